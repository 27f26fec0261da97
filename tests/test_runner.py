"""The grader's runner of student C code (mpilab.grade.runner), on the key's solutions and on
broken student code, case by case (real Open MPI and SMPI): the real defects of real code get
the points of the cases they get right and feedback that names the defect."""

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
    assert len(found) == sum(len(r.kinds or ccode.ALLGATHER_KINDS) for r in runs)
    assert not failed(found), [c.text() if hasattr(c, "text") else c.message for c in failed(found)]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_deadlock_is_worded_by_the_call_every_rank_is_blocked_in():
    """Receive-first: every rank in MPI_Recv; the larger int cases are not tried again."""
    found = cases(DATA / "ring_deadlock.c", "ring", [runner.Run("openmpi", 2, kinds=("int",))], timeout=10)
    hung, skipped = failed(found)
    assert hung.name == "Open MPI, P = 2, int (count=1)" and hung.weight == pytest.approx(1 / 6)
    assert hung.message.startswith(
        "no result after 3 s — every rank is in MPI_Recv: each waits for a message"
    ), hung.message
    assert skipped.message.startswith(
        "not run: int count=1 hung at P = 2"
    ) and skipped.weight == pytest.approx(5 / 6)


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_send_first_ring_keeps_the_cases_it_gets_right():
    """MPI_Send before MPI_Recv: right while MPI buffers the message, hung above; every smaller
    case keeps its points, and the hint says what to change (it is not "send before receive")."""
    found = cases(
        DATA / "ring_send_first.c", "ring", [runner.Run("openmpi", 2, kinds=("int", "char"))], timeout=6
    )
    assert sum(c.weight for c in found if c.passed) >= 1 + 4 / 6, [c.line() for c in found]
    hung = next(c for c in failed(found) if "no result" in c.message)
    assert "every rank is in MPI_Send: each sends before it receives" in hung.message
    assert "let every other rank receive first, or use MPI_Sendrecv" in hung.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_segfault_names_the_rank_and_the_signal():
    bad = failed(cases(DATA / "bruck_segfault.c", "bruck", [runner.Run("openmpi", 2, kinds=("int",))]))[0]
    assert "rank 1 crashed: signal 11 (SIGSEGV)" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_an_abort_names_the_rank_and_the_error_code():
    bad = failed(cases(DATA / "ring_abort.c", "ring", [runner.Run("openmpi", 3, kinds=("int",))]))[0]
    assert "rank 2 crashed: MPI_Abort with error code 3" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_an_abort_under_smpi_is_a_crash():
    """SMPI exits with status 0 after MPI_Abort: the case still fails, naming the rank."""
    found = cases(
        DATA / "ring_abort.c", "ring", [runner.Run("smpi", 3, "orfeo-thin", "core", kinds=("int",))]
    )
    bad = failed(found)[0]
    assert "rank 2 crashed: MPI_Abort with error code 3" in bad.message, bad.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_smpi
def test_the_simulated_run_catches_what_one_rank_cannot():
    """The deadlocking ring passes at P = 1; under SMPI at P = 13 every rank waits."""
    assert not failed(cases(DATA / "ring_deadlock.c", "ring", ccode.runs_at("openmpi", (1,))))
    found = cases(
        DATA / "ring_deadlock.c", "ring", [runner.Run("smpi", 13, "orfeo-thin", "node", kinds=("int",))]
    )
    bad = failed(found)[0]
    assert (
        "the simulator found every rank blocked, for good (a deadlock) — every rank is in MPI_Recv"
        in bad.message
    )


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
def test_a_wrong_result_a_compile_error_and_a_link_error(tmp_path):
    found = cases(ROOT / "labs" / "lab2" / "ring.c", "ring", ccode.runs_at("openmpi", (2,)))
    assert sum(c.weight for c in failed(found)) == len(ccode.ALLGATHER_KINDS)
    assert any(re.search(r"block 1 \(rank 1's data\) was never written", c.message) for c in found), [
        c.message for c in found
    ]
    bad = tmp_path / "ring.c"
    bad.write_text("int student_allgather_ring( {\n")
    [case] = cases(bad, "ring", ccode.runs_at("openmpi", (1, 2)))
    assert case.name == "ring.c compiles" and not case.passed
    assert case.weight == len(ccode.ALLGATHER_KINDS) - 1 + len(ccode.ALLGATHER_KINDS)
    [case] = cases(DATA / "ring_undefined.c", "ring", ccode.runs_at("openmpi", (2,)))
    assert "calls next_block, which is defined nowhere the grader links with (a link error" in case.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_bruck_that_calls_log2_links_with_the_maths_library():
    assert not failed(cases(DATA / "bruck_log2.c", "bruck", [runner.Run("openmpi", 3)]))


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_write_past_the_end_of_recvbuf_is_measured():
    """Rank r writes r blocks past recvbuf: the guard bytes say how far, on every case."""
    found = cases(DATA / "bruck_overrun.c", "bruck", [runner.Run("openmpi", 3, kinds=("int", "char"))])
    assert not any(c.passed for c in found)
    lines = [c.message for c in found]
    # every int case overruns: the line names the case its numbers are from
    assert lines[0].startswith(
        "count=1: rank 1: wrote 4 bytes past the end of recvbuf (12 bytes long) (and 1 more rank)"
    ), lines
    assert any("(element size hard-coded?)" in m for m in lines[1:]), lines


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_a_hard_coded_mpi_int_fails_only_the_other_datatypes_and_the_hint_says_so(capsys):
    runs = [runner.Run("openmpi", 2, kinds=("int", "char", "double"))]
    found = ccode.visible_allgather(DATA / "ring_mpi_int.c", "ring", runs)
    assert [c.name for c in found if c.passed] == ["Open MPI, P = 2, int"]
    char = next(c for c in found if c.name.startswith("Open MPI, P = 2, char"))
    assert "past the end of recvbuf" in char.message and "(element size hard-coded?)" in char.message
    assert (
        "hint: only the char and double cases fail: is the datatype argument ignored"
        in capsys.readouterr().out
    )


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.parametrize(
    "flavour, said",
    [
        ("openmpi", "in MPI_Sendrecv: MPI_ERR_TRUNCATE: message truncated"),
        ("mpich", "in MPI_Sendrecv: Message truncated"),
        ("smpi", "in MPI_Sendrecv: MPI_ERR_TRUNCATE"),
    ],
)
def test_mpi_s_own_error_is_kept_even_when_the_launcher_loses_it(flavour, said, monkeypatch, built_flavour):
    """The harness's own error handler writes the library's words to error.<rank>: under load
    Open MPI 4.1's mpirun can fail to unpack the help text a rank sends it (ORTE_ERROR_LOG ...
    show_help.c, three times in a row in one CI run), and the student then read only that.
    What the launcher printed is taken away here, so the message can come only from the file."""
    built_flavour(flavour)
    monkeypatch.setattr(runner, "mpi_error", lambda res: None)
    run = runner.Run(flavour, 2, kinds=("int",))
    [first, *_] = failed(cases(DATA / "ring_truncate.c", "ring", [run]))
    assert f"MPI reported an error {said}" in first.message, first.message


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@needs_openmpi
def test_heap_overflow_keeps_the_c_librarys_message():
    """A heap overflow after MPI_Init is reported at once as SIGABRT with glibc's own line,
    not as a time-out (Open MPI's SIGABRT handler would hang on the corrupted heap's lock)."""
    work = harness.build_allgather(DATA / "ring_heap_overflow.c", "ring", "openmpi")
    try:
        start = time.monotonic()
        found = runner.run_cases(
            work, "check_student", [runner.Run("openmpi", 2, kinds=("int",))], ccode.ALLGATHER, 20
        )
        assert time.monotonic() - start < 15, "the crash was not reported before the time-out"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    case, *more = failed(found)
    assert "rank 1 crashed: signal 6 (SIGABRT)" in case.message, case.message
    assert [c.message for c in more] == [
        "not run: two cases of int ended the program at P = 2; the others were not tried"
    ]
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


def test_failed_cases_group_by_their_sentence_and_a_whole_kind_says_which_case_spoke():
    """kind_cases: a kind whose every case failed is named alone, so its line leads with the
    detail of the case whose sentence it quotes; a kind partly failed names its failed cases."""
    from types import SimpleNamespace

    from mpilab.grade.casedata import Spec

    def result(seq, kind, detail, passed, message=""):
        return SimpleNamespace(spec=Spec(seq, kind, "int", 1, detail=detail), passed=passed, message=message)

    run = SimpleNamespace(label="Open MPI, P = 3", hidden=False)
    results = [
        result(1, "int", "count=1", True),
        result(2, "int", "count=7", False, "rank 1: element 3 is 5, expected 4"),
        result(3, "root", "count=1 root=2", False, "rank 0: nothing arrived (1 elements)"),
        result(4, "root", "count=9 root=1", False, "rank 0: nothing arrived (9 elements)"),
    ]
    found = runner.kind_cases(run, ["int", "root"], results)
    lines = {c.name: (c.passed, c.message, round(c.weight, 3)) for c in found}
    assert lines == {
        "Open MPI, P = 3, int": (True, "", 0.5),
        "Open MPI, P = 3, int (count=7)": (False, "rank 1: element 3 is 5, expected 4", 0.5),
        "Open MPI, P = 3, root": (False, "count=1 root=2: rank 0: nothing arrived (1 elements)", 1.0),
    }
