"""Lab 6's rubric on answers that are right in another form than the key's, and its sweep gates.

The cost of the pipelined chain may count every one of its k = ⌈n/s⌉ segments as a full one
(the registry's form) or as k equal segments of n/k bytes, the textbook (p + k − 2)(α + nβ/k):
both are right; a wrong count of messages is not.

The answers read off the sweep are credited only on the notebook's whole grid, simulated again by
the grader where the answer reads it and at a (network, P) drawn when it runs. The simulations
themselves are tests/test_bcast_study.py's (``segments.rerun_case``).
"""

import json

import course
import pandas as pd
import pytest
import sympy
from course import ROOT

from mpilab.grade import judge
from mpilab.grade.cases import Case
from mpilab.grade.labs import lab6
from mpilab.model.costs import alpha, beta, n, p, s
from mpilab_key.rubrics import lab6 as rubric

K = sympy.ceiling(n / s)


def judged(gid, points=2, **given):
    return course.judged("lab6", gid, points, ".", **given)


def test_pipeline_cost_in_either_segment_convention():
    full = rubric.EXPECTED["pipeline"].expr
    equal = (p + K - 2) * (alpha + n * beta / K)
    assert sympy.simplify(full - equal) != 0  # they differ where s does not divide n
    assert judged("cost_pipeline", cost_pipeline=full).score == 2
    assert judged("cost_pipeline", cost_pipeline=equal).score == 2
    assert (
        judged("cost_pipeline", cost_pipeline="(p + ceiling(n/s) - 2)*(alpha + n*beta/ceiling(n/s))").score
        == 2
    )
    v = judged("cost_pipeline", cost_pipeline=(p - 1) * K * (alpha + sympy.Min(n, s) * beta))
    assert v.score == 0 and "differs at p =" in v.text()
    half = judged("cost_pipeline", cost_pipeline=(p + K - 2) * alpha + (p - 2 + K) * n * beta)
    assert half.score == 1 and "β term" in half.text()


def _sweep(platforms=lab6.SWEEP_PLATFORMS):
    return pd.DataFrame(
        [
            dict(platform=w, nprocs=q, segsize=g, maxrank_avg_us=1000.0 + abs(g - 16384) / 100)
            for w in platforms
            for q in lab6.SWEEP_P
            for g in lab6.SEGSIZES
        ]
    )


@pytest.fixture
def reruns(monkeypatch):
    """The grader's simulations, recorded instead of run: (platform, P) -> passed."""
    seen = {}

    def rerun(ctx, sweep, platform, nprocs):
        seen[(platform, nprocs)] = True
        return Case(f"your sweep is what your pipeline.c gives ({platform}, P = {nprocs})", True)

    monkeypatch.setattr(rubric, "_rerun", rerun)
    return seen


def test_a_sweep_without_every_network_earns_nothing_and_runs_nothing(reruns):
    sweep = _sweep(("orfeo-thin",))
    best = sweep.loc[sweep.groupby(["platform", "nprocs"])["maxrank_avg_us"].idxmin()]
    cases = rubric._best({"best_seg": best, "sweep": sweep}, None)
    assert not any(c.passed and c.weight for c in cases) and not reruns
    assert "sweep holds the whole measured grid" in cases[0].name
    assert "platform = fattree-4x8-2spines" in cases[0].message


def test_the_grader_simulates_where_the_answer_reads_and_one_place_drawn(reruns, monkeypatch):
    drawn = []
    monkeypatch.setattr(rubric, "draw", lambda choices: drawn.append(list(choices)) or choices[-1])
    sweep = _sweep()
    best = sweep.loc[sweep.groupby(["platform", "nprocs"])["maxrank_avg_us"].idxmin()]
    cases = rubric._best({"best_seg": best, "sweep": sweep}, None)
    assert all(c.passed for c in cases)
    assert set(reruns) == {("orfeo-thin", lab6.SWEEP_P[0]), ("torus-4x8", lab6.SWEEP_P[-1])}
    assert len(drawn[0]) == len(lab6.SWEEP_PLATFORMS) * len(lab6.SWEEP_P) - 1
    reruns.clear()
    rubric._k_opt({"k_opt": rubric.K_OPT, "sweep": sweep}, None)
    assert ("orfeo-thin", lab6.SWEEP_P[-1]) in reruns


def test_the_graders_networks_are_the_notebooks():
    """NETWORKS builds each network of the notebook's sweep cell with the same call."""
    nb = json.loads((ROOT / "solutions" / "lab6" / "lab6.ipynb").read_text())
    cell = next(
        "".join(c["source"])
        for c in nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "code_sweep"
    )
    assert set(rubric.NETWORKS) == set(lab6.SWEEP_PLATFORMS)
    for call in (
        "topologies.fat_tree(leaves=4, nodes_per_leaf=8, spines=2)",
        "topologies.torus(dims=(4, 8))",
    ):
        assert call in cell
    assert rubric.NETWORKS["orfeo-thin"]() == "orfeo-thin"


def test_the_prediction_needs_the_costs_handed_in(tmp_path):
    table = pd.DataFrame(
        [
            dict(algorithm=a, nprocs=q, bytes=b, predicted_us=1.0)
            for a in lab6.PREDICTED
            for q in lab6.P_MAP
            for b in lab6.SIZES_MAP
        ]
    )
    ctx = judge.Context("lab6", tmp_path, tmp_path, {})
    cases = rubric.RUBRIC["prediction_check"].cases({"prediction": table}, ctx)
    assert not any(c.passed for c in cases)
    assert "your cost of linear was not handed in" in cases[0].message
