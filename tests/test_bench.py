"""Timing students' collectives on the kit's one road (mpilab.grade.bench): the harness's timing
mode prints the provenance block, mpilab.measure.driver parses it, mpilab.core.results makes the
rows; every launch goes through the sandbox (mpilab.grade.launcher.SandboxLauncher)."""

import shutil
from pathlib import Path

import pytest

from mpilab.core import results
from mpilab.grade import bench, launcher

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
KEY = ROOT / "solutions" / "lab2" / "c_solutions"
KEY6 = ROOT / "solutions" / "lab6" / "c_solutions"
needs_smpi = pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed")
needs_openmpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_benchmark_checks_then_times_with_the_reference_algorithms():
    df = bench.benchmark_c({"ring": KEY / "ring.c"}, nprocs=(2, 16), flavour="smpi", reference=True)
    assert list(df.columns) == list(results.COLUMNS)
    assert sorted(df["algorithm"].unique()) == ["gather_bcast", "native", "pairwise", "ring"]
    assert set(df["launcher"]) == {"smpirun"} and set(df["platform"]) == {"orfeo-thin"}
    assert df["library"].str.contains("SimGrid|SMPI", case=False).all() and df["date"].str.endswith("Z").all()
    assert df["command"].str.contains("check_student_smpi --time").all()
    t = df[df["bytes"] == 16384].pivot_table(index="nprocs", columns="algorithm", values="maxrank_avg_us")
    # the root of gather_bcast sends the p blocks to p - 1 ranks, one message after another
    assert t.loc[16, "gather_bcast"] > 4 * t.loc[16, "pairwise"]
    with pytest.raises(ValueError, match="unknown flavour for benchmark_c 'mpich'; valid: openmpi, smpi"):
        bench.benchmark_c({"ring": KEY / "ring.c"}, flavour="mpich")


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_a_wrong_algorithm_is_left_out_of_the_benchmark_and_the_others_are_timed():
    with pytest.warns(
        UserWarning, match=r"ring left out: it is not right yet, so its time would mean nothing"
    ):
        df = bench.benchmark_c(
            {"ring": DATA / "ring_deadlock.c", "bruck": KEY / "bruck.c"},
            nprocs=(2,),
            flavour="smpi",
            timeout=20,
        )
    assert sorted(df["algorithm"].unique()) == ["bruck", "native"]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_smpi_benchmark_simulates_native_and_the_references_once(monkeypatch):
    """Simulated times repeat exactly: with two algorithms MPI_Allgather and the references are
    simulated in the first algorithm's launches only, and the table still has every row."""
    launches = []
    real_run = launcher.SandboxLauncher.run

    def run(self, program, args=(), *rest, **kw):
        launches.append([a for a in args if a.startswith("--time")])
        return real_run(self, program, args, *rest, **kw)

    monkeypatch.setattr(launcher.SandboxLauncher, "run", run)
    df = bench.benchmark_c(
        {"ring": KEY / "ring.c", "bruck": KEY / "bruck.c"}, nprocs=(2, 5), flavour="smpi", reference=True
    )
    assert [a for a in launches if a] == [
        ["--time"],
        ["--time-reference"],
        ["--time"],
        ["--time-reference"],
        ["--time-alone"],
        ["--time-alone"],
    ]
    assert df.groupby("algorithm").size().to_dict() == dict.fromkeys(
        ["bruck", "gather_bcast", "native", "pairwise", "ring"], 2 * 7
    )


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_real_broadcasts_are_results_rows_with_their_segment_size():
    df = bench.benchmark_bcast(
        {"pipeline": KEY6 / "pipeline.c", "linear": KEY6 / "linear.c"},
        nprocs=(2,),
        sizes=(1024,),
        segsizes=(256, 512),
    )
    assert set(df["launcher"]) == {"mpirun"} and df["library"].str.startswith("Open MPI").all()
    assert sorted(zip(df["algorithm"], df["segsize"])) == [
        ("linear", 0),
        ("native", 0),
        ("pipeline", 256),
        ("pipeline", 512),
    ]
    assert (df["maxrank_avg_us"] > 0).all() and set(df["collective"]) == {"bcast"}
