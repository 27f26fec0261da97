"""Lab 2's rubric: the expected costs, the hidden cases of the C checks, the plots credited only
on the tables the grader measures again, and the prediction recomputed from the student's costs.

* ``plot_check`` (at4: real Open MPI, P = 4): at4 must hold every size of every algorithm it has
  (the kit's references always), and the grader times the submitted ring.c and bruck.c and the
  references at P = 4 itself: real times agree within the factor of
  :data:`mpilab_key.resimulate.REAL_FACTOR` at the median point.
* ``plot_p_check`` (at16k: simulated THIN, 16 KiB): every P of the sweep for every algorithm, and
  one P drawn when the grader runs simulated again with the submitted files: equal times.
* ``prediction_check``: the prediction must be the student's own four cost answers evaluated on the
  grid at THIN's α and β, computed here; when it was made is not graded.
"""

import hashlib
import warnings

from mpilab.grade import bench
from mpilab.grade.checks import ccode, missing, plots
from mpilab.grade.checks.costs import CostVerdict
from mpilab.grade.checks.prediction import PredictionVerdict
from mpilab.grade.checks.tables import credited_only_if, frame
from mpilab.grade.labs.lab2 import P_SIM, PREDICTED, SIZES, VISIBLE_RUNS
from mpilab.grade.runner import Run
from mpilab.model import algorithms, costs
from mpilab.simulate import platforms, routes
from mpilab_key.resimulate import draw, grid_case, remeasured_case

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


#: The kit's reference allgathers, timed with the student's in every run (reference=True).
REFERENCES = ("gather_bcast", "pairwise")
#: The notebook's plots: at4 is the real run at P = 4, at16k the simulated sweep at 16 KiB.
AT4_P, AT16K_BYTES = 4, 16384
KEYS = ("algorithm", "nprocs", "bytes")

_RUNS = {}


def grader_run(ctx, flavour, nprocs):
    """The grader's own ``bench.benchmark_c`` of the submitted ring.c and bruck.c with the kit's
    references, as the notebook's cell runs it (None when nothing could be timed); memoised."""
    files = {a: ctx.submitted_file(f"{a}.c") for a in ("ring", "bruck")}
    files = {a: f for a, f in files.items() if f is not None}
    key = (
        flavour,
        tuple(nprocs),
        tuple((a, hashlib.sha256(f.read_bytes()).hexdigest()) for a, f in files.items()),
    )
    if key not in _RUNS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the student's notebook showed why one is left out
                _RUNS[key] = bench.benchmark_c(files, nprocs=nprocs, flavour=flavour, reference=True)
        except AssertionError:
            _RUNS[key] = None
    return _RUNS[key]


def _algorithms(table):
    t = frame(table)
    return sorted(set(map(str, t["algorithm"]))) if hasattr(t, "columns") and "algorithm" in t.columns else []


def measured_gates(table, ctx, what, flavour, nprocs, grid, at=None, how="the grader's own run"):
    """The gates of a table the notebook measured with ``bench.benchmark_c``: the grid (the
    references and every algorithm it has, at every point of ``grid``), then the grader's run of
    the same files at ``nprocs`` (again once when it misses an algorithm the table has)."""
    algos = sorted(set(_algorithms(table)) | set(REFERENCES))
    gates = [grid_case(frame(table), what, {"algorithm": algos, **grid})]
    theirs = grader_run(ctx, flavour, nprocs)
    if theirs is not None and not set(algos) <= set(theirs["algorithm"]):
        _RUNS.clear()
        theirs = grader_run(ctx, flavour, nprocs)
    if theirs is not None:
        theirs = theirs[theirs["algorithm"].isin(algos) & theirs["nprocs"].isin(grid["nprocs"])]
        if at is not None:
            theirs = theirs[theirs["bytes"] == at]
    gates.append(
        remeasured_case(frame(table), theirs, what, KEYS, "maxrank_avg_us", real=flavour != "smpi", how=how)
    )
    return gates


class MeasuredPlotVerdict(plots.LatencyPlotVerdict):
    """A plot of a benchmark_c table, credited only when the table passes :func:`measured_gates`."""

    def __init__(self, figure, table, gates, **options):
        super().__init__(figure, table, **options)
        self.gates = gates

    def cases(self, answers, ctx):
        bad = missing(answers, self.figure, self.table)
        if bad:
            return [bad]
        return credited_only_if(self.gates(answers[self.table], ctx), super().cases(answers, ctx))


def _at4_gates(at4, ctx):
    theirs = grader_run(ctx, "openmpi", (AT4_P,))
    sizes = sorted(int(b) for b in theirs["bytes"].unique()) if theirs is not None else []
    return measured_gates(
        at4,
        ctx,
        "at4",
        "openmpi",
        (AT4_P,),
        {"nprocs": (AT4_P,), "bytes": sizes},
        how="the grader's real run",
    )


def _at16k_gates(at16k, ctx):
    p = draw(P_SIM)
    return measured_gates(
        at16k,
        ctx,
        "at16k",
        "smpi",
        tuple(sorted({2, p})),
        {"nprocs": P_SIM, "bytes": (AT16K_BYTES,)},
        at=AT16K_BYTES,
        how=f"the grader's simulation at P = {p}",
    )


def _thin_alpha_beta():
    """The notebook's α and β: two cores of one socket of simulated THIN."""
    return routes.route_cost("orfeo-thin", *platforms.placement("orfeo-thin", 2, "core"))


RUBRIC = {
    "cost_gather_bcast": _cost("cost_gather_bcast", "gather_bcast"),
    "cost_pairwise": _cost("cost_pairwise", "pairwise"),
    "cost_ring": _cost("cost_ring", "ring"),
    "cost_bruck": _cost("cost_bruck", "bruck"),
    "ring_correct": ccode.AllgatherVerdict("ring.c", "ring", RUNS),
    "bruck_correct": ccode.AllgatherVerdict("bruck.c", "bruck", RUNS),
    "plot_check": MeasuredPlotVerdict("fig", "at4", _at4_gates, x="bytes", y="maxrank_avg_us"),
    "plot_p_check": MeasuredPlotVerdict("fig_p", "at16k", _at16k_gates, x="nprocs", y="maxrank_avg_us"),
    "prediction_check": PredictionVerdict(
        "prediction",
        {a: (f"cost_{a}", f"cost_{a}") for a in PREDICTED},
        (P_SIM, SIZES),
        _thin_alpha_beta,
        record="prediction-lab2-thin.json",
    ),
}

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": "4 to 6 hours for a typical MSc student; the C part takes the longest, about half of it",
    "sections": [
        ("1. The reference algorithms: read them, draw their schedules at p = 8", "30 to 45 min"),
        ("2. Cost expressions", "30 to 45 min"),
        ("3. Ring and Bruck in C (first compile errors, a deadlock, MPI_IN_PLACE)", "2 to 3 h"),
        ("4. Predict, then run: the prediction from one's own costs", "15 min"),
        ("5. Benchmark and plots, and the prediction against the measurement", "30 to 45 min"),
        ("6. Model against measurement", "30 min"),
    ],
    "hidden": {
        "plot_check": "the plot read as data against the handed-in at4 (each algorithm's line, its values), "
        "credited only when at4 holds every size and the grader's own real run at P = 4 agrees with it",
        "plot_p_check": "the plot read as data against the handed-in at16k (each line and its values), "
        f"credited only when at16k holds every P of {P_SIM} and the grader's simulation at one P drawn "
        "when it runs gives its times",
        "prediction_check": (
            f"the record prediction-lab2-thin.json, its times recomputed from the student's own cost "
            f"answers at THIN's α and β, at every P of {P_SIM} and size of {SIZES}"
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
