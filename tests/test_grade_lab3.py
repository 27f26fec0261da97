"""End to end: release lab 3, make four submissions, run scripts/grade.sh, check every score.

Real nbgrader, real Open MPI, real SMPI; the points come from the trusted grader
(mpilab.grade.judge with the answer key's rubric, solutions/mpilab_key/rubrics/lab3.py). The
autograder runs the study on the ``quick`` grid (MPILAB_LAB3_GRID=quick, as the notebook says);
per-run limit 20 s (so a case hangs for 7 s before it counts as a deadlock). The wrong
reduce-scatter arrives as an LMS download (Blackboard's file names, underscores in the student id
and in the C files' names) that grade.sh collects with zip_collect.
"""

import html
import json
import shutil

import pytest
from course import ROOT, Course, assert_scores, released_notebook, solved_notebook
from test_rubric_lab3 import wrong_block

DATA = ROOT / "tests" / "data" / "grading"
SOL = ROOT / "solutions" / "lab3"
FILES = ("reduce_scatter.c", "allreduce_rabenseifner.c", "allreduce_two_level.c")

#: Autograded points per cell of lab 3 (the written answers are graded by hand: 0 here).
FULL = {
    "reduce_scatter_correct": 3,
    "rabenseifner_correct": 3,
    "cost_rabenseifner": 2,
    "two_level_correct": 3,
    "study_plot_check": 2,
    "nonpof2": 0,
    "study_discussion": 0,
    "noise_discussion": 0,
}
ZERO = dict.fromkeys(FULL, 0)
EXPECTED = {
    "solution": FULL,
    "untouched": ZERO,
    # Each C cell has 59 cases of weight 1: visible Open MPI P = 1 (4 kinds, no in-place), P = 2,
    # 3, 5, 8 (5 kinds each) and SMPI P = 5 on 3 x 3 cores (5); hidden Open MPI P = 4, 6, 7 and SMPI
    # P = 7 (3 x 3, node), 37 (jupiter, node), 40 (jupiter, core), 5 kinds each.
    # The virtual rank's block is right only where the communicator's size is a power of two:
    # P = 1 (4), 2 (5), 4 (5), 8 (5) pass, and at P = 3 the sub-communicator case (halves of 2 and
    # 1 ranks): 20 of 59 cases, 3 x 20/59 = 1.02.
    "wrong_reduce_scatter": {**FULL, "reduce_scatter_correct": 1.02},
    # The deadlock needs two ranks on a node: only P = 1's 4 kinds pass, 3 x 4/59 = 0.2. The study
    # refuses to time a two-level allreduce that fails its check and runs on the kit's compiled
    # reference instead (built by grade.sh: the kernel cannot read the key), so its plot scores.
    "two_level_deadlock": {**FULL, "two_level_correct": 0.2},
}


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="Open MPI or SimGrid SMPI not installed",
)
def test_grade_four_submissions(tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_LAB3_GRID", "quick")
    course = Course(tmp_path)
    solved = {f: SOL / "c_solutions" / f for f in FILES}
    course.submit("solution", "lab3", solved_notebook("lab3"), solved)
    course.submit("untouched", "lab3", released_notebook("lab3"), {f: SOL / f for f in FILES})
    course.submit_lms_zip(
        "wrong_reduce_scatter",
        "lab3",
        solved_notebook("lab3"),
        {**solved, "reduce_scatter.c": wrong_block(tmp_path / "wrong_reduce_scatter.c")},
    )
    course.submit(
        "two_level_deadlock",
        "lab3",
        solved_notebook("lab3"),
        {**solved, "allreduce_two_level.c": DATA / "allreduce_two_level_deadlock.c"},
    )
    table, elapsed = course.grade("lab3", cell_timeout=600, run_timeout=20)
    assert_scores(table, EXPECTED, course, "lab3")
    collected = course.root / "submitted" / "wrong_reduce_scatter" / "lab3"
    assert sorted(p.name for p in collected.iterdir()) == sorted(["lab3.ipynb", "timestamp.txt", *FILES])
    assert table.loc["solution", "max"] == 13 + 8  # 13 autograded, 8 by hand
    wrong = html.unescape(course.feedback("wrong_reduce_scatter", "lab3"))
    assert (
        "Open MPI, P = 3, int (count=1), double (count=1), in-place (count=1): rank 1: recvbuf[0] is" in wrong
    )
    # halves of 3 and 2 ranks: the sub-communicator fails too; 39 failed cases: past 12 lines, a count
    assert "Open MPI, P = 5, sub-communicator (count=1): rank 1 of its half (world rank 2)" in wrong
    assert "more lines of failed cases" in wrong
    dead = html.unescape(course.feedback("two_level_deadlock", "lab3"))
    assert (
        "Open MPI, P = 2, int (count=1), double (count=1): no result after 7 s — every rank is in MPI_Recv"
        in dead
    )
    assert "the simulator found every rank waiting for a message nobody sends" in dead
    assert "the study's correctness check failed at P = 20" in dead
    assert "it runs on the kit's compiled allreduce_two_level (lab3, no source) instead" in dead
    # the committed student version is what nbgrader releases from the source
    released = json.loads((tmp_path / "release" / "lab3" / "lab3.ipynb").read_text())
    assert released == released_notebook("lab3")
    for f in FILES:
        assert (tmp_path / "release" / "lab3" / f).read_text() == (ROOT / "labs" / "lab3" / f).read_text()
