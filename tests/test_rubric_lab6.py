"""Lab 6's rubric on answers that are right in another form than the key's.

The cost of the pipelined chain may count every one of its k = ⌈n/s⌉ segments as a full one
(the registry's form) or as k equal segments of n/k bytes, the textbook (p + k − 2)(α + nβ/k):
both are right; a wrong count of messages is not.
"""

import course
import sympy

from mpilab.model.costs import alpha, beta, n, p, s
from mpilab_key.rubrics import lab6 as rubric

K = sympy.ceiling(n / s)


def judged(gid, points=2, **given):
    return course.judged("lab6", gid, points, ".", **given)


def test_pipeline_cost_in_either_segment_convention():
    full = rubric.EXPECTED["pipeline"].expr
    equal = (p + K - 2) * (alpha + n * beta / K)
    assert sympy.simplify(full - equal) != 0  # they differ where s does not divide n
    assert judged("cost_pipeline", cost_pipeline=full).score == 2
    assert judged("cost_pipeline", cost_pipeline=equal).score == 2
    assert (
        judged("cost_pipeline", cost_pipeline="(p + ceiling(n/s) - 2)*(alpha + n*beta/ceiling(n/s))").score
        == 2
    )
    v = judged("cost_pipeline", cost_pipeline=(p - 1) * K * (alpha + sympy.Min(n, s) * beta))
    assert v.score == 0 and "differs at p =" in v.text()
    half = judged("cost_pipeline", cost_pipeline=(p + K - 2) * alpha + (p - 2 + K) * n * beta)
    assert half.score == 1 and "β term" in half.text()
