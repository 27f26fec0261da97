"""A throw-away nbgrader course for end-to-end grading tests of any lab.

Real nbgrader, run through ``scripts/grade.sh`` exactly as an instructor runs it; only the
course root, the source and the release directories are private to the test::

    course = Course(tmp_path)
    course.submit("solution", "lab2", solved_notebook("lab2"), {"ring.c": SOL / "ring.c"})
    table, elapsed = course.grade("lab2")
"""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def strip_fences(src):
    """A solution cell's source without its ``### BEGIN/END SOLUTION`` lines."""
    return re.sub(r"^\s*### (BEGIN|END) SOLUTION\n?", "", src, flags=re.M)


def released_notebook(lab):
    """The student version of ``labs/<lab>/<lab>.ipynb``, as a dict."""
    return json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())


def solved_notebook(lab, edit=None):
    """The released notebook with the source's solutions pasted in, as a student would.

    ``edit(grade_id, source) -> source`` may change any code answer cell (a wrong submission).
    Markdown answer cells stay as released (they are graded by hand).
    """
    release = released_notebook(lab)
    source = {
        c["metadata"]["nbgrader"]["grade_id"]: c
        for c in json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())["cells"]
        if "nbgrader" in c["metadata"]
    }
    for cell in release["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            cell["source"] = strip_fences("".join(source[meta["grade_id"]]["source"]))
            if edit:
                cell["source"] = edit(meta["grade_id"], cell["source"])
    return release


class Course:
    """An nbgrader course root under ``tmp_path`` with the repository's config and sources."""

    def __init__(self, tmp_path):
        self.tmp = Path(tmp_path)
        self.root = self.tmp / "course"
        self.root.mkdir()
        cfg = (ROOT / "grader" / "nbgrader_config.py").read_text()
        cfg = cfg.replace('"../solutions"', repr(str(ROOT / "solutions")))
        cfg = cfg.replace('"../labs"', repr(str(self.tmp / "release")))
        (self.root / "nbgrader_config.py").write_text(cfg)

    def submit(self, student, lab, notebook, files=None):
        """Put a submission in ``submitted/<student>/<lab>/``: the notebook and other files.

        ``files`` maps a name in the submission to a path to copy (e.g. the student's C file).
        """
        d = self.root / "submitted" / student / lab
        d.mkdir(parents=True)
        (d / f"{lab}.ipynb").write_text(json.dumps(notebook))
        for name, src in (files or {}).items():
            shutil.copy(src, d / name)
        return d

    def submit_lms_zip(self, student, lab, notebook=None, files=None, date="2026-11-20-10-00-00", extra=None):
        """Add a submission to an LMS download: ``downloaded/<lab>/archive/<lab>-gradebook.zip``,
        with Blackboard's names (``<lab>_<student>_attempt_<date>_<file>``), for zip_collect.

        ``notebook`` (a dict) becomes ``<lab>.ipynb``, ``files`` maps a submitted file name to a
        path to copy, ``extra`` maps a whole name in the zip to its text (e.g. Blackboard's
        per-attempt ``..._attempt_<date>.txt``).
        """
        import zipfile

        archive = self.root / "downloaded" / lab / "archive"
        archive.mkdir(parents=True, exist_ok=True)
        prefix = f"{lab}_{student}_attempt_{date}_"
        with zipfile.ZipFile(archive / f"{lab}-gradebook.zip", "a") as z:
            if notebook is not None:
                z.writestr(prefix + f"{lab}.ipynb", json.dumps(notebook))
            for name, src in (files or {}).items():
                z.write(src, prefix + name)
            for name, text in (extra or {}).items():
                z.writestr(name, text)

    def grade(self, lab, cell_timeout=60, run_timeout=10, timeout=3600, student_timeout=None, name=None):
        """Run ``scripts/grade.sh lab`` on the course; return (score table, seconds).

        ``student_timeout`` sets MPILAB_STUDENT_TIMEOUT (grade.sh's default otherwise). The output
        is saved as ``test-output/<name>.txt`` (default ``grade_<lab>``); a non-zero exit fails.
        """
        from mpilab.grade.gradebook import score_table

        env = dict(
            os.environ,
            COURSE=str(self.root),
            MPILAB_CELL_TIMEOUT=str(cell_timeout),
            MPILAB_RUN_TIMEOUT=str(run_timeout),
        )
        if student_timeout is not None:
            env["MPILAB_STUDENT_TIMEOUT"] = str(student_timeout)
        start = time.monotonic()
        proc = subprocess.run(
            [str(ROOT / "scripts" / "grade.sh"), lab],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        elapsed = time.monotonic() - start
        self.output = proc.stdout + proc.stderr
        (ROOT / "test-output").mkdir(exist_ok=True)
        (ROOT / "test-output" / f"{name or 'grade_' + lab}.txt").write_text(
            self.output + f"\nelapsed {elapsed:.0f} s\n"
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return score_table(self.root, lab), elapsed

    def autograde_runs(self, lab):
        """grade.sh's record of each student's autograde: {student: (seconds, status)}."""
        import csv

        with open(self.root / f"autograde-times-{lab}.csv") as f:
            return {r["student"]: (int(r["seconds"]), r["autograde"]) for r in csv.DictReader(f)}

    def feedback(self, student, lab):
        """The HTML feedback nbgrader generated for one student."""
        return (self.root / "feedback" / student / lab / f"{lab}.html").read_text()

    def verdict(self, student, lab, grade_id):
        """The trusted verdict's text in one test cell of a student's autograded notebook."""
        path = self.root / "autograded" / student / lab / f"{lab}.ipynb"
        if not path.exists():
            return f"(no autograded notebook {path})"
        for cell in json.loads(path.read_text())["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
                return "\n".join(
                    "".join(o.get("text", "")) or "\n".join(o.get("traceback", []))
                    for o in cell.get("outputs", [])
                )
        return f"(no cell {grade_id!r})"


def assert_scores(table, expected, course=None, lab=None):
    """Every student's score per graded cell is exactly as expected.

    With ``course`` and ``lab``, a mismatch quotes the verdicts of the cells that differ.
    """
    for student, want in expected.items():
        got = {k: float(table.loc[student, k]) for k in want}
        why = "".join(
            f"\n--- {student}, {k}:\n{course.verdict(student, lab, k)}"
            for k in want
            if course and got[k] != want[k]
        )
        assert got == want, f"{student}: {got} != {want}{why}"


def grade_three(tmp_path, lab, wrong, edit, measurements=(), cell_timeout=600):
    """Grade the solution, the untouched release and one wrong submission of ``lab``.

    The wrong submission is the solution with ``edit`` applied (see :func:`solved_notebook`);
    it hands in the solution's ``measurements`` next to its notebook, as a student hands in the
    results files their notebook wrote: symlinks that autograde resolves when it copies the
    submission, after the solution (graded first, in name order) has measured. Its sweeps then
    measure nothing and its checks recompute from those rows.

    Returns (course, score table, seconds).
    """
    import os

    course = Course(tmp_path)
    notebook = solved_notebook(lab, edit)
    assert notebook != solved_notebook(lab), f"the edits of {wrong!r} no longer apply to {lab}"
    assert wrong > "solution", "the wrong submission must be graded after the solution"
    course.submit("solution", lab, solved_notebook(lab))
    course.submit("untouched", lab, released_notebook(lab))
    d = course.submit(wrong, lab, notebook)
    for name in measurements:
        os.symlink(course.root / "autograded" / "solution" / lab / name, d / name)
    table, elapsed = course.grade(lab, cell_timeout=cell_timeout)
    return course, table, elapsed


def mutant(src, old, new, dest):
    """Write ``dest``: a copy of the solution file ``src`` with ``old`` replaced by ``new`` once.

    A wrong submission made from the real solution stays in step with it; the edit must apply
    exactly once, so a solution that changes under it fails loudly instead of testing nothing.
    """
    text = Path(src).read_text()
    assert text.count(old) == 1, f"{src}: the mutation's target occurs {text.count(old)} times"
    Path(dest).write_text(text.replace(old, new))
    return Path(dest)


def judged(lab, grade_id, points=1, workdir=".", **given):
    """The answer key's verdict on answers handed in as the notebook's ``check`` hands them in.

    ``given`` maps each answer name of the cell to its value in the kernel: the cell's
    ``prepare`` turns them into data, they go through JSON as the payload does, and the rubric
    judges them with ``workdir`` as the notebook's directory (files it wrote).
    """
    import importlib

    from mpilab.grade import answers, judge
    from mpilab.grade.labs import cells

    cell = cells(lab)[grade_id]
    values = [given[n] for n in cell.names]
    handed = cell.prepare(*values) if cell.prepare else values
    enc = {k: json.loads(json.dumps(answers.encode(v))) for k, v in zip(cell.names, handed)}
    rubric = importlib.import_module(f"mpilab_key.rubrics.{lab}")
    return judge.judge_cell(
        rubric.RUBRIC[grade_id],
        grade_id,
        {"points": points, "answers": enc},
        judge.Context(lab, Path(workdir), Path(workdir)),
    )
