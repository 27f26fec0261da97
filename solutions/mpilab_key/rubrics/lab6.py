"""Lab 6's rubric: the expected costs and k*, and the hidden cases of the broadcast checks."""

import sympy

from mpilab.grade.checks import Function, ccode, segments
from mpilab.grade.checks.costs import CostVerdict
from mpilab.grade.checks.prediction import PredictionVerdict
from mpilab.grade.labs.lab6 import (
    C_FILES,
    P_MAP,
    PREDICTED,
    SEGSIZES,
    SIZES_MAP,
    SWEEP_BYTES,
    SWEEP_P,
    SWEEP_PLATFORMS,
    VISIBLE_RUNS,
    k_simulated,
)
from mpilab.grade.runner import Run
from mpilab.model import algorithms, costs
from mpilab.model.costs import alpha, beta, n, p
from mpilab_key import schedules

#: Runs the notebook's check does not do: P = 4 and 7 on Open MPI, and 29 ranks of THIN dealt
#: by socket over both nodes.
HIDDEN_RUNS = ccode.runs_at("openmpi", (4, 7), hidden=True) + (
    Run("smpi", 29, "orfeo-thin", "socket", hidden=True),
)
RUNS = VISIBLE_RUNS + HIDDEN_RUNS

#: The costs of the students' broadcasts (one-port α-β model, see the notebook's part 2), from
#: their records in the algorithm registry.
EXPECTED = {name: algorithms.entry("bcast", name).cost for name in C_FILES}
#: The number of segments that minimises the pipeline's (p - 2 + k)(α + (n/k)β): the derivative
#: in k is α − (p − 2)nβ/k², zero at k* = √((p − 2)nβ/α).
K_OPT = sympy.sqrt((p - 2) * n * beta / alpha)


def _k_opt(answers, ctx):
    return segments.k_value_cases(answers["k_opt"], K_OPT) + [k_simulated(answers["k_opt"], answers["sweep"])]


def _best(answers, ctx):
    """The best sizes read off the sweep, credited only when the sweep is real: the grader times
    the submitted pipeline.c on THIN at the smallest P again (a few seconds of SMPI)."""
    real = segments.rerun_case(
        ctx.submitted_file("pipeline.c"), answers["sweep"], "orfeo-thin", SWEEP_P[0], SWEEP_BYTES, SEGSIZES
    )
    return segments.credited_if(
        real, segments.best_segment_cases(answers["best_seg"], answers["sweep"], SWEEP_PLATFORMS, SWEEP_P)
    )


RUBRIC = {
    **{f"cost_{a}": CostVerdict(f"cost_{a}", e.expr, e.domain) for a, e in EXPECTED.items()},
    **{
        f"{a}_correct": ccode.BcastVerdict(f, a, RUNS, schedules=schedules.BCASTS) for a, f in C_FILES.items()
    },
    "best_seg_check": Function(_best, ("best_seg", "sweep")),
    "k_opt_check": Function(_k_opt, ("k_opt", "sweep")),
    "prediction_check": PredictionVerdict(
        "prediction", "made_at", "sim", PREDICTED, P_MAP, SIZES_MAP, record="prediction-lab6-thin.json"
    ),
}

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": "8 to 12 hours for a typical MSc student; the five broadcasts in C take half of it",
    "sections": [
        ("1. Five broadcasts on paper: trees and chains at p = 6 and 8", "45 min"),
        ("2. Costs and the optimal number of segments", "1 to 1.5 h"),
        ("3. Five broadcasts in C (roots other than 0, count < p, segments)", "3 to 5 h"),
        ("4. The segment-size sweep on THIN, a fat tree and a torus", "45 min"),
        ("5. Crossover maps: your costs, SMPI, Open MPI's fixed rules", "1 to 1.5 h"),
        ("6. Seed 000 retold: the 1 KiB pipeline with 8 KiB segments", "45 min"),
        ("7. Non-blocking: overlap measured for real and simulated", "45 min"),
    ],
    "quotes": {
        "best segment size, THIN P = 8 (B)": (
            "int(best_seg[(best_seg.platform == 'orfeo-thin') & (best_seg.nprocs == 8)].segsize.iloc[0])"
        ),
        "best segment size, THIN P = 32 (B)": (
            "int(best_seg[(best_seg.platform == 'orfeo-thin') & (best_seg.nprocs == 32)].segsize.iloc[0])"
        ),
        "best segment sizes, all platforms": "best_seg.to_dict('records')",
        "predicted winners agree with SMPI at": "f\"{comparison.attrs['agreement']:.0%} of the points\"",
        "simulated overlap of MPI_Ibcast, P = 8, 1 MiB": (
            "overlap_sim[overlap_sim.collective == 'bcast'][['progress', 'overlap']].to_dict('records')"
        ),
    },
    "wrong": {
        "cost_chain": [("p hops instead of p - 1", {"cost_chain": p * (alpha + n * beta)})],
        "cost_pipeline": [
            (
                "every segment pays the whole chain: (p - 1)·k messages",
                {"cost_pipeline": (p - 1) * costs.SEGMENTS * (alpha + costs.SEGMENT_BYTES * beta)},
            )
        ],
        "binomial_correct": [
            (
                "root 0 only: the ranks are not numbered from the root",
                {"binomial.c": "tests/data/grading/binomial_root0.c"},
            )
        ],
    },
}
