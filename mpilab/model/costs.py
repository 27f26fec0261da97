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
:func:`mpilab.simulate.platforms.alpha_beta_xml` platforms and says where a simulator without
per-message overhead overlaps those α.

Examples
--------
>>> from mpilab.model import costs
>>> costs.cost("allgather", "ring")
(alpha + beta*n)*(p - 1)
>>> costs.check_expression("(p-1)*(alpha+n*beta)", "allgather", "ring").equal
True
>>> costs.TABLE["allgather", "pairwise"].domain
'p power of two'
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import sympy
from sympy.parsing.sympy_parser import (convert_xor, implicit_multiplication_application,
    parse_expr, standard_transformations)

from mpilab.core.errors import one_of, UsageError

p, n, alpha, beta, s = sympy.symbols("p n alpha beta s", positive=True)
SYMBOLS = {"p": p, "n": n, "alpha": alpha, "beta": beta, "s": s}
_L = sympy.ceiling(sympy.log(p, 2))          # rounds of a binomial / Bruck schedule
_F = sympy.floor(sympy.log(p, 2))
_LOG2 = sympy.log(p, 2)                       # exact for p a power of two
_NSEG = sympy.ceiling(n / s)                 # number of segments of a pipelined algorithm
_SEG = sympy.Min(n, s)                       # bytes of one segment (the whole buffer if n < s)
# Open MPI's chain: 4 chains (coll_tuned_<coll>_algorithm_chain_fanout = 4); the root serves
# the 4 chain heads one after another, the last chain then takes ceil((p-1)/4) - 1 more hops.
_CHAIN = sympy.Max(0, sympy.Min(4, p - 1) + sympy.ceiling((p - 1) / 4) - 1)

_PER_RANK = "n = bytes contributed by each rank (each rank ends with p*n bytes)"
_BUF = "n = bytes of the buffer"

#: Domains of the table: name -> predicate on an integer p.
DOMAINS = {
    "any p": lambda v: v >= 1,
    "p power of two": lambda v: v >= 1 and (v & (v - 1)) == 0,
    "p even": lambda v: v >= 2 and v % 2 == 0,
    "p = 2": lambda v: v == 2,
}


def _pairwise_any_p():
    """The kit's pairwise exchange for every p (c_reference/allgather/pairwise.c).

    With q = 2^L the largest power of two <= p and e = p - q extra ranks: fold (α + nβ: rank
    q + i sends its block to rank i), L steps among the q ranks, each a Sendrecv of 2^k blocks
    (α + 2^k·nβ) and a second Sendrecv of the group's folded blocks (α + min(e, 2^k)·nβ on
    rank 0's pair, the busiest), then unfold (α + p·nβ: rank i sends the whole result to
    q + i). Σ_{k<L} min(e, 2^k) = 2^(f+1) - 1 + (L-1-f)·e with f = ⌊log2 e⌋.
    """
    L = _F
    q = 2 ** L
    e = p - q
    f = sympy.floor(sympy.log(sympy.Max(e, 1), 2))
    folded = 2 ** (f + 1) - 1 + (L - 1 - f) * e
    other = (2 * L + 2) * alpha + (q + p + folded) * n * beta
    return sympy.Piecewise((L * alpha + (p - 1) * n * beta, sympy.Eq(e, 0)), (other, True))


class Cost(NamedTuple):
    """One entry of :data:`TABLE`.

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


_POW2 = "p power of two"

#: (collective, name) -> Cost. Library names are those of :mod:`mpilab.measure.libalgs`.
TABLE = {
    # the kit's allgather algorithms (c_reference/allgather)
    ("allgather", "gather_bcast"): Cost(
        2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta, _PER_RANK,
        "kit: linear gather of p-1 blocks, then linear bcast of p*n bytes; the root's single "
        "port serialises the p-1 messages of each phase"),
    ("allgather", "pairwise"): Cost(
        _LOG2 * alpha + (p - 1) * n * beta, _PER_RANK,
        "kit: recursive doubling, log2 p Sendrecv steps with doubling blocks; other p fold the "
        "extra ranks in and out (exact)", _POW2, _pairwise_any_p()),
    ("allgather", "ring"): Cost((p - 1) * (alpha + n * beta), _PER_RANK, "kit: p-1 ring steps"),
    ("allgather", "bruck"): Cost(_L * alpha + (p - 1) * n * beta, _PER_RANK,
                                 "kit: ceil(log2 p) rounds of doubling blocks"),
    # library allgather (Open MPI ids)
    ("allgather", "linear"): Cost(2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta, _PER_RANK,
                                  "ompi 1: gather then bcast"),
    ("allgather", "recursive_doubling"): Cost(_LOG2 * alpha + (p - 1) * n * beta, _PER_RANK,
                                              "ompi 3: log2 p exchanges", _POW2),
    ("allgather", "neighbor"): Cost((p / 2) * alpha + (p - 1) * n * beta, _PER_RANK,
                                    "ompi 5: p/2 neighbour exchanges", "p even"),
    ("allgather", "two_proc"): Cost(alpha + n * beta, _PER_RANK, "ompi 6: one exchange", "p = 2"),
    ("allgather", "lib:bruck"): Cost(_L * alpha + (p - 1) * n * beta, _PER_RANK,
                                     "ompi 2: Bruck's ceil(log2 p) rounds, as the kit's"),
    ("allgather", "lib:ring"): Cost((p - 1) * (alpha + n * beta), _PER_RANK,
                                    "ompi 4: p-1 ring steps, as the kit's"),
    # bcast
    ("bcast", "basic_linear"): Cost((p - 1) * (alpha + n * beta), _BUF,
                                    "ompi 1: root sends to each rank"),
    ("bcast", "chain"): Cost(_CHAIN * (alpha + n * beta), _BUF,
                             "ompi 2: 4 unsegmented chains (fanout 4), fed by the root in turn"),
    ("bcast", "pipeline"): Cost((p - 2 + _NSEG) * (alpha + _SEG * beta), _BUF,
                                "ompi 3: chain pipelined in segments of s bytes"),
    ("bcast", "binary_tree"): Cost(2 * _F * (alpha + n * beta), _BUF,
                                   "ompi 5: binary tree, two sends per level"),
    ("bcast", "split_binary_tree"): Cost(2 * _F * (alpha + n / 2 * beta) + alpha + n / 2 * beta,
                                         _BUF, "ompi 4: two halves down two subtrees, then exchanged"),
    ("bcast", "binomial"): Cost(_L * (alpha + n * beta), _BUF, "ompi 6: binomial tree"),
    ("bcast", "knomial"): Cost((4 - 1) * sympy.ceiling(sympy.log(p, 4)) * (alpha + n * beta), _BUF,
                               "ompi 7: radix-4 tree, 3 sends per level"),
    ("bcast", "scatter_allgather"): Cost((_L + p - 1) * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                         "ompi 8: binomial scatter then allgather"),
    ("bcast", "scatter_allgather_ring"): Cost((_L + p - 1) * alpha + 2 * (p - 1) / p * n * beta,
                                              _BUF, "ompi 9: binomial scatter then ring allgather"),
    # reduce
    ("reduce", "basic_linear"): Cost((p - 1) * (alpha + n * beta), _BUF,
                                     "ompi 1: root receives from each rank"),
    ("reduce", "chain"): Cost(_CHAIN * (alpha + n * beta), _BUF,
                              "ompi 2: 4 unsegmented chains (fanout 4) into the root"),
    ("reduce", "pipeline"): Cost((p - 2 + _NSEG) * (alpha + _SEG * beta), _BUF,
                                 "ompi 3: pipelined chain"),
    ("reduce", "binary"): Cost(2 * _F * (alpha + n * beta), _BUF, "ompi 4: binary tree"),
    ("reduce", "binomial"): Cost(_L * (alpha + n * beta), _BUF, "ompi 5: binomial tree"),
    ("reduce", "in_order_binary"): Cost(2 * _F * (alpha + n * beta), _BUF,
                                        "ompi 6: in-order binary tree"),
    ("reduce", "rabenseifner"): Cost(2 * _L * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                     "ompi 7: reduce-scatter then gather"),
    # allreduce
    ("allreduce", "basic_linear"): Cost(2 * (p - 1) * (alpha + n * beta), _BUF,
                                        "ompi 1: reduce then bcast, linear"),
    ("allreduce", "nonoverlapping"): Cost(2 * _L * (alpha + n * beta), _BUF,
                                          "ompi 2: binomial reduce + bcast"),
    ("allreduce", "recursive_doubling"): Cost(
        _LOG2 * (alpha + n * beta), _BUF,
        "ompi 3: log2 p exchanges; other p fold the extra ranks in and out (2 more steps)", _POW2,
        (_F + 2 * sympy.ceiling(p / 2 ** _F - 1)) * (alpha + n * beta)),
    ("allreduce", "ring"): Cost(2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                "ompi 4: ring reduce-scatter + ring allgather"),
    ("allreduce", "rabenseifner"): Cost(2 * _LOG2 * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                        "ompi 6: recursive halving + doubling", _POW2),
    ("allreduce", "segmented_ring"): Cost(
        (p - 1) * (sympy.Max(1, sympy.ceiling(n / (p * s))) + 1) * alpha + 2 * (p - 1) / p * n * beta,
        _BUF, "ompi 5: the ring's reduce-scatter repeated in ceil(n/(p*s)) phases of s-byte "
              "pieces of each block, then one ring allgather; Open MPI runs the plain ring "
              "when n < p*s (always with s = 0, its default segment size)"),
}

#: Library algorithms of :mod:`mpilab.measure.libalgs` that have no entry in :data:`TABLE`, and why.
NO_COST = {
    ("allreduce", "smp"): "hierarchical (SMPI smp_binomial: binomial inside each node, then "
                          "between nodes, then inside again): its cost depends on the ranks per "
                          "node, which the table's p, n, alpha, beta do not describe",
}


def header_form(collective, name, exact=False):
    """The cost as the C headers write it: ``α``, ``β``, ``·``, and, for allgather,
    ``N = p·n`` bytes gathered on each process (``c_reference/allgather/*.c``).

    Returns
    -------
    str
        E.g. ``header_form("allgather", "ring")`` gives ``'(p - 1)·α + (p - 1)·N·β/p'``
        followed by what N (or n) is.
    """
    e = entry(collective, name)
    expr = e.exact if exact and e.exact is not None else e.expr
    log2p = sympy.Symbol("log2(p)", positive=True)
    expr = expr.subs(sympy.log(p), log2p * sympy.log(2))
    if collective == "allgather":
        expr = expr.subs(n, sympy.Symbol("N", positive=True) / p)
        what = "N = bytes gathered on each process (p blocks of n)"
    else:
        what = "n = bytes of the buffer"
    parts = sympy.collect(sympy.expand(expr), [alpha, beta], evaluate=False)
    terms = []
    for sym, mark in ((alpha, "α"), (beta, "β")):
        coef = sympy.factor(parts.pop(sym, 0))
        if coef == 0:
            continue
        c = sympy.sstr(coef).replace("**", "^").replace("*", "·")
        terms.append(mark if coef == 1 else f"({c})·{mark}" if coef.is_Add else f"{c}·{mark}")
    if parts:   # a term without alpha or beta: not expected in the table
        terms.append(sympy.sstr(sum(k * v for k, v in parts.items())))
    return f"{' + '.join(terms)}    ({what}; {e.domain})"


def names(collective=None):
    """Algorithms in the table, as ``(collective, name)`` pairs (or names for one collective)."""
    if collective is None:
        return sorted(TABLE)
    return sorted(nm for c, nm in TABLE if c == collective)


def entry(collective, name):
    """The :class:`Cost` of one algorithm.

    Raises
    ------
    UsageError
        Unknown collective or algorithm; the message lists the valid ones.
    """
    if collective not in {c for c, _ in TABLE}:
        raise one_of("collective", collective, {c for c, _ in TABLE})
    if (collective, name) not in TABLE:
        raise one_of(f"{collective} algorithm", name, names(collective))
    return TABLE[(collective, name)]


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
    return np.array([float(v).is_integer() and DOMAINS[domain](int(v)) for v in arr.ravel()],
                    dtype=bool).reshape(arr.shape)


# floor/ceiling of log2(2^k) computed as log(p)/log(2) can land just above or below k;
# the table's floor and ceiling arguments are logs of integers or n/s, never within 1e-9 of
# an integer unless they are one.
_NUMERIC = [{"ceiling": lambda x: np.ceil(np.asarray(x) - 1e-9),
             "floor": lambda x: np.floor(np.asarray(x) + 1e-9)}, "numpy"]


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
    f = sympy.lambdify((p, n, alpha, beta, s), expr, modules=_NUMERIC)
    pv = np.asarray(nprocs, dtype=float)
    nv = np.asarray(nbytes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(f(pv, nv, alpha_us, beta_us_per_byte, float(segment)), dtype=float)
    out = np.broadcast_to(out, np.broadcast(pv, nv).shape).copy()
    if e.exact is None:
        out[~np.broadcast_to(in_domain(e.domain, pv), out.shape)] = np.nan
    return out if out.ndim else float(out)


def compare_model(df, alpha_us, beta_us_per_byte, value="avg_us", segment=8192):
    """Model vs measurement per algorithm: the mean absolute percentage error (MAPE).

    Parameters
    ----------
    df : pandas.DataFrame
        Results with ``collective``, ``algorithm``, ``nprocs``, ``bytes`` and ``value``.
        For allgather, ``bytes`` is taken as the per-rank block, as in the results table.
    alpha_us, beta_us_per_byte : float

    Returns
    -------
    pandas.DataFrame
        ``collective``, ``algorithm``, ``points``, ``mape`` (%) — rows whose algorithm is not in
        the table, or whose p is outside an entry's domain with no exact cost, are left out.
    """
    rows, detail = [], []
    for (coll, algo), g in df.groupby(["collective", "algorithm"]):
        if (coll, algo) not in TABLE:
            continue
        pred = evaluate(coll, algo, g["nprocs"], g["bytes"], alpha_us, beta_us_per_byte, segment)
        pred = np.atleast_1d(pred)
        ok = ~np.isnan(pred)
        if not ok.any():
            continue
        meas = g[value].to_numpy(dtype=float)
        err = np.abs(pred[ok] - meas[ok]) / meas[ok] * 100
        rows.append(dict(collective=coll, algorithm=algo, points=int(ok.sum()),
                         mape=float(np.mean(err))))
        detail.append(g[ok].assign(model_us=pred[ok]))
    out = pd.DataFrame(rows, columns=["collective", "algorithm", "points", "mape"])
    out.attrs["detail"] = pd.concat(detail) if detail else pd.DataFrame()
    return out


def plot_model(table, ax=None, value="avg_us"):
    """Measured (points) vs model (lines) against message size, for :func:`compare_model`'s output.

    Log-log axes, one panel per process count (or everything on ``ax`` when one is given).

    Returns
    -------
    (fig, axes)
        ``axes`` is an array with one Axes per process count (``ax`` itself when given).
    """
    d = table.attrs.get("detail")
    if d is None or d.empty:
        raise UsageError("nothing to plot: compare_model found no algorithm with a cost")
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
            h = h.groupby("bytes")[[value, "model_us"]].median().reset_index()
            c = f"C{algos.index(algo)}"
            a.plot(h["bytes"], h[value], "o", color=c, label=f"{algo} measured")
            a.plot(h["bytes"], h["model_us"], "-", color=c, label=f"{algo} model")
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


_TRANSFORMS = standard_transformations + (implicit_multiplication_application, convert_xor)
_ALLOWED_FUNCS = {"log": sympy.log, "ceiling": sympy.ceiling, "ceil": sympy.ceiling,
                  "floor": sympy.floor, "sqrt": sympy.sqrt, "log2": lambda x: sympy.log(x, 2),
                  "Rational": sympy.Rational, "Integer": sympy.Integer, "Float": sympy.Float}


def parse(text):
    """Parse a cost written as text, allowing only the symbols p, n, alpha, beta, s.

    Raises
    ------
    UsageError
        Unparseable text, or a name that is not an allowed symbol or function.
    """
    local = dict(SYMBOLS)
    local.update(_ALLOWED_FUNCS)
    local.update({"a": alpha, "b": beta, "α": alpha, "β": beta})
    try:
        expr = parse_expr(str(text), local_dict=local, global_dict={"__builtins__": {}, "Symbol": sympy.Symbol,
                                                       "Function": sympy.Function, **local},
                          transformations=_TRANSFORMS)
    except Exception as exc:   # sympy raises many kinds for bad text
        raise UsageError(f"cannot read {text!r} as a cost expression ({exc}); write it with "
                         f"p, n, alpha, beta (and s), e.g. (p-1)*(alpha + n*beta)") from None
    return _only_allowed(expr, text)


def _only_allowed(expr, shown):
    expr = sympy.sympify(expr)
    by_name = {str(k): v for k, v in SYMBOLS.items()}
    expr = expr.subs({sym: by_name[str(sym)] for sym in expr.free_symbols if str(sym) in by_name})
    extra = sorted(str(x) for x in expr.free_symbols if x not in SYMBOLS.values())
    if extra:
        raise UsageError(f"unknown symbol(s) {', '.join(extra)} in {shown!r}; "
                         f"valid: {', '.join(SYMBOLS)}")
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
    return pts + extra[:max(0, 4 - len(pts))]


def check_expression(student, collective, name, points=None):
    """Compare a student's cost with the table's; equivalent forms are equal.

    Only points of the entry's domain count: for the pairwise exchange (``p power of two``)
    ``log(p, 2)*alpha + (p - 1)*n*beta`` is right.

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
        got = parse(student) if isinstance(student, str) else _only_allowed(student, str(student))
    except UsageError as exc:
        return CheckResult(False, str(exc), want, None)
    try:
        if sympy.simplify(got - want) == 0:
            return CheckResult(True, "equal", want, got)
    except Exception:
        pass
    points = check_points(e.domain) if points is None else \
        [(pv, nv) for pv, nv in points if DOMAINS[e.domain](int(pv))]
    where = "" if e.domain == "any p" else f" (for {e.domain})"
    subs_common = {alpha: sympy.Rational(3, 2), beta: sympy.Rational(1, 1000), s: 8192}
    for pv, nv in points:
        vals = {**subs_common, p: pv, n: nv}
        try:
            g = float(got.subs(vals))
        except (TypeError, ValueError):
            return CheckResult(False, f"{student!r} does not give a number at p = {pv}, n = {nv}",
                               want, got)
        w = float(want.subs(vals))
        if not math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12):
            return CheckResult(False, f"the {collective} {name} cost{where} differs at p = {pv}, "
                                      f"n = {nv} bytes (alpha = 1.5 us, beta = 0.001 us/B): yours "
                                      f"gives {g:g} us, expected {w:g} us", want, got)
    return CheckResult(True, f"equal at every checked (p, n){where}", want, got)
