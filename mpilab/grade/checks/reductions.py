"""Checks of lab 3's reductions in C: built with a harness, run case by case.

The harness (``mpilab/data/grading/check_reduce.c``) calls the student's function in several
kinds of case (datatypes, a prime count, ``MPI_IN_PLACE``, a sub-communicator), compares every
element of every rank's result with the exact sum, checks that the send buffer comes back
unchanged, and prints one line per case (:func:`mpilab.grade.runner.run_cases`). Each (run,
kind) is one case of the verdict: a reduce-scatter that fails only ``MPI_IN_PLACE`` keeps the
points of the other kinds, and the feedback names each failed case ("Open MPI, P = 5, in-place:
count=5: rank 3: recvbuf[2] is 4, expected 7 ...").

Under SMPI the code is built with the node shim (``data/lab3/smpi_nodes.h``), so that
``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`` groups the ranks of one simulated node.
"""

import importlib.resources
import os
import shutil

from mpilab.core.errors import one_of
from mpilab.grade import harness, runner
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict
from mpilab.model import algorithms

#: The harness's kinds of case for a reduce-scatter or an allreduce, in the order it runs them.
KINDS = ("int", "double", "prime-count", "in-place", "sub-communicator")
#: A reduce (MPI_Reduce's signature) adds other roots than 0.
REDUCE_KINDS = KINDS + ("root",)
#: Kinds that are trivially right with one process and no code at all (with MPI_IN_PLACE the
#: input already is the result): runs at P = 1 leave them out, so an empty skeleton scores nothing.
TRIVIAL_AT_ONE = ("in-place",)
HARNESS = "check_reduce.c"
#: The harness's KIND of each collective: its signature (reduce-scatter, allreduce, reduce).
HARNESS_KINDS = {"reduce_scatter_block": 1, "allreduce": 2, "reduce": 3}
#: What each of lab 3's skeletons implements (from :mod:`mpilab.model.algorithms`): the function
#: it defines, the harness's KIND, and whether it must send its own messages (the lab asks for
#: the reduce-scatter and Rabenseifner's allreduce from point-to-point messages: a call of one of
#: the library's collectives fails the case; the two-level allreduce is made of the library's
#: collectives).
FUNCTIONS = {
    name: (a.skeleton, HARNESS_KINDS[a.collective], a.point_to_point)
    for name, a in algorithms.skeletons(*HARNESS_KINDS).items()
}


def kinds_of(harness_kind):
    """The kinds of case the harness runs for a KIND (3, a reduce, adds ``root``)."""
    return REDUCE_KINDS if harness_kind == 3 else KINDS


def build(c_file, function, harness_kind, flavours, work=None, own_messages=False):
    """Build ``check_reduce`` (real flavours) and ``check_reduce_smpi`` with a C file.

    Parameters
    ----------
    c_file : path
        The file that defines ``function``.
    function : str
        The function the harness calls.
    harness_kind : {1, 2, 3}
        Its signature: reduce-scatter, allreduce or reduce.
    flavours : iterable of str
        The flavours to build for (``openmpi``, ``smpi`` ...).
    work : str, optional
        A scratch directory to build in (default: a new one).
    own_messages : bool
        Fail a case in which the function calls one of the library's collectives.

    Returns
    -------
    str
        The scratch directory; the caller removes it.

    Raises
    ------
    mpilab.grade.harness.BuildError
        When the file is missing or does not compile (the compiler's words).
    """
    if harness_kind not in (1, 2, 3):
        raise one_of("harness kind", harness_kind, (1, 2, 3))
    defines = [f"STUDENT_FN={function}", f"KIND={harness_kind}"] + (["OWN_MESSAGES"] if own_messages else [])
    with importlib.resources.as_file(harness.data_file("grading", HARNESS)) as source:
        for flavour in sorted(set(flavours), key=lambda f: f == "smpi"):
            program = "check_reduce" + ("_smpi" if flavour == "smpi" else "")
            work = harness.build(
                [source, os.fspath(c_file)],
                flavour,
                program,
                defines,
                work=work,
                smpi_nodes=True,
                student=c_file,
                keep=[function],
            )
    return work


def reduction_cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT, progress=None):
    """Build a student's lab-3 file with the harness and run every kind of case for each run.

    Parameters
    ----------
    c_file : path
        The student's file (``reduce_scatter.c``, ``allreduce_rabenseifner.c``,
        ``allreduce_two_level.c``).
    algorithm : {"reduce_scatter", "rabenseifner", "two_level"}
        Which skeleton it implements (:data:`FUNCTIONS`).
    runs : sequence of mpilab.grade.runner.Run
    timeout : float
        Limit of one launch, seconds.
    progress : callable, optional
        Called with a line before and after each launch (see :func:`mpilab.grade.runner.run_cases`).

    Returns
    -------
    list of Case
        One failed case, weighing all of them, when the file does not compile.
    """
    if algorithm not in FUNCTIONS:
        raise one_of("lab 3 algorithm", algorithm, FUNCTIONS)
    function, kind, own = FUNCTIONS[algorithm]
    return harness_cases(c_file, function, kind, runs, timeout=timeout, own_messages=own, progress=progress)


def harness_cases(
    c_file, function, harness_kind, runs, timeout=runner.RUN_TIMEOUT, own_messages=False, progress=None
):
    """:func:`reduction_cases` for any function of one of the harness's signatures."""
    name = os.path.basename(os.fspath(c_file))
    kinds = kinds_of(harness_kind)
    try:
        work = build(c_file, function, harness_kind, {r.flavour for r in runs}, own_messages=own_messages)
    except harness.BuildError as exc:
        return [Case(f"{name} compiles", False, str(exc), weight=weight(runs, kinds))]
    try:
        return runner.run_cases(work, "check_reduce", runs, kinds, timeout=timeout, progress=progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def weight(runs, kinds=KINDS):
    """The weight of all the cases of ``runs`` (what a file that does not build loses)."""
    return float(sum(len(r.kinds or kinds) for r in runs))


def runs_at(flavour, counts, hidden=False, kinds=KINDS):
    """Real runs at each process count; P = 1 without the kinds of :data:`TRIVIAL_AT_ONE`."""
    one = tuple(k for k in kinds if k not in TRIVIAL_AT_ONE)
    return tuple(runner.Run(flavour, p, hidden=hidden, kinds=one if p == 1 else None) for p in counts)


class ReductionVerdict(Verdict):
    """The grader's verdict on a submitted lab-3 file: every case of every run."""

    def __init__(self, c_file, algorithm, runs):
        if algorithm not in FUNCTIONS:
            raise one_of("lab 3 algorithm", algorithm, FUNCTIONS)
        self.c_file, self.algorithm, self.runs = c_file, algorithm, list(runs)

    def cases(self, answers, ctx):
        path = ctx.submitted_file(self.c_file)
        if path is None:
            return [
                Case(
                    f"{self.c_file} was handed in",
                    False,
                    f"{self.c_file} is not in the submission: "
                    f"hand in your {self.c_file} next to the notebook",
                    weight=weight(self.runs),
                )
            ]
        return reduction_cases(path, self.algorithm, self.runs)
