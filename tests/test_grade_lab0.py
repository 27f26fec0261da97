"""End to end: release lab 0, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, Open MPI, SMPI and ipyparallel engines. The wrong submission's hello.c never asks
for the processor name, and it hands in the bandwidth in MB/s where GB/s is asked; it arrives
as an LMS download (a zip with Blackboard's file names) that grade.sh collects with zip_collect.
"""

import shutil

import pytest
from course import ROOT, Course, assert_scores, mutant, released_notebook, solved_notebook

SOL = ROOT / "solutions" / "lab0"
#: Autograded points per cell (the two written answers are graded by hand: 0 here).
FULL = {"hello_correct": 2, "px_allgather": 2, "pingpong_fit": 2, "order_answer": 0, "pingpong_answer": 0}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    "wrong": {**FULL, "hello_correct": 0, "pingpong_fit": 0},
}


def _edit(gid, src):
    if gid == "fit_answer":
        return src.replace("bandwidth_GBps = 1e-3 / beta_us_per_byte", "bandwidth_GBps = 1 / beta_us_per_byte")
    return src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
                    reason="needs Open MPI and SimGrid SMPI")
def test_grade_lab0(tmp_path, built_flavour):
    built_flavour("openmpi")
    built_flavour("smpi")
    course = Course(tmp_path)
    hello = SOL / "c_solutions" / "hello.c"
    no_host = mutant(hello, "MPI_Get_processor_name(host, &len);", "", tmp_path / "hello.c")
    course.submit("solution", "lab0", solved_notebook("lab0"), {"hello.c": hello})
    course.submit("untouched", "lab0", released_notebook("lab0"), {"hello.c": SOL / "hello.c"})
    course.submit_lms_zip("wrong", "lab0", solved_notebook("lab0", _edit), {"hello.c": no_host})
    table, elapsed = course.grade("lab0", cell_timeout=300)
    assert_scores(table, EXPECTED)
    feedback = course.feedback("wrong", "lab0")
    assert "did you call MPI_Get_processor_name?" in feedback and "divide by 1000 for GB/s" in feedback
    assert "NotImplementedError" in course.feedback("untouched", "lab0")
    assert elapsed < 600, f"the batch took {elapsed:.0f} s"
