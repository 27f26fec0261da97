"""Lab 0's checks: hello.c on real Open MPI and SMPI, the engines' allgather, the α-β fit."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpilab.cluster import engines
from mpilab.grade import grading
from mpilab.core.errors import LaunchError, UsageError

ROOT = Path(__file__).resolve().parents[1]
SOL = ROOT / "solutions" / "lab0"
needs_mpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
                               reason="needs Open MPI and SimGrid SMPI")


@needs_mpi
def test_hello_solution_passes_and_skeleton_fails():
    grading.check_hello_c(SOL / "c_solutions" / "hello.c")
    with pytest.raises(AssertionError, match=r"Open MPI, P = 1: the ranks printed were \[-1\]"):
        grading.check_hello_c(ROOT / "labs" / "lab0" / "hello.c")


@needs_mpi
@pytest.mark.parametrize("old,new,message", [
    ('printf("hello', 'if (rank != 1) printf("hello', r"P = 2: 1 lines .* expected 2"),
    ("MPI_Comm_size(MPI_COMM_WORLD, &size);", "size = 4;", r"P = 1: the sizes printed were \[4\]"),
    ("MPI_Get_processor_name(host, &len);", 'host[0] = \'x\'; host[1] = 0;',
     r"SMPI on orfeo-thin, P = 8, mapping node: rank 0 says it ran on 'x', but it was placed on 'thin00-s0-c00'"),
    ("MPI_Finalize();", "if (rank == 1) *(volatile int *)0 = 1;\n    MPI_Finalize();",
     r"P = 2: rank 1 crashed: signal 11 \(SIGSEGV\)"),
])
def test_hello_mistakes_are_named(tmp_path, old, new, message):
    text = (SOL / "c_solutions" / "hello.c").read_text()
    assert text.count(old) == 1
    (tmp_path / "hello.c").write_text(text.replace(old, new))
    with pytest.raises(AssertionError, match=message):
        grading.check_hello_c(tmp_path / "hello.c")


def test_hello_missing_file(tmp_path):
    with pytest.raises(AssertionError, match="not found: keep hello.c next to the notebook"):
        grading.check_hello_c(tmp_path / "hello.c")


@needs_mpi
def test_run_c_runs_hello_for_real_and_simulated(tmp_path):
    shutil.copy(SOL / "c_solutions" / "hello.c", tmp_path / "hello.c")
    out = grading.run_c(tmp_path / "hello.c", "openmpi", nprocs=4)
    assert sorted(line.split(" on ")[0] for line in out.splitlines()) == \
        [f"hello from rank {r} of 4" for r in range(4)]
    out = grading.run_c(tmp_path / "hello.c", "smpi", nprocs=8, mapping="node", platform="orfeo-thin")
    assert "hello from rank 1 of 8 on thin01-s0-c00" in out.splitlines()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.c"]   # built and run elsewhere


@needs_mpi
def test_run_c_stops_a_hung_hello_and_keeps_it_in_a_scratch_dir(tmp_path):
    """The notebook's hello cells run the student's file under the grader's limits: a hang ends
    at the time limit, and the program sees only its own copy (not what lies next to it)."""
    text = (SOL / "c_solutions" / "hello.c").read_text()
    peek = 'if (fopen("secret.txt", "r")) printf("I can read secret.txt\\n");\n    MPI_Finalize();'
    (tmp_path / "hello.c").write_text(text.replace("MPI_Finalize();", peek))
    (tmp_path / "secret.txt").write_text("hidden tests\n")
    out = grading.run_c(tmp_path / "hello.c", "openmpi", nprocs=2)
    assert "hello from rank 1 of 2" in out and "secret" not in out
    (tmp_path / "hello.c").write_text(text.replace("MPI_Finalize();", "if (rank == 1) for (;;);\n    MPI_Finalize();"))
    with pytest.raises(LaunchError, match=r"hello.c on openmpi, P = 2: timed out after 3 s — a deadlock\?"):
        grading.run_c(tmp_path / "hello.c", "openmpi", nprocs=2, timeout=3)
    (tmp_path / "hello.c").write_text(text.replace("MPI_Finalize();", "MPI_Finalize() oops;"))
    with pytest.raises(LaunchError, match=r"(?s)hello.c does not compile for smpi:\n.*error: expected"):
        grading.run_c(tmp_path / "hello.c", "smpi", nprocs=2)
    with pytest.raises(UsageError, match=r"unknown flavour 'intel'; valid: mpich, openmpi, smpi"):
        grading.run_c(tmp_path / "hello.c", "intel")


def _pingpong(alpha=1.5, beta=4e-4):
    b = np.array([0, 1, 2, 4, 64, 1024, 8192, 65536])
    noise = np.array([0.02, -0.01, 0.0, 0.01, -0.02, 0.01, 0.0, -0.01])
    return pd.DataFrame({"bytes": b, "avg_us": alpha + beta * b + noise})


def test_pingpong_fit_accepts_the_fit_and_names_each_mistake():
    pp = _pingpong()
    a, b = np.polyfit(pp["bytes"], pp["avg_us"], 1)[::-1]
    grading.check_pingpong_fit(a, b, 1e-3 / b, pp)
    with pytest.raises(AssertionError, match=r"alpha_us = 2, but .* gives 1.5"):
        grading.check_pingpong_fit(2.0, b, 1e-3 / b, pp)
    with pytest.raises(AssertionError, match=r"beta_us_per_byte = 0.0004.*slope"):
        grading.check_pingpong_fit(a, b * 1.1, 1e-3 / b, pp)
    with pytest.raises(AssertionError, match="divide by 1000 for GB/s"):
        grading.check_pingpong_fit(a, b, 1 / b, pp)          # MB/s handed in as GB/s
    with pytest.raises(AssertionError, match="alpha_us should be a number, got None"):
        grading.check_pingpong_fit(None, b, 1e-3 / b, pp)
    with pytest.raises(AssertionError, match="pingpong_df is empty"):
        grading.check_pingpong_fit(a, b, 1e-3 / b, pp.iloc[:0])


@pytest.mark.skipif(shutil.which("mpirun.openmpi") is None, reason="Open MPI not installed")
def test_engines_allgather_checked_on_real_mpi_engines():
    pytest.importorskip("ipyparallel")
    cluster = engines.mpi_cluster(n=3)
    rc = cluster.start_and_connect_sync()
    try:
        view = rc[:]
        view.execute("from mpi4py import MPI\nimport numpy as np\ncomm = MPI.COMM_WORLD\n"
                     "send = np.arange(3, dtype='i') + 100 * comm.Get_rank()", block=True)
        with pytest.raises(AssertionError, match="could not read 'send' and 'recv'.*run the %%px cells"):
            grading.check_px_allgather(rc)
        view.execute("recv = np.zeros(9, dtype='i')\ncomm.Gather(send, recv, root=0)", block=True)
        with pytest.raises(AssertionError, match=r"rank 1: recv = \[0, 0, 0"):
            grading.check_px_allgather(rc)
        view.execute("comm.Allgather(send, recv)", block=True)
        grading.check_px_allgather(rc)
        assert sorted(view.pull("recv", block=True)[0]) == [0, 1, 2, 100, 101, 102, 200, 201, 202]
    finally:
        cluster.stop_cluster_sync()


def test_engines_refuse_bad_counts_and_the_other_mpi():
    pytest.importorskip("ipyparallel")
    with pytest.raises(ValueError, match="bad number of engines 0; valid: an integer >= 1"):
        engines.mpi_cluster(n=0)
    other = {"openmpi": "mpich", "mpich": "openmpi"}[engines.mpi4py_flavour()]
    with pytest.raises(ValueError, match="mpi4py here runs on .* use flavour="):
        engines.mpi_cluster(n=2, flavour=other)
    with pytest.raises(ValueError, match="unknown flavour for MPI engines 'smpi'; valid: mpich, openmpi"):
        engines.mpi_cluster(n=2, flavour="smpi")
