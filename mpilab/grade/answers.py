"""Answers handed from a student's notebook to the grader, as data.

A graded cell of a lab ends by handing its answers in (:func:`hand_in`): each value is turned
into plain JSON (:func:`encode`) and shown as an output of the cell with the MIME type
:data:`MIME`. After the notebook has run, the trusted grader (:mod:`mpilab.grade.judge`, a fresh
process the notebook cannot reach) reads those outputs back (:func:`collect`) and decodes them
(:func:`decode`) without running anything the notebook wrote: a sympy expression travels as its
``srepr`` text and is rebuilt from a short list of sympy classes (:func:`safe_sympy`), a figure
as its axes, labels and line data, a table as its columns and rows.

So an answer is only data. A notebook that replaces the kit's functions, redefines builtins or
patches a library can change what it hands in, never how the grader judges it.
"""

import ast
import json
import math
import numbers

import numpy as np
import pandas as pd
import sympy
from sympy.core.assumptions import _assume_defined
from sympy.functions.elementary.piecewise import ExprCondPair

from mpilab.core.errors import UsageError
from mpilab.model import expressions

#: The MIME type of an answer output.
MIME = "application/vnd.mpilab.answer+json"
#: Format version of the payload.
VERSION = 1
#: Largest payload the grader reads, in characters of JSON (a bigger one counts as no answer).
MAX_PAYLOAD = 4_000_000
#: Longest sympy ``srepr`` text the grader rebuilds.
MAX_SREPR = 20_000


# ---- encoding (in the student's kernel) ------------------------------------------------------


def encode(value):
    """Turn an answer into JSON-able data tagged with its kind.

    Kinds: ``none``, ``bool``, ``number``, ``text``, ``sympy``, ``table`` (a pandas DataFrame or
    Series), ``array``, ``figure`` (a matplotlib Figure or Axes), ``list``, ``dict``.

    Raises
    ------
    UsageError
        For a value of another type (the message names the type).
    """
    if value is None or value is Ellipsis:
        return {"kind": "none"}
    if isinstance(value, (bool, np.bool_)):
        return {"kind": "bool", "value": bool(value)}
    if isinstance(value, sympy.Basic):
        return {"kind": "sympy", "srepr": sympy.srepr(value)}
    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        return {"kind": "number", "value": _number(value)}
    if isinstance(value, str):
        return {"kind": "text", "value": value}
    if isinstance(value, pd.Series):
        value = value.to_frame()
    if isinstance(value, pd.DataFrame):
        frame = value.reset_index() if _named_index(value) else value
        return {
            "kind": "table",
            "columns": [str(c) for c in frame.columns],
            "rows": [[_cell(v) for v in row] for row in frame.itertuples(index=False)],
        }
    if isinstance(value, np.ndarray):
        return {
            "kind": "array",
            "shape": list(value.shape),
            "values": [_cell(v) for v in value.ravel().tolist()],
        }
    if hasattr(value, "savefig") or hasattr(value, "get_lines"):
        return encode_figure(value)
    if isinstance(value, (list, tuple)):
        return {"kind": "list", "items": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"kind": "dict", "items": [[str(k), encode(v)] for k, v in value.items()]}
    raise UsageError(
        f"cannot hand in a {type(value).__name__}; valid: a number, text, a sympy "
        "expression, a pandas table, a numpy array, a matplotlib figure, or a "
        "list or dict of those"
    )


def _named_index(df):
    return not isinstance(df.index, pd.RangeIndex) or df.index.name is not None


def _number(v):
    v = float(v) if not isinstance(v, int) else v
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN or infinity
    return v


def _cell(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, numbers.Number):
        return _number(v.item() if hasattr(v, "item") else v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return str(v)


def encode_figure(fig_or_ax):
    """The data of a figure: per axes its scales, labels, title, legend and lines."""
    axes = fig_or_ax.axes if hasattr(fig_or_ax, "savefig") else [fig_or_ax]
    out = []
    for ax in axes:
        legend = ax.get_legend()
        lines = []
        for line in ax.get_lines():
            xs, ys = line.get_data()
            lines.append(
                {
                    "label": str(line.get_label()),
                    "x": [_cell(v) for v in np.asarray(xs, dtype=float).tolist()],
                    "y": [_cell(v) for v in np.asarray(ys, dtype=float).tolist()],
                }
            )
        out.append(
            {
                "xscale": ax.get_xscale(),
                "yscale": ax.get_yscale(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "title": ax.get_title(),
                "legend": None if legend is None else [t.get_text() for t in legend.get_texts()],
                "lines": lines,
            }
        )
    return {"kind": "figure", "axes": out}


def payload(grade_id, answers):
    """The JSON payload of one hand-in: the cell's id and its encoded answers by name."""
    return {
        "version": VERSION,
        "grade_id": str(grade_id),
        "answers": {str(k): encode(v) for k, v in answers.items()},
    }


def hand_in(grade_id, **answers):
    """Hand answers in for the graded cell ``grade_id``; the grader judges them after the run.

    Shows one output: the payload (MIME type :data:`MIME`) and a line saying what was handed in.
    """
    from IPython.display import display  # only in a kernel: the grader never imports IPython

    data = payload(grade_id, answers)
    names = ", ".join(answers) or "no value (the grader reads your files)"
    display({MIME: data, "text/plain": f"handed in for {grade_id}: {names}"}, raw=True)
    return data


# ---- reading back (in the trusted grader) ----------------------------------------------------


def collect(cell):
    """The payloads of a notebook cell's outputs for that cell's own grade id.

    Parameters
    ----------
    cell : dict
        A code cell of an executed notebook (nbformat v4).

    Returns
    -------
    dict or None
        ``{name: encoded answer}`` of the last payload whose ``grade_id`` is the cell's, or None
        when the cell handed nothing in (it did not reach its hand-in line).
    """
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    found = None
    for out in cell.get("outputs", []):
        data = out.get("data", {}) if isinstance(out, dict) else {}
        raw = data.get(MIME)
        if raw is None:
            continue
        if isinstance(raw, str):
            if len(raw) > MAX_PAYLOAD:
                continue
            try:
                raw = json.loads(raw)
            except ValueError:
                continue
        elif len(json.dumps(raw)) > MAX_PAYLOAD:
            continue
        if isinstance(raw, dict) and raw.get("grade_id") == grade_id and isinstance(raw.get("answers"), dict):
            found = raw["answers"]
    return found


class BadAnswer(ValueError):
    """An answer that cannot be read back; the message says why, for the feedback."""


def decode(data):
    """Rebuild a value from :func:`encode`'s data without evaluating anything.

    Raises
    ------
    BadAnswer
        Data that is not what :func:`encode` writes.
    """
    if not isinstance(data, dict) or "kind" not in data:
        raise BadAnswer("the answer is not in the kit's format")
    kind = data["kind"]
    try:
        if kind == "none":
            return None
        if kind == "bool":
            return bool(data["value"])
        if kind == "number":
            v = data["value"]
            return float(v) if isinstance(v, str) else v
        if kind == "text":
            return str(data["value"])
        if kind == "sympy":
            return safe_sympy(data["srepr"])
        if kind == "table":
            return pd.DataFrame([list(r) for r in data["rows"]], columns=list(data["columns"]))
        if kind == "array":
            return np.array(data["values"], dtype=float).reshape(data["shape"])
        if kind == "figure":
            return {"axes": list(data["axes"])}
        if kind == "list":
            return [decode(v) for v in data["items"]]
        if kind == "dict":
            return {str(k): decode(v) for k, v in data["items"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise BadAnswer(f"a {kind} answer that cannot be read back ({exc})") from None
    raise BadAnswer(f"unknown answer kind {kind!r}")


#: The sympy classes a cost expression may be built from (srepr names).
SYMPY_CLASSES = {
    name: getattr(sympy, name)
    for name in (
        "Symbol",
        "Integer",
        "Rational",
        "Float",
        "Add",
        "Mul",
        "Pow",
        "log",
        "ceiling",
        "floor",
        "Max",
        "Min",
        "Abs",
        "sqrt",
        "Piecewise",
        "Eq",
        "Ne",
        "Lt",
        "Le",
        "Gt",
        "Ge",
        "StrictLessThan",
        "StrictGreaterThan",
        "LessThan",
        "GreaterThan",
        "Equality",
        "Unequality",
        "And",
        "Or",
        "Not",
        "Mod",
        "Tuple",
    )
}
SYMPY_CLASSES["ExprCondPair"] = ExprCondPair
SYMPY_CONSTANTS = {
    "Half": sympy.S.Half,
    "One": sympy.S.One,
    "Zero": sympy.S.Zero,
    "NegativeOne": sympy.S.NegativeOne,
    "Infinity": sympy.oo,
    "NegativeInfinity": -sympy.oo,
    "true": sympy.true,
    "false": sympy.false,
    "BooleanTrue": sympy.true,
    "BooleanFalse": sympy.false,
    "E": sympy.E,
}


#: The assumptions a symbol may carry (sympy's own names: positive, integer, ...).
ASSUMPTIONS = frozenset(_assume_defined)


def safe_sympy(text):
    """Rebuild a sympy expression from its ``srepr`` text, allowing only :data:`SYMPY_CLASSES`.

    The text is parsed as a Python expression tree and every node is checked: calls of the
    listed classes with numbers, strings and booleans as arguments, nothing else (no
    attributes, no other names). Nothing in the text is executed.

    Raises
    ------
    BadAnswer
        Text that is too long or holds anything else.
    """
    if not isinstance(text, str) or len(text) > MAX_SREPR:
        raise BadAnswer(f"the expression is longer than {MAX_SREPR} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise BadAnswer("the expression cannot be read back") from None
    return _build(tree.body, 0)


def _number_or_expr(v):
    """A rebuilt argument as a sympy object (numbers converted, nothing else)."""
    if isinstance(v, sympy.Basic):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise expressions.ExpressionError(f"{v!r} as a power's argument")
    return sympy.Integer(v) if isinstance(v, int) else sympy.Float(v)


def _build(node, depth):
    if depth > 200:
        raise BadAnswer("the expression is nested too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        if isinstance(node.value, int) and abs(node.value) > 10**30:
            raise BadAnswer("a number in the expression is too large")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _build(node.operand, depth + 1)
        if isinstance(v, (int, float)):
            return -v
    if isinstance(node, ast.Name) and node.id in SYMPY_CONSTANTS:
        return SYMPY_CONSTANTS[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_build(e, depth + 1) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in SYMPY_CONSTANTS and not node.args and not node.keywords:
            return SYMPY_CONSTANTS[name]
        cls = SYMPY_CLASSES.get(name)
        if cls is None:
            raise BadAnswer(f"{name} is not allowed in a cost expression")
        args = [_build(a, depth + 1) for a in node.args]
        kwargs = {}
        for kw in node.keywords:
            value = _build(kw.value, depth + 1)
            if name != "Symbol" or not isinstance(value, bool) or kw.arg not in ASSUMPTIONS:
                raise BadAnswer(f"{name}({kw.arg}=...) is not allowed in a cost expression")
            kwargs[kw.arg] = value
        if name == "Pow" and len(args) == 2:
            try:
                return expressions.power(*map(_number_or_expr, args))
            except expressions.ExpressionError as exc:
                raise BadAnswer(f"{exc} is not allowed in a cost expression") from None
        if name == "Symbol" and (len(args) != 1 or not isinstance(args[0], str)):
            raise BadAnswer("a symbol must be named by one string")
        if name in ("Integer", "Rational", "Float") and not all(
            isinstance(a, (int, float, str)) for a in args
        ):
            raise BadAnswer(f"{name} takes numbers only")
        try:
            return cls(*args, **kwargs)
        except Exception as exc:  # sympy raises many kinds on nonsense arguments
            raise BadAnswer(f"{name}{tuple(args)} is not a valid expression ({exc})") from None
    raise BadAnswer("the expression holds something other than sympy numbers, symbols and functions")
