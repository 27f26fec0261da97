"""Checks of the form of an answer that is a table, a dict or a number (nothing about its value).

The notebooks' visible checks use them to say early that an answer has the wrong shape (no
column ``algorithm``, a list where a dict was asked for); the grader's verdicts use them before
they compare contents, so a malformed answer gets one clear failed case instead of a crash.
"""

import numbers

import pandas as pd

from mpilab.grade.answers import BadAnswer
from mpilab.grade.cases import Case


def table_case(value, name, columns=(), rows=True):
    """None when ``value`` is a DataFrame with ``columns`` (and, with ``rows``, at least one row);
    else one failed :class:`Case` saying what is wrong."""
    title = f"{name} is a table"
    if isinstance(value, BadAnswer):
        return Case(title, False, str(value))
    if value is None or value is Ellipsis:
        return Case(title, False, f"{name} has no value yet: assign it in the cell above")
    if isinstance(value, pd.Series):
        value = value.to_frame()
    if not isinstance(value, pd.DataFrame):
        return Case(title, False, f"{name} should be a pandas DataFrame, got {type(value).__name__}")
    missing = [c for c in columns if c not in value.columns]
    if missing:
        return Case(
            title,
            False,
            f"{name} has no column(s) {', '.join(missing)}; its columns: "
            f"{', '.join(map(str, value.columns)) or 'none'}",
        )
    if rows and value.empty:
        return Case(title, False, f"{name} is empty: run the cells above it first")
    return None


def frame(value):
    """``value`` as a DataFrame (a Series becomes its one-column frame)."""
    return value.to_frame() if isinstance(value, pd.Series) else value


def slim(value, columns):
    """A results table cut to ``columns`` (those it has) before it is handed in: the grader reads
    only those, and the notebook stays small. Anything else is returned as it is."""
    if isinstance(value, pd.DataFrame):
        return value[[c for c in value.columns if c in columns]]
    return value


def dict_case(value, name, keys=None, kind=None):
    """None when ``value`` is a dict (with exactly ``keys`` if given, values of type ``kind``
    if given); else one failed :class:`Case`."""
    title = f"{name} is a dict"
    if isinstance(value, BadAnswer):
        return Case(title, False, str(value))
    if not isinstance(value, dict):
        return Case(title, False, f"{name} should be a dict, got {type(value).__name__}")
    if keys is not None and set(value) != set(keys):
        return Case(
            title,
            False,
            f"{name} should have the keys {', '.join(map(repr, sorted(keys)))}; "
            f"it has {', '.join(map(repr, sorted(map(str, value)))) or 'none'}",
        )
    if kind is not None:
        bad = [k for k, v in value.items() if not is_kind(v, kind)]
        if bad:
            return Case(title, False, f"{name}[{bad[0]!r}] is {value[bad[0]]!r}; valid: {kind_name(kind)}")
    return None


def is_kind(v, kind):
    """Whether ``v`` is of ``kind``: ``"int"`` (an integral number, not a bool), ``"number"``,
    ``"list"`` (of text)."""
    if kind == "int":
        return isinstance(v, numbers.Number) and not isinstance(v, bool) and float(v).is_integer()
    if kind == "number":
        return isinstance(v, numbers.Number) and not isinstance(v, bool)
    if kind == "list":
        return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
    raise ValueError(f"unknown kind {kind!r}")


def kind_name(kind):
    return {"int": "a whole number", "number": "a number", "list": "a list of names"}[kind]


def credited_only_if(gates, cases):
    """``gates`` (weight 0: they earn nothing themselves) then ``cases``; while any gate fails,
    ``cases`` earn nothing (each says why).

    A check of what a table shows (a plot, a fit, a best size) is worth its points only when the
    table passes the grader's gates (it is the measured grid, measured again by the grader).
    """
    gates = [Case(g.name, g.passed, g.message, 0.0, g.hidden) for g in gates]
    failed = [g for g in gates if not g.passed]
    if not failed:
        return gates + list(cases)
    why = f"not credited: {failed[0].name} fails"
    return gates + [Case(c.name, False, why, c.weight, c.hidden) for c in cases]
