"""Issue 14's cheating suite: every technique scores 0 on every lab, end to end with scripts/grade.sh.

Per lab, one course: a cheating submission per technique (tests/cheats.py; the C files are the
untouched skeletons) and, graded after them, the solution as ``zz_solution``. The cheats score 0
on every automatic cell, the solution keeps full marks, and the kit's files, the answer key, the
course's config and the solution's submitted files are exactly as they were.
"""
import importlib.util
import shutil
import subprocess

import pytest
from cheats import TECHNIQUES, cheating_notebook, tree_digest
from course import ROOT, Course, solved_notebook

LABS = sorted(p.name for p in (ROOT / "solutions").glob("lab*") if (p / f"{p.name}.ipynb").exists())
JUDGED = [lab for lab in LABS if importlib.util.find_spec(f"mpilab_key.rubrics.{lab}") is not None]

#: What the feedback of each technique says, where the kit can tell what happened.
SAYS = {
    "monkeypatch": "no answer named",
    "builtins": "mpilab grader: 0 of",
    "libraries": "mpilab grader: 0 of",
    "writes": "mpilab grader: 0 of",
}


def _automatic(lab):
    import json

    nb = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"] for c in nb["cells"]
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")}


def _pid_namespaces():
    return shutil.which("unshare") and subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode == 0


def test_every_lab_is_judged_by_the_trusted_grader():
    assert JUDGED == LABS, f"labs without a rubric in the answer key: {sorted(set(LABS) - set(JUDGED))}"


@pytest.mark.slow
@pytest.mark.parametrize("lab", JUDGED)
def test_cheating_scores_nothing(tmp_path, lab):
    course = Course(tmp_path)
    skeletons = {p.name: p for p in sorted((ROOT / "labs" / lab).glob("*.c"))}
    solutions = {name: ROOT / "solutions" / lab / "c_solutions" / name for name in skeletons}
    techniques = [t for t in TECHNIQUES if t != "kill" or _pid_namespaces()]
    for t in techniques:
        course.submit(f"cheat_{t}", lab, cheating_notebook(lab, t), skeletons)
    victim = course.submit("zz_solution", lab, solved_notebook(lab), solutions)
    watched = ("mpilab", "c_reference", "solutions", "grader", "scripts")
    before, victim_before = tree_digest(*watched), {p.name: p.read_bytes() for p in victim.iterdir()}
    table, _ = course.grade(lab, cell_timeout=300, name=f"cheating_{lab}")
    auto = _automatic(lab)
    for t in techniques:
        got = {gid: float(table.loc[f"cheat_{t}", gid]) if f"cheat_{t}" in table.index else 0.0 for gid in auto}
        assert not any(got.values()), f"{t} scored on {lab}: {got}"
        if t in SAYS and (course.root / "feedback" / f"cheat_{t}").exists():
            assert SAYS[t] in course.feedback(f"cheat_{t}", lab), t
    assert {gid: float(table.loc["zz_solution", gid]) for gid in auto} == {g: float(p) for g, p in auto.items()}
    assert tree_digest(*watched) == before, "a submission changed the kit's files"
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == victim_before
