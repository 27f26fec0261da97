"""End to end: release lab 5, grade three submissions with scripts/grade.sh, check every score.

Real nbgrader, SimGrid and Open MPI (the rules-file runs and the runs under load are real). The
solution runs the whole notebook; the untouched release fails fast where its answers are
missing. The wrong submission, on the solution's measurements (``course.grade_three``), picks
its winners and computes its correlations on the mean over ranks (``avg_us``) instead of the
slowest rank; its rules file, written from its own table, still reads back right. The trusted
grader scores each process count of the table and each algorithm's correlations on its own.
"""

import re
import shutil

import pytest
from course import assert_scores, grade_three

FULL = {
    "decision_table": 3,
    "regret_check": 2,
    "rules_check": 2,
    "corr_check": 2,
    "regret_discussion": 0,
    "rules_discussion": 0,
    "load_discussion": 0,
}
EXPECTED = {
    "solution": FULL,
    "untouched": dict.fromkeys(FULL, 0),
    # decision table: one case per P (2, 4, 8, 16, 32, 48) and one for the merging; on the
    # calibrated THIN (per-message overheads, Open MPI's barrier) the mean over ranks picks the
    # slowest rank's winner at every size at four of the six P, and its own table is merged
    # right: 5 of 7, 3 x 5 / 7 = 2.14 (it was 2 of 7 on the uncalibrated platform).
    # correlations over the load study's 40 runs: one case per algorithm (binomial, pipeline)
    # and coefficient (Pearson, Spearman); against avg_us every r and rho moves by more than
    # 0.001 at some size: 0 of 4.
    "wrong_metric": {**FULL, "decision_table": 2.14, "corr_check": 0},
}
MEASUREMENTS = ["lab5_results.csv", "lab5_real.csv", "lab5_study-probe8.csv"] + [
    f"lab5_load_{n}.csv" for n in ("quiet", "cpu", "memory", "one_cpu")
]


def _wrong(gid, src):
    if gid == "table_answer":
        assert 'def fastest(df, value="maxrank_avg_us"):' in src
        return src.replace('def fastest(df, value="maxrank_avg_us"):', 'def fastest(df, value="avg_us"):')
    if gid == "corr_answer":
        assert src.count('g["probe_us"].corr(g["maxrank_avg_us"]') == 2  # Pearson's r and Spearman's rho
        return src.replace('g["probe_us"].corr(g["maxrank_avg_us"]', 'g["probe_us"].corr(g["avg_us"]')
    return src


@pytest.mark.extended  # make test-all: its rubric is tested alone in test_rubric_lab5.py
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("mpirun.openmpi") is None,
    reason="SimGrid and Open MPI are needed",
)
def test_grade_three_submissions(tmp_path, built_flavour):
    built_flavour("smpi")
    built_flavour("openmpi")
    course, table, elapsed = grade_three(tmp_path, "lab5", "wrong_metric", _wrong, MEASUREMENTS)
    assert_scores(table, EXPECTED, course, "lab5")
    assert {status for _, status in course.autograde_runs("lab5").values()} == {"ok"}
    feedback = course.feedback("wrong_metric", "lab5")
    assert re.search(
        r"P = \d+: the fastest algorithm at every size: \d+ B: \w+ \(fastest: \w+", feedback
    )  # a failed P named
    assert "binomial: Pearson's r at every size: 128 B: 0." in feedback and "Spearman's rho" in feedback
