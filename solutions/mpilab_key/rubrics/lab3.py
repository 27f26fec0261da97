"""Lab 3's rubric: the hidden runs of the C checks, the expected cost, the study's plot against
medians the grader simulates itself."""

import dataclasses
import os

import pandas as pd

from mpilab.grade import references
from mpilab.grade.cases import Case
from mpilab.grade.checks import missing, plots, reductions
from mpilab.grade.checks.costs import CostVerdict
from mpilab.grade.harness import BuildError
from mpilab.grade.labs.lab3 import VISIBLE_RUNS
from mpilab.grade.runner import SMALL_CLUSTER, Run
from mpilab.model import algorithms, costs
from mpilab.studies import repro
from mpilab_key import schedules

#: Runs the notebook's check does not do: the other process counts up to 8 on Open MPI, and
#: simulated nodes the visible run does not have: 7 ranks dealt round-robin over the 3 x 3
#: cluster (a node's ranks are not neighbours), 37 ranks dealt over jupiter's 32 nodes (nodes of
#: 2 and of 1 rank) and 40 ranks filling jupiter's nodes of 16 (16 + 16 + 8).
HIDDEN_RUNS = reductions.runs_at("openmpi", (4, 6, 7), hidden=True) + (
    Run("smpi", 7, SMALL_CLUSTER, "node", hidden=True),
    Run("smpi", 37, "jupiter-32x16", "node", hidden=True),
    Run("smpi", 40, "jupiter-32x16", "core", hidden=True),
)
RUNS = VISIBLE_RUNS + HIDDEN_RUNS

#: The study's points the grader simulates again, and how far a handed-in median may be from its
#: own (launches whose jobs run in another order differed by at most 0.05 %).
STUDY_NPROCS, STUDY_RTOL = (16, 32), 0.02


def _mismatch(table, allreduce_c, nprocs, x, y, by, what):
    """Why ``table`` does not hold the medians ``allreduce_c`` (a file or the compiled reference)
    gives, or None when it does."""
    try:
        want = repro.point_medians(allreduce_c, nprocs, 8)
    except (AssertionError, BuildError) as exc:
        return f"the grader could not simulate the study's points with {what}: {exc}"
    for (algo, p), w in sorted(want.items()):
        rows = table[(table[by].astype(str) == algo) & (pd.to_numeric(table[x], errors="coerce") == p)]
        if rows.empty:
            return f"s8 has no row for {algo} at P = {p}"
        got = float(pd.to_numeric(rows[y], errors="coerce").iloc[0])
        if not abs(got - w) <= STUDY_RTOL * abs(w):
            return f"s8 says {algo} at P = {p} takes {got:g} us; the grader simulated {what} there: {w:g} us"
    return None


def study_table_case(table, allreduce_c, nprocs=STUDY_NPROCS, x="nprocs", y="median_us", by="algorithm"):
    """Whether ``table`` holds the study's medians of MPI_Allreduce at 8 B at each P of
    ``nprocs``, simulated here again with the submitted two-level allreduce — or with the kit's
    compiled reference, which the notebook runs the study on while the student's file does not
    work (:func:`mpilab.grade.references.or_reference`): this section's grade does not depend on
    the C of section 3 (one case)."""
    title = "s8 holds the study's simulated medians"
    if not isinstance(table, pd.DataFrame) or not {x, y, by} <= set(table.columns):
        return Case(title, False, f"s8 should be the study's summary with columns {x}, {by} and {y}")
    why = (
        "allreduce_two_level.c is not in the submission"
        if allreduce_c is None
        else _mismatch(table, allreduce_c, nprocs, x, y, by, "your allreduce_two_level.c")
    )
    if why is None:
        return Case(title, True)
    ref = references.reference("allreduce_two_level")
    if _mismatch(table, ref, nprocs, x, y, by, str(ref)) is None:
        return Case(title, True, "s8 is the study of the kit's compiled reference, as the notebook ran it")
    return Case(title, False, f"{why} (nor is s8 the kit's compiled reference's)")


class StudyPlotVerdict(plots.LatencyPlotVerdict):
    """The study's plot: its table must be the study's (simulated again here); then the plot's
    cases (:class:`mpilab.grade.checks.plots.LatencyPlotVerdict`)."""

    def __init__(self, figure, table, allreduce_c, **options):
        super().__init__(figure, table, **options)
        self.allreduce_c = allreduce_c

    def cases(self, answers, ctx):
        bad = missing(answers, self.figure, self.table)
        if bad:
            return [bad]
        path = ctx.submitted_file(self.allreduce_c)
        gate = study_table_case(
            answers[self.table], os.fspath(path) if path else None, x=self.options["x"], y=self.options["y"]
        )
        if not gate.passed:
            return [gate]
        # the table comes from the kit's code: it opens the plot's cases and earns nothing by
        # itself, or a notebook that only ran the given cells would score
        return [dataclasses.replace(gate, weight=0.0)] + super().cases(answers, ctx)


_RABENSEIFNER = algorithms.entry("allreduce", "rabenseifner").cost

RUBRIC = {
    "reduce_scatter_correct": reductions.ReductionVerdict(
        "reduce_scatter.c", "reduce_scatter", RUNS, schedules=schedules.REDUCTIONS
    ),
    "rabenseifner_correct": reductions.ReductionVerdict(
        "allreduce_rabenseifner.c", "rabenseifner", RUNS, schedules=schedules.REDUCTIONS
    ),
    "cost_rabenseifner": CostVerdict("cost_rabenseifner", _RABENSEIFNER.expr, _RABENSEIFNER.domain),
    "two_level_correct": reductions.ReductionVerdict("allreduce_two_level.c", "two_level", RUNS),
    "study_plot_check": StudyPlotVerdict("fig", "s8", "allreduce_two_level.c", x="nprocs", y="median_us"),
}

_S8 = "s8[(s8.nprocs == s8.nprocs.max()) & (s8.algorithm == {!r})]['median_us'].iloc[0]"

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": "8 to 12 hours for a typical MSc student; the three C files take most of it, the first "
    "reduce-scatter alone often half a day",
    "sections": [
        (
            "1. Reduce-scatter by recursive halving, then Rabenseifner's allreduce (schedules "
            "for p = 8 and p = 6, the fold for p not a power of two, MPI_IN_PLACE, a deadlock "
            "or two)",
            "4 to 5 h",
        ),
        ("2. Rabenseifner's cost, and what the fold adds (written)", "45 min to 1 h"),
        (
            "3. The two-level allreduce (MPI_Comm_split_type, the leaders' communicator, nodes under SMPI)",
            "1.5 to 2.5 h",
        ),
        ("4. The reproduction study: simulate, compare with the paper, plot, discuss", "1.5 to 2.5 h"),
        ("5. Noise: repetitions in a deterministic simulator, jitter (written)", "30 to 45 min"),
    ],
    "hidden": {
        "study_plot_check": (
            f"the study's medians at P = {', '.join(map(str, STUDY_NPROCS))}, 8 B, simulated again with the "
            "submitted allreduce_two_level.c, or with the kit's compiled reference when the notebook ran the "
            f"study on it (within {STUDY_RTOL:.0%}); then the plot read as data"
        ),
    },
    "quotes": {
        "largest P of the study's grid": "int(s8.nprocs.max())",
        "MPI_Allreduce 8 B at that P, library default (simulated median, us)": "round(float("
        + _S8.format("default")
        + "), 2)",
        "MPI_Allreduce 8 B at that P, the solution's two-level (simulated median, us)": "round(float("
        + _S8.format("two_level")
        + "), 2)",
        "largest relative spread of the R launches of one point (plain platform)": (
            "float(repro.spread(results)['rel_spread'].max())"
        ),
        "relative spread of the jittered launches (sigma = 0.1, P = 32, 8 B)": (
            "round(float(repro.spread(jittered)['rel_spread'].max()), 3)"
        ),
    },
    "wrong": {
        "rabenseifner_correct": [
            (
                "a write through a wrong block pointer: a crash from P = 2 on",
                {"allreduce_rabenseifner.c": "tests/data/grading/allreduce_rabenseifner_segfault.c"},
            )
        ],
        "two_level_correct": [
            (
                "every rank waits for its leader's result before sending its own part: a deadlock",
                {"allreduce_two_level.c": "tests/data/grading/allreduce_two_level_deadlock.c"},
            )
        ],
        "cost_rabenseifner": [
            (
                "only the reduce-scatter half counted",
                {
                    "cost_rabenseifner": costs.LOG2 * costs.alpha
                    + (costs.p - 1) / costs.p * costs.n * costs.beta
                },
            ),
            (
                "recursive doubling's cost (the whole vector on every step)",
                {"cost_rabenseifner": costs.LOG2 * (costs.alpha + costs.n * costs.beta)},
            ),
        ],
    },
}
