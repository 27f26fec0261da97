"""Checks of a student's C collective: built with a harness, run case by case.

The harnesses (``mpilab/data/grading/check_student.c`` for allgather, ``check_bcast.c`` for
lab 6's broadcasts) run the cases the grader chose on data the grader chose and hand back what
every rank's buffers hold (:func:`mpilab.grade.runner.run_cases`,
:mod:`mpilab.grade.checks.collectives`). Every case counts: a ring that fails only the
``MPI_IN_PLACE`` cases keeps the points of the others, and the feedback names each failed case
("Open MPI, P = 5, in-place (count=8): rank 3: block 2 holds rank 1's block ...").
"""

import dataclasses
import html
import os
import shutil
import time

from mpilab.grade import diagnose, harness, runner
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict, algorithm
from mpilab.grade.checks.collectives import AllgatherCases, BcastCases

ALLGATHER = AllgatherCases()
ALLGATHER_KINDS = ALLGATHER.kinds


def build_failure(name, exc, weight):
    """The one failed case of a file that does not build (or is refused)."""
    return Case(f"{name} {exc.title}", False, str(exc), weight=weight)


def allgather_cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT, progress=None, observe=None):
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
    observe : callable, optional
        Called with every case's result (:func:`mpilab.grade.runner.run_cases`).

    Returns
    -------
    list of Case
        One failed case when the file does not build or is refused.
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
        return [build_failure(name, exc, _weight(runs))]
    try:
        return runner.run_cases(
            work, "check_student", runs, ALLGATHER, timeout=timeout, progress=progress, observe=observe
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


def visible_allgather(c_file, name, runs):
    """The notebook's check of an allgather file: its cases, and the hints the grader gives
    (printed) when some fail."""
    seen = algorithm.Observed()
    cases = allgather_cases(c_file, name, runs, progress=print, observe=seen)
    for line in algorithm.hints(seen):
        print(f"hint: {line}")
    return cases


def block_bytes(spec):
    """The schedule's n of an allgather case: the bytes of one rank's block."""
    return spec.count * spec.size


class CFileVerdict(Verdict):
    """A grader's verdict on a submitted C file (the common part of :class:`AllgatherVerdict`,
    :class:`BcastVerdict` and lab 3's): the file's cases, then the cases about the algorithm
    (:func:`mpilab.grade.checks.algorithm.algorithm_cases`); :meth:`explain` gives the hints."""

    collective = None
    #: The task is built from point-to-point messages (no library collective).
    point_to_point = True
    #: Compare the sizes of the messages with the schedule's (else only their peers).
    exact = True

    def __init__(self, c_file, name, runs, schedules=None):
        """``schedules``: ``{algorithm: schedule}`` to compare the messages with (the asked one
        among them), when not the registry's (:func:`mpilab.grade.checks.algorithm.algorithm_cases`)."""
        self.c_file, self.algorithm, self.runs = c_file, name, list(runs)
        self.schedules = schedules
        self._seen = {}

    def weight(self):
        raise NotImplementedError

    def file_cases(self, path, observe):
        raise NotImplementedError

    def nbytes(self, spec, q):
        return block_bytes(spec)

    def options(self, spec):
        return {}

    def inbound(self, spec, q, rank):
        """The bytes rank ``rank`` of ``q`` must receive in messages (see
        :func:`mpilab.grade.checks.algorithm.unseen_data`)."""
        return 0

    def root(self, spec, q):
        return spec.root

    def cases(self, answers, ctx):
        path = ctx.submitted_file(self.c_file)
        if path is None:
            return [
                Case(
                    f"{self.c_file} was handed in",
                    False,
                    f"{self.c_file} is not in the submission: "
                    f"hand in your {self.c_file} next to the notebook",
                    weight=self.weight(),
                )
            ]
        if ctx.untouched(self.c_file):
            return [untouched_case(self.c_file, self.weight())]
        seen = algorithm.Observed()
        self._seen[os.fspath(path)] = seen
        cases = self.file_cases(path, seen)
        if not seen.items:  # it did not build: the cases say why
            return cases
        kind, extra = algorithm.algorithm_cases(
            seen,
            self.collective,
            self.algorithm,
            sum(c.weight for c in cases),
            harness.task(self.collective, self.algorithm),
            self.nbytes,
            self.options,
            self.inbound,
            self.point_to_point,
            self.schedules,
            self.root,
            self.exact,
        )
        return extra if kind in ("library", "kit") else cases + extra

    def hints(self, ctx):
        path = ctx.submitted_file(self.c_file)
        seen = self._seen.get(os.fspath(path)) if path is not None else None
        return algorithm.hints(seen) if seen else []

    def explain(self, answers, ctx, cases):
        """The hints on the pattern of the failures (none when every case passed)."""
        lines = self.hints(ctx)
        if not lines:
            return None
        text = "\n".join(f"hint: {line}" for line in lines)
        return text, "".join(f"<p>hint: {html.escape(line)}</p>" for line in lines)


class AllgatherVerdict(CFileVerdict):
    """The grader's verdict on a submitted allgather file: every case of every run, the
    algorithm its messages are, the hints, and the schedule-level diagnosis."""

    collective = "allgather"

    def __init__(self, c_file, algorithm, runs, diagnose=True, schedules=None):
        super().__init__(c_file, algorithm, runs, schedules)
        self.diagnose = diagnose and os.environ.get("MPILAB_DIAGNOSE", "1") != "0"

    def weight(self):
        return _weight(self.runs)

    def file_cases(self, path, observe):
        return allgather_cases(path, self.algorithm, self.runs, observe=observe)

    def inbound(self, spec, q, rank):
        return (q - 1) * block_bytes(spec)

    def explain(self, answers, ctx, cases):
        """The hints, then schedule-level feedback (:mod:`mpilab.grade.diagnose`) when a case
        failed or the collective is more than :data:`mpilab.grade.diagnose.SLOW` times slower
        than the reference; None when the file is missing or does not build (the cases say so)."""
        hinted = super().explain(answers, ctx, cases) or ("", "")
        path = ctx.submitted_file(self.c_file)
        built = path is not None and self._seen.get(os.fspath(path)) and self._seen[os.fspath(path)].items
        found = None
        if self.diagnose and built:
            failed = not all(c.passed for c in cases)
            try:
                found = diagnose.diagnose_allgather(path, self.algorithm, failed=failed)
            except harness.BuildError:
                found = None
            if found is not None and found.status == "ok" and not failed:
                found = None
        if found is None:
            return hinted if hinted[0] else None
        text = "\n".join(t for t in (hinted[0], found.text()) if t)
        return text, hinted[1] + found.html()


# ---- lab 6: broadcasts ------------------------------------------------------------------------

#: The broadcast harness's kinds of case (``mpilab/data/grading/check_bcast.c``), in the order it
#: runs them; the pipeline adds :data:`SEGMENT_KINDS`.
BCAST_KINDS = BcastCases("linear").kinds
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


def bcast_cases(c_file, algorithm, runs, timeout=runner.RUN_TIMEOUT, progress=None, observe=None):
    """Build a student's broadcast with the harness and run every kind of case for each run.

    Parameters
    ----------
    c_file : path
        The student's file (``linear.c``, ``pipeline.c``, ...).
    algorithm : str
        Which skeleton it implements (:data:`mpilab.grade.harness.BCAST_FUNCTIONS`).
    runs : sequence of mpilab.grade.runner.Run
        Their kinds are set per algorithm and P (:func:`bcast_runs`).
    progress, observe : callable, optional
        See :func:`mpilab.grade.runner.run_cases`.

    Returns
    -------
    list of Case
        One failed case, weighing as much as all the others, when the file does not build.
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
        return [build_failure(name, exc, weight)]
    try:
        return runner.run_cases(
            work,
            "check_bcast",
            runs,
            BcastCases(algorithm),
            timeout=timeout,
            args=("--algo", algorithm),
            progress=progress,
            observe=observe,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def visible_bcast(c_file, name, runs):
    """The notebook's check of a broadcast file: its cases, and the grader's hints (printed)."""
    seen = algorithm.Observed()
    cases = bcast_cases(c_file, name, runs, progress=print, observe=seen)
    for line in algorithm.hints(seen):
        print(f"hint: {line}")
    return cases


class BcastVerdict(CFileVerdict):
    """The grader's verdict on a submitted broadcast file: every case of every run, the
    algorithm its messages are (the pipeline's with the case's segment size), and the hints."""

    collective = "bcast"

    def weight(self):
        return float(sum(len(r.kinds) for r in bcast_runs(self.runs, self.algorithm)))

    def file_cases(self, path, observe):
        return bcast_cases(path, self.algorithm, self.runs, observe=observe)

    def options(self, spec):
        """The element size (blocks and segments are whole elements) and the pipeline's segment size."""
        return {"esize": spec.size, **({"segsize": spec.segsize} if self.algorithm == "pipeline" else {})}

    def root(self, spec, q):
        return BcastCases.root_of(spec, range(q))

    def inbound(self, spec, q, rank):
        return 0 if rank == self.root(spec, q) else spec.count * spec.size
