"""End to end: release lab 2, make seven submissions, run scripts/grade.sh, check every score.

Real nbgrader, real Open MPI. Per-run limit 10 s and per-cell limit 60 s keep the batch short.
Two more, a notebook that loops and one that ignores the interrupt, are graded in ``make
test-all`` (extended): each spends two cell limits, and tests/test_autograde.py tests the same
kernel restarts on a small notebook in ``make test``.
Three submissions hand in C written the way real students write it (tests/data/grading, each
adapted from allgathers of public course repositories, bugs kept): the grade and the first
line of feedback each gets are part of the test.
"""

import shutil

import pytest
from course import ROOT, Course, assert_scores, released_notebook, solved_notebook

DATA = ROOT / "tests" / "data" / "grading"
SOL = ROOT / "solutions" / "lab2"

#: Autograded points per cell of lab 2 (schedules and discussion are graded by hand: 0 here).
FULL = {
    "cost_gather_bcast": 1,
    "cost_pairwise": 1,
    "cost_ring": 1,
    "cost_bruck": 2,
    "ring_correct": 3,
    "bruck_correct": 3,
    "plot_check": 2,
    "plot_p_check": 2,
    "prediction_check": 1,
    "schedules": 0,
    "reflection": 0,
    "discussion": 0,
}
ZERO = dict.fromkeys(FULL, 0)
#: Per kind of case of a C check: Open MPI P = 1 (4 kinds: in-place is trivial at P = 1),
#: P = 2..8 (7 x 5 kinds), 3 simulated runs (3 x 5 kinds); a code right only at P = 1 keeps
#: 4 of these 54 cases: 3 x 4 / 54 = 0.22 points.
ONLY_P1 = 0.22
EXPECTED = {
    "solution": FULL,
    "untouched": ZERO,
    # the ring cost's α term is right, its β term is not: half of the cell; the plot: 10 cases,
    # two log axes missing, bruck's line missing; labels, legend, 4 lines right
    "wrong_answers": {**FULL, "cost_ring": 0.5, "plot_check": 1.4},
    # a ring that deadlocks and a Bruck that crashes: each right only at P = 1; with neither
    # right the benchmark times nothing ("fix the correctness checks first"), so the plots and
    # the prediction made from it score nothing either
    "broken_c": {
        **FULL,
        "ring_correct": ONLY_P1,
        "bruck_correct": ONLY_P1,
        "plot_check": 0,
        "plot_p_check": 0,
        "prediction_check": 0,
    },
    # the costs never exist, so neither does the prediction made from them
    "loops_forever": {
        **FULL,
        "cost_gather_bcast": 0,
        "cost_pairwise": 0,
        "cost_ring": 0,
        "cost_bruck": 0,
        "prediction_check": 0,
    },
    # its kernel is restarted after the plot cell's time limit: the cells below lack its variables
    "ignores_sigint": {**FULL, "plot_check": 0, "plot_p_check": 0, "prediction_check": 0},
}


def _edit_answers(gid, src):
    """A ring cost with a wrong β term, and a plot without log axes or Bruck's line."""
    if gid == "costs":
        return src.replace(
            "cost_ring = (p - 1) * alpha + (p - 1) * n * beta", "cost_ring = (p - 1) * alpha + p * n * beta"
        )
    if gid != "plot":
        return src
    src = src.replace('ax.set_xscale("log")\n', "").replace('ax.set_yscale("log")\n', "")
    return src.replace(
        'for name, sub in at4.groupby("algorithm"):\n',
        'for name, sub in at4.groupby("algorithm"):\n    if name == "bruck":\n        continue\n',
    )


#: Real-world-style C (tests/data/grading): the ring and the Bruck each submission hands in, the
#: points of each C cell (3 each) and the first failed case of each cell's feedback.
REAL = {
    # a ring right only for MPI_INT (the datatype argument ignored), a Bruck that calls log2()
    "real_mpi_int_log2": ("ring_mpi_int.c", "bruck_log2.c"),
    # a ring that sends before it receives (a deadlock once MPI stops buffering), a Bruck that
    # writes past the end of recvbuf
    "real_send_first_overrun": ("ring_send_first.c", "bruck_overrun.c"),
    # right results by other algorithms: a gather + broadcast as the ring (the kit's own
    # algorithm: nothing), every rank sending straight to every other as Bruck (a third)
    "real_wrong_algorithms": ("ring_gather_bcast.c", "ring_spread.c"),
}


def _edit_loop(gid, src):
    return "while True:\n    pass\n" + src if gid == "costs" else src


def _edit_ignore_sigint(gid, src):
    if gid != "plot":
        return src
    return "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n" + src


needs_openmpi = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")
C_RING, C_BRUCK = SOL / "c_solutions" / "ring.c", SOL / "c_solutions" / "bruck.c"


def _submit(course, student, notebook, ring=C_RING, bruck=C_BRUCK):
    course.submit(student, "lab2", notebook, {"ring.c": ring, "bruck.c": bruck})


@pytest.mark.slow
@needs_openmpi
def test_grade_seven_submissions(tmp_path):
    course = Course(tmp_path)
    _submit(course, "solution", solved_notebook("lab2"))
    _submit(course, "untouched", released_notebook("lab2"), SOL / "ring.c", SOL / "bruck.c")
    _submit(course, "wrong_answers", solved_notebook("lab2", _edit_answers))
    _submit(course, "broken_c", solved_notebook("lab2"), DATA / "ring_deadlock.c", DATA / "bruck_segfault.c")
    for student, (ring, bruck) in REAL.items():
        _submit(course, student, solved_notebook("lab2"), DATA / ring, DATA / bruck)
    table, elapsed = course.grade("lab2")
    for student in REAL:
        print(student, {k: float(table.loc[student, k]) for k in FULL})
        for gid in ("ring_correct", "bruck_correct"):
            print("  ", gid, course.verdict(student, "lab2", gid).splitlines()[:3])
    assert_scores(table, {k: v for k, v in EXPECTED.items() if k not in KERNEL}, course, "lab2")
    assert {status for _, status in course.autograde_runs("lab2").values()} == {"ok"}
    assert (course.root / "grades-lab2.csv").exists()
    assert table.loc["solution", "max"] == 16 + 7  # 16 autograded, 7 by hand
    dead = course.feedback("broken_c", "lab2")
    # the first case of each of two kinds is tried; where each rank was blocked says which way
    assert (
        "Open MPI, P = 2, int (count=1), char (count=1): no result after 3 s — every rank is in MPI_Recv: "
        "each waits for a message before it sends its own, so nobody sends; at least one rank must send "
        "first"
        in dead
        and "not run: the first case of int and of char hung; no other kind was tried" in dead
    )
    # schedule-level feedback (mpilab.grade.diagnose): the wait-for cycle and both timing diagrams
    assert (
        "deadlock: rank 0 waits for 5, 5 waits for 4, 4 waits for 3, 3 waits for 2, 2 waits for 1, "
        "1 waits for 0, all in MPI_Recv" in dead
    )
    assert 'class="mpilab-diagnosis"' in dead and 'alt="Timing diagrams: the reference ring above' in dead
    assert "mpilab-diagnosis" not in course.feedback("solution", "lab2")
    segfault = dead
    assert (
        "Open MPI, P = 2, int (count=1 and count=4), char (count=1): rank 1 crashed: signal 11 (SIGSEGV)"
        in segfault
    )
    assert "the run stopped before your function returned: a rank crashed: signal 11 (SIGSEGV)" in segfault
    wrong = course.feedback("wrong_answers", "lab2")
    assert (
        "its β term: bytes on the critical path: the β coefficient differs at p = 1, n = 1 bytes: "
        "yours is 1, expected 0"
        in wrong
        and "0.5 of 1 points" in wrong
    )


#: The notebooks whose kernel the grader has to stop: each keeps the points of its other cells.
KERNEL = {"loops_forever": _edit_loop, "ignores_sigint": _edit_ignore_sigint}


@pytest.mark.slow
@pytest.mark.extended
@needs_openmpi
def test_a_notebook_that_loops_or_ignores_the_interrupt_keeps_its_other_points(tmp_path):
    course = Course(tmp_path)
    for student, edit in KERNEL.items():
        _submit(course, student, solved_notebook("lab2", edit))
    table, _ = course.grade("lab2")
    assert_scores(table, {k: EXPECTED[k] for k in KERNEL}, course, "lab2")
    assert {status for _, status in course.autograde_runs("lab2").values()} == {"ok"}
    assert "KernelRestarted" in course.feedback("ignores_sigint", "lab2")
