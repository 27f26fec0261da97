"""End to end: release lab 2, make seven submissions, run scripts/grade.sh, check every score.

Real nbgrader, real Open MPI. Per-run limit 10 s and per-cell limit 60 s keep the batch short.
"""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
SOL = ROOT / "solutions" / "lab2"

#: Autograded points per cell of lab 2 (schedules and discussion are graded by hand: 0 here).
FULL = {"cost_pairwise": 1, "cost_ring": 1, "cost_bruck": 2, "ring_correct": 3, "bruck_correct": 3,
        "plot_check": 2, "schedules": 0, "discussion": 0}
ZERO = dict.fromkeys(FULL, 0)
EXPECTED = {
    "solution": FULL,
    "untouched": ZERO,
    "wrong_cost": {**FULL, "cost_ring": 0},
    "ring_deadlock": {**FULL, "ring_correct": 0},
    "bruck_segfault": {**FULL, "bruck_correct": 0},
    "wrong_plot": {**FULL, "plot_check": 0},
    "loops_forever": {**FULL, "cost_pairwise": 0, "cost_ring": 0, "cost_bruck": 0},
}


def _strip_fences(src):
    return re.sub(r"^\s*### (BEGIN|END) SOLUTION\n?", "", src, flags=re.M)


def _solved_notebook(edit=None):
    """The released notebook with the source's solutions pasted in (as a student would)."""
    release = json.loads((ROOT / "labs" / "lab2" / "lab2.ipynb").read_text())
    source = {c["metadata"]["nbgrader"]["grade_id"]: c for c in json.loads((SOL / "lab2.ipynb").read_text())["cells"]}
    for cell in release["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            cell["source"] = _strip_fences("".join(source[meta["grade_id"]]["source"]))
            if edit:
                cell["source"] = edit(meta["grade_id"], cell["source"])
    return release


def _submit(course, student, notebook, ring, bruck):
    d = course / "submitted" / student / "lab2"
    d.mkdir(parents=True)
    (d / "lab2.ipynb").write_text(json.dumps(notebook))
    shutil.copy(ring, d / "ring.c")
    shutil.copy(bruck, d / "bruck.c")


def _edit_cost(gid, src):
    return src.replace("cost_ring = (p - 1) * alpha + (p - 1) * n * beta", "cost_ring = p * (alpha + n * beta)") \
        if gid == "costs" else src


def _edit_plot(gid, src):
    if gid != "plot":
        return src
    src = src.replace('ax.set_xscale("log")\n', "").replace('ax.set_yscale("log")\n', "")
    return src.replace("for name, sub in at4.groupby(\"algorithm\"):\n",
                       "for name, sub in at4.groupby(\"algorithm\"):\n    if name == \"bruck\":\n        continue\n")


def _edit_loop(gid, src):
    return "while True:\n    pass\n" + src if gid == "costs" else src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpicc.openmpi") is None, reason="Open MPI not installed")
def test_grade_seven_submissions(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "grader" / "nbgrader_config.py", course)
    # the config's relative source/release dirs point at the repo's solutions/ and a private release
    cfg = (course / "nbgrader_config.py").read_text()
    cfg = cfg.replace('"../solutions"', repr(str(ROOT / "solutions"))).replace('"../labs"', repr(str(tmp_path / "release")))
    (course / "nbgrader_config.py").write_text(cfg)
    c_ring, c_bruck = SOL / "c_solutions" / "ring.c", SOL / "c_solutions" / "bruck.c"
    _submit(course, "solution", _solved_notebook(), c_ring, c_bruck)
    _submit(course, "untouched", json.loads((ROOT / "labs" / "lab2" / "lab2.ipynb").read_text()),
            SOL / "ring.c", SOL / "bruck.c")
    _submit(course, "wrong_cost", _solved_notebook(_edit_cost), c_ring, c_bruck)
    _submit(course, "ring_deadlock", _solved_notebook(), DATA / "ring_deadlock.c", c_bruck)
    _submit(course, "bruck_segfault", _solved_notebook(), c_ring, DATA / "bruck_segfault.c")
    _submit(course, "wrong_plot", _solved_notebook(_edit_plot), c_ring, c_bruck)
    _submit(course, "loops_forever", _solved_notebook(_edit_loop), c_ring, c_bruck)
    env = dict(os.environ, COURSE=str(course), MPILAB_CELL_TIMEOUT="60", MPILAB_RUN_TIMEOUT="10")
    start = time.monotonic()
    proc = subprocess.run([str(ROOT / "scripts" / "grade.sh"), "lab2"], env=env, capture_output=True,
                          text=True, timeout=1200)
    elapsed = time.monotonic() - start
    (ROOT / "test-output").mkdir(exist_ok=True)
    (ROOT / "test-output" / "grade_e2e.txt").write_text(proc.stdout + proc.stderr + f"\nelapsed {elapsed:.0f} s\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mpilab.grading import score_table
    table = score_table(course, "lab2")
    for student, want in EXPECTED.items():
        got = {k: float(table.loc[student, k]) for k in want}
        assert got == want, f"{student}: {got} != {want}"
    assert (course / "grades-lab2.csv").exists()
    assert (course / "feedback" / "ring_deadlock" / "lab2" / "lab2.html").exists()
    feedback = (course / "feedback" / "ring_deadlock" / "lab2" / "lab2.html").read_text()
    assert "a deadlock? check the order of sends and receives" in feedback
    assert elapsed < 900, f"the batch took {elapsed:.0f} s"
