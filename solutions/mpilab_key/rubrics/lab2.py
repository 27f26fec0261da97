"""Lab 2's rubric: the expected costs, and the hidden cases of the C checks."""
from mpilab.grade.checks import ccode, plots
from mpilab.grade.checks.costs import CostVerdict
from mpilab.grade.labs.lab2 import VISIBLE_RUNS
from mpilab.grade.runner import Run
from mpilab.model import costs

#: Runs the notebook's check does not do: the other process counts up to 8, THIN filled by
#: core (48 ranks) and dealt by socket over both nodes (29 ranks).
HIDDEN_RUNS = (ccode.runs_at("openmpi", (4, 6, 7), hidden=True)
               + (Run("smpi", 48, "orfeo-thin", "core", hidden=True),
                  Run("smpi", 29, "orfeo-thin", "socket", hidden=True)))
RUNS = VISIBLE_RUNS + HIDDEN_RUNS


def _cost(name, algorithm):
    e = costs.entry("allgather", algorithm)
    return CostVerdict(name, e.expr, e.domain)


RUBRIC = {
    "cost_gather_bcast": _cost("cost_gather_bcast", "gather_bcast"),
    "cost_pairwise": _cost("cost_pairwise", "pairwise"),
    "cost_ring": _cost("cost_ring", "ring"),
    "cost_bruck": _cost("cost_bruck", "bruck"),
    "ring_correct": ccode.AllgatherVerdict("ring.c", "ring", RUNS),
    "bruck_correct": ccode.AllgatherVerdict("bruck.c", "bruck", RUNS),
    "plot_check": plots.LatencyPlotVerdict("fig", "at4", x="bytes", y="maxrank_avg_us"),
    "plot_p_check": plots.LatencyPlotVerdict("fig_p", "at16k", x="nprocs", y="maxrank_avg_us"),
}
