"""nbgrader's autograde step that puts trusted verdicts in place of the notebook's own outputs.

nbgrader scores a test cell by its outputs: an error gives 0, a number printed as the cell's
result gives partial credit, anything else full marks. Those outputs come from the student's
kernel, which the student's code controls. :class:`TrustedVerdicts` runs after the notebook
(grader/nbgrader_config.py puts it before SaveAutoGrades): it reads what each test cell handed in
(:func:`mpilab.grade.answers.collect`), asks the trusted grader (:mod:`mpilab.grade.judge`, a
fresh process) for the verdicts, and replaces every test cell's outputs with its verdict: the
feedback text, then the score as nbgrader reads it. What the notebook printed in a test cell is
dropped, so text that imitates a pass changes nothing.

The judge runs confined where the machine allows it (:func:`mpilab.grade.sandbox.isolation`), as
the sandbox user in namespaces of its own (:func:`judge_reads`): it reads the kit and the answer
key, and copies of the submission and of the notebook's folder; the course (the gradebook, the
other students, the submitted originals) does not exist for it, and only this process, its
trusted parent, turns its verdicts into scores. The student's C it builds and runs is confined
again inside it, in runs that do not see the key.
"""

import json
import os
import subprocess
import sys
import tempfile

from nbformat.v4 import new_output
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Enum, Float

from mpilab.core import key, paths
from mpilab.grade import answers, sandbox, sandbox_init
from mpilab.grade.cases import Case, CellVerdict
from mpilab.grade.outcome import Limits

#: Bytes of the confined judge's standard output kept: its verdicts, HTML diagrams included.
JUDGE_OUTPUT_CAP = 256 << 20


def test_cells(nb):
    """The graded code cells that are not answers (nbgrader's autograder tests), by grade id."""
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            out[meta["grade_id"]] = cell
    return out


def verdict_outputs(verdict, handed):
    """The outputs nbgrader will score: the verdict's text, then its score as nbgrader reads it."""
    text = verdict.text() + ("" if handed is None else f"\n(handed in: {', '.join(handed) or 'your files'})")
    if verdict.score <= 0:
        first, *rest = text.splitlines()
        return [new_output("error", ename="NotPassed", evalue=first, traceback=[first, *rest])] + (
            [_html_output(verdict)] if verdict.html else []
        )
    outputs = [new_output("stream", name="stdout", text=text + "\n")]
    if verdict.html:
        outputs.append(_html_output(verdict))
    if verdict.score < verdict.points:
        outputs.append(
            new_output("execute_result", data={"text/plain": f"{verdict.score:g}"}, execution_count=None)
        )
    return outputs


def _html_output(verdict):
    """The verdict's HTML feedback (diagrams included) as a display output: nbgrader scores a
    cell by its error and execute_result outputs only, so this one changes no score."""
    return new_output(
        "display_data",
        data={"text/html": verdict.html, "text/plain": verdict.explanation or "(see the HTML feedback)"},
    )


class TrustedVerdicts(NbGraderPreprocessor):
    """Score every test cell from the trusted grader's verdict (see the module's docstring)."""

    #: What the last judge said of itself (:func:`mpilab.grade.judge.whereabouts`).
    whereabouts = {}

    judge_timeout = Float(
        float(os.environ.get("MPILAB_JUDGE_TIMEOUT", "1800")),
        help="Wall-time limit of the trusted grader for one notebook, seconds.",
    ).tag(config=True)

    without_rubric = Enum(
        ["zero", "outputs"],
        default_value="zero",
        help="An assignment without a rubric in the answer key: 'zero' gives its test "
        "cells no point (the default: the notebook's outputs are the student's to forge), "
        "'outputs' scores them by the notebook's own outputs (only for trusted notebooks, e.g. "
        "an instructor's own exercise)",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        cells = test_cells(nb)
        if not cells:
            return nb, resources
        info = resources["nbgrader"]
        if key.module(f"rubrics.{info['assignment']}") is None:
            if self.without_rubric == "outputs":
                self.log.warning(
                    "no rubric for %s in the answer key: the notebook's own outputs "
                    "are scored (TrustedVerdicts.without_rubric = 'outputs')",
                    info["assignment"],
                )
                return nb, resources
            why = (
                f"no rubric for {info['assignment']} in the answer key (solutions/mpilab_key/"
                "rubrics): nothing here can be judged, so no point is given; tell your instructor"
            )
            self.log.error("%s", why)
            for gid, cell in cells.items():
                v = CellVerdict(
                    gid, float(cell.metadata.nbgrader.get("points", 0)), [Case("the grader", False, why)]
                )
                cell.outputs = verdict_outputs(v, None)
            return nb, resources
        coursedir = CourseDirectory(config=self.config)
        submission = coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])
        workdir = resources.get("metadata", {}).get("path") or submission
        handed = {gid: answers.collect(cell) for gid, cell in cells.items()}
        request = {
            "lab": info["assignment"],
            "submission": os.path.abspath(submission),
            "workdir": os.path.abspath(workdir),
            "cells": {
                gid: {"points": float(cell.metadata.nbgrader.get("points", 0)), "answers": handed[gid]}
                for gid, cell in cells.items()
            },
        }
        verdicts = self.judge(request)
        for gid, cell in cells.items():
            v = verdicts.get(gid) or CellVerdict(
                gid,
                float(cell.metadata.nbgrader.get("points", 0)),
                [Case("the grader", False, "the grader gave no verdict for this cell; tell your instructor")],
            )
            cell.outputs = verdict_outputs(v, None if handed[gid] is None else list(handed[gid]))
            self.log.info("%s: %g / %g", gid, v.score, v.points)
        return nb, resources

    def judge(self, request):
        """Run ``python -I -m mpilab.grade.judge`` on ``request``, confined where possible;
        return ``{grade_id: CellVerdict}``."""
        confined, note = sandbox.isolation()
        if confined:
            return self._judge_confined(request, note)
        self.log.warning("the trusted grader runs unconfined: %s", note)
        with tempfile.TemporaryDirectory(prefix="mpilab-judge-") as tmp:
            try:
                proc = subprocess.run(
                    [sys.executable, "-I", "-m", "mpilab.grade.judge"],
                    input=json.dumps(request),
                    capture_output=True,
                    text=True,
                    cwd=tmp,
                    timeout=self.judge_timeout,
                )
            except subprocess.TimeoutExpired:
                return self._verdicts(request, "", "", None, "")
        return self._verdicts(request, proc.stdout, proc.stderr, proc.returncode, "")

    def _judge_confined(self, request, note):
        """The judge in a confined run (the module's description) on copies of its inputs."""
        with tempfile.TemporaryDirectory(prefix="mpilab-judge-") as tmp:
            mine = dict(request)
            for name in ("submission", "workdir"):
                copy = os.path.join(tmp, name)
                os.mkdir(copy)
                if os.path.isdir(request[name]):
                    sandbox_init.copy_tree(request[name], copy, plain=True)
                mine[name] = copy
            with open(os.path.join(tmp, "request.json"), "w") as f:
                json.dump(mine, f)
            self.log.info("trusted grader: confined as %s (%s)", sandbox.sandbox_user()[0], note)
            res = sandbox.run(
                [sys.executable, "-I", "-m", "mpilab.grade.judge", "request.json"],
                cwd=tmp,
                timeout=self.judge_timeout,
                memory_mb=0,
                output_cap=JUDGE_OUTPUT_CAP,
                env={"HOME": "/tmp", "MPLCONFIGDIR": "/tmp/.matplotlib"},
                read=judge_reads(request["lab"]),
                limits=Limits.from_env("JUDGE"),
            )
        return self._verdicts(
            request, res.stdout, res.stderr, None if res.timed_out else res.returncode, res.limit
        )

    def _verdicts(self, request, stdout, stderr, returncode, limit):
        """``{grade_id: CellVerdict}`` from what the judge printed (``returncode`` None: it ran
        past its limit; ``limit``: the confinement limit it hit, if any); on a failure every cell
        says why."""
        if stderr.strip():
            self.log.warning("trusted grader:\n%s", stderr[-4000:])
        if returncode is None:
            self.log.error("the trusted grader ran past %s s", self.judge_timeout)
            return self._failed(request, f"the grader ran past its {self.judge_timeout:g} s limit")
        if returncode != 0:
            why = limit or stderr.strip()[-300:]
            self.log.error("the trusted grader failed (exit %s): %s", returncode, why)
            return self._failed(request, f"the grader failed (exit {returncode}): {why}")
        try:
            data = json.loads(stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return self._failed(request, "the grader's answer could not be read")
        self.whereabouts = data.get("judge", {})
        self.log.info(
            "trusted grader: ran as uid %(uid)s; the course visible to it: %(course_visible)s",
            self.whereabouts,
        )
        return {gid: CellVerdict.from_dict(v) for gid, v in data["verdicts"].items()}

    @staticmethod
    def _failed(request, why):
        return {
            gid: CellVerdict(gid, cell["points"], [Case("the grader", False, why + "; tell your instructor")])
            for gid, cell in request["cells"].items()
        }


def judge_reads(lab):
    """What the confined judge reads besides the copies it is given: the kit and the answer key
    (:func:`mpilab.grade.sandbox.kit_paths` with ``key``), the key's C (every lab's
    ``c_solutions/`` and ``c_reference/`` beside the key's package), the lab's released files
    (``labs/<lab>``: a skeleton handed in untouched is not built) and the compiled references
    (:mod:`mpilab.grade.references`). Each is named on its own: the key's package would be
    covered by an empty directory below a folder named instead."""
    root = paths.repo_root()
    more = {str(root / "labs" / lab), str(root / "c_reference" / "compiled")}
    for package in sandbox.key_paths():
        folder = os.path.dirname(package)
        if os.path.basename(folder) == "solutions":
            more |= {os.path.join(folder, "c_reference")}
            more |= {
                os.path.join(folder, d, "c_solutions") for d in os.listdir(folder) if d.startswith("lab")
            }
    return sandbox.kit_paths(key=True) + sorted(p for p in more if os.path.isdir(p))
