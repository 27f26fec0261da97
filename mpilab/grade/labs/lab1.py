"""Lab 1's graded cells, as the notebook sees them: the answers each hands in, the visible checks.

Every cell hands in ``fixed``, the simulated results at the student's message size, with its
answer: the grader recomputes what the answer should be from that table (after simulating one
of its points again), with conventions a careful student could defend.
"""

from mpilab.grade.cases import Case
from mpilab.grade.checks import fits as fit_checks
from mpilab.grade.checks import plots
from mpilab.grade.checks.tables import dict_case, frame, slim, table_case
from mpilab.grade.labs import Cell

#: The collectives of the lab, and the columns the results table must have.
COLLECTIVES = ("bcast", "reduce")
RESULT_COLUMNS = ("collective", "algorithm", "nprocs", "bytes", "avg_us")
#: At least this many process counts per curve: four segments of three (the reduced design has
#: 15, the report's 24).
MIN_NPROCS = 12


def data_cases(fixed):
    """The table ``fixed`` is results at one message size, both collectives, every curve over
    at least :data:`MIN_NPROCS` process counts. One failed case, or none."""
    bad = table_case(fixed, "fixed", RESULT_COLUMNS)
    if bad:
        return [bad]
    fixed = frame(fixed)
    sizes = sorted(fixed["bytes"].unique())
    if len(sizes) != 1:
        return [
            Case(
                "fixed is at one message size",
                False,
                f"fixed holds {len(sizes)} sizes ({', '.join(map(str, sizes[:6]))}): keep the rows at "
                f"FIXED_BYTES only",
            )
        ]
    missing = [c for c in COLLECTIVES if c not in set(fixed["collective"])]
    if missing:
        return [Case("fixed has both collectives", False, f"fixed has no {' or '.join(missing)} rows")]
    short = [
        f"{c} {a} ({n} P)"
        for (c, a), n in fixed.groupby(["collective", "algorithm"])["nprocs"].nunique().items()
        if n < MIN_NPROCS
    ]
    if short:
        return [
            Case(
                "fixed covers the design",
                False,
                f"too few process counts for {', '.join(short)}: "
                f"measure every P of DESIGN (at least {MIN_NPROCS})",
            )
        ]
    return []


def _panel(axes, collective):
    def visible(fig, fixed):
        bad = data_cases(fixed)
        if bad:
            return bad
        sub = frame(fixed)[frame(fixed)["collective"] == collective]
        return plots.latency_plot_cases(fig, sub, x="nprocs", y="avg_us", log="y", axes=axes)

    return visible


def _fits(fits, fixed):
    return data_cases(fixed) or fit_checks.fit_form_cases(fits, fixed, segments=4)


def ranking_form_cases(ranking, fixed):
    """The visible checks of a ranking: per collective, a list of every algorithm of ``fixed``,
    once each. Whether the order is right the grader decides."""
    bad = data_cases(fixed) or [c for c in [dict_case(ranking, "ranking", COLLECTIVES, "list")] if c]
    if bad:
        return bad
    out = []
    for coll in COLLECTIVES:
        want = sorted(set(frame(fixed).loc[frame(fixed)["collective"] == coll, "algorithm"].astype(str)))
        got = list(ranking[coll])
        ok = sorted(got) == want and len(set(got)) == len(got)
        out.append(
            Case(f"ranking[{coll!r}] names every algorithm once", ok, f"it is {got}; it should order {want}")
        )
    return out


#: The columns of ``fixed`` the grader reads (the rest stays in the notebook).
KEPT = (
    "collective",
    "algorithm",
    "flavour",
    "platform",
    "nprocs",
    "bytes",
    "repetition",
    "avg_us",
    "maxrank_avg_us",
)


def _slim(answer, fixed):
    return answer, slim(fixed, KEPT)


_PLOT_NOTE = "The grader runs them again after you hand in, on your table fixed."
_ANALYSIS_NOTE = (
    "Whether the values are right the grader decides after you hand in, from your "
    "table fixed (one of its points simulated again)."
)

CELLS = {
    "plot_bcast": Cell(("fig", "fixed"), _panel(0, "bcast"), _PLOT_NOTE, _slim),
    "plot_reduce": Cell(("fig", "fixed"), _panel(1, "reduce"), _PLOT_NOTE, _slim),
    "fits_check": Cell(("fits", "fixed"), _fits, _ANALYSIS_NOTE, _slim),
    "ranking_check": Cell(("ranking", "fixed"), ranking_form_cases, _ANALYSIS_NOTE, _slim),
}
