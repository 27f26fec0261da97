"""Lab 2's rubric: the expected costs, and the hidden cases of the C checks."""

from mpilab.grade.checks import ccode, plots
from mpilab.grade.checks.costs import CostVerdict
from mpilab.grade.checks.prediction import PredictionVerdict
from mpilab.grade.labs.lab2 import P_SIM, PREDICTED, SIZES, VISIBLE_RUNS
from mpilab.grade.runner import Run
from mpilab.model import algorithms, costs

#: Runs the notebook's check does not do: the other process counts up to 8, THIN filled by
#: core (48 ranks) and dealt by socket over both nodes (29 ranks).
HIDDEN_RUNS = ccode.runs_at("openmpi", (4, 6, 7), hidden=True) + (
    Run("smpi", 48, "orfeo-thin", "core", hidden=True),
    Run("smpi", 29, "orfeo-thin", "socket", hidden=True),
)
RUNS = VISIBLE_RUNS + HIDDEN_RUNS


def _cost(name, algorithm):
    e = algorithms.entry("allgather", algorithm).cost
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
    "prediction_check": PredictionVerdict(
        "prediction", "made_at", "sim", PREDICTED, P_SIM, SIZES, record="prediction-lab2-thin.json"
    ),
}

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": "4 to 6 hours for a typical MSc student; the C part takes most of it",
    "sections": [
        ("1. The reference algorithms: read them, draw their schedules at p = 8", "45 min"),
        ("2. Cost expressions", "45 min to 1 h"),
        ("3. Ring and Bruck in C (first compile errors, a deadlock, MPI_IN_PLACE)", "2 to 3 h"),
        ("4. Predict, then run: the prediction from one's own costs", "15 min"),
        ("5. Benchmark and plots, and the prediction against the measurement", "45 min"),
        ("6. Model against measurement", "45 min"),
    ],
    "hidden": {
        "plot_check": "the plot read as data against the handed-in at4 (each algorithm's line, its values)",
        "plot_p_check": "the plot read as data against the handed-in at16k (each line and its values)",
        "prediction_check": (
            f"the record prediction-lab2-thin.json written before the simulation, at every P of {P_SIM} "
            f"and size of {SIZES}"
        ),
    },
    "quotes": {
        "fastest algorithm at P = 48, 16 KiB per process (simulated THIN)": (
            "at16k[at16k.nprocs == 48].sort_values('maxrank_avg_us').iloc[0]['algorithm']"
        ),
        "its time there (us)": "round(at16k[at16k.nprocs == 48]['maxrank_avg_us'].min(), 1)",
        "Bruck at P = 48, 16 KiB (us)": (
            "round(float(at16k[(at16k.nprocs == 48) & (at16k.algorithm =="
            " 'bruck')]['maxrank_avg_us'].iloc[0]), 1)"
        ),
        "fastest at P = 4, 4 bytes per process (real, this machine)": (
            "at4[at4.bytes == 4].sort_values('maxrank_avg_us').iloc[0]['algorithm']"
        ),
    },
    "wrong": {
        "cost_ring": [
            ("p messages instead of p - 1", {"cost_ring": costs.p * (costs.alpha + costs.n * costs.beta)}),
            (
                "the whole gathered buffer on every step",
                {"cost_ring": (costs.p - 1) * (costs.alpha + costs.p * costs.n * costs.beta)},
            ),
        ],
        "cost_bruck": [
            (
                "log2 p without the ceiling (wrong for p not a power of two)",
                {"cost_bruck": costs.LOG2 * costs.alpha + (costs.p - 1) * costs.n * costs.beta},
            )
        ],
        "ring_correct": [
            (
                "every rank receives first with a blocking MPI_Recv: a deadlock",
                {"ring.c": "tests/data/grading/ring_deadlock.c"},
            )
        ],
        "bruck_correct": [
            (
                "a buffer overrun in the final rotation: a crash",
                {"bruck.c": "tests/data/grading/bruck_segfault.c"},
            )
        ],
    },
}
