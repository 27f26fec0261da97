"""End to end: release lab 1, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, real SimGrid and Open MPI. The solution runs the whole notebook (its reduced
design). The untouched release fails fast: its sweeps are the student's to write. The wrong
submission, on the solution's measurements (``course.grade_three``), cuts its segmented fits at
P = 8, 16 and 32 (powers of two, not where the hardware changes) and ranks the reduce algorithms
slowest first; the trusted grader scores each curve and each collective on its own.
"""

import shutil

import pytest
from course import assert_scores, grade_three

#: Autograded points per cell (the written answers are graded by hand: 0 here).
FULL = {
    "plot_bcast": 1,
    "plot_reduce": 1,
    "fits_check": 3,
    "ranking_check": 2,
    "size_choice": 0,
    "discussion": 0,
    "p2p_discussion": 0,
}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    # fits: one case per simulated curve at 1 KiB (5 bcast + 6 reduce algorithms, default
    # included). Cuts at 8, 16, 32 (powers of two, not where THIN's hardware changes) fit 4 of
    # the 11 as well as the report's cuts or the best fit (bcast basic_linear, chain and pipeline,
    # reduce binomial); the other 7 fall short, e.g. bcast binomial R² 0.972 against 0.987 (the
    # report's cuts) and 0.995 (the best four segments): 3 x 4 / 11 = 1.09.
    # ranking: one case per collective; bcast right, reduce backwards: 2 x 1 / 2 = 1.
    "wrong_fits_ranking": {**FULL, "fits_check": 1.09, "ranking_check": 1},
}


def _wrong(gid, src):
    if gid == "fits":
        assert "CUTS = (12, 24, 36)" in src
        return src.replace("CUTS = (12, 24, 36)", "CUTS = (8, 16, 32)")
    if gid == "ranking_answer":
        assert "wide.mean().sort_values()" in src
        return src.replace("wide.mean().sort_values()", 'wide.mean().sort_values(ascending=coll == "bcast")')
    return src


@pytest.mark.extended  # make test-all: its rubric is tested alone in test_rubric_lab1.py
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("mpirun.openmpi") is None,
    reason="SimGrid and Open MPI are needed",
)
def test_grade_three_submissions(tmp_path, built_flavour):
    built_flavour("smpi")
    built_flavour("openmpi")
    course, table, elapsed = grade_three(tmp_path, "lab1", "wrong_fits_ranking", _wrong, ["lab1_results.csv"])
    assert_scores(table, EXPECTED, course, "lab1")
    assert {status for _, status in course.autograde_runs("lab1").values()} == {"ok"}
    feedback = course.feedback("wrong_fits_ranking", "lab1")
    assert "your segments give R²" in feedback  # the failed fit is named
    assert "reduce: the ranking: your ranking is" in feedback
    untouched = course.feedback("untouched", "lab1")
    assert "no answer named" in untouched or "is not defined" in untouched
