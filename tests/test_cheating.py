"""Issue 14's cheating suite: every technique scores 0 on every lab, end to end with scripts/grade.sh.

Per lab, one course: a cheating submission per technique (tests/cheats.py; the C files are the
untouched skeletons, but for the C techniques of the labs whose C a harness calls) and, graded after them, a
victim: the solution as ``zz_solution`` for lab 2
(it keeps full marks), the untouched release as ``zz_untouched`` for the others (it keeps 0: what
the issue saw was a release that scored after a cheat wrote into the kit). The cheats score 0 on
every automatic cell, and the kit's files, the answer key, the course's config and the victim's
submitted files are exactly as they were. Every lab's solution gets full marks in its own
tests/test_grade_<lab>.py; executing each solution notebook again here would double the suite's time.
"""

import contextlib
import importlib.util
import os
import shutil
import subprocess

import pytest
from cheats import C_TECHNIQUES, TECHNIQUES, Technique, cheating_c_files, cheating_notebook, tree_digest
from course import ROOT, Course, released_notebook, solved_notebook

#: The lab whose victim is the solution (the others' victim is the untouched release).
SOLVED_VICTIM = "lab2"
LABS = sorted(p.name for p in (ROOT / "solutions").glob("lab*") if (p / f"{p.name}.ipynb").exists())
JUDGED = [lab for lab in LABS if importlib.util.find_spec(f"mpilab_key.rubrics.{lab}") is not None]

#: What the feedback of each technique says, where the kit can tell what happened.
SAYS = {
    "monkeypatch": "no answer named",
    "builtins": "mpilab grader: 0 of",
    "libraries": "mpilab grader: 0 of",
    "writes": "mpilab grader: 0 of",
    # lines printed and the program ended at once: refused before it runs
    "c_forged": "calls _exit (process control), which an algorithm file may not use",
    "c_library": "asks you to build",
    **{t: v.says for t, v in TECHNIQUES.items() if isinstance(v, Technique) and v.says},
}
#: The size of the tmpfs a course is graded on when a technique would fill a disk unchecked.
CAPPED_SIZE = "2g"


def _automatic(lab):
    import json

    nb = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())
    return {
        c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
        for c in nb["cells"]
        if c["cell_type"] == "code"
        and c["metadata"].get("nbgrader", {}).get("grade")
        and not c["metadata"]["nbgrader"].get("solution")
    }


def _pid_namespaces():
    return (
        shutil.which("unshare")
        and subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True
        ).returncode
        == 0
    )


def test_every_lab_is_judged_by_the_trusted_grader():
    assert JUDGED == LABS, f"labs without a rubric in the answer key: {sorted(set(LABS) - set(JUDGED))}"


@contextlib.contextmanager
def _capped(tmp_path):
    """A folder on a tmpfs of :data:`CAPPED_SIZE` (None when it cannot be mounted: not root)."""
    where = tmp_path / "capped"
    where.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={CAPPED_SIZE},mode=0755", "tmpfs", str(where)]
        ).returncode
    ):
        yield None
        return
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=False)


def _applies(t, lab, capped):
    v = TECHNIQUES[t]
    if t == "kill" and not _pid_namespaces():
        return False
    if isinstance(v, Technique):
        return v.applies(lab) and (capped is not None or not v.disk_capped)
    return True


#: Lab 2's C techniques graded end to end by ``make test``; the others run end to end in ``make
#: test-all`` (:class:`TestLab2OtherC`) and, in ``make test``, against the verdict itself with the
#: symbol check off (tests/test_casedata.py: the data they hand back earns nothing either).
C_IN_MAKE_TEST = ("c_forged", "c_library", "c_renamed", "c_writes")


def cheating_scores_nothing(tmp_path, lab, python=True, c_techniques=tuple(C_TECHNIQUES)):
    """Grade every technique's submission (``python``: the notebook techniques; ``c_techniques``:
    those in the C files) and then the victim on ``lab``; see the module's doc."""
    with _capped(tmp_path) as capped:
        _cheating_scores_nothing(capped or tmp_path, lab, capped, python, c_techniques)


def _cheating_scores_nothing(tmp_path, lab, capped, python, c_techniques):
    course = Course(tmp_path)
    skeletons = {p.name: p for p in sorted((ROOT / "labs" / lab).glob("*.c"))}
    solutions = {name: ROOT / "solutions" / lab / "c_solutions" / name for name in skeletons}
    techniques = [t for t in TECHNIQUES if python and _applies(t, lab, capped)]
    for t in techniques:
        folder = course.submit(f"cheat_{t}", lab, cheating_notebook(lab, t), skeletons)
        if isinstance(TECHNIQUES[t], Technique) and TECHNIQUES[t].files:
            TECHNIQUES[t].files(folder, lab)
    # the C techniques, where the student's C is a function a harness calls (not lab 0's hello)
    if set(skeletons) - {"hello.c"}:
        for t in c_techniques:
            files = {}
            for name, text in cheating_c_files(skeletons, t).items():
                files[name] = tmp_path / t / name
                files[name].parent.mkdir(exist_ok=True)
                files[name].write_text(text)
            course.submit(f"cheat_{t}", lab, cheating_notebook(lab, t), files)
            techniques.append(t)
    if lab == SOLVED_VICTIM:
        name, expected = "zz_solution", None
        victim = course.submit(name, lab, solved_notebook(lab), solutions)
    else:
        name, expected = "zz_untouched", 0.0
        victim = course.submit(name, lab, released_notebook(lab), skeletons)
    watched = ("mpilab", "c_reference", "solutions", "grader", "scripts")
    before, victim_before = tree_digest(*watched), {p.name: p.read_bytes() for p in victim.iterdir()}
    # a cheat that breaks its kernel (patched builtins) waits out its cell's limit; the solution's
    # longest cell (lab 2's benchmark sweep) takes about 8 s alone here
    table, _ = course.grade(lab, cell_timeout=120 if lab == SOLVED_VICTIM else 60, name=f"cheating_{lab}")
    auto = _automatic(lab)
    for t in techniques:
        got = {
            gid: float(table.loc[f"cheat_{t}", gid]) if f"cheat_{t}" in table.index else 0.0 for gid in auto
        }
        assert not any(got.values()), f"{t} scored on {lab}: {got}"
        if t in SAYS and (course.root / "feedback" / f"cheat_{t}").exists():
            assert SAYS[t] in course.feedback(f"cheat_{t}", lab), t
    want = {g: float(p) if expected is None else expected for g, p in auto.items()}
    assert {gid: float(table.loc[name, gid]) if name in table.index else 0.0 for gid in auto} == want
    after = tree_digest(*watched)
    changed = sorted(f for f in set(before) | set(after) if before.get(f) != after.get(f))
    assert not changed, f"a submission changed the kit's files: {changed[:20]}"
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == victim_before


@pytest.mark.slow
class Lab:
    """One class per lab: ``make test``'s ``pytest --dist loadscope`` hands each class (a lab, a
    few minutes) to whichever worker is free, and each other test file whole to one worker.

    ``make test`` runs lab 2 (every Python technique and :data:`C_IN_MAKE_TEST`, the solution as
    the victim); lab 2's other C techniques and the other labs (those techniques on their own
    rubrics) run in ``make test-all`` (marker ``extended``), to keep CI within its limit. Lab 0's
    %%px road stays in ``make test`` through test_cheat_payloads.py (every payload on lab 0's
    verdicts) and test_grade_lab0.py."""

    lab = None

    def test_cheating_scores_nothing(self, tmp_path):
        if self.lab not in JUDGED:
            pytest.fail(f"{self.lab} has no rubric in the answer key")
        cheating_scores_nothing(tmp_path, self.lab)


@pytest.mark.extended
class TestLab0(Lab):
    lab = "lab0"


@pytest.mark.extended
class TestLab1(Lab):
    lab = "lab1"


class TestLab2(Lab):
    """Every notebook technique and :data:`C_IN_MAKE_TEST`."""

    lab = "lab2"

    def test_cheating_scores_nothing(self, tmp_path):
        cheating_scores_nothing(tmp_path, self.lab, c_techniques=C_IN_MAKE_TEST)


@pytest.mark.slow
@pytest.mark.extended
class TestLab2OtherC:
    """Lab 2's other C techniques, end to end (``make test-all``)."""

    def test_cheating_scores_nothing(self, tmp_path):
        others = tuple(t for t in C_TECHNIQUES if t not in C_IN_MAKE_TEST)
        assert others, "every C technique is already in make test"
        cheating_scores_nothing(tmp_path, "lab2", python=False, c_techniques=others)


@pytest.mark.extended
class TestLab3(Lab):
    lab = "lab3"


@pytest.mark.extended
class TestLab4(Lab):
    lab = "lab4"


@pytest.mark.extended
class TestLab5(Lab):
    lab = "lab5"


@pytest.mark.extended
class TestLab6(Lab):
    lab = "lab6"


def test_every_lab_has_its_class():
    assert sorted(c.lab for c in Lab.__subclasses__()) == LABS
