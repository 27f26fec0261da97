"""Lab 0's checks, case by case: hello.c on real Open MPI and SMPI (mpilab.grade.checks.hello),
the %%px cell run by the grader and the engines' allgather (mpilab.grade.checks.pxcell), the α-β
fit recomputed in the answer key (mpilab_key.rubrics.lab0). Scored end to end in test_grade_lab0.py.
"""

import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpilab.cluster import engines
from mpilab.core.errors import LaunchError, UsageError
from mpilab.grade import runner
from mpilab.grade.checks import hello, pxcell
from mpilab.grade.labs import lab0
from mpilab.grade.runner import Run

ROOT = Path(__file__).resolve().parents[1]
SOL = ROOT / "solutions" / "lab0"
needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="needs Open MPI and SimGrid SMPI",
)
SMPI8 = Run("smpi", 8, "orfeo-thin", "node")
RUNS = (Run("openmpi", 1), Run("openmpi", 2), SMPI8)


def _failed(cases):
    return {c.name: c.message for c in cases if not c.passed}


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_hello_solution_passes_and_skeleton_fails_every_case():
    cases = hello.hello_cases(SOL / "c_solutions" / "hello.c", lab0.HELLO_RUNS)
    assert len(cases) == 2 * len(lab0.HELLO_RUNS) and _failed(cases) == {}
    cases = hello.hello_cases(ROOT / "labs" / "lab0" / "hello.c", RUNS)
    assert len(cases) == 6 and not any(c.passed for c in cases)
    assert _failed(cases)["Open MPI, P = 1, one line per rank with its rank and the size"].startswith(
        "the ranks printed were [-1]"
    )


@needs_mpi
@pytest.mark.parametrize(
    "old,new,name,message",
    [
        (
            'printf("hello',
            'if (rank != 1) printf("hello',
            "Open MPI, P = 2, one line per rank with its rank and the size",
            r"1 lines .* expected 2",
        ),
        (
            "MPI_Comm_size(MPI_COMM_WORLD, &size);",
            "size = 4;",
            "Open MPI, P = 1, one line per rank with its rank and the size",
            r"the sizes printed were \[4\]",
        ),
        (
            "MPI_Get_processor_name(host, &len);",
            "host[0] = 'x'; host[1] = 0;",
            "SMPI on orfeo-thin, P = 8, mapping node, each rank's simulated core",
            r"rank 0 says it ran on 'x', but it was placed on 'thin00-s0-c00'",
        ),
        (
            "MPI_Finalize();",
            "if (rank == 1) *(volatile int *)0 = 1;\n    MPI_Finalize();",
            "Open MPI, P = 2, each rank's host",
            r"rank 1 crashed: signal 11 \(SIGSEGV\)",
        ),
    ],
)
@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_hello_mistakes_fail_their_cases_by_name(tmp_path, old, new, name, message):
    import re

    text = (SOL / "c_solutions" / "hello.c").read_text()
    assert text.count(old) == 1
    (tmp_path / "hello.c").write_text(text.replace(old, new))
    failed = _failed(hello.hello_cases(tmp_path / "hello.c", RUNS))
    assert name in failed and re.search(message, failed[name]), failed


def test_hello_missing_or_broken_file_fails_with_the_weight_of_every_case(tmp_path):
    cases = hello.hello_cases(tmp_path / "hello.c", RUNS)
    assert len(cases) == 1 and cases[0].weight == 6 and "not found" in cases[0].message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_run_c_runs_hello_for_real_and_simulated(tmp_path):
    shutil.copy(SOL / "c_solutions" / "hello.c", tmp_path / "hello.c")
    out = runner.run_c(tmp_path / "hello.c", "openmpi", nprocs=4)
    assert sorted(line.split(" on ")[0] for line in out.splitlines()) == [
        f"hello from rank {r} of 4" for r in range(4)
    ]
    out = runner.run_c(tmp_path / "hello.c", "smpi", nprocs=8, mapping="node", platform="orfeo-thin")
    assert "hello from rank 1 of 8 on thin01-s0-c00" in out.splitlines()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.c"]  # built and run elsewhere


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_mpi
def test_run_c_stops_a_hung_hello_and_keeps_it_in_a_scratch_dir(tmp_path):
    """The notebook's hello cells run the student's file under the grader's limits: a hang ends
    at the time limit, and the program sees only its own copy (not what lies next to it)."""
    text = (SOL / "c_solutions" / "hello.c").read_text()
    peek = 'if (fopen("secret.txt", "r")) printf("I can read secret.txt\\n");\n    MPI_Finalize();'
    (tmp_path / "hello.c").write_text(text.replace("MPI_Finalize();", peek))
    (tmp_path / "secret.txt").write_text("hidden tests\n")
    out = runner.run_c(tmp_path / "hello.c", "openmpi", nprocs=2)
    assert "hello from rank 1 of 2" in out and "secret" not in out
    (tmp_path / "hello.c").write_text(
        text.replace("MPI_Finalize();", "if (rank == 1) for (;;);\n    MPI_Finalize();")
    )
    with pytest.raises(LaunchError, match=r"hello.c on openmpi, P = 2: timed out after 3 s — a deadlock\?"):
        runner.run_c(tmp_path / "hello.c", "openmpi", nprocs=2, timeout=3)
    (tmp_path / "hello.c").write_text(text.replace("MPI_Finalize();", "MPI_Finalize() oops;"))
    with pytest.raises(LaunchError, match=r"(?s)hello.c does not compile for smpi:\n.*error: expected"):
        runner.run_c(tmp_path / "hello.c", "smpi", nprocs=2)
    with pytest.raises(UsageError, match=r"unknown flavour 'intel'; valid: mpich, openmpi, smpi"):
        runner.run_c(tmp_path / "hello.c", "intel")


def _pingpong(alpha=1.5, beta=4e-4):
    b = np.array([0, 1, 2, 4, 64, 1024, 8192, 65536])
    noise = np.array([0.02, -0.01, 0.0, 0.01, -0.02, 0.01, 0.0, -0.01])
    return pd.DataFrame({"bytes": b, "avg_us": alpha + beta * b + noise})


def _fit(alpha_us, beta_us_per_byte, bandwidth_GBps, pp):
    from mpilab_key.rubrics import lab0 as rubric

    return rubric.fit_cases(
        dict(alpha_us=alpha_us, beta_us_per_byte=beta_us_per_byte, bandwidth_GBps=bandwidth_GBps, pp=pp), None
    )


@pytest.fixture
def no_pingpong_gate(monkeypatch):
    """The fit's analysis alone: pp taken as the grader's own measurement (no real run here)."""
    from mpilab.grade.cases import Case
    from mpilab_key.rubrics import lab0 as rubric

    monkeypatch.setattr(rubric, "pingpong_gates", lambda pp, what, **options: [Case("gate", True)])


@pytest.mark.skipif(shutil.which("mpirun.openmpi") is None, reason="Open MPI not installed")
def test_a_pingpong_typed_in_earns_nothing(built_flavour):
    """pp must be this machine's ping-pong: the grader runs the notebook's own once more. The
    kit's ping-pong passes; the guide's typed-in table, fitted exactly, earns nothing."""
    built_flavour("openmpi")
    from mpilab.measure import pingpong
    from mpilab_key.rubrics import lab0 as rubric

    pp = pingpong.run("openmpi", "core", **rubric.PINGPONG)
    a, b = np.polyfit(pp["bytes"], pp["avg_us"], 1)[::-1]
    assert _failed(_fit(a, b, 1e-3 / b, pp)) == {}
    typed = _pingpong()
    a, b = np.polyfit(typed["bytes"], typed["avg_us"], 1)[::-1]
    cases = _fit(a, b, 1e-3 / b, typed)
    assert not any(c.passed and c.weight for c in cases)
    assert "pp holds the whole measured grid" in _failed(cases)


def test_pingpong_fit_recomputed_in_the_key_names_each_mistake(no_pingpong_gate):
    pp = _pingpong()
    a, b = np.polyfit(pp["bytes"], pp["avg_us"], 1)[::-1]
    assert _failed(_fit(a, b, 1e-3 / b, pp)) == {}
    # the median or leaving out the 0-byte message are defensible conventions too
    a0, b0 = np.polyfit(pp["bytes"][1:], pp["avg_us"][1:], 1)[::-1]
    assert _failed(_fit(a0, b0, 1e-3 / b0, pp)) == {}
    failed = _failed(_fit(2.0, b, 1e-3 / b, pp))
    assert (
        list(failed) == ["alpha_us is the fit's intercept (µs)"]
        and "intercept 1.5" in failed["alpha_us is the fit's intercept (µs)"]
    )
    assert list(_failed(_fit(a, b * 1.1, 1e-3 / (b * 1.1), pp))) == [
        "beta_us_per_byte is the fit's slope (µs per byte)"
    ]
    failed = _failed(_fit(a, b, 1 / b, pp))  # MB/s handed in as GB/s
    assert (
        list(failed) == ["bandwidth_GBps is 1/β in GB/s"]
        and "divide by 1000 for GB/s" in failed["bandwidth_GBps is 1/β in GB/s"]
    )
    assert "is not a number" in _failed(_fit(None, b, 1e-3 / b, pp))["alpha_us is the fit's intercept (µs)"]
    assert list(_failed(_fit(a, b, 1e-3 / b, pp.iloc[:2]))) == ["pp is your ping-pong's table"]


def test_pingpong_fit_on_small_sizes_for_alpha_passes(no_pingpong_gate):
    """A real ping-pong bends where the protocol changes (eager below 4 KiB here): α fitted on the
    small sizes, the fix the written answer's rubric points to, and β on the large ones are
    correct too, though a line over every size gives other numbers; a made-up α still fails."""
    b = np.array([0, 1, 2, 4, 8, 16, 64, 256, 1024, 4096, 8192, 16384, 32768, 65536], dtype=float)
    t = np.where(b < 4096, 1.0 + 2e-4 * b, 6.0 + 1.2e-4 * b)
    pp = pd.DataFrame({"bytes": b, "avg_us": t})
    a_all, b_all = np.polyfit(b, t, 1)[::-1]
    small = b <= 1024
    a_small = np.polyfit(b[small], t[small], 1)[1]
    b_large = np.polyfit(b[b >= 8192], t[b >= 8192], 1)[0]
    assert abs(a_small - a_all) > 0.5 and abs(b_large - b_all) > 0.05 * b_all  # the conventions differ
    assert _failed(_fit(a_all, b_all, 1e-3 / b_all, pp)) == {}
    assert _failed(_fit(a_small, b_large, 1e-3 / b_large, pp)) == {}
    assert _failed(_fit(float(t[0]), b_all, 1e-3 / b_all, pp)) == {}  # α: the 0-byte time
    failed = _failed(_fit((a_small + a_all) / 2, b_all, 1e-3 / b_all, pp))
    assert list(failed) == ["alpha_us is the fit's intercept (µs)"]


def test_pingpong_visible_checks_only_look_at_the_form():
    pp = _pingpong()
    assert all(c.passed for c in lab0.fit_form_cases(9.0, 1e-3, 7.0, pp))  # wrong values, right form
    assert [c.passed for c in lab0.fit_form_cases(None, -1.0, 7.0, "pp")] == [False, False, True, False]


PX = "%%px\nrecv = np.empty(3 * comm.Get_size(), dtype='i')\ncomm.Allgather(send, recv)\nprint(recv)\n"


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.skipif(shutil.which("mpirun.openmpi") is None, reason="Open MPI not installed")
def test_the_grader_runs_the_px_cell_itself_on_other_rank_counts():
    pytest.importorskip("mpi4py")
    runs = [Run("openmpi", 2), Run("openmpi", 5, hidden=True)]
    assert _failed(pxcell.px_cases(PX, runs)) == {}
    fixed = _failed(pxcell.px_cases(PX.replace("3 * comm.Get_size()", "6"), runs))
    assert (
        list(fixed) == ["Open MPI, P = 5, every rank's recv"]
        and "your cell raised ValueError" in fixed["Open MPI, P = 5, every rank's recv"]
    )
    # numbers copied from the notebook's printout instead of communicating: wrong with fresh sends
    copied = "%%px\nrecv = np.array([0, 1, 2, 100, 101, 102], dtype='i')\n"
    assert not any(c.passed for c in pxcell.px_cases(copied, runs))
    failed = _failed(pxcell.px_cases("%%px\n%time x = 1\n", runs[:1]))
    assert "not Python the grader can run" in failed["Open MPI, P = 2, every rank's recv"]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.skipif(shutil.which("mpirun.openmpi") is None, reason="Open MPI not installed")
def test_a_slow_start_is_tried_again_and_a_hung_cell_is_not():
    """Starting the ranks is the grader's part: a launch that runs out of time before every rank
    reaches the cell is tried once more (and named as the machine's fault); a cell that hangs
    after every rank started is the student's, and is launched once."""
    pytest.importorskip("mpi4py")
    # 16 ranks, each importing numpy and mpi4py, do not all start within 0.05 s and the half
    # second a killed run is given to end (the whole launch takes about 1.7 s here, idle)
    many = Run("openmpi", 16)
    slow = _failed(pxcell.px_cases(PX, [many], timeout=0.05))
    assert (
        "of 16 ranks started within 0.15 s, twice: the grading machine was too busy"
        in slow[many.label + ", every rank's recv"]
    )
    run = Run("openmpi", 2)
    hung = "%%px\nrecv = np.empty(6, dtype='i')\nif rank == 0:\n    comm.Recv(recv, source=1)\n"
    start = time.monotonic()
    failed = _failed(pxcell.px_cases(hung, [run], timeout=8))
    assert time.monotonic() - start < 8 * 2, "a cell that hangs after starting was launched again"
    assert "twice" not in failed[run.label + ", every rank's recv"]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.skipif(shutil.which("mpirun.openmpi") is None, reason="Open MPI not installed")
def test_engines_allgather_checked_on_real_mpi_engines():
    pytest.importorskip("ipyparallel")
    cluster = engines.mpi_cluster(n=3)
    rc = cluster.start_and_connect_sync()
    try:
        view = rc[:]
        view.execute(
            "from mpi4py import MPI\nimport numpy as np\ncomm = MPI.COMM_WORLD\n"
            "send = np.arange(3, dtype='i') + 100 * comm.Get_rank()",
            block=True,
        )
        with pytest.raises(
            UsageError, match="could not read 'send', 'recv' from the engines.*run the %%px cells"
        ):
            engines.pull(rc, "send", "recv")
        view.execute("recv = np.zeros(9, dtype='i')\ncomm.Gather(send, recv, root=0)", block=True)
        failed = _failed(pxcell.engine_cases(engines.pull(rc, "send", "recv")))
        assert sorted(failed) == ["rank 1's recv", "rank 2's recv"]
        assert failed["rank 1's recv"].startswith("recv = [0, 0, 0")
        view.execute("comm.Allgather(send, recv)", block=True)
        assert _failed(pxcell.engine_cases(engines.pull(rc, "send", "recv"))) == {}
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


def test_hidden_runs_only_vary_where_the_visible_ones_run():
    """Issue 21: the grader's runs test nothing the notebook's checks do not (real and simulated
    hello runs; the %%px cell on real ranks), only at other process counts."""
    from mpilab_key.rubrics import lab0 as rubric

    def where(r):
        return (r.flavour, r.nprocs, r.platform, r.mapping)

    for visible, hidden in ((lab0.HELLO_RUNS, rubric.HELLO_HIDDEN), (lab0.PX_RUNS, rubric.PX_HIDDEN)):
        assert not any(r.hidden for r in visible) and all(r.hidden for r in hidden)
        assert {r.flavour for r in hidden} <= {r.flavour for r in visible}
        assert not {where(r) for r in hidden} & {where(r) for r in visible}
    assert {r.flavour for r in lab0.HELLO_RUNS} == {"openmpi", "smpi"}
