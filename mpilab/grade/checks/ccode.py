"""Checks of a student's C collective: built with a harness, run case by case.

The harnesses (``mpilab/data/grading/check_student.c`` for allgather, ``check_bcast.c`` for
lab 6's broadcasts) check every element of every case and print one line per case
(:func:`mpilab.grade.runner.run_cases`). Every case counts: a ring that fails only the ``MPI_IN_PLACE``
cases keeps the points of the others, and the
feedback names each failed case ("Open MPI, P = 5, in-place count=8: rank 3: block 2 ...").
"""

import dataclasses
import os
import shutil
import time

from mpilab.grade import diagnose, harness, runner
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict

ALLGATHER_KINDS = runner.ALLGATHER_KINDS


def allgather_cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT, progress=None):
    """Build a student's allgather with the harness and run every kind of case for each run.

    Parameters
    ----------
    c_file : path
        The student's file (``ring.c``, ``bruck.c``).
    algorithm : {"ring", "bruck"}
        Which skeleton it implements (:data:`mpilab.grade.harness.STUDENT_FUNCTIONS`).
    runs : sequence of mpilab.grade.runner.Run
    timeout : float
        Limit of one launch, seconds.
    progress : callable, optional
        Called with a line before and after each launch (see :func:`mpilab.grade.runner.run_cases`).

    Returns
    -------
    list of Case
        One failed case when the file does not compile.
    """
    name = os.path.basename(os.fspath(c_file))
    flavours = sorted({r.flavour for r in runs}, key=lambda f: f == "smpi")
    work = None
    try:
        for flavour in flavours:
            work = harness.build_allgather(os.fspath(c_file), algorithm, flavour, work=work)
    except harness.BuildError as exc:
        if work:
            shutil.rmtree(work, ignore_errors=True)
        return [Case(f"{name} compiles", False, str(exc), weight=_weight(runs))]
    try:
        return runner.run_cases(
            work, "check_student", runs, ALLGATHER_KINDS, timeout=timeout, progress=progress
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def saved_note(c_file, now=None):
    """The line a visible check prints first: which saved version of ``c_file`` it tests.

    The check reads the file on disk; an edit still open in JupyterLab's editor and not saved
    is not in it. The kernel cannot see the editor's buffer, so the check says when the file was
    last saved (and the kit's JupyterLab extension, labext/, warns on the page when a file of the
    lab has unsaved edits).
    """
    path = os.fspath(c_file)
    try:
        saved = os.stat(path).st_mtime
    except OSError:
        return f"{path}: no such file next to this notebook"
    ago = max(0, round((time.time() if now is None else now) - saved))
    when = time.strftime("%H:%M:%S" if ago < 86400 else "%Y-%m-%d %H:%M", time.localtime(saved))
    age = f"{ago} s" if ago < 120 else f"{ago // 60} min" if ago < 7200 else f"{ago // 3600} h"
    return (
        f"checking {path} as last saved at {when} ({age} ago); an edit made since and not "
        "saved (Ctrl+S in its editor) is not checked"
    )


def untouched_case(c_file, weight):
    """The one failed case of a C file handed in as released: nothing of it is built or run."""
    return Case(
        f"{c_file} holds your code",
        False,
        f"{c_file} is the skeleton as released, "
        "unchanged: write the algorithm in it, save it, then run the check",
        weight=weight,
    )


def _weight(runs):
    """The weight of all the cases of ``runs`` (what a file that does not build loses)."""
    return float(sum(len(r.kinds or ALLGATHER_KINDS) for r in runs))


#: Kinds that are trivially right with one process and no code at all (MPI_IN_PLACE leaves the
#: own block where it is): runs at P = 1 leave them out, so an empty skeleton scores nothing.
TRIVIAL_AT_ONE = ("in-place",)


def runs_at(flavour, counts, hidden=False):
    """Real runs at each process count; P = 1 without the kinds :data:`TRIVIAL_AT_ONE`."""
    one = tuple(k for k in ALLGATHER_KINDS if k not in TRIVIAL_AT_ONE)
    return tuple(runner.Run(flavour, p, hidden=hidden, kinds=one if p == 1 else None) for p in counts)


class AllgatherVerdict(Verdict):
    """The grader's verdict on a submitted allgather file: every case of every run."""

    def __init__(self, c_file, algorithm, runs, diagnose=True):
        self.c_file, self.algorithm, self.runs = c_file, algorithm, list(runs)
        self.diagnose = diagnose and os.environ.get("MPILAB_DIAGNOSE", "1") != "0"

    def cases(self, answers, ctx):
        path = ctx.submitted_file(self.c_file)
        if path is None:
            return [
                Case(
                    f"{self.c_file} was handed in",
                    False,
                    f"{self.c_file} is not in the submission: "
                    f"hand in your {self.c_file} next to the notebook",
                    weight=_weight(self.runs),
                )
            ]
        if ctx.untouched(self.c_file):
            return [untouched_case(self.c_file, _weight(self.runs))]
        return allgather_cases(path, self.algorithm, self.runs)

    def explain(self, answers, ctx, cases):
        """Schedule-level feedback (:mod:`mpilab.grade.diagnose`) when a case failed or the
        collective is more than :data:`mpilab.grade.diagnose.SLOW` times slower than the
        reference; None when the file is missing or does not compile (the cases say so)."""
        path = ctx.submitted_file(self.c_file)
        if not self.diagnose or path is None or any(c.name.endswith(" compiles") for c in cases):
            return None
        failed = not all(c.passed for c in cases)
        try:
            found = diagnose.diagnose_allgather(path, self.algorithm, failed=failed)
        except harness.BuildError:
            return None
        if found.status == "ok" and not failed:
            return None
        return found.text(), found.html()


# ---- lab 6: broadcasts ------------------------------------------------------------------------

#: The broadcast harness's kinds of case (``mpilab/data/grading/check_bcast.c``), in the order it
#: runs them; the pipeline adds :data:`SEGMENT_KINDS`.
BCAST_KINDS = ("int", "char", "double", "root", "sub-communicator")
SEGMENT_KINDS = ("segments",)
#: Kinds that are trivially right at P = 2 with no code: each half of the sub-communicator
#: case holds one rank. (At P = 1 every kind is: broadcast runs start at P = 2.)
TRIVIAL_AT_TWO = ("sub-communicator",)


def bcast_kinds(algorithm, nprocs):
    """The kinds of case a run of ``nprocs`` checks for ``algorithm``."""
    kinds = BCAST_KINDS + (SEGMENT_KINDS if algorithm == "pipeline" else ())
    return tuple(k for k in kinds if not (nprocs == 2 and k in TRIVIAL_AT_TWO))


def bcast_runs(runs, algorithm):
    """``runs`` with the kinds each checks for ``algorithm`` (:func:`bcast_kinds`).

    Raises
    ------
    ValueError
        For a run of one process: every broadcast is right there with no code at all.
    """
    out = []
    for r in runs:
        if r.nprocs < 2:
            raise ValueError(
                f"a broadcast check needs P >= 2, not {r.nprocs}: with one process an empty function is right"
            )
        out.append(dataclasses.replace(r, kinds=bcast_kinds(algorithm, r.nprocs)))
    return out


def bcast_cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT):
    """Build a student's broadcast with the harness and run every kind of case for each run.

    Parameters
    ----------
    c_file : path
        The student's file (``linear.c``, ``pipeline.c``, ...).
    algorithm : str
        Which skeleton it implements (:data:`mpilab.grade.harness.BCAST_FUNCTIONS`).
    runs : sequence of mpilab.grade.runner.Run
        Their kinds are set per algorithm and P (:func:`bcast_runs`).

    Returns
    -------
    list of Case
        One failed case, weighing as much as all the others, when the file does not compile.
    """
    name = os.path.basename(os.fspath(c_file))
    runs = bcast_runs(runs, algorithm)
    weight = float(sum(len(r.kinds) for r in runs))
    flavours = sorted({r.flavour for r in runs}, key=lambda f: f == "smpi")
    work = None
    try:
        for flavour in flavours:
            work = harness.build_bcast([os.fspath(c_file)], flavour, work=work, require=algorithm)
    except harness.BuildError as exc:
        if work:
            shutil.rmtree(work, ignore_errors=True)
        return [Case(f"{name} compiles", False, str(exc), weight=weight)]
    try:
        return runner.run_cases(work, "check_bcast", runs, (), timeout=timeout, args=("--algo", algorithm))
    finally:
        shutil.rmtree(work, ignore_errors=True)


class BcastVerdict(Verdict):
    """The grader's verdict on a submitted broadcast file: every case of every run."""

    def __init__(self, c_file, algorithm, runs):
        self.c_file, self.algorithm, self.runs = c_file, algorithm, list(runs)

    def cases(self, answers, ctx):
        path = ctx.submitted_file(self.c_file)
        weight = float(sum(len(r.kinds) for r in bcast_runs(self.runs, self.algorithm)))
        if path is None:
            return [
                Case(
                    f"{self.c_file} was handed in",
                    False,
                    f"{self.c_file} is not in the "
                    f"submission: hand in your {self.c_file} next to the notebook",
                    weight=weight,
                )
            ]
        if ctx.untouched(self.c_file):
            return [untouched_case(self.c_file, weight)]
        return bcast_cases(path, self.algorithm, self.runs)
