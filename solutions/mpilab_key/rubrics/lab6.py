"""Lab 6's rubric: the expected costs and k*, the hidden cases of the broadcast checks, the
sweep's answers credited only on a sweep the grader simulates again, and the prediction
recomputed from the student's costs.

The sweep (``best_seg_check``, ``k_opt_check``) must hold every platform × P × segment size of
the notebook's cell, and the grader simulates the submitted pipeline.c again where the cell's
answer reads it (THIN at the smallest P for the best sizes, THIN at the largest for k*) and at one
(network, P) drawn when it runs: equal times (SMPI is deterministic).
"""

import hashlib

import sympy

from mpilab.grade.checks import Function, ccode, missing, segments
from mpilab.grade.checks.costs import CostVerdict, value_cases
from mpilab.grade.checks.prediction import PredictionVerdict
from mpilab.grade.checks.tables import credited_only_if
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
from mpilab.simulate import routes, topologies
from mpilab_key import schedules
from mpilab_key.resimulate import draw, grid_case

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


#: The pipeline's cost counted the two ways the notebook accepts: every one of the k = ⌈n/s⌉
#: segments a full one (min(n, s) bytes, the registry's), or k equal segments of n/k bytes, the
#: textbook form (p + k − 2)(α + nβ/k). They differ only where s does not divide n.
PIPELINE_FORMS = (
    EXPECTED["pipeline"].expr,
    (p + costs.SEGMENTS - 2) * (alpha + n * beta / costs.SEGMENTS),
)


def _pipeline_cost(answers, ctx):
    """The pipeline's cost against each accepted form: the form it agrees with best counts."""
    bad = missing(answers, "cost_pipeline")
    if bad:
        return [bad]
    tries = [
        value_cases(answers["cost_pipeline"], e, EXPECTED["pipeline"].domain, name="cost_pipeline")
        for e in PIPELINE_FORMS
    ]
    return max(tries, key=lambda cases: sum(c.passed for c in cases))


#: The networks of the notebook's sweep cell (code_sweep), built the same way: name -> platform.
NETWORKS = {
    "orfeo-thin": lambda: "orfeo-thin",
    "fattree-4x8-2spines": lambda: topologies.fat_tree(leaves=4, nodes_per_leaf=8, spines=2),
    "torus-4x8": lambda: topologies.torus(dims=(4, 8)),
}
_RERUNS = {}


def _rerun(ctx, sweep, platform, nprocs):
    """:func:`segments.rerun_case` of the submitted pipeline.c at (platform, P), memoised."""
    c_file = ctx.submitted_file("pipeline.c")
    digest = hashlib.sha256(c_file.read_bytes()).hexdigest() if c_file else None
    text = sweep.to_csv() if hasattr(sweep, "to_csv") else repr(sweep)
    key = (digest, platform, nprocs, hashlib.sha256(text.encode()).hexdigest())
    if key not in _RERUNS:
        _RERUNS[key] = segments.rerun_case(
            c_file, sweep, platform, nprocs, SWEEP_BYTES, SEGSIZES, where=NETWORKS[platform]()
        )
    return _RERUNS[key]


def sweep_gates(sweep, ctx, read_at):
    """The sweep is the notebook's whole grid, and the grader's simulation at ``read_at`` (where the
    cell's answer reads it) and at one (network, P) drawn now gives its times."""
    gates = [grid_case(sweep, "sweep", {"platform": SWEEP_PLATFORMS, "nprocs": SWEEP_P, "segsize": SEGSIZES})]
    if not gates[0].passed:
        return gates
    drawn = draw([(w, q) for w in SWEEP_PLATFORMS for q in SWEEP_P if (w, q) != read_at])
    return gates + [_rerun(ctx, sweep, *read_at), _rerun(ctx, sweep, *drawn)]


def _k_opt(answers, ctx):
    """k* against the expected expression; against the sweep's minimum only on a measured sweep."""
    gates = sweep_gates(answers["sweep"], ctx, ("orfeo-thin", SWEEP_P[-1]))
    return segments.k_value_cases(answers["k_opt"], K_OPT) + credited_only_if(
        gates, [k_simulated(answers["k_opt"], answers["sweep"])]
    )


def _best(answers, ctx):
    """The best sizes read off the sweep, credited only when the sweep is measured (see the
    module's description)."""
    return credited_only_if(
        sweep_gates(answers["sweep"], ctx, ("orfeo-thin", SWEEP_P[0])),
        segments.best_segment_cases(answers["best_seg"], answers["sweep"], SWEEP_PLATFORMS, SWEEP_P),
    )


def _thin_alpha_beta():
    """The notebook's α and β: the means over the pairs of 2 ranks of simulated THIN."""
    ab = routes.alpha_beta("orfeo-thin", 2).iloc[0]
    return float(ab["alpha_us"]), float(ab["beta_us_per_byte"])


RUBRIC = {
    **{f"cost_{a}": CostVerdict(f"cost_{a}", e.expr, e.domain) for a, e in EXPECTED.items()},
    "cost_pipeline": Function(_pipeline_cost, ("cost_pipeline",)),
    **{
        f"{a}_correct": ccode.BcastVerdict(f, a, RUNS, schedules=schedules.BCASTS) for a, f in C_FILES.items()
    },
    "best_seg_check": Function(_best, ("best_seg", "sweep")),
    "k_opt_check": Function(_k_opt, ("k_opt", "sweep")),
    "prediction_check": PredictionVerdict(
        "prediction",
        {a: (f"cost_{a}", f"cost_{a}") for a in PREDICTED},
        (P_MAP, SIZES_MAP),
        _thin_alpha_beta,
        segment=8192,
        record="prediction-lab6-thin.json",
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
        ("6. Seed 000 retold: its forced pipeline was an unsegmented chain", "45 min"),
        ("7. Non-blocking: overlap measured for real and simulated", "45 min"),
    ],
    "hidden": {
        "cost_pipeline": "the value, α and β terms apart, at the costs' (p, n) points, in either segment "
        "convention: every segment full (min(n, s) bytes) or k = ⌈n/s⌉ equal segments of n/k bytes",
        "best_seg_check": f"credited only on a sweep that holds the whole grid (platform × P × segment "
        f"size) and that the submitted pipeline.c (or the kit's compiled reference, when the notebook ran "
        f"the sweep on it) gives again on THIN at P = {SWEEP_P[0]}, {SWEEP_BYTES} B, every segment size, "
        f"and at one (network, P) drawn when the grader runs",
        "k_opt_check": f"k* as an expression (value at several p, n, α, β); the swept size nearest n/k* "
        f"within 25 % of the fastest only on a sweep simulated again as for best_seg_check (THIN at "
        f"P = {SWEEP_P[-1]})",
        "prediction_check": f"the record prediction-lab6-thin.json written before the simulation, its times "
        f"recomputed from the student's own cost answers at THIN's α and β, at every P of {P_MAP} and "
        f"size of {SIZES_MAP}",
    },
    "quotes": {
        "best segment size, THIN P = 8 (B)": (
            "int(best_seg[(best_seg.platform == 'orfeo-thin') & (best_seg.nprocs == 8)].segsize.iloc[0])"
        ),
        "best segment size, THIN P = 32 (B)": (
            "int(best_seg[(best_seg.platform == 'orfeo-thin') & (best_seg.nprocs == 32)].segsize.iloc[0])"
        ),
        "best segment sizes, all platforms": "best_seg.to_dict('records')",
        "predicted winners agree with SMPI at": "f\"{comparison.attrs['agreement']:.0%} of the points\"",
        "seed 000 retold, simulated THIN, P = 48, 1 KiB (µs; segsize 0: unsegmented)": (
            "{f'{a} {int(g)} B': round(float(t), 1) for a, g, t in "
            "seed_sim[['algorithm', 'segsize', 'maxrank_avg_us']].itertuples(index=False)}"
        ),
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
