"""Lab 3's graded cells, as the notebook sees them: the answers each hands in, the visible checks."""

from functools import partial

from mpilab.grade.checks import costs, plots, reductions
from mpilab.grade.labs import Cell, c_file_cell
from mpilab.grade.runner import SMALL_CLUSTER, Run

#: The runs of the visible correctness checks: real Open MPI at P = 1, 2, 3, 5, 8 (one node: a
#: two-level allreduce's degenerate case) and 5 ranks on the small simulated cluster of 3 nodes
#: x 3 cores (nodes of 3 and 2 ranks). Every kind of case the grader checks runs in each (int,
#: double, a prime count, MPI_IN_PLACE, a sub-communicator; at P = 1 not MPI_IN_PLACE, which
#: is right there without any code); the grader adds other process counts and clusters.
VISIBLE_RUNS = reductions.runs_at("openmpi", (1, 2, 3, 5, 8)) + (Run("smpi", 5, SMALL_CLUSTER, "core"),)


def _c(c_file, algorithm):
    return c_file_cell(c_file, lambda: reductions.visible_reduction(c_file, algorithm, VISIBLE_RUNS))


CELLS = {
    "reduce_scatter_correct": _c("reduce_scatter.c", "reduce_scatter"),
    "rabenseifner_correct": _c("allreduce_rabenseifner.c", "rabenseifner"),
    "two_level_correct": _c("allreduce_two_level.c", "two_level"),
    "cost_rabenseifner": Cell(
        ("cost_rabenseifner",),
        partial(costs.form_cases, name="cost_rabenseifner"),
        "Its value is checked by the grader after you hand in; the feedback then "
        "names a (p, n) where it differs.",
    ),
    "study_plot_check": Cell(
        ("fig", "s8"),
        partial(plots.latency_plot_cases, x="nprocs", y="median_us"),
        "After you hand in, the grader also simulates your two-level allreduce at "
        "P = 16 and 32 itself and checks that s8 holds those medians.",
    ),
}
