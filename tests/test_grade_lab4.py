"""End to end: release lab 4, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, real Open MPI (ping-pong, traced ring) and SMPI (traces, sweep). The wrong
submission has a linear broadcast that forgets the last rank, and model options that pass the
visible check but not the hidden one (eager below 64 KiB is not SMPI's rule).
"""

import shutil

import pytest
from course import ROOT, Course, assert_scores, released_notebook, solved_notebook

#: Autograded points per cell of lab 4 (the questions in text are graded by hand: 0 here).
FULL = {"linear_bcast_check": 2, "rank0_check": 1, "model_check": 2, "errors_check": 1,
        "calibrate_check": 2, "real_run_answer": 0, "overlap_answer": 0, "errors_answer": 0,
        "calibration_answer": 0}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    "wrong": {**FULL, "linear_bcast_check": 0, "model_check": 0},
}


def _edit_wrong(gid, src):
    if gid == "linear_bcast":
        assert "for dst in range(p):" in src
        return src.replace("for dst in range(p):", "for dst in range(p - 1):")
    if gid == "model":
        assert "eager_bytes=65536" in src
        return src.replace("eager_bytes=65536", "eager_bytes=40000")
    return src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
                    reason="needs Open MPI and SimGrid SMPI")
def test_grade_lab4(tmp_path, built_flavour):
    built_flavour("openmpi")
    built_flavour("smpi")
    course = Course(tmp_path)
    course.submit("solution", "lab4", solved_notebook("lab4"))
    course.submit("untouched", "lab4", released_notebook("lab4"))
    course.submit("wrong", "lab4", solved_notebook("lab4", _edit_wrong))
    table, elapsed = course.grade("lab4")
    assert_scores(table, EXPECTED)
    feedback = course.feedback("wrong", "lab4")
    assert "never receive the 1000-byte buffer" in feedback or "deadlocks" in feedback
    times = (course.root / "autograde-times-lab4.csv").read_text()
    (ROOT / "test-output" / "lab4-autograde-times.csv").write_text(times)
