"""Lab 3's reproduction study (mpilab.studies.repro): the paper's values, grids, a real quick study under
SMPI with resume, its comparison and plots, the jittered platforms, and refusing wrong code."""

import re
import shutil
import time
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from mpilab.core import results
from mpilab.studies import repro

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lab3" / "c_solutions" / "allreduce_two_level.c"
needs_smpi = pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed")


def test_reference_table_is_the_seeds():
    ref = repro.reference_table()
    assert len(ref) == 4 * 2 * 6
    one = ref.set_index(["figure", "algorithm", "nprocs"])["reference_us"]
    assert one[(10, "default", 512)] == 96.0 and one[(10, "two_level", 512)] == 8.7
    assert one[(6, "two_level", 512)] == 2375.0 and one[(11, "default", 64)] == 177000.0
    assert one[(7, "default", 512)] == 247000.0
    assert set(ref[ref["figure"] == 6]["note"]) == {repro.FIGURE6_NOTE}
    assert set(ref[ref["figure"] != 6]["note"]) == {""}
    assert dict(ref.groupby("figure")["bytes"].first()) == {6: 8, 7: 1_000_000, 10: 128, 11: 1_000_000}


def test_grid_errors():
    assert repro.grid("quick").launches() == 2 * 6  # two process counts, six launches each
    with pytest.raises(ValueError, match="unknown study grid 'huge'; valid: default, full, paper, quick"):
        repro.grid("huge")
    with pytest.raises(ValueError, match=r"bad size\(s\) \[12\]"):
        repro.grid(repro.Grid(nprocs=(16,), sizes=(8, 12)))
    with pytest.raises(ValueError, match="unknown study algorithm 'ml'"):
        repro.grid(repro.Grid(nprocs=(16,), algorithms=("ml",)))
    with pytest.raises(ValueError, match="must be >= 1"):
        repro.grid(repro.Grid(nprocs=(16,), warmup=0))


def test_jittered_platform_scales_every_link(tmp_path):
    from mpilab.simulate import platforms

    link = re.compile(r'<link id="([^"]+)" bandwidth="([0-9.e+-]+)Bps" latency="([0-9.e+-]+)us"')
    base = {
        m.group(1): (float(m.group(2)), float(m.group(3)))
        for m in link.finditer(platforms.platform_file("orfeo-thin").read_text())
    }
    a = repro.jittered_platform("orfeo-thin", 0.2, seed=1, path=tmp_path / "a.xml")
    b = repro.jittered_platform("orfeo-thin", 0.2, seed=1, path=tmp_path / "b.xml")
    c = repro.jittered_platform("orfeo-thin", 0.2, seed=2, path=tmp_path / "c.xml")
    assert Path(a).read_text() == Path(b).read_text() != Path(c).read_text()
    new = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in link.finditer(Path(a).read_text())}
    assert new.keys() == base.keys()
    # bandwidth / f and latency x f (a zero latency stays zero), with log f ~ N(0, 0.2^2)
    bw_f = np.array([base[k][0] / new[k][0] for k in base])
    assert 0.1 < np.log(bw_f).std() < 0.3 and len(set(np.round(bw_f, 6))) == len(bw_f)
    timed = [k for k in base if base[k][1] > 0]
    assert len(timed) >= 3 and all(new[k][1] == 0 for k in base if base[k][1] == 0)
    lat_f = np.array([new[k][1] / base[k][1] for k in timed])
    assert np.allclose(lat_f, [base[k][0] / new[k][0] for k in timed], rtol=1e-4)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        repro.jittered_platform("orfeo-thin", 0, seed=1, path=tmp_path / "d.xml")


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
@pytest.mark.slow
def test_quick_study_resumes_and_compares(tmp_path):
    out = tmp_path / "study.csv"
    df = repro.run_study(SOLUTION, out, "quick", progress=False)
    g = repro.GRIDS["quick"]
    # reduce and allreduce by the library, allreduce two-level: the reduce's two-level is the key's
    assert len(repro.jobs(g)) == 3
    assert len(df) == len(g.nprocs) * g.repetitions * 3 * len(g.sizes)
    assert set(df["forced"]) == {"yes", "no"} and (df["maxrank_median_us"] > 0).all()
    assert set(df["evidence"][df["algorithm"] == "default"]) == {"library default; SMPI coll-selector ompi"}
    # a deterministic simulator: every repetition of a point is the same
    assert (repro.spread(df)["rel_spread"] == 0).all()
    # a 1 MB reduction costs far more than an 8 B one, and more ranks cost more
    s = repro.summary(df).set_index(["collective", "algorithm", "bytes", "nprocs"])["median_us"]
    assert s[("allreduce", "default", 1_000_000, 16)] > 10 * s[("allreduce", "default", 8, 16)]
    assert s[("allreduce", "default", 8, 32)] > s[("allreduce", "default", 8, 16)]
    # resume: nothing is launched again
    before = out.read_text()
    t0 = time.monotonic()
    again = repro.run_study(SOLUTION, out, "quick", progress=False)
    assert out.read_text() == before and len(again) == len(df)
    assert time.monotonic() - t0 < 15
    table, (fig, axes) = repro.compare(df)
    assert len(axes) == 4 and set(table["figure"]) == {6, 7, 10, 11}
    row = table[(table["figure"] == 10) & (table["algorithm"] == "default") & (table["nprocs"] == 16)].iloc[0]
    assert row["reference_us"] == 5.9 and row["ratio"] == pytest.approx(row["median_us"] / 5.9)
    assert table[table["nprocs"] == 512]["median_us"].isna().all()
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert (
        "two_level (simulated median, 97 % interval, [min, max] of 6 runs)" in labels
        and "ml, hierarchical (algorithm 90) (paper)" in labels
    )
    fig2, axes2 = repro.boxplots(df, "allreduce", 128)  # the library's and the student's two-level
    assert len(axes2) == 2 and axes2[0].get_xlabel() == "processes"
    with pytest.raises(ValueError, match="no rows for reduce at 64 bytes"):
        repro.boxplots(df, "reduce", 64)
    plt.close("all")
    assert len(results.read_results(out)) == len(df)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
@pytest.mark.slow
def test_jitter_gives_spread_and_wrong_code_is_not_timed(tmp_path):
    small = repro.Grid(nprocs=(32,), sizes=(8,), collectives=("allreduce",), repetitions=3, iters=2)
    df = repro.run_study(SOLUTION, tmp_path / "j.csv", small, jitter=0.2, progress=False)
    assert set(df["platform"]) == {"jupiter-32x16+jitter0.2"} and len(df) == 6
    assert (repro.spread(df)["rel_spread"] > 0).all()
    dead = ROOT / "tests" / "data" / "grading" / "allreduce_two_level_deadlock.c"
    with pytest.raises(
        AssertionError,
        match=r"correctness check failed at P = 20 \(simulated, core "
        r"mapping on jupiter-32x16\): the simulator found",
    ):
        repro.run_study(dead, tmp_path / "dead.csv", "quick", progress=False)
    assert not (tmp_path / "dead.csv").exists()
