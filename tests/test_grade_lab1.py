"""End to end: release lab 1, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, real SimGrid and Open MPI. The solution runs the whole notebook (its reduced
design). The untouched release fails fast: its sweeps are the student's to write. The wrong
submission fits two segments instead of four and ranks slowest first, on the solution's
measurements (``course.grade_three``).
"""

import shutil

import pytest
from course import assert_scores, grade_three

#: Autograded points per cell (the written answers are graded by hand: 0 here).
FULL = {"plot_bcast": 1, "plot_reduce": 1, "fits_check": 3, "ranking_check": 2,
        "size_choice": 0, "discussion": 0, "p2p_discussion": 0}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    "wrong_fits_ranking": {**FULL, "fits_check": 0, "ranking_check": 0},
}


def _wrong(gid, src):
    if gid == "fits":
        return src.replace("segments=4", "segments=2")
    if gid == "ranking_answer":
        return src.replace('g.sort_values("rank")', 'g.sort_values("rank", ascending=False)')
    return src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("mpirun.openmpi") is None,
                    reason="SimGrid and Open MPI are needed")
def test_grade_three_submissions(tmp_path, built_flavour):
    built_flavour("smpi")
    built_flavour("openmpi")
    course, table, elapsed = grade_three(tmp_path, "lab1", "wrong_fits_ranking", _wrong,
                                         ["lab1_results.csv"])
    assert_scores(table, EXPECTED)
    feedback = course.feedback("wrong_fits_ranking", "lab1")
    assert "2 segments in fits, expected 4" in feedback and "your ranking is" in feedback
