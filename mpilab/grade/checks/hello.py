"""Checks of lab 0's ``hello.c``: what every rank prints, run by run.

Every rank must print one line ``hello from rank R of P on HOST``. Each run (real Open MPI at
one process count, or SMPI on a simulated cluster) gives two cases: the ranks and the size
(one line per rank, each rank once, P on every line), and the hosts (a name from
``MPI_Get_processor_name`` on real MPI; under SMPI the simulated core the rank was placed on).
"""

import os
import re
import shutil

from mpilab.grade import harness, runner
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict
from mpilab.simulate import platforms

_HELLO = re.compile(r"^hello from rank (-?\d+) of (-?\d+) on (\S+)\s*$")


def _ranks_case(lines, p, title):
    if len(lines) != p:
        return Case(
            title, False, f"{len(lines)} lines 'hello from rank R of P on HOST', expected {p} (one per rank)"
        )
    ranks = sorted(int(r) for r, _, _ in lines)
    if ranks != list(range(p)):
        return Case(
            title,
            False,
            f"the ranks printed were {ranks}, expected each of 0..{p - 1} once "
            "— did you call MPI_Comm_rank on MPI_COMM_WORLD?",
        )
    sizes = sorted({int(s) for _, s, _ in lines})
    if sizes != [p]:
        return Case(
            title,
            False,
            f"the sizes printed were {sizes}, expected {p} on every rank — did "
            "you call MPI_Comm_size on MPI_COMM_WORLD?",
        )
    return Case(title, True)


def _hosts_case(lines, run, title):
    hosts = {}
    for r, _, h in lines:
        hosts.setdefault(int(r), h)
    if "?" in hosts.values() or not hosts:
        return Case(title, False, "a rank printed host '?' — did you call MPI_Get_processor_name?")
    if run.flavour != "smpi":
        return Case(title, True)
    want = platforms.placement(run.platform, run.nprocs, run.mapping)
    for r in range(run.nprocs):
        if hosts.get(r) != want[r]:
            got = "no line" if r not in hosts else repr(hosts[r])
            return Case(
                title,
                False,
                f"rank {r} says it ran on {got}, but it was placed on {want[r]!r}; "
                "print the name MPI_Get_processor_name gives",
            )
    return Case(title, True)


def run_cases(res, run):
    """The two cases of one run from its result (:class:`mpilab.grade.outcome.SandboxResult`)."""
    why = runner.failure(res, run)
    # "<run>, <kind>", as the C harnesses' cases, so the feedback groups one run's failures
    titles = (
        f"{run.label}, one line per rank with its rank and the size",
        f"{run.label}, " + ("each rank's simulated core" if run.flavour == "smpi" else "each rank's host"),
    )
    if why:
        return [Case(t, False, why, hidden=run.hidden) for t in titles]
    lines = [m.groups() for m in map(_HELLO.match, res.stdout.splitlines()) if m]
    out = [_ranks_case(lines, run.nprocs, titles[0]), _hosts_case(lines, run, titles[1])]
    if not lines:
        out[0].message += f"; the output was: {res.stdout.strip()[-300:]!r}"
    for c in out:
        c.hidden = run.hidden
    return out


def hello_cases(c_file, runs, timeout=runner.RUN_TIMEOUT):
    """Build ``hello.c`` for each flavour of ``runs`` and run it as each run says.

    Parameters
    ----------
    c_file : path
    runs : sequence of mpilab.grade.runner.Run
        Real Open MPI runs and SMPI runs (``platform`` and ``mapping`` set).
    timeout : float
        Limit of one launch, seconds.

    Returns
    -------
    list of Case
        Two per run; one failed case, weighing all of them, when the file does not compile.
    """
    name = os.path.basename(os.fspath(c_file))
    programs = {"openmpi": "hello", "mpich": "hello_mpich", "smpi": "hello_smpi"}
    work = None
    try:
        for flavour in sorted({r.flavour for r in runs}, key=lambda f: f == "smpi"):
            work = harness.build([os.fspath(c_file)], flavour, programs[flavour], work=work)
    except harness.BuildError as exc:
        if work:
            shutil.rmtree(work, ignore_errors=True)
        return [Case(f"{name} compiles", False, str(exc), weight=2.0 * len(runs))]
    try:
        out = []
        for run in runs:
            res = runner.execute(work, runner.argv(work, programs[run.flavour], [], run), run, timeout)
            out += run_cases(res, run)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


class HelloVerdict(Verdict):
    """The grader's verdict on a submitted ``hello.c``: two cases per run."""

    def __init__(self, c_file, runs):
        self.c_file, self.runs = c_file, list(runs)

    def cases(self, answers, ctx):
        path = ctx.submitted_file(self.c_file)
        if path is None:
            return [
                Case(
                    f"{self.c_file} was handed in",
                    False,
                    f"{self.c_file} is not in the submission: "
                    f"hand in your {self.c_file} next to the notebook",
                    weight=2.0 * len(self.runs),
                )
            ]
        return hello_cases(path, self.runs)
