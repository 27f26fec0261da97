"""End to end: release lab 5, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, SimGrid and Open MPI (the rules-file runs and the runs under load are real). The
solution runs the whole notebook; the untouched release fails fast where its answers are
missing. The wrong submission, on the solution's measurements (``course.grade_three``), builds
its decision table and correlations on the mean over ranks (``avg_us``) instead of the slowest
rank: those two checks fail; its rules file, written from its own table, still reads back right.
"""

import shutil

import pytest
from course import assert_scores, grade_three

FULL = {"decision_table": 3, "regret_check": 2, "rules_check": 2, "corr_check": 2,
        "regret_discussion": 0, "rules_discussion": 0, "load_discussion": 0}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    "wrong_metric": {**FULL, "decision_table": 0, "corr_check": 0},
}
MEASUREMENTS = ["lab5_results.csv", "lab5_real.csv"] + [
    f"lab5_load_{n}.csv" for n in ("quiet", "cpu", "memory", "one_cpu")]


def _wrong(gid, src):
    if gid == "table_answer":
        return src.replace("decision.decision_table(quiet)", 'decision.decision_table(quiet, value="avg_us")')
    if gid == "corr_answer":
        return src.replace('y="maxrank_avg_us")', 'y="avg_us")')
    return src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("mpirun.openmpi") is None,
                    reason="SimGrid and Open MPI are needed")
def test_grade_three_submissions(tmp_path, built_flavour):
    built_flavour("smpi")
    built_flavour("openmpi")
    course, table, elapsed = grade_three(tmp_path, "lab5", "wrong_metric", _wrong, MEASUREMENTS)
    assert_scores(table, EXPECTED)
    feedback = course.feedback("wrong_metric", "lab5")
    assert "of the decision table is" in feedback and "r = " in feedback
