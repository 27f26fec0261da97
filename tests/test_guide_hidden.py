"""The instructor's guide lists what the grader checks beyond the notebook for every graded
cell of every lab, C or not (hidden runs, cost points, re-simulated points, recomputed values)."""

import json
from pathlib import Path

import pytest

from mpilab_key import guide

ROOT = Path(__file__).resolve().parents[1]
LABS = [f"lab{i}" for i in range(7)]


def graded(lab):
    nb = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())
    return [
        c["metadata"]["nbgrader"]["grade_id"]
        for c in nb["cells"]
        if c["cell_type"] == "code"
        and c["metadata"].get("nbgrader", {}).get("grade")
        and not c["metadata"]["nbgrader"].get("solution")
    ]


@pytest.mark.parametrize("lab", LABS)
def test_every_graded_cell_says_what_the_grader_checks_beyond_the_notebook(lab):
    empty = [gid for gid in graded(lab) if not guide.hidden_cases(lab, gid).strip()]
    assert not empty, f"{lab}: the guide lists no hidden case for {empty}"


def test_c_and_other_cells_alike():
    assert "hidden" in guide.hidden_cases("lab2", "ring_correct") or "P =" in guide.hidden_cases(
        "lab2", "ring_correct"
    )
    assert "(p, n) = (1, 1)" in guide.hidden_cases("lab2", "cost_ring")
    assert "realisation" in guide.hidden_cases("lab5", "corr_check")
    assert "4095" in guide.hidden_cases("lab4", "model_check")
