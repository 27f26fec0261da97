"""End to end: release lab 6, make five submissions, run scripts/grade.sh, check every score.

Real nbgrader, real Open MPI and SMPI: the solution's notebook runs whole (the sweeps, the maps,
forced Open MPI broadcasts at P = 4, the overlap runs), and the grader builds and runs every
submitted broadcast with its hidden cases.
"""

import shutil

import pytest
from course import ROOT, Course, assert_scores, released_notebook, solved_notebook

DATA = ROOT / "tests" / "data" / "grading"
SOL = ROOT / "solutions" / "lab6"
ALGORITHMS = ("linear", "chain", "pipeline", "binomial", "scatter_allgather")

#: Autograded points per cell of lab 6 (the five discussions are graded by hand: 0 here).
FULL = {
    "cost_linear": 1,
    "cost_chain": 1,
    "cost_pipeline": 2,
    "cost_binomial": 1,
    "cost_scatter_allgather": 2,
    "linear_correct": 2,
    "chain_correct": 2,
    "pipeline_correct": 3,
    "binomial_correct": 3,
    "scatter_allgather_correct": 3,
    "best_seg_check": 2,
    "k_opt_check": 2,
    "prediction_check": 1,
    "schedules": 0,
    "seg_discussion": 0,
    "map_discussion": 0,
    "seed000": 0,
    "overlap_discussion": 0,
}
ZERO = dict.fromkeys(FULL, 0)
#: binomial_root0.c numbers the tree from rank 0: right in the int, char and double cases (root
#: 0), wrong in the root and sub-communicator ones. Runs: Open MPI P = 2 (4 kinds: the
#: sub-communicator is trivial at P = 2), P = 3, 5, SMPI 13, hidden Open MPI 4, 7, SMPI 29
#: (6 x 5 kinds) = 34 cases, 3 of each run pass = 21: 3 points x 21 / 34 = 1.85.
ROOT0 = 1.85
EXPECTED = {
    "solution": FULL,
    "untouched": ZERO,
    # cost_chain: the α term is right, the β term counts p hops (half of the cell);
    # k_opt: (p - 1) instead of (p - 2): its value is wrong (1 of 2 cases), the segment size it
    # gives on THIN at P = 32 is still near the simulated optimum (the other case)
    "wrong_answers": {**FULL, "cost_chain": 0.5, "k_opt_check": 1.0},
    "wrong_binomial": {**FULL, "binomial_correct": ROOT0},
}


def _edit_answers(gid, src):
    if gid == "costs":
        return src.replace(
            "cost_chain = (p - 1) * (alpha + n * beta)", "cost_chain = (p - 1) * alpha + p * n * beta"
        )
    if gid == "k_opt_answer":
        return src.replace(
            "k_opt = sympy.sqrt((p - 2) * n * beta / alpha)", "k_opt = sympy.sqrt((p - 1) * n * beta / alpha)"
        )
    return src


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc.openmpi") is None or shutil.which("smpicc") is None,
    reason="Open MPI or SimGrid not installed",
)
def test_grade_lab6_submissions(tmp_path):
    course = Course(tmp_path)
    solved = {f"{a}.c": SOL / "c_solutions" / f"{a}.c" for a in ALGORITHMS}
    course.submit("solution", "lab6", solved_notebook("lab6"), solved)
    course.submit(
        "untouched", "lab6", released_notebook("lab6"), {f"{a}.c": SOL / f"{a}.c" for a in ALGORITHMS}
    )
    wrong = solved_notebook("lab6", _edit_answers)
    assert wrong != solved_notebook("lab6"), "the edits of wrong_answers no longer apply to lab 6"
    course.submit("wrong_answers", "lab6", wrong, solved)
    course.submit(
        "wrong_binomial", "lab6", solved_notebook("lab6"), {**solved, "binomial.c": DATA / "binomial_root0.c"}
    )
    table, _ = course.grade("lab6", cell_timeout=600, run_timeout=30)
    assert_scores(table, EXPECTED, course, "lab6")
    assert {status for _, status in course.autograde_runs("lab6").values()} == {"ok"}
    assert table.loc["solution", "max"] == 25 + 11  # 25 autograded, 11 by hand
    root0 = course.feedback("wrong_binomial", "lab6")
    # the tree is rooted at rank 0 whatever the root: rank 0 never receives the root's data
    assert "Open MPI, P = 3, root: count=1 root=2: rank 0: nothing arrived (the buffer still holds" in root0
    assert (
        "hidden: SMPI on orfeo-thin, P = 29, mapping socket, root: count=1 root=28: rank 0: nothing arrived"
        in root0
    )
    answers = course.feedback("wrong_answers", "lab6")
    assert "its β term: bytes on the critical path" in answers
    assert "k_opt is the number of segments that minimises your pipeline's cost: at p = 3" in answers
