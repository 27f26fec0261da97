"""Checks of lab 3's reductions in C: built with a harness, run case by case.

The harness (``mpilab/data/grading/check_reduce.c``) calls the student's function in several
kinds of case (datatypes, a prime count, ``MPI_IN_PLACE``, a sub-communicator) on data the
grader chose, and hands back every rank's buffers; the grader compares every element of every
rank's result with the exact sum and checks that the send buffer came back unchanged
(:mod:`mpilab.grade.checks.collectives`, :func:`mpilab.grade.runner.run_cases`). Each (run,
kind) is one case of the verdict: a reduce-scatter that fails only ``MPI_IN_PLACE`` keeps the
points of the other kinds, and the feedback names each failed case ("Open MPI, P = 5, in-place
(count=5): rank 3: recvbuf[2] is 4, expected 7 ..."). The reduce-scatter and Rabenseifner's
allreduce are built from point-to-point messages (a library collective scores nothing, and the
messages are checked against the algorithm's), the two-level allreduce from the library's
collectives on the node and leader communicators.

Under SMPI the code is built with the node shim (``data/lab3/smpi_nodes.h``), so that
``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`` groups the ranks of one simulated node.
"""

import importlib.resources
import os
import shutil

from mpilab.core.errors import one_of
from mpilab.grade import harness, runner
from mpilab.grade.checks import algorithm as algorithm_checks
from mpilab.grade.checks.ccode import CFileVerdict, build_failure
from mpilab.grade.checks.collectives import ReductionCases
from mpilab.model import algorithms

#: The harness's kinds of case for a reduce-scatter or an allreduce, in the order it runs them.
KINDS = ReductionCases(2).kinds
#: A reduce (MPI_Reduce's signature) adds other roots than 0.
REDUCE_KINDS = ReductionCases(3).kinds
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


def build(c_file, function, harness_kind, flavours, work=None, task=None, point_to_point=True):
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
    task : str, optional
        What the lab asks: the student's object may then call only what the task allows
        (:mod:`mpilab.grade.symbols`).
    point_to_point : bool
        The task allows no library collective.

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
    defines = [f"STUDENT_FN={function}", f"KIND={harness_kind}"]
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
                task=task,
                point_to_point=point_to_point,
            )
    return work


def reduction_cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT, progress=None, observe=None):
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
    progress, observe : callable, optional
        See :func:`mpilab.grade.runner.run_cases`.

    Returns
    -------
    list of Case
        One failed case, weighing all of them, when the file does not build or is refused.
    """
    if algorithm not in FUNCTIONS:
        raise one_of("lab 3 algorithm", algorithm, FUNCTIONS)
    function, kind, own = FUNCTIONS[algorithm]
    a = next(x for x in algorithms.skeletons(*HARNESS_KINDS).values() if x.name == algorithm)
    return harness_cases(
        c_file,
        function,
        kind,
        runs,
        timeout=timeout,
        task=harness.task(a.collective, algorithm),
        point_to_point=own,
        progress=progress,
        observe=observe,
    )


def harness_cases(
    c_file,
    function,
    harness_kind,
    runs,
    timeout=runner.RUN_TIMEOUT,
    task=None,
    point_to_point=True,
    progress=None,
    observe=None,
):
    """:func:`reduction_cases` for any function of one of the harness's signatures."""
    name = os.path.basename(os.fspath(c_file))
    kinds = kinds_of(harness_kind)
    try:
        work = build(
            c_file,
            function,
            harness_kind,
            {r.flavour for r in runs},
            task=task,
            point_to_point=point_to_point,
        )
    except harness.BuildError as exc:
        return [build_failure(name, exc, weight(runs, kinds))]
    try:
        return runner.run_cases(
            work,
            "check_reduce",
            runs,
            ReductionCases(harness_kind),
            timeout=timeout,
            progress=progress,
            observe=observe,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def visible_reduction(c_file, name, runs):
    """The notebook's check of a lab-3 file: its cases, and the grader's hints (printed)."""
    seen = algorithm_checks.Observed()
    cases = reduction_cases(c_file, name, runs, progress=print, observe=seen)
    for line in algorithm_checks.hints(seen):
        print(f"hint: {line}")
    return cases


def weight(runs, kinds=KINDS):
    """The weight of all the cases of ``runs`` (what a file that does not build loses)."""
    return float(sum(len(r.kinds or kinds) for r in runs))


def runs_at(flavour, counts, hidden=False, kinds=KINDS):
    """Real runs at each process count; P = 1 without the kinds of :data:`TRIVIAL_AT_ONE`."""
    one = tuple(k for k in kinds if k not in TRIVIAL_AT_ONE)
    return tuple(runner.Run(flavour, p, hidden=hidden, kinds=one if p == 1 else None) for p in counts)


class ReductionVerdict(CFileVerdict):
    """The grader's verdict on a submitted lab-3 file: every case of every run, the algorithm
    (see the module's docstring) and the hints."""

    #: Recursive halving and doubling: how many messages go to which partner (their sizes follow
    #: the count's split into blocks, which is the student's to choose for uneven counts).
    exact = False

    def __init__(self, c_file, algorithm, runs, schedules=None):
        if algorithm not in FUNCTIONS:
            raise one_of("lab 3 algorithm", algorithm, FUNCTIONS)
        super().__init__(c_file, algorithm, runs, schedules)
        a = next(x for x in algorithms.skeletons(*HARNESS_KINDS).values() if x.name == algorithm)
        self.collective, self.harness_kind = a.collective, HARNESS_KINDS[a.collective]
        self.point_to_point = a.point_to_point

    def weight(self):
        return weight(self.runs, kinds_of(self.harness_kind))

    def file_cases(self, path, observe):
        return reduction_cases(path, self.algorithm, self.runs, observe=observe)

    def nbytes(self, spec, q):
        # the schedules' n is the whole vector: a reduce-scatter's count is one block of q
        whole = spec.count * spec.size
        return whole * q if self.collective == "reduce_scatter" else whole

    def inbound(self, spec, q, rank):
        if not FUNCTIONS[self.algorithm][2]:
            return 0
        return spec.count * spec.size if self.harness_kind != 3 or rank == spec.root else 0
