"""α-β (Hockney) costs of collective algorithms, as sympy expressions, from one table.

Symbols: ``p`` processes, ``n`` bytes, ``alpha`` latency (µs), ``beta`` µs per byte, ``s``
segment size in bytes for pipelined algorithms. Each entry states what ``n`` is:

* allgather (the kit's algorithms and the library's): ``n`` = bytes **contributed by each
  rank** (one block), so every rank ends with ``p * n`` bytes. The C headers in
  ``c_reference/allgather`` write costs in terms of the bytes gathered on each process,
  ``N = p * n``; the two forms are the same cost.
* bcast / reduce / allreduce: ``n`` = bytes of the buffer being broadcast or reduced.

Reduction arithmetic is not counted (no γ term). Costs are contention-free.

Examples
--------
>>> from mpilab import costs
>>> costs.cost("allgather", "ring")
beta*n*(p - 1) + alpha*(p - 1)
>>> costs.check_expression("(p-1)*(alpha+n*beta)", "allgather", "ring").equal
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sympy
from sympy.parsing.sympy_parser import (parse_expr, standard_transformations,
                                        implicit_multiplication_application, convert_xor)

from .errors import UsageError, one_of

p, n, alpha, beta, s = sympy.symbols("p n alpha beta s", positive=True)
SYMBOLS = {"p": p, "n": n, "alpha": alpha, "beta": beta, "s": s}
_L = sympy.ceiling(sympy.log(p, 2))          # rounds of a binomial / Bruck schedule
_F = sympy.floor(sympy.log(p, 2))
_NSEG = sympy.ceiling(n / s)                 # number of segments of a pipelined algorithm

_PER_RANK = "n = bytes contributed by each rank (each rank ends with p*n bytes)"
_BUF = "n = bytes of the buffer"

#: (collective, name) -> (expression, meaning of n, source)
TABLE = {
    # the kit's allgather algorithms (c_reference/allgather)
    ("allgather", "gather_bcast"): (2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta, _PER_RANK,
                                    "kit: linear gather of p-1 blocks, then linear bcast of p*n bytes"),
    ("allgather", "pairwise"): ((p - 1) * (alpha + n * beta), _PER_RANK, "kit: p-1 pairwise exchanges"),
    ("allgather", "ring"): ((p - 1) * (alpha + n * beta), _PER_RANK, "kit: p-1 ring steps"),
    ("allgather", "bruck"): (_L * alpha + (p - 1) * n * beta, _PER_RANK,
                             "kit: ceil(log2 p) rounds of doubling blocks"),
    # library allgather (Open MPI ids)
    ("allgather", "linear"): (2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta, _PER_RANK,
                              "ompi 1: gather then bcast"),
    ("allgather", "recursive_doubling"): (_L * alpha + (p - 1) * n * beta, _PER_RANK,
                                          "ompi 3: log2 p exchanges (p a power of two)"),
    ("allgather", "neighbor"): ((p / 2) * alpha + (p - 1) * n * beta, _PER_RANK,
                                "ompi 5: p/2 neighbour exchanges (p even)"),
    ("allgather", "two_proc"): (alpha + n * beta, _PER_RANK, "ompi 6: p = 2 only"),
    # bcast
    ("bcast", "basic_linear"): ((p - 1) * (alpha + n * beta), _BUF, "ompi 1: root sends to each rank"),
    ("bcast", "chain"): ((p - 1) * (alpha + n * beta), _BUF, "ompi 2: unsegmented chain"),
    ("bcast", "pipeline"): ((p - 2 + _NSEG) * (alpha + s * beta), _BUF,
                            "ompi 3: chain pipelined in segments of s bytes"),
    ("bcast", "binary_tree"): (2 * _F * (alpha + n * beta), _BUF,
                               "ompi 5: binary tree, two sends per level"),
    ("bcast", "split_binary_tree"): (2 * _F * (alpha + n / 2 * beta) + alpha + n / 2 * beta, _BUF,
                                     "ompi 4: two halves down two subtrees, then exchanged"),
    ("bcast", "binomial"): (_L * (alpha + n * beta), _BUF, "ompi 6: binomial tree"),
    ("bcast", "knomial"): ((4 - 1) * sympy.ceiling(sympy.log(p, 4)) * (alpha + n * beta), _BUF,
                           "ompi 7: radix-4 tree, 3 sends per level"),
    ("bcast", "scatter_allgather"): ((_L + p - 1) * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                     "ompi 8: binomial scatter then allgather"),
    ("bcast", "scatter_allgather_ring"): ((_L + p - 1) * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                          "ompi 9: binomial scatter then ring allgather"),
    # reduce
    ("reduce", "linear"): ((p - 1) * (alpha + n * beta), _BUF, "ompi 1: root receives from each rank"),
    ("reduce", "chain"): ((p - 1) * (alpha + n * beta), _BUF, "ompi 2: unsegmented chain"),
    ("reduce", "pipeline"): ((p - 2 + _NSEG) * (alpha + s * beta), _BUF, "ompi 3: pipelined chain"),
    ("reduce", "binary"): (2 * _F * (alpha + n * beta), _BUF, "ompi 4: binary tree"),
    ("reduce", "binomial"): (_L * (alpha + n * beta), _BUF, "ompi 5: binomial tree"),
    ("reduce", "in-order_binary"): (2 * _F * (alpha + n * beta), _BUF, "ompi 6: in-order binary tree"),
    ("reduce", "rabenseifner"): (2 * _L * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                 "ompi 7: reduce-scatter then gather"),
    # allreduce
    ("allreduce", "basic_linear"): (2 * (p - 1) * (alpha + n * beta), _BUF, "ompi 1: reduce then bcast, linear"),
    ("allreduce", "nonoverlapping"): (2 * _L * (alpha + n * beta), _BUF, "ompi 2: binomial reduce + bcast"),
    ("allreduce", "recursive_doubling"): (_L * (alpha + n * beta), _BUF, "ompi 3: log2 p exchanges"),
    ("allreduce", "ring"): (2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                            "ompi 4: ring reduce-scatter + ring allgather"),
    ("allreduce", "rabenseifner"): (2 * _L * alpha + 2 * (p - 1) / p * n * beta, _BUF,
                                    "ompi 6: recursive halving + doubling"),
}


def names(collective=None):
    """Algorithms in the table, as ``(collective, name)`` pairs (or names for one collective)."""
    if collective is None:
        return sorted(TABLE)
    return sorted(nm for c, nm in TABLE if c == collective)


def cost(collective, name):
    """The sympy cost expression of one algorithm.

    Raises
    ------
    UsageError
        Unknown collective or algorithm; the message lists the valid ones.
    """
    if collective not in {c for c, _ in TABLE}:
        raise one_of("collective", collective, {c for c, _ in TABLE})
    if (collective, name) not in TABLE:
        raise one_of(f"{collective} algorithm", name, names(collective))
    return TABLE[(collective, name)][0]


def evaluate(collective, name, nprocs, nbytes, alpha_us, beta_us_per_byte, segment=8192):
    """Numeric cost in µs (arrays broadcast) with fitted ``alpha`` and ``beta``.

    Returns
    -------
    numpy.ndarray or float
    """
    f = sympy.lambdify((p, n, alpha, beta, s), cost(collective, name),
                       modules=[{"ceiling": np.ceil, "floor": np.floor}, "numpy"])
    return f(np.asarray(nprocs, dtype=float), np.asarray(nbytes, dtype=float),
             alpha_us, beta_us_per_byte, float(segment))


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
        the table are left out.
    """
    rows, detail = [], []
    for (coll, algo), g in df.groupby(["collective", "algorithm"]):
        if (coll, algo) not in TABLE:
            continue
        pred = evaluate(coll, algo, g["nprocs"], g["bytes"], alpha_us, beta_us_per_byte, segment)
        err = np.abs(pred - g[value].to_numpy()) / g[value].to_numpy() * 100
        rows.append(dict(collective=coll, algorithm=algo, points=len(g), mape=float(np.mean(err))))
        detail.append(g.assign(model_us=pred))
    out = pd.DataFrame(rows, columns=["collective", "algorithm", "points", "mape"])
    out.attrs["detail"] = pd.concat(detail) if detail else pd.DataFrame()
    return out


def plot_model(table, ax=None, value="avg_us"):
    """Measured (points) vs model (lines) over ``nprocs`` for the output of :func:`compare_model`.

    Returns
    -------
    (fig, ax)
    """
    import matplotlib.pyplot as plt
    d = table.attrs.get("detail")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    for i, (algo, g) in enumerate(d.groupby("algorithm")):
        g = g.sort_values("nprocs")
        ax.plot(g["nprocs"], g[value], "o", color=f"C{i}", label=f"{algo} measured")
        ax.plot(g["nprocs"], g["model_us"], "-", color=f"C{i}", label=f"{algo} model")
    ax.set_xlabel("processes")
    ax.set_ylabel("time (µs)")
    ax.legend(fontsize="small")
    return fig, ax


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


def check_expression(student, collective, name,
                     points=((1, 1), (2, 1), (3, 1024), (5, 100), (8, 65536), (13, 7), (16, 1 << 20), (48, 4096))):
    """Compare a student's cost with the table's; equivalent forms are equal.

    Parameters
    ----------
    student : sympy expression or str
    collective, name : str
    points : sequence of (p, n)
        Where both are evaluated (alpha = 1.5 µs, beta = 0.001 µs/B, s = 8192), after a
        symbolic simplification attempt.

    Returns
    -------
    CheckResult
        ``.equal``; when False, ``.message`` names a (p, n) where they differ and both values.
    """
    want = cost(collective, name)
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
            return CheckResult(False, f"the {collective} {name} cost differs at p = {pv}, n = {nv} "
                                      f"bytes (alpha = 1.5 us, beta = 0.001 us/B): yours gives "
                                      f"{g:g} us, expected {w:g} us", want, got)
    return CheckResult(True, "equal at every checked (p, n)", want, got)
