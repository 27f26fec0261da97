"""End to end: release lab 4, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, real Open MPI (ping-pong, traced ring) and SMPI (traces, sweep); the trusted
grader traces the SMPI runs again itself. The wrong submission has a linear broadcast whose root
forgets the last rank, and model options that pass the visible check but not every hidden run
(eager below 4000 B, 4 kB read as decimal kilobytes, is not the platform's 4 KiB = 4096 B).
"""

import re
import shutil

import pytest
from course import ROOT, Course, assert_scores, released_notebook, solved_notebook

#: Autograded points per cell of lab 4 (the questions in text are graded by hand: 0 here).
FULL = {
    "linear_bcast_check": 2,
    "rank0_check": 1,
    "model_check": 2,
    "errors_check": 1,
    "calibrate_check": 2,
    "real_run_answer": 0,
    "overlap_answer": 0,
    "errors_answer": 0,
    "calibration_answer": 0,
}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    "wrong": {
        **FULL,
        # 11 schedule cases (5 visible, 6 hidden) + the cost's α and β terms: the root that
        # skips rank p - 1 is right only where it is rank p - 1 itself (hidden roots p - 1 at
        # p = 4, 7, 13), and the cost is right: 5 of 13, 2 x 5 / 13 = 0.77
        "linear_bcast_check": 0.77,
        # 4 visible and 5 hidden SMPI runs; only gather_bcast at P = 6 with 4095 B per rank
        # sends messages between 4000 B and the platform's limit of 4096 B (eager on THIN,
        # rendezvous with 4000): 8 of 9, 2 x 8 / 9 = 1.78
        "model_check": 1.78,
    },
}


def _edit_wrong(gid, src):
    if gid == "linear_bcast":
        assert "for dst in range(p):" in src
        return src.replace("for dst in range(p):", "for dst in range(p - 1):")
    if gid == "model":
        assert "eager_bytes=4096" in src
        return src.replace("eager_bytes=4096", "eager_bytes=4000")
    return src


@pytest.mark.extended  # make test-all: its rubric is tested alone in test_rubric_lab4.py
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="needs Open MPI and SimGrid SMPI",
)
def test_grade_lab4(tmp_path, built_flavour):
    built_flavour("openmpi")
    built_flavour("smpi")
    course = Course(tmp_path)
    course.submit("solution", "lab4", solved_notebook("lab4"))
    course.submit("untouched", "lab4", released_notebook("lab4"))
    course.submit("wrong", "lab4", solved_notebook("lab4", _edit_wrong))
    table, elapsed = course.grade("lab4", cell_timeout=600)
    assert_scores(table, EXPECTED, course, "lab4")
    assert {status for _, status in course.autograde_runs("lab4").values()} == {"ok"}
    feedback = course.feedback("wrong", "lab4")
    assert "p = 5, root = 2: the schedule deadlocks: rank 4 in Recv" in feedback
    # which rank the model misses first follows the platform's routes (THIN as the sim branch left it)
    assert re.search(
        r"hidden: gather_bcast, P = 6, 4095 B: the model ends rank \d+ at [\d.]+ us, SMPI at", feedback
    )
    times = (course.root / "autograde-times-lab4.csv").read_text()
    (ROOT / "test-output" / "lab4-autograde-times.csv").write_text(times)
