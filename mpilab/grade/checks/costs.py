"""Checks of α-β cost expressions: their form (visible) and their value (the grader's).

A cost ``A·α + B·β`` has two terms that mean different things: ``A`` counts the messages on the
critical path, ``B`` the bytes that cross it. :func:`value_cases` checks each term on its own,
so an answer with the right message count and a wrong byte count earns half the points and is
told which term is off, at which p and n. An expression that is not linear in α and β (a max,
a product of the two) is compared whole.
"""

import math

import sympy

from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict, missing
from mpilab.model import costs

#: α (µs), β (µs/B) and the segment size used to compare expressions numerically.
ALPHA, BETA, SEGMENT = sympy.Rational(3, 2), sympy.Rational(1, 1000), 8192


def to_expression(answer):
    """The answer as a sympy expression in the table's symbols (:func:`mpilab.model.costs.expression`:
    text is read by an allow-list, nothing is evaluated).

    Raises
    ------
    ValueError
        No answer, unreadable text, or unknown symbols (the message says which).
    """
    try:
        return costs.expression(answer)
    except costs.UsageError as exc:
        raise ValueError(str(exc)) from None


def terms(expr):
    """``(A, B)`` with ``expr = A·alpha + B·beta``, or None when ``expr`` is not of that form."""
    try:
        e = sympy.expand(expr)
        a, b = sympy.diff(e, costs.alpha), sympy.diff(e, costs.beta)
        rest = sympy.simplify(e - a * costs.alpha - b * costs.beta)
    except Exception:  # sympy raises many kinds on odd expressions
        return None
    if any(s in x.free_symbols for x in (a, b) for s in (costs.alpha, costs.beta)) or rest != 0:
        return None
    return a, b


def _value(expr, pv, nv):
    try:
        v = float(
            expr.subs({costs.p: pv, costs.n: nv, costs.s: SEGMENT, costs.alpha: ALPHA, costs.beta: BETA})
        )
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def form_cases(answer, name="the cost"):
    """The visible checks of a cost: it reads as an expression in p, n, alpha, beta, it has an
    α term and a β term, it is 0 at p = 1 (nothing to send) and positive above.

    They say nothing of whether the cost is right: the grader checks that after hand-in.
    """
    try:
        expr = to_expression(answer)
    except ValueError as exc:
        return [Case(f"{name} reads as an expression", False, str(exc))]
    out = [Case(f"{name} reads as an expression", True)]
    split = terms(expr)
    out.append(
        Case(
            f"{name} is A·alpha + B·beta",
            split is not None,
            "write it as (messages)·alpha + (bytes)·beta, with p and n in the coefficients",
        )
    )
    at1 = _value(expr, 1, 1024)
    out.append(
        Case(
            f"{name} at p = 1",
            at1 is not None and abs(at1) < 1e-12,
            f"one process sends nothing, so the cost at p = 1 is 0; yours gives {at1}",
        )
    )
    bad = [pv for pv in (2, 3, 5, 8) if (_value(expr, pv, 1024) or 0) <= 0]
    out.append(
        Case(
            f"{name} above p = 1",
            not bad,
            f"the cost must be positive; at p = {bad[0] if bad else ''} it is not",
        )
    )
    return out


def value_cases(answer, expected, domain="any p", points=None, name="the cost"):
    """The grader's check of a cost against the expected one, term by term.

    Parameters
    ----------
    answer : sympy expression or str
    expected : sympy expression
    domain : str
        Where the costs are compared (a key of :data:`mpilab.model.costs.DOMAINS`).
    points : sequence of (p, n), optional
        Default :func:`mpilab.model.costs.check_points` of the domain.

    Returns
    -------
    list of Case
        Two cases (the α term, the β term), or one (the whole cost) when either side is not
        linear in α and β.
    """
    try:
        got = to_expression(answer)
    except ValueError as exc:
        return [Case(f"{name}", False, str(exc))]
    points = (
        costs.check_points(domain)
        if points is None
        else [(pv, nv) for pv, nv in points if costs.DOMAINS[domain](int(pv))]
    )
    where = "" if domain == "any p" else f" (for {domain})"
    mine, theirs = terms(got), terms(expected)
    if mine is None or theirs is None:
        return [_compare(got, expected, points, f"{name}{where}", "the cost")]
    return [
        _compare(
            mine[0],
            theirs[0],
            points,
            f"its α term{where}: messages on the critical path",
            "the α coefficient",
            weight=1.0,
        ),
        _compare(
            mine[1],
            theirs[1],
            points,
            f"its β term{where}: bytes on the critical path",
            "the β coefficient",
            weight=1.0,
        ),
    ]


def _compare(got, want, points, title, what, weight=1.0):
    for pv, nv in points:
        g, w = _value(got, pv, nv), _value(want, pv, nv)
        if g is None:
            return Case(title, False, f"{what} gives no number at p = {pv}, n = {nv}", weight)
        if not math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12):
            return Case(
                title,
                False,
                f"{what} differs at p = {pv}, n = {nv} bytes: yours is {g:g}, expected {w:g}",
                weight,
            )
    return Case(title, True, "", weight)


class CostVerdict(Verdict):
    """The grader's verdict on a cost answer (see :func:`value_cases`)."""

    def __init__(self, answer, expected, domain="any p"):
        self.answer = answer
        self.needs = (answer,)
        self.expected = expected
        self.domain = domain

    def cases(self, answers, ctx):
        bad = missing(answers, self.answer)
        return (
            [bad] if bad else value_cases(answers[self.answer], self.expected, self.domain, name=self.answer)
        )
