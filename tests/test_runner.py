"""The grader's runner of student C code (mpilab.grade.runner), on the key's solutions and on
broken student code, case by case (real Open MPI and SMPI)."""

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from mpilab.core.errors import LaunchError
from mpilab.core.vocabulary import COMPILERS
from mpilab.grade import harness, runner
from mpilab.grade.checks import ccode
from mpilab.grade.labs import lab2

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
KEY = ROOT / "solutions" / "lab2" / "c_solutions"
needs_openmpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")
needs_smpi = pytest.mark.skipif(shutil.which("smpicc") is None, reason="SimGrid SMPI not installed")


def cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT):
    return ccode.allgather_cases(c_file, algorithm, runs, timeout=timeout)


def failed(found):
    return [c for c in found if not c.passed]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
@pytest.mark.parametrize("algorithm", ["ring", "bruck"])
def test_the_keys_solutions_pass_every_case(algorithm):
    """Every kind of case of every visible run, plus a real P = 6 (not a power of two)."""
    runs = lab2.VISIBLE_RUNS + ccode.runs_at("openmpi", (6,), hidden=True)
    found = cases(KEY / f"{algorithm}.c", algorithm, runs)
    assert len(found) == sum(len(r.kinds or runner.ALLGATHER_KINDS) for r in runs)
    assert not failed(found), [c.text() if hasattr(c, "text") else c.message for c in failed(found)]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_deadlock_is_a_failed_case_that_says_so():
    [bad] = failed(
        cases(DATA / "ring_deadlock.c", "ring", [runner.Run("openmpi", 2, kinds=("int",))], timeout=5)
    )
    assert "a deadlock? check the order" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_segfault_names_the_rank_and_the_signal():
    [bad] = failed(cases(DATA / "bruck_segfault.c", "bruck", [runner.Run("openmpi", 2, kinds=("int",))]))
    assert "rank 1 crashed: signal 11 (SIGSEGV)" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_an_abort_names_the_rank_and_the_error_code():
    [bad] = failed(cases(DATA / "ring_abort.c", "ring", [runner.Run("openmpi", 3, kinds=("int",))]))
    assert "rank 2 crashed: MPI_Abort with error code 3" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_an_abort_under_smpi_is_a_crash():
    """SMPI exits with status 0 after MPI_Abort: the case still fails, naming the rank."""
    found = cases(
        DATA / "ring_abort.c", "ring", [runner.Run("smpi", 3, "orfeo-thin", "core", kinds=("int",))]
    )
    [bad] = failed(found)
    assert "rank 2 crashed: MPI_Abort with error code 3" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_the_simulated_run_catches_what_one_rank_cannot():
    """The deadlocking ring passes at P = 1; under SMPI at P = 13 every rank waits."""
    assert not failed(cases(DATA / "ring_deadlock.c", "ring", ccode.runs_at("openmpi", (1,))))
    found = cases(
        DATA / "ring_deadlock.c", "ring", [runner.Run("smpi", 13, "orfeo-thin", "node", kinds=("int",))]
    )
    [bad] = failed(found)
    assert "the simulator found every rank waiting" in bad.message, bad.message


@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_run_c_names_the_aborting_rank(flavour):
    if shutil.which(COMPILERS[flavour]) is None:
        pytest.skip(f"{flavour} not installed")
    with pytest.raises(
        LaunchError,
        match=rf"abort_rank2.c on {flavour}.*, P = 3: rank 2 crashed: MPI_Abort with error code 3$",
    ):
        runner.run_c(DATA / "abort_rank2.c", flavour, nprocs=3)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_wrong_element_and_a_compile_error(tmp_path):
    found = cases(ROOT / "labs" / "lab2" / "ring.c", "ring", ccode.runs_at("openmpi", (2,)))
    assert len(failed(found)) == len(runner.ALLGATHER_KINDS)
    assert any(re.search(r"block|recvbuf", c.message) for c in failed(found)), [c.message for c in found]
    bad = tmp_path / "ring.c"
    bad.write_text("int student_allgather_ring( {\n")
    [case] = cases(bad, "ring", ccode.runs_at("openmpi", (1, 2)))
    assert case.name == "ring.c compiles" and not case.passed
    assert case.weight == len(runner.ALLGATHER_KINDS) - 1 + len(runner.ALLGATHER_KINDS)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_benchmark_checks_then_times_with_the_reference_algorithms():
    df = runner.benchmark_c({"ring": KEY / "ring.c"}, nprocs=(2, 16), flavour="smpi", reference=True)
    assert sorted(df["algorithm"].unique()) == ["gather_bcast", "native", "pairwise", "ring"]
    t = df[df["bytes"] == 16384].pivot_table(index="nprocs", columns="algorithm", values="maxrank_avg_us")
    # the root of gather_bcast sends the p blocks to p - 1 ranks, one message after another
    assert t.loc[16, "gather_bcast"] > 4 * t.loc[16, "pairwise"]
    with pytest.raises(ValueError, match="unknown flavour for benchmark_c 'mpich'; valid: openmpi, smpi"):
        runner.benchmark_c({"ring": KEY / "ring.c"}, flavour="mpich")


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_a_wrong_algorithm_is_left_out_of_the_benchmark_and_the_others_are_timed():
    with pytest.warns(
        UserWarning, match=r"ring left out: it is not right yet, so its time would mean nothing"
    ):
        df = runner.benchmark_c(
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
    real_execute = runner.execute

    def execute(work, command, run, timeout=runner.RUN_TIMEOUT):
        launches.append([a for a in command if a.startswith("--time")])
        return real_execute(work, command, run, timeout)

    monkeypatch.setattr(runner, "execute", execute)
    df = runner.benchmark_c(
        {"ring": KEY / "ring.c", "bruck": KEY / "bruck.c"}, nprocs=(2, 5), flavour="smpi", reference=True
    )
    timed = [a for a in launches if a]
    assert timed == [
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
def test_heap_overflow_keeps_the_c_librarys_message():
    """A heap overflow after MPI_Init is reported at once as SIGABRT with glibc's own line,
    not as a time-out (Open MPI's SIGABRT handler would hang on the corrupted heap's lock)."""
    work = harness.build_allgather(DATA / "ring_heap_overflow.c", "ring", "openmpi")
    try:
        start = time.monotonic()
        found = runner.run_cases(work, "check_student", [runner.Run("openmpi", 2)], ["int"], timeout=20)
        assert time.monotonic() - start < 15, "the crash was not reported before the time-out"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    [case] = found
    assert not case.passed
    assert "rank 1 crashed: signal 6 (SIGABRT)" in case.message, case.message
    # glibc 2.36 (bookworm) catches it at free() as "(out)"; other versions at the next malloc()
    assert re.search(
        r"the C library said: (malloc\(\): corrupted top size|double free or corruption \(out\))$",
        case.message,
    ), case.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_a_visible_check_says_which_saved_version_it_tests(tmp_path, capsys, monkeypatch):
    """The kernel cannot see an editor's unsaved buffer: lab 2's check first names the file's
    last save, so an edit made after it shows up as newer than what was checked."""
    ring = tmp_path / "ring.c"
    ring.write_text("this does not compile\n")
    saved = time.time() - 42
    os.utime(ring, (saved, saved))
    assert ccode.saved_note(ring, now=saved + 42) == (
        f"checking {ring} as last saved at {time.strftime('%H:%M:%S', time.localtime(saved))} (42 s ago); "
        "an edit made since and not saved (Ctrl+S in its editor) is not checked"
    )
    assert "(3 h ago)" in ccode.saved_note(ring, now=saved + 3 * 3600 + 59)
    assert "(12 min ago)" in ccode.saved_note(ring, now=saved + 12 * 60 + 5)
    assert (
        ccode.saved_note(tmp_path / "bruck.c")
        == f"{tmp_path / 'bruck.c'}: no such file next to this notebook"
    )
    monkeypatch.chdir(tmp_path)
    found = lab2.CELLS["ring_correct"].visible()
    assert capsys.readouterr().out.startswith("checking ring.c as last saved at ")
    assert not found[0].passed and "compiles" in found[0].name
