"""α-β (Hockney) costs of collective algorithms, as sympy expressions, from one table.

Symbols: ``p`` processes, ``n`` bytes, ``alpha`` latency (µs), ``beta`` µs per byte, ``s``
segment size in bytes for pipelined algorithms. Each entry states what ``n`` is:

* allgather (the kit's algorithms and the library's): ``n`` = bytes **contributed by each
  rank** (one block), so every rank ends with ``p * n`` bytes. The C headers in
  ``c_reference/allgather`` write costs in terms of the bytes gathered on each process,
  ``N = p * n``; the two forms are the same cost (a test parses the headers and checks).
* bcast / reduce / allreduce: ``n`` = bytes of the buffer being broadcast or reduced.

Every entry (:class:`Cost`) has a **domain**, the process counts where its expression is the
algorithm's cost: ``any p``, ``p power of two``, ``p even`` or ``p = 2``. Where the
implementation runs outside that domain with another schedule, the entry also has an
``exact`` expression valid for every ``p`` (the kit's pairwise exchange folds the ranks above
the largest power of two in and out; Open MPI's recursive-doubling allreduce does the same).
:func:`check_expression` compares a student's answer only at points of the domain, and
:func:`evaluate` uses ``exact`` where there is one and NaN outside the domain where not.

Reduction arithmetic is not counted (no γ term). Costs are contention-free in the sense of
the single-port model: a rank sends one message and receives one at a time, and α is paid per
message (so a root that sends p - 1 messages pays (p - 1)·α). ``tests/test_costs_simulated.py``
checks the kit's allgathers (and some library algorithms) against SMPI on
:func:`mpilab.simulate.platform_xml.alpha_beta_xml` platforms and says where a simulator without
per-message overhead overlaps those α.

Examples
--------
>>> from mpilab.model import costs
>>> costs.register("allgather", "mine", "3*(p-1)*alpha + 2*n*beta").domain
'any p'
>>> costs.check_expression("2*n*beta + 3*(p-1)*alpha", "allgather", "mine").equal
True

Which costs the table holds depends on the installation: the costs of the kit's and the
libraries' algorithms answer the labs' questions and come from the answer key (the instructor's
side, :mod:`mpilab.core.key`); a student's own go in with :func:`register`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import sympy

from mpilab.core import key
from mpilab.core.errors import UsageError, one_of
from mpilab.model import expressions

p, n, alpha, beta, s = sympy.symbols("p n alpha beta s", positive=True)
SYMBOLS = {"p": p, "n": n, "alpha": alpha, "beta": beta, "s": s}
#: Rounds of a binomial tree or of Bruck's algorithm, ⌈log2 p⌉.
ROUNDS = sympy.ceiling(sympy.log(p, 2))
#: ⌊log2 p⌋.
FLOOR_LOG2 = sympy.floor(sympy.log(p, 2))
#: log2 p, exact for p a power of two.
LOG2 = sympy.log(p, 2)
#: Segments of a pipelined algorithm of segment size s.
SEGMENTS = sympy.ceiling(n / s)
#: Bytes of one segment (the whole buffer if n < s).
SEGMENT_BYTES = sympy.Min(n, s)
#: What n means in an allgather's cost, and in the other collectives'.
PER_RANK = "n = bytes contributed by each rank (each rank ends with p*n bytes)"
BUFFER = "n = bytes of the buffer"
#: The domain of algorithms whose plain form holds for p a power of two.
POW2 = "p power of two"

#: Domains of the table: name -> predicate on an integer p.
DOMAINS = {
    "any p": lambda v: v >= 1,
    "p power of two": lambda v: v >= 1 and (v & (v - 1)) == 0,
    "p even": lambda v: v >= 2 and v % 2 == 0,
    "p = 2": lambda v: v == 2,
}


class Cost(NamedTuple):
    """One entry of the cost table (:func:`table`).

    Attributes
    ----------
    expr : sympy.Expr
        The cost on ``domain`` (the form a student is asked for).
    n : str
        What ``n`` is.
    source : str
        Which implementation, and how the cost comes about.
    domain : str
        A key of :data:`DOMAINS`.
    exact : sympy.Expr or None
        The implementation's cost for every p, when ``expr`` holds only on ``domain``.
    """

    expr: object
    n: str
    source: str
    domain: str = "any p"
    exact: object = None


def header_form(collective, name, exact=False, e=None):
    """The cost as the C headers write it: ``α``, ``β``, ``·``, and, for allgather,
    ``N = p·n`` bytes gathered on each process (``c_reference/allgather/*.c``).

    Parameters
    ----------
    collective, name : str
        The table's entry (:func:`entry`), unless ``e`` is given.
    exact : bool
        The form for every p (:attr:`Cost.exact`) where there is one.
    e : Cost, optional
        Format this cost instead (e.g. a record's of :mod:`mpilab.model.algorithms`).

    Returns
    -------
    str
        The cost, followed by what N (or n) is: for an allgather, N = p·n replaces n (the
        bytes gathered on each process, as the C headers count them).
    """
    e = entry(collective, name) if e is None else e
    expr = e.exact if exact and e.exact is not None else e.expr
    log2p = sympy.Symbol("log2(p)", positive=True)
    expr = expr.subs(sympy.log(p), log2p * sympy.log(2))
    if collective == "allgather":
        expr = expr.subs(n, sympy.Symbol("N", positive=True) / p)
        what = "N = bytes gathered on each process (p blocks of n)"
    else:
        what = e.n
    parts = sympy.collect(sympy.expand(expr), [alpha, beta], evaluate=False)
    terms = []
    for sym, mark in ((alpha, "α"), (beta, "β")):
        coef = sympy.factor(parts.pop(sym, 0))
        if coef == 0:
            continue
        c = sympy.sstr(coef).replace("**", "^").replace("*", "·")
        terms.append(mark if coef == 1 else f"({c})·{mark}" if coef.is_Add else f"{c}·{mark}")
    if parts:  # a term without alpha or beta: not expected in the table
        terms.append(sympy.sstr(sum(k * v for k, v in parts.items())))
    return f"{' + '.join(terms)}    ({what}; {e.domain})"


_TABLE = None


def table():
    """Every cost this installation knows, ``{(collective, name): Cost}``.

    The costs of the kit's algorithms and of the libraries' are answers to the labs' questions:
    they are in the answer key (:mod:`mpilab.core.key`, the instructor's side), and the table is
    empty where the key is not installed. Costs added with :func:`register` (a student's own,
    e.g. from lab 2, to compare with measurements) are in it too.
    """
    global _TABLE
    if _TABLE is None:
        keyed = key.module("costs")
        _TABLE = dict(keyed.TABLE) if keyed else {}
        _TABLE.update(_REGISTERED)
    return _TABLE


_REGISTERED = {}


def no_cost():
    """Library algorithms the table has no cost for, and why (from the answer key; else empty)."""
    keyed = key.module("costs")
    return dict(getattr(keyed, "NO_COST", {}))


def register(collective, name, expr, n=None, source="registered", domain="any p", exact=None):
    """Add a cost to the table (e.g. your own expression from lab 2) and return its entry.

    Parameters
    ----------
    collective, name : str
    expr : sympy expression or str
        In ``p``, ``n``, ``alpha``, ``beta`` (and ``s``).
    n : str, optional
        What n is (default: per rank for allgather, the buffer otherwise).
    source : str
    domain : str
        A key of :data:`DOMAINS`.
    exact : sympy expression or str, optional
        The cost for every p when ``expr`` holds only on ``domain``.
    """
    if domain not in DOMAINS:
        raise one_of("domain", domain, DOMAINS)
    expr = expression(expr)
    if exact is not None:
        exact = expression(exact)
    e = Cost(expr, n or (PER_RANK if collective == "allgather" else BUFFER), source, domain, exact)
    _REGISTERED[(collective, name)] = e
    table()[(collective, name)] = e
    return e


def names(collective=None):
    """Algorithms in the table, as ``(collective, name)`` pairs (or names for one collective)."""
    if collective is None:
        return sorted(table())
    return sorted(nm for c, nm in table() if c == collective)


def entry(collective, name):
    """The :class:`Cost` of one algorithm.

    Raises
    ------
    UsageError
        Unknown collective or algorithm; the message lists the valid ones.
    """
    known = table()
    if not known:
        raise UsageError(
            f"no cost is known for {collective} {name}: the costs of the kit's and the "
            "libraries' algorithms are in the answer key (the instructor's side), and "
            "labs 2, 3 and 6 ask you to derive them; add yours with costs.register()"
        )
    if collective not in {c for c, _ in known}:
        raise one_of("collective", collective, {c for c, _ in known})
    if (collective, name) not in known:
        raise one_of(f"{collective} algorithm", name, names(collective))
    return known[(collective, name)]


def cost(collective, name, exact=False):
    """The sympy cost expression of one algorithm.

    Parameters
    ----------
    collective, name : str
    exact : bool
        Return the expression valid for every p (:attr:`Cost.exact`) when the entry has one;
        otherwise the expression of the entry's domain.

    Raises
    ------
    UsageError
        Unknown collective or algorithm; the message lists the valid ones.
    """
    e = entry(collective, name)
    return e.exact if exact and e.exact is not None else e.expr


def in_domain(domain, nprocs):
    """Whether each process count is in ``domain`` (a key of :data:`DOMAINS`).

    Returns
    -------
    numpy.ndarray of bool
    """
    if domain not in DOMAINS:
        raise one_of("domain", domain, DOMAINS)
    arr = np.asarray(nprocs, dtype=float)
    return np.array(
        [float(v).is_integer() and DOMAINS[domain](int(v)) for v in arr.ravel()], dtype=bool
    ).reshape(arr.shape)


# floor/ceiling of log2(2^k) computed as log(p)/log(2) can land just above or below k;
# the table's floor and ceiling arguments are logs of integers or n/s, never within 1e-9 of
# an integer unless they are one.
_NUMERIC = [
    {"ceiling": lambda x: np.ceil(np.asarray(x) - 1e-9), "floor": lambda x: np.floor(np.asarray(x) + 1e-9)},
    "numpy",
]


def evaluate(collective, name, nprocs, nbytes, alpha_us, beta_us_per_byte, segment=8192):
    """Numeric cost in µs (arrays broadcast) with fitted ``alpha`` and ``beta``.

    The entry's exact expression is used where it has one; otherwise points outside the
    entry's domain (e.g. a power-of-two-only algorithm at p = 12) are NaN.

    Returns
    -------
    numpy.ndarray or float
    """
    e = entry(collective, name)
    expr = e.exact if e.exact is not None else e.expr
    out = np.asarray(evaluate_expression(expr, nprocs, nbytes, alpha_us, beta_us_per_byte, segment))
    pv = np.asarray(nprocs, dtype=float)
    if e.exact is None:
        out = out.copy()
        out[~np.broadcast_to(in_domain(e.domain, pv), out.shape)] = np.nan
    return out if out.ndim else float(out)


def evaluate_expression(expr, nprocs, nbytes, alpha_us, beta_us_per_byte, segment=8192):
    """Numeric value in µs of any cost expression in p, n, alpha, beta (and s); arrays broadcast.

    Use it with your own expressions (a string is parsed with :func:`parse`), e.g. to put a model
    next to measurements.

    Returns
    -------
    numpy.ndarray or float
    """
    expr = expression(expr)
    f = sympy.lambdify((p, n, alpha, beta, s), expr, modules=_NUMERIC)
    pv = np.asarray(nprocs, dtype=float)
    nv = np.asarray(nbytes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(f(pv, nv, alpha_us, beta_us_per_byte, float(segment)), dtype=float)
    out = np.broadcast_to(out, np.broadcast(pv, nv).shape).copy()
    return out if out.ndim else float(out)


def plot_model(table, ax=None, value="avg_us", model="model_us"):
    """Measured (points) against a model (lines) over message size, one panel per process count.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows with ``algorithm``, ``nprocs``, ``bytes``, the measured ``value`` and the model's
        prediction in the column ``model`` (e.g. results rows with a ``model_us`` column you
        computed from a cost expression). A table whose ``attrs["detail"]`` holds such rows
        (the answer key's model comparison) is read through it.
    ax : matplotlib Axes, optional
        Draw everything on it instead of one panel per process count.

    Returns
    -------
    (fig, axes)
        ``axes`` is an array with one Axes per process count (``ax`` itself when given).
    """
    d = table.attrs.get("detail", table)
    missing = [
        c for c in ("algorithm", "nprocs", "bytes", value, model) if c not in getattr(d, "columns", ())
    ]
    if d is None or len(d) == 0 or missing:
        raise UsageError(
            "nothing to plot: give rows with algorithm, nprocs, bytes, "
            f"{value} and {model}" + (f" (missing: {', '.join(missing)})" if missing else "")
        )
    counts = sorted(d["nprocs"].unique())
    if ax is None:
        fig, axes = plt.subplots(1, len(counts), figsize=(5 * len(counts), 4), squeeze=False)
        axes = axes[0]
        panels = dict(zip(counts, axes))
    else:
        fig, axes = ax.figure, ax
        panels = dict.fromkeys(counts, ax)
    algos = sorted(d["algorithm"].unique())
    for p_, g in d.groupby("nprocs"):
        a = panels[p_]
        for algo, h in g.groupby("algorithm"):
            h = h.groupby("bytes")[[value, model]].median().reset_index()
            c = f"C{algos.index(algo)}"
            a.plot(h["bytes"], h[value], "o", color=c, label=f"{algo} measured")
            a.plot(h["bytes"], h[model], "-", color=c, label=f"{algo} model")
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.set_xlabel("message size (bytes)")
        a.set_ylabel("time (µs)")
        a.set_title(f"P = {p_}")
        a.legend(fontsize="small")
    return fig, axes


@dataclass
class CheckResult:
    """Outcome of :func:`check_expression`: ``equal`` (also ``ok``) and a ``message``."""

    equal: bool
    message: str
    expected: object = None
    given: object = None

    @property
    def ok(self):
        return self.equal

    def __bool__(self):
        return self.equal


def parse(text, symbols=None):
    """Read a cost written as text by an allow-list (:mod:`mpilab.model.expressions`): numbers,
    the symbols p, n, alpha (α, a), beta (β, b), s, ``+ - * / ^`` and their Unicode forms,
    parentheses, ⌈ ⌉ ⌊ ⌋ and log, log2, ln, ceil, floor, sqrt, min, max. ``2n``, ``(p-1)(α+nβ)``
    and ``log2 p`` multiply and apply as on paper. Nothing in the text is evaluated.

    Parameters
    ----------
    text : str
    symbols : dict, optional
        ``{name: sympy.Symbol}`` allowed instead of :data:`SYMBOLS` (e.g. with a lab's ``k``).

    Raises
    ------
    UsageError
        Text that holds anything else (the message names it and says what is allowed).
    """
    return expressions.parse(text, SYMBOLS if symbols is None else symbols)


def expression(value, symbols=None):
    """Any answer as a cost expression in the table's symbols: text (:func:`parse`), a number, or
    a sympy expression made of allowed parts (:func:`only_allowed`). Nothing else is converted:
    a list, a dict or any other object is refused, never evaluated.

    Raises
    ------
    UsageError
        No answer, an answer of another kind, or one that is not allowed (the message says which).
    """
    if value is None or value is Ellipsis:
        raise UsageError("no answer yet: give an expression in p, n, alpha, beta")
    if isinstance(value, str):
        return parse(value, symbols)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        v = float(value)
        if not math.isfinite(v):
            raise UsageError(f"the cost {value!r} is not a finite number")
        return sympy.Integer(int(v)) if v.is_integer() and abs(v) < 2**53 else sympy.Float(v)
    if isinstance(value, sympy.Basic):
        return only_allowed(value, str(value)[:200], symbols)
    raise UsageError(
        "a cost is an expression or its text, e.g. (p - 1)*(alpha + n*beta); got "
        + expressions.with_article(type(value).__name__)
        + (": hand in one expression, not a list of them" if isinstance(value, (list, tuple)) else "")
    )


def only_allowed(expr, shown, symbols=None):
    """``expr`` (a sympy expression) with its symbols replaced by the table's of the same name.

    Raises
    ------
    UsageError
        ``expr`` is not a sympy expression, holds a node that is not allowed
        (:func:`mpilab.model.expressions.check_tree`), or a symbol that is not one of
        :data:`SYMBOLS` (``shown`` names the expression).
    """
    symbols = SYMBOLS if symbols is None else symbols
    expressions.check_tree(expr, shown)
    by_name = {str(k): v for k, v in symbols.items()}
    expr = expr.subs({sym: by_name[str(sym)] for sym in expr.free_symbols if str(sym) in by_name})
    extra = sorted(str(x) for x in expr.free_symbols if x not in symbols.values())
    if extra:
        raise UsageError(f"unknown symbol(s) {', '.join(extra)} in {shown!r}; valid: {', '.join(symbols)}")
    return expr


#: Candidate process counts and sizes of :func:`check_expression` (filtered by the domain).
_CHECK_P = (1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 32, 48, 64)
_CHECK_N = (1, 1, 1024, 100, 7, 65536, 4096, 1 << 20, 3, 8192, 12345, 1 << 16, 2)


def check_points(domain="any p"):
    """The (p, n) points where :func:`check_expression` compares costs on ``domain``.

    At least four points: domains with few process counts (``p = 2``) get several sizes.
    """
    pts = [(pv, nv) for pv, nv in zip(_CHECK_P, _CHECK_N) if DOMAINS[domain](pv)]
    extra = [(pv, nv) for pv, _ in pts for nv in (2, 1024, 65536, 1 << 20) if (pv, nv) not in pts]
    return pts + extra[: max(0, 4 - len(pts))]


def check_expression(student, collective, name, points=None):
    """Compare a student's cost with the table's; equivalent forms are equal.

    Only points of the entry's domain count: for the pairwise exchange (``p power of two``)
    an expression that is right for every power of two is right.

    Parameters
    ----------
    student : sympy expression or str
    collective, name : str
    points : sequence of (p, n), optional
        Where both are evaluated (alpha = 1.5 µs, beta = 0.001 µs/B, s = 8192), after a
        symbolic simplification attempt; default :func:`check_points` of the domain. Points
        outside the domain are skipped.

    Returns
    -------
    CheckResult
        ``.equal``; when False, ``.message`` names a (p, n) where they differ and both values.
    """
    e = entry(collective, name)
    want = e.expr
    if student is None or student is Ellipsis:
        return CheckResult(False, "no answer: give an expression in p, n, alpha, beta")
    try:
        got = expression(student)
    except UsageError as exc:
        return CheckResult(False, str(exc), want, None)
    try:
        if sympy.simplify(got - want) == 0:
            return CheckResult(True, "equal", want, got)
    except Exception:
        pass
    points = (
        check_points(e.domain)
        if points is None
        else [(pv, nv) for pv, nv in points if DOMAINS[e.domain](int(pv))]
    )
    where = "" if e.domain == "any p" else f" (for {e.domain})"
    subs_common = {alpha: sympy.Rational(3, 2), beta: sympy.Rational(1, 1000), s: 8192}
    for pv, nv in points:
        vals = {**subs_common, p: pv, n: nv}
        try:
            g = float(got.subs(vals))
        except (TypeError, ValueError):
            return CheckResult(False, f"{student!r} does not give a number at p = {pv}, n = {nv}", want, got)
        w = float(want.subs(vals))
        if not math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12):
            return CheckResult(
                False,
                f"the {collective} {name} cost{where} differs at p = {pv}, "
                f"n = {nv} bytes (alpha = 1.5 us, beta = 0.001 us/B): yours "
                f"gives {g:g} us, expected {w:g} us",
                want,
                got,
            )
    return CheckResult(True, f"equal at every checked (p, n){where}", want, got)
