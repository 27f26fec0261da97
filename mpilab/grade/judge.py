"""The trusted grader: a fresh process that turns a submission's answers into verdicts.

:class:`mpilab.grade.verdicts.TrustedVerdicts` starts it once per notebook, after the notebook
has run, as ``python -I -m mpilab.grade.judge`` (isolated mode: neither the working directory
nor PYTHON* variables decide what it imports), and writes a request on its standard input::

    {"lab": "lab2", "submission": ".../submitted/alice/lab2", "workdir": ".../autograded/alice/lab2",
     "cells": {"cost_ring": {"points": 1, "answers": {...} or null}, ...}}

``answers`` are what the cell handed in (:mod:`mpilab.grade.answers`), still encoded. For each
cell the judge runs the verdict of the lab's rubric in the answer key (``mpilab_key.rubrics.<lab>``,
the instructor's side of the kit: expected answers, hidden cases), each under its own time
limit, and prints ``{"verdicts": {grade_id: CellVerdict as dict}}`` on standard output. Nothing
it runs comes from the notebook: answers are decoded as data, and student C code is built from
the submitted files and run in :mod:`mpilab.grade.sandbox`.
"""

import importlib
import json
import os
import signal
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from mpilab.core import paths
from mpilab.grade import answers as answers_mod
from mpilab.grade.cases import Case, CellVerdict

#: Wall-time limit of one cell's verdict, seconds (MPILAB_VERDICT_TIMEOUT overrides).
CELL_TIMEOUT = float(os.environ.get("MPILAB_VERDICT_TIMEOUT", "900"))
#: The answer key's package (the instructor's side: solutions/mpilab_key).
KEY_PACKAGE = "mpilab_key"


class KeyMissing(RuntimeError):
    """The answer key is not installed here: verdicts need the instructor's checkout."""


def load_rubric(lab):
    """The rubric of ``lab`` from the answer key: ``{grade_id: verdict}``.

    Raises
    ------
    KeyMissing
        When the key or the lab's rubric is not installed.
    """
    try:
        module = importlib.import_module(f"{KEY_PACKAGE}.rubrics.{lab}")
    except ModuleNotFoundError as exc:
        raise KeyMissing(
            f"no rubric for {lab!r} in the answer key ({exc.name} not found): grade "
            f"from the instructor's checkout, where solutions/ is installed "
            f"(scripts/setup.sh installs it into .venv)"
        ) from None
    return module.RUBRIC


@dataclass
class Context:
    """What a verdict may look at besides the answers."""

    lab: str
    submission: Path
    workdir: Path
    cells: dict = field(default_factory=dict)

    def submitted_file(self, name):
        """Path of a file as the student handed it in, or None if it is missing.

        Only plain files directly in the submission directory count (no paths, no links).
        """
        return _plain_file(self.submission, name)

    def written_file(self, name):
        """Path of a file the notebook wrote next to itself while it ran, or None."""
        return _plain_file(self.workdir, name)

    def answer(self, grade_id, name):
        """What another graded cell handed in under ``name``, decoded as data; None when that
        cell handed nothing in, a :class:`~mpilab.grade.answers.BadAnswer` when it cannot be read."""
        encoded = (self.cells.get(grade_id) or {}).get("answers") or {}
        if name not in encoded:
            return None
        return (decode_answers({name: encoded[name]}) or {}).get(name)

    def released_file(self, name):
        """Path of the kit's own copy of a file the lab hands out (a C skeleton), or None."""
        return _plain_file(paths.repo_root() / "labs" / self.lab, name)

    def untouched(self, name):
        """Whether the submitted ``name`` is byte for byte the file as released (a skeleton
        nobody wrote into: there is nothing to build or run)."""
        mine, released = self.submitted_file(name), self.released_file(name)
        return bool(mine and released and mine.read_bytes() == released.read_bytes())


def _plain_file(directory, name):
    if not name or os.path.basename(name) != name or name in (".", ".."):
        return None
    path = Path(directory) / name
    try:
        if path.is_symlink() or not path.is_file():
            return None
    except OSError:
        return None
    return path


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def decode_answers(encoded):
    """Decode a cell's answers; an answer that cannot be read back becomes its :class:`BadAnswer`."""
    if encoded is None:
        return None
    out = {}
    for name, data in encoded.items():
        try:
            out[name] = answers_mod.decode(data)
        except answers_mod.BadAnswer as exc:
            out[name] = exc
    return out


def judge_cell(verdict, grade_id, cell, ctx, timeout=CELL_TIMEOUT):
    """Run one verdict under a time limit; a crash of the verdict is reported, not raised."""
    points = float(cell.get("points", 0))
    answers = decode_answers(cell.get("answers"))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    explanation = ("", "")
    try:
        cases = list(verdict(answers, ctx))
        note = ""
        if answers is None and getattr(verdict, "needs", ()):
            note = (
                "This cell handed nothing in: it did not reach its last line (an error above "
                "it, or the notebook changed the kit's functions). Only your files were graded."
            )
        explanation = _explain(verdict, grade_id, answers, ctx, cases)
    except _Timeout:
        cases = [
            Case(
                "the grader's time limit",
                False,
                f"judging this cell took more than {timeout:g} s and was stopped",
            )
        ]
        note = ""
    except Exception as exc:  # a bug of the grader must not cost other cells their verdict
        print(f"judge: verdict of {grade_id} failed:\n{traceback.format_exc()}", file=sys.stderr)
        cases = [
            Case(
                "the grader",
                False,
                f"the grader failed on this cell ({type(exc).__name__}: {exc}); tell your instructor",
            )
        ]
        note = ""
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return CellVerdict(grade_id, points, cases, note, *explanation)


def _explain(verdict, grade_id, answers, ctx, cases):
    """The verdict's extra feedback ``(text, html)``; nothing when it fails or runs out of time
    (the cases and their score stand either way)."""
    explain = getattr(verdict, "explain", None)
    if explain is None:
        return "", ""
    try:
        out = explain(answers or {}, ctx, cases)
    except _Timeout:
        print(f"judge: the explanation of {grade_id} ran out of time; left out", file=sys.stderr)
        return "", ""
    except Exception:  # feedback is a bonus: its failure must not cost the verdict
        print(f"judge: the explanation of {grade_id} failed:\n{traceback.format_exc()}", file=sys.stderr)
        return "", ""
    return tuple(out) if out else ("", "")


def run(request):
    """Verdicts for one notebook's request (see the module's docstring)."""
    lab = request["lab"]
    rubric = load_rubric(lab)
    ctx = Context(lab, Path(request["submission"]), Path(request["workdir"]), request.get("cells", {}))
    out = {}
    for grade_id, cell in request.get("cells", {}).items():
        verdict = rubric.get(grade_id)
        if verdict is None:
            out[grade_id] = CellVerdict(
                grade_id,
                float(cell.get("points", 0)),
                [
                    Case(
                        "the answer key",
                        False,
                        f"the answer key has no verdict for cell {grade_id!r}; tell your instructor",
                    )
                ],
            )
            print(f"judge: no verdict for {lab} {grade_id}", file=sys.stderr)
            continue
        out[grade_id] = judge_cell(verdict, grade_id, cell, ctx)
    return {"verdicts": {k: v.to_dict() for k, v in out.items()}, "judge": whereabouts()}


def whereabouts():
    """Who the judge ran as and whether the course being graded (``$MPILAB_COURSE_ROOT``) existed
    for it: the grader's log says it, and the tests check the confinement with it."""
    course = os.environ.get("MPILAB_COURSE_ROOT", "")
    return {"uid": os.getuid(), "course_visible": bool(course) and os.path.exists(course)}


def main(argv=None):
    """``python -I -m mpilab.grade.judge [REQUEST.json]``: the request from that file (the
    confined judge's, :meth:`mpilab.grade.verdicts.TrustedVerdicts.judge`) or standard input."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        with open(argv[0]) as f:
            request = json.load(f)
    else:
        request = json.load(sys.stdin)
    try:
        result = run(request)
    except KeyMissing as exc:
        print(f"judge: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
