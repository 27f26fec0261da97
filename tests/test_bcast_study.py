"""Lab 6's study module (mpilab.studies.bcast) and its segment checks (mpilab.grade.checks.segments)."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sympy

from mpilab.core.errors import UsageError
from mpilab.grade import bench
from mpilab.grade.checks import segments
from mpilab.model.costs import alpha, beta, n, p
from mpilab.simulate import platforms, routes
from mpilab.studies import bcast


def _table(rows):
    return pd.DataFrame(rows, columns=["algorithm", "nprocs", "bytes", "maxrank_avg_us"])


def test_winners_takes_the_fastest_per_point_and_breaks_ties_by_name():
    t = _table([("b", 4, 8, 1.0), ("a", 4, 8, 1.0), ("c", 4, 8, 3.0), ("a", 4, 64, 5.0), ("c", 4, 64, 2.0)])
    w = bcast.winners(t)
    assert list(w["algorithm"]) == ["a", "c"]
    assert list(w["maxrank_avg_us"]) == [1.0, 2.0]


def test_winners_names_a_missing_column():
    with pytest.raises(UsageError, match="no column 'maxrank_avg_us'"):
        bcast.winners(pd.DataFrame({"algorithm": ["a"], "nprocs": [2], "bytes": [8]}))


def test_plot_maps_draws_one_panel_per_map_and_one_cell_per_point():
    m1 = _table([("a", 4, 8, 1), ("b", 4, 64, 1), ("a", 8, 8, 1), ("a", 8, 64, 1)])[
        ["nprocs", "bytes", "algorithm"]
    ]
    m2 = m1.assign(algorithm=["c", "c", "b", "a"])
    fig, axes = bcast.plot_maps({"one": m1, "two": m2})
    assert len(axes) == 2 and [ax.get_title() for ax in axes] == ["one", "two"]
    assert all(len(ax.patches) == 4 for ax in axes)
    colours = {tuple(pt.get_facecolor()) for pt in axes[1].patches}
    assert len(colours) == 3  # c, b, a: one colour per algorithm
    with pytest.raises(UsageError):
        bcast.plot_maps({})


def test_alpha_beta_is_the_mean_of_the_pairs_routes():
    got = routes.alpha_beta("orfeo-thin", (2, 3), mapping="node").set_index("nprocs")
    hosts = platforms.placement("orfeo-thin", 3, "node")
    pairs = [
        routes.route_cost("orfeo-thin", hosts[a], hosts[b]) for a in range(3) for b in range(3) if a != b
    ]
    assert got.loc[3, "alpha_us"] == pytest.approx(np.mean([a for a, _ in pairs]))
    assert got.loc[3, "beta_us_per_byte"] == pytest.approx(np.mean([b for _, b in pairs]))
    two = platforms.placement("orfeo-thin", 2, "node")
    assert got.loc[2, "alpha_us"] == pytest.approx(routes.route_cost("orfeo-thin", *two)[0])
    with pytest.raises(UsageError, match="P >= 2"):
        routes.alpha_beta("orfeo-thin", 1)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid not installed")
def test_simulated_overlap_hides_the_broadcast_behind_the_kernel():
    """SimGrid moves messages on its own: a 1 MiB broadcast at P = 4 (a few hundred µs, shorter
    than 2 ms of computing) hides behind the kernel; the kernel's simulated time is its CPU time
    (which a loaded machine stretches by some tens of µs from call to call: hence the margins)."""
    got = bcast.overlap(
        "smpi",
        nprocs=(4,),
        collectives=("bcast",),
        sizes=(1 << 20,),
        compute_us=2000,
        progress=("none",),
        iters=5,
        warmup=1,
    )
    r = got.iloc[0]
    assert r["comm_us"] > 0 and r["comm_us"] < r["compute_us"]
    assert r["compute_us"] == pytest.approx(2000, rel=0.5)
    assert r["both_us"] < r["compute_us"] + 0.5 * r["comm_us"]
    assert r["overlap"] > 0.5
    # the rows carry the program's provenance block, read by the drivers' parser
    assert "SimGrid" in r["library"] and r["host"] and "smpirun" in r["command"]


def test_forced_bcasts_rows_carry_the_launch_provenance(built_flavour):
    """Lab 6's forced broadcasts keep, row by row, the provenance collbench printed and the
    command that ran it (the study used to rebuild its rows without them)."""
    built_flavour("smpi")
    got = bcast.forced_bcasts(
        {"binomial": ("binomial", {})},
        nprocs=(4,),
        sizes=(1024,),
        repetitions=1,
        iters=2,
        warmup=1,
        flavour="smpi",
        platform="orfeo-thin",
    )
    assert list(got["bytes"]) == [1024]
    r = got.iloc[0]
    assert "SimGrid" in r["library"] and r["host"]
    assert "smpirun" in r["command"] and "collbench" in r["command"]


def test_overlap_names_a_bad_collective():
    with pytest.raises(UsageError, match="'reduce'"):
        bcast.overlap("smpi", collectives=("reduce",))


# ---- segment checks ------------------------------------------------------------------------------

SWEEP = pd.DataFrame(
    {
        "platform": ["thin"] * 3 + ["torus"] * 3,
        "nprocs": [8] * 6,
        "segsize": [1024, 4096, 16384] * 2,
        "maxrank_avg_us": [300.0, 100.0, 101.0, 500.0, 400.0, 200.0],
    }
)


def test_best_segment_accepts_the_minimum_or_a_tie_and_names_a_wrong_one():
    best = pd.DataFrame({"platform": ["thin", "torus"], "nprocs": [8, 8], "segsize": [16384, 4096]})
    cases = segments.best_segment_cases(best, SWEEP, ("thin", "torus"), (8,))
    assert [c.passed for c in cases] == [True, False]  # 101 is within 2 % of 100; 400 is not 200
    assert "4096 B takes 400.0 us in your sweep, 16384 B takes 200.0 us" in cases[1].message
    missing = segments.best_segment_cases(best, SWEEP, ("thin",), (8, 32))
    assert not missing[1].passed and "no row there" in missing[1].message
    bad = segments.best_segment_cases(best.drop(columns="segsize"), SWEEP, ("thin",), (8,))
    assert len(bad) == 1 and "no column 'segsize'" in bad[0].message


def test_k_value_is_compared_at_several_points():
    right = sympy.sqrt((p - 2) * n * beta / alpha)
    assert all(c.passed for c in segments.k_value_cases(right, right))
    wrong = segments.k_value_cases(sympy.sqrt((p - 1) * n * beta / alpha), right)
    assert not wrong[0].passed and "at p = 3, n = 1024" in wrong[0].message
    assert not segments.k_value_cases("sqrt(p * x)", right)[0].passed


def test_k_simulated_takes_the_swept_size_nearest_to_n_over_k():
    # n / k = 2^20 / 64 = 16 KiB: 101 us, within 25 % of the best (100 us)
    k = sympy.Integer(64)
    assert segments.k_simulated_case(k, SWEEP, "thin", 8, 1 << 20, 1.0, 1e-4).passed
    # n / k = 1 KiB: 300 us, three times the best
    far = segments.k_simulated_case(sympy.Integer(1024), SWEEP, "thin", 8, 1 << 20, 1.0, 1e-4)
    assert not far.passed and "1024 B, takes 300.0 us" in far.message
    assert not segments.k_simulated_case(-k, SWEEP, "thin", 8, 1 << 20, 1.0, 1e-4).passed


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid not installed")
def test_rerun_credits_a_real_sweep_and_not_a_forged_one():
    """The grader times the submitted pipeline again in SMPI (deterministic): the sweep the
    notebook measured passes, the same sweep with one time lowered does not, and the best sizes
    read off a forged sweep earn nothing."""
    c_file = str(Path(__file__).parents[1] / "solutions" / "lab6" / "c_solutions" / "pipeline.c")
    segs = (4096, 65536)
    real = bench.benchmark_bcast(
        {"pipeline": c_file}, nprocs=(4,), sizes=(1 << 18,), segsizes=segs, flavour="smpi", native=False
    ).assign(platform="orfeo-thin")
    ok = segments.rerun_case(c_file, real, "orfeo-thin", 4, 1 << 18, segs)
    assert ok.passed and ok.hidden
    forged = real.copy()
    forged.loc[forged["segsize"] == 4096, "maxrank_avg_us"] = 1.0
    bad = segments.rerun_case(c_file, forged, "orfeo-thin", 4, 1 << 18, segs)
    assert not bad.passed and "segments of 4096 B: the grader's run gives" in bad.message
    best = pd.DataFrame({"platform": ["orfeo-thin"], "nprocs": [4], "segsize": [4096]})
    cases = segments.credited_if(bad, segments.best_segment_cases(best, forged, ("orfeo-thin",), (4,)))
    assert [c.passed for c in cases] == [False, False] and "not credited" in cases[1].message
    # without pipeline.c a sweep still counts when it is the kit's compiled reference's (the
    # notebook ran the section on it: mpilab.grade.references), which the key's file gives; a
    # forged one does not
    assert segments.rerun_case(None, real, "orfeo-thin", 4, 1 << 18, segs).passed
    none = segments.rerun_case(None, forged, "orfeo-thin", 4, 1 << 18, segs)
    assert not none.passed and none.message.startswith("pipeline.c is not in the submission"), none.message
    # the skeleton as released builds and times nothing: an invented sweep does not agree with
    # that nothing (lab 6's cheating course: its best sizes earned 2 points before)
    skeleton = str(Path(__file__).parents[1] / "labs" / "lab6" / "pipeline.c")
    invented = forged.assign(maxrank_avg_us=1000.0 + abs(forged["segsize"] - 16384) / 100)
    empty = segments.rerun_case(skeleton, invented, "orfeo-thin", 4, 1 << 18, segs)
    assert not empty.passed, empty.message
