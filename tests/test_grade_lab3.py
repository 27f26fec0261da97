"""End to end: release lab 3, make four submissions, run scripts/grade.sh, check every score.

Real nbgrader, real Open MPI, real SMPI. The autograder runs the study on the ``quick`` grid
(MPILAB_LAB3_GRID=quick, as the notebook says); per-run limit 6 s. The wrong reduce-scatter
arrives as an LMS download (Blackboard's file names, underscores in the student id and in the C
files' names) that grade.sh collects with zip_collect.
"""

import json
import shutil

import pytest
from course import ROOT, Course, assert_scores, released_notebook, solved_notebook
from test_grading_lab3 import wrong_block

DATA = ROOT / "tests" / "data" / "grading"
SOL = ROOT / "solutions" / "lab3"
FILES = ("reduce_scatter.c", "allreduce_rabenseifner.c", "allreduce_two_level.c")

#: Autograded points per cell of lab 3 (the written answers are graded by hand: 0 here).
FULL = {"reduce_scatter_correct": 3, "rabenseifner_correct": 3, "cost_rabenseifner": 2,
        "two_level_correct": 3, "study_plot_check": 2,
        "nonpof2": 0, "study_discussion": 0, "noise_discussion": 0}
ZERO = dict.fromkeys(FULL, 0)
EXPECTED = {
    "solution": FULL,
    "untouched": ZERO,
    "wrong_reduce_scatter": {**FULL, "reduce_scatter_correct": 0},
    # the study refuses to time a two-level allreduce that fails its check: no plot either
    "two_level_deadlock": {**FULL, "two_level_correct": 0, "study_plot_check": 0},
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
                    reason="Open MPI or SimGrid SMPI not installed")
def test_grade_four_submissions(tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_LAB3_GRID", "quick")
    course = Course(tmp_path)
    solved = {f: SOL / "c_solutions" / f for f in FILES}
    course.submit("solution", "lab3", solved_notebook("lab3"), solved)
    course.submit("untouched", "lab3", released_notebook("lab3"), {f: SOL / f for f in FILES})
    course.submit_lms_zip("wrong_reduce_scatter", "lab3", solved_notebook("lab3"),
                          {**solved, "reduce_scatter.c": wrong_block(tmp_path / "wrong_reduce_scatter.c")})
    course.submit("two_level_deadlock", "lab3", solved_notebook("lab3"),
                  {**solved, "allreduce_two_level.c": DATA / "allreduce_two_level_deadlock.c"})
    table, elapsed = course.grade("lab3", cell_timeout=240, run_timeout=6)
    assert_scores(table, EXPECTED)
    collected = course.root / "submitted" / "wrong_reduce_scatter" / "lab3"
    assert sorted(p.name for p in collected.iterdir()) == sorted(["lab3.ipynb", "timestamp.txt", *FILES])
    assert table.loc["solution", "max"] == 13 + 8   # 13 autograded, 8 by hand
    wrong = course.feedback("wrong_reduce_scatter", "lab3")
    assert "reduce-scatter with P = 3: int, count=1: rank 1: recvbuf[0] is" in wrong
    dead = course.feedback("two_level_deadlock", "lab3")
    assert "two-level allreduce with P = 2: timed out after 6 s" in dead
    assert "the study&#39;s correctness check failed at P = 20" in dead or \
        "the study's correctness check failed at P = 20" in dead
    # the committed student version is what nbgrader releases from the source
    released = json.loads((tmp_path / "release" / "lab3" / "lab3.ipynb").read_text())
    assert released == released_notebook("lab3")
    for f in FILES:
        assert (tmp_path / "release" / "lab3" / f).read_text() == (ROOT / "labs" / "lab3" / f).read_text()
