"""Checks that turn an answer into cases, shared by the two sides of grading.

Each check is a plain function returning a list of :class:`mpilab.grade.cases.Case`. The
student's notebook runs a check on the *visible* cases while the student works
(:mod:`mpilab.grade.labs`); the trusted grader runs the same check on the visible and the hidden
cases, with the expected answers of the answer key (:mod:`mpilab.grade.judge`). The checks hold
no answer: expected values, hidden cases and reference data are their arguments.

A rubric entry of the answer key is a :class:`Verdict`: it names the answers its cell hands in
(``needs``) and is called with the decoded answers and the judge's context.
"""

from mpilab.grade.answers import BadAnswer
from mpilab.grade.cases import Case


class Verdict:
    """A rubric entry: how the trusted grader judges one graded cell.

    Subclasses set :attr:`needs` (the names of the answers the cell hands in; empty when the
    verdict only reads the student's files) and implement :meth:`cases`.
    """

    needs = ()

    def __call__(self, answers, ctx):
        return self.cases(answers or {}, ctx)

    def cases(self, answers, ctx):
        raise NotImplementedError

    def explain(self, answers, ctx, cases):
        """More feedback once the cases are known: ``(text, html)`` or None (the default).

        It never changes the score; the judge drops it when it fails or runs out of time.
        """
        return None


def missing(answers, *names):
    """A failed case for the first of ``names`` that was not handed in or cannot be read; else None."""
    for name in names:
        if name not in answers:
            return Case(
                f"the answer {name}",
                False,
                f"no answer named {name!r} was handed in: run the cells above this one so that {name} exists",
            )
        if isinstance(answers[name], BadAnswer):
            return Case(f"the answer {name}", False, str(answers[name]))
    return None


class Function(Verdict):
    """A verdict made from a function ``fn(answers, ctx) -> list of Case`` and the names it needs."""

    def __init__(self, fn, needs=()):
        self.fn = fn
        self.needs = tuple(needs)

    def cases(self, answers, ctx):
        bad = missing(answers, *self.needs)
        return [bad] if bad else list(self.fn(answers, ctx))
