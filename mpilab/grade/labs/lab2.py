"""Lab 2's graded cells, as the notebook sees them: the answers each hands in, the visible checks."""

from functools import partial

from mpilab.grade.checks import ccode, costs, plots, prediction
from mpilab.grade.labs import Cell, c_file_cell
from mpilab.grade.runner import Run

#: The runs of the visible correctness check: real Open MPI at P = 1, 2, 3, 5, 8 (non-powers of
#: two included) and 13 ranks dealt over the two nodes of simulated THIN. Every kind of case the
#: grader checks (datatypes, MPI_IN_PLACE, a sub-communicator) runs in each; the grader adds
#: other process counts and larger simulated runs.
VISIBLE_RUNS = ccode.runs_at("openmpi", (1, 2, 3, 5, 8)) + (Run("smpi", 13, "orfeo-thin", "node"),)

#: The grid of the predict-then-run section: the simulated sweep's P and sizes, the algorithms
#: whose costs the student gave.
P_SIM = (2, 4, 8, 16, 32, 48)
SIZES = (4, 16, 64, 256, 1024, 4096, 16384)
PREDICTED = ("gather_bcast", "pairwise", "ring", "bruck")

_COST_NOTE = (
    "Its value is checked by the grader after you hand in; the feedback then names a (p, n) where it differs."
)


def _cost(name):
    return Cell((name,), partial(costs.form_cases, name=name), _COST_NOTE)


def _c(c_file, algorithm):
    return c_file_cell(c_file, lambda: ccode.visible_allgather(c_file, algorithm, VISIBLE_RUNS))


CELLS = {
    "cost_gather_bcast": _cost("cost_gather_bcast"),
    "cost_pairwise": _cost("cost_pairwise"),
    "cost_ring": _cost("cost_ring"),
    "cost_bruck": _cost("cost_bruck"),
    "ring_correct": _c("ring.c", "ring"),
    "bruck_correct": _c("bruck.c", "bruck"),
    "plot_check": Cell(("fig", "at4"), partial(plots.latency_plot_cases, x="bytes", y="maxrank_avg_us")),
    "plot_p_check": Cell(
        ("fig_p", "at16k"), partial(plots.latency_plot_cases, x="nprocs", y="maxrank_avg_us")
    ),
    "prediction_check": Cell(
        ("prediction", "made_at", "sim"),
        partial(prediction.prediction_cases, algorithms=PREDICTED, nprocs=P_SIM, sizes=SIZES),
    ),
}
