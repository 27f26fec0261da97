import importlib.util

import pandas as pd
import pytest

from mpilab.core import results
from mpilab.studies import demo


@pytest.mark.slow
@pytest.mark.mpi
def test_demo_quick(built_flavour, tmp_path, capsys):
    built_flavour("openmpi")
    built_flavour("mpich")
    have_platforms = importlib.util.find_spec("mpilab.simulate.platforms") is not None
    if have_platforms:
        built_flavour("smpi")
    out = demo.run_demo(tmp_path, quick=True, progress=False)
    df = results.read_results(out["results"])
    expected = {("openmpi", 1), ("openmpi", 2), ("mpich", 2)}
    if have_platforms:
        expected |= {("smpi", 2), ("smpi", 4)}
    assert set(zip(df["flavour"], df["nprocs"])) == expected
    assert set(df["algorithm"]) == set(demo.ALGOS)
    assert not df.duplicated(list(results.KEY_COLUMNS)).any()
    names = {p.name for p in out["pngs"]}
    assert "allgather_openmpi_local_core_P2_vs_size.png" in names
    assert "allgather_mpich_local_core_P2_vs_size.png" in names
    if have_platforms:
        assert "allgather_smpi_orfeo-thin_core_1024B_vs_nprocs.png" in names
    text = demo.format_summary(out)
    assert "wall time:" in text and "gather_bcast" in text
    # real points are launched twice in the quick demo, simulated ones once
    pts = out["points"]
    assert set(pts.loc[pts["flavour"] != "smpi", "n"]) == {2}
    if have_platforms:
        assert set(pts.loc[pts["flavour"] == "smpi", "n"]) == {1}
    assert (pts["ci_low_us"] <= pts["median_us"]).all()
    assert (pts["median_us"] <= pts["ci_high_us"]).all()
    assert "real points: median of 2 launches [lowest, highest] (a 50 % interval for the median)" in text
    # a rerun finds every point measured and launches nothing
    again = demo.run_demo(tmp_path, quick=True, progress=False)
    assert len(results.read_results(again["results"])) == len(df)


def test_a_real_point_whose_launches_disagree_is_flagged():
    """The seed of this rule: a loaded machine printed 1,918 µs for the ring at P = 2 next to
    167 µs for pairwise. With five launches the median stays near the others and the point's
    interval, [lowest, highest], is flagged; a simulated point (one launch) is never flagged."""
    rows = []
    for flavour, platform, reps in (("openmpi", "local", 5), ("smpi", "orfeo-thin", 1)):
        for algo, times in (("ring", [160, 170, 1918, 165, 1500]), ("pairwise", [167, 160, 170, 165, 168])):
            for r in range(reps):
                rows.append(
                    dict(
                        collective="allgather",
                        algorithm=algo,
                        flavour=flavour,
                        platform=platform,
                        mapping="core",
                        nprocs=2,
                        bytes=1 << 20,
                        repetition=r,
                        maxrank_avg_us=float(times[r]),
                        avg_us=float(times[r]),
                    )
                )
    pts = demo.point_statistics(pd.DataFrame(rows)).set_index(["flavour", "algorithm"])
    assert pts.loc[("openmpi", "ring"), "median_us"] == 170
    ring = pts.loc[("openmpi", "ring")]
    assert (ring["ci_low_us"], ring["ci_high_us"]) == (160, 1918)
    assert bool(pts.loc[("openmpi", "ring"), "flagged"])
    assert not pts.loc[("openmpi", "pairwise"), "flagged"]
    assert not pts.loc[("smpi", "ring"), "flagged"]
    out = dict(
        table=demo.speedup_table(pd.DataFrame(rows)),
        points=pts.reset_index(),
        bytes=1 << 20,
        skipped=[],
        results="r.csv",
        pngs=[],
        wall_s=0.0,
    )
    text = demo.format_summary(out)
    assert "170.00 [160, 1918] !" in text and "167.00 [160, 170]" in text and "(1 flagged)" in text
