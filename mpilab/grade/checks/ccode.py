"""Checks of a student's C collective: built with a harness, run case by case.

The harness (``mpilab/data/grading/check_student.c`` for allgather) checks every element of
every case and prints one line per case (:func:`mpilab.grade.runner.run_cases`). Every case
counts: a ring that fails only the ``MPI_IN_PLACE`` cases keeps the points of the others, and the
feedback names each failed case ("Open MPI, P = 5, in-place count=8: rank 3: block 2 ...").
"""
import os
import shutil

from mpilab.grade import runner
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
        Which skeleton it implements (:data:`mpilab.grade.runner.STUDENT_FUNCTIONS`).
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
            work = runner.build_allgather(os.fspath(c_file), algorithm, flavour, work=work)
    except runner.BuildError as exc:
        if work:
            shutil.rmtree(work, ignore_errors=True)
        return [Case(f"{name} compiles", False, str(exc), weight=_weight(runs))]
    try:
        return runner.run_cases(work, "check_student", runs, ALLGATHER_KINDS, timeout=timeout, progress=progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)


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

    def __init__(self, c_file, algorithm, runs):
        self.c_file, self.algorithm, self.runs = c_file, algorithm, list(runs)

    def cases(self, answers, ctx):
        path = ctx.submitted_file(self.c_file)
        if path is None:
            return [Case(f"{self.c_file} was handed in", False, f"{self.c_file} is not in the submission: "
                         f"hand in your {self.c_file} next to the notebook", weight=_weight(self.runs))]
        return allgather_cases(path, self.algorithm, self.runs)
