"""Running a student's C code under the grader's limits: the case protocol.

Everything the labs and the grader run of a student's C goes through here, in a fresh scratch
directory holding only the files it needs and under :mod:`mpilab.grade.sandbox`'s limits:

* :mod:`mpilab.grade.harness` compiles the student's file with a checking harness (or alone);
* :func:`run_cases` runs a case harness (``mpilab/data/grading/harness.h``) over several
  process counts and simulated clusters: the grader chooses the cases and the data
  (:mod:`mpilab.grade.casedata`), judges what the ranks hand back, and turns that, a crash or a
  hang into :class:`mpilab.grade.cases.Case` results;
* :func:`run_c` compiles and runs one program and returns its output (lab 0's hello cells).

Timing a student's collective takes the kit's one road instead (:mod:`mpilab.grade.bench`:
:class:`mpilab.grade.launcher.SandboxLauncher`, :mod:`mpilab.measure.driver`,
:mod:`mpilab.core.results`); :func:`benchmark_c` and :func:`benchmark_bcast` are its names in
the notebooks.
"""

import os
import re
import shutil
import time
from dataclasses import dataclass

from mpilab.core.errors import LaunchError, ToolMissing, one_of
from mpilab.core.vocabulary import COMPILERS, MPIRUN
from mpilab.grade import casedata, harness, outcome, sandbox
from mpilab.grade.cases import Case
from mpilab.measure import launch
from mpilab.simulate import platform_xml, platforms

#: Wall-time limit of one run, seconds (MPILAB_RUN_TIMEOUT overrides).
RUN_TIMEOUT = float(os.environ.get("MPILAB_RUN_TIMEOUT", "30"))
#: How runs on real Open MPI start: as many ranks as asked on any number of cores.
MPIRUN_OPENMPI = [MPIRUN["openmpi"], "--oversubscribe", "-np"]
#: Address-space limit of each process of a real run, MiB.
REAL_MEMORY_MB = 2048
#: Address-space limit of one simulated run (all its ranks live in smpirun's one process, with
#: an 8 MiB stack each), MiB.
SMPI_MEMORY_MB = 4096
#: Environment of every student run. Open MPI's own handler of SIGABRT (``opal_signal``, default
#: 6,7,8,11) prints a backtrace from inside the signal: after glibc aborts on a corrupted heap
#: ("malloc(): corrupted top size") that backtrace waits forever for the heap's lock, and the
#: crash would end as a time-out that looks like a deadlock. Without it the rank dies at once
#: and the launcher reports signal 6; glibc's line stays on stderr (:func:`runtime_message`).
RUN_ENV = {"OMPI_MCA_opal_signal": "7,8,11"}
#: The small simulated cluster of lab 3's checks: 3 nodes x 3 cores (hosts lab<node>-s0-c<core>).
SMALL_CLUSTER = "lab-3x3"


@dataclass(frozen=True)
class Run:
    """One launch of a checking program: where it runs, whether the student saw it, and (when
    not all) which kinds of case it checks."""

    flavour: str
    nprocs: int
    platform: str = None
    mapping: str = "core"
    hidden: bool = False
    kinds: tuple = None

    @property
    def label(self):
        if self.flavour == "smpi":
            where = "3 nodes x 3 cores" if self.platform == SMALL_CLUSTER else self.platform
            return f"SMPI on {where}, P = {self.nprocs}, mapping {self.mapping}"
        return f"{'Open MPI' if self.flavour == 'openmpi' else 'MPICH'}, P = {self.nprocs}"


def smpi_platform(platform, work):
    """Platform name or XML path; the small cluster of lab 3 is written into ``work``."""
    if platform != SMALL_CLUSTER:
        return platform
    path = os.path.join(work, f"{SMALL_CLUSTER}.xml")
    if not os.path.exists(path):
        spec = platforms.Spec("lab", 3, 1, 3, description="lab 3 checks: 3 nodes x 3 cores")
        with open(path, "w") as f:
            f.write(platform_xml.render_xml(spec))
    return path


def argv(work, program, args, run, cfg=()):
    """The command that runs ``program args`` as ``run`` says."""
    if run.flavour == "smpi":
        lau = launch.get_launcher(
            "smpi", platform=smpi_platform(run.platform or "orfeo-thin", work), workdir=work, cfg=list(cfg)
        )
        return lau.command(os.path.join(work, program), list(args), run.nprocs, run.mapping).argv
    if run.flavour == "openmpi":
        return MPIRUN_OPENMPI + [str(run.nprocs), f"./{program}", *args]
    return [MPIRUN["mpich"], "-n", str(run.nprocs), f"./{program}", *args]


def execute(work, command, run, timeout=RUN_TIMEOUT):
    """Run a command of :func:`argv` in the sandbox with the flavour's memory cap; the files it
    wrote come back even when it failed (the records of the cases it finished)."""
    return sandbox.run(
        command,
        cwd=work,
        timeout=timeout,
        env=RUN_ENV,
        memory_mb=SMPI_MEMORY_MB if run.flavour == "smpi" else REAL_MEMORY_MB,
        copy_back="always",
    )


_SMPI_FAILED = re.compile(r"Execution failed with code (\d+)")
#: What the C library prints before it aborts a program: glibc's heap checks ("malloc(): corrupted
#: top size", "free(): invalid pointer", "double free or corruption (out)", "corrupted size vs.
#: prev_size"), its fortify and stack-protector checks and a failed assert().
_RUNTIME_MESSAGE = re.compile(
    r"^(?:(?:malloc|free|realloc|calloc|malloc_consolidate|munmap_chunk|_int_\w+)\(\): .+"
    r"|double free or corruption.*|corrupted (?:size|double-linked list|top size).*"
    r"|\*\*\* .+ \*\*\*: terminated|Fatal glibc error: .+|.+: Assertion `.+' failed\.)$",
    re.M,
)


def runtime_message(res):
    """The C library's own message about a crash (glibc's abort line), or None."""
    m = _RUNTIME_MESSAGE.search(res.stderr) or _RUNTIME_MESSAGE.search(res.stdout)
    return m.group(0).strip() if m else None


def with_runtime_message(why, res):
    """``why`` followed by the C library's message when there is one and ``why`` lacks it."""
    said = runtime_message(res)
    if why and said and said not in why:
        return f"{why} — the C library said: {said}"
    return why


def failure(res, run):
    """Why a run failed, in the words students read; None if it ended normally.

    A crash keeps the C library's own message (:func:`runtime_message`), e.g. "rank 1 crashed:
    signal 6 (SIGABRT) — the C library said: malloc(): corrupted top size". Under SMPI every rank runs
    inside one process: a crash has no rank to name, and a deadlock
    is found by the simulator (which then exits with status 0) rather than by a time-out.
    """
    return with_runtime_message(_failure(res, run), res)


def _failure(res, run):
    if run.flavour != "smpi":
        return res.failure()
    if res.timed_out:
        return outcome.timeout_message(res.timeout)
    abort = res.abort()
    if abort:
        return f"rank {abort[0]} crashed: {abort[1]}"
    if "Deadlock detected" in res.stderr:
        return f"the simulator found every rank waiting for a message nobody sends — {outcome.DEADLOCK_HINT}"
    m = _SMPI_FAILED.search(res.stderr)
    code = int(m.group(1)) if m else res.returncode
    if code is not None and code > 128:
        sig = code - 128
        return (
            f"a rank crashed: signal {sig} ({outcome.signal_name(sig)}) (the simulator runs "
            "every rank in one process and cannot say which)"
        )
    if res.ok:
        return None
    last = (res.stderr.strip() or res.stdout.strip()).splitlines()[-3:]
    return f"exit status {res.returncode}: " + " | ".join(last)


#: Open MPI's and MPICH's words for an MPI error: "*** MPI_ERR_TRUNCATE: message truncated",
#: "Fatal error in MPI_Recv: Message truncated, error stack:" (the first lines of each), and
#: Open MPI's "*** An error occurred in MPI_Sendrecv" before it.
_MPI_ERROR = re.compile(r"(MPI_ERR_[A-Z_]+\b.*|Fatal error in (?:P?MPI_\w+|internal_\w+): .*)$", re.M)
_MPI_CALL = re.compile(r"An error occurred in (\w+)")


def mpi_error(res):
    """The MPI library's own words about an error, "in MPI_Sendrecv: MPI_ERR_TRUNCATE: message
    truncated" (the call when it says), or None."""
    text = res.stderr + "\n" + res.stdout
    m = _MPI_ERROR.search(text)
    if not m:
        return None
    call = _MPI_CALL.search(text)
    return (f"in {call.group(1)}: " if call else "") + m.group(1).strip(" *\t,")


def _reported_error(errors, spec):
    """The harness's report of an MPI error in this case ("in MPI_Sendrecv: MPI_ERR_TRUNCATE:
    message truncated"), the lowest rank's; None when no rank reported one in it."""
    for _, (seq, call, text) in sorted(errors.items()):
        if seq == spec.seq and text:
            return (f"in {call}: " if call != "-" else "") + text
    return None


#: Launches of one run at most: the first, then one after each case that hangs or crashes.
MAX_LAUNCHES = 10
_TIMEOUT_LINE = re.compile(r"^TIMEOUT (\d+)$", re.M)


@dataclass
class CaseResult:
    """One case of a run, judged: passed, or why not; ``records`` are what its ranks handed back
    (``{world rank: Record}``, empty when the case did not finish)."""

    spec: casedata.Spec
    passed: bool
    message: str = ""
    records: dict = None


def run_cases(
    work,
    program,
    runs,
    caseset,
    timeout=RUN_TIMEOUT,
    case_timeout=None,
    args=(),
    progress=None,
    observe=None,
):
    """Run a case harness for every run and return its :class:`mpilab.grade.cases.Case`\\ s.

    For each run the grader chooses the cases (``caseset.specs``) and every rank's data
    (``caseset.inputs``), launches the harness once, and judges every case it finished from what
    the ranks handed back (``caseset.judge``, :mod:`mpilab.grade.casedata`). A case that hangs or
    crashes fails with what stopped it (for a hang, where each rank was blocked: "every rank is
    in MPI_Send ..."); the harness is then launched again with the cases after it, so one bad
    case costs only itself. What a hang says about the cases not yet run:

    * every rank was in a blocking send (MPI stopped buffering at that size): the cases with as
      much data or more are not tried, in this run or a later one of the same flavour;
    * otherwise the larger cases of the same kind are not tried, and when the first case of two
      kinds hangs, no other kind of the run; after two such runs the other runs of the flavour
      are skipped;
    * a case that crashes (or aborts) costs itself; after two of one kind, the rest of that kind
      is not tried, and after the first case of two kinds, no other kind of the run.

    Each (run, kind) weighs one case of the verdict: the share of its cases that passed is a
    passed :class:`Case`; the failed ones are grouped by what went wrong (the same sentence up
    to its numbers), each group one failed :class:`Case` naming its cases and saying the first
    one's sentence ("Open MPI, P = 5, int (count=1024), double (count=512): no result after 3 s
    — ...").

    Parameters
    ----------
    work : str
        The scratch directory with the built programs (``program`` for real flavours,
        ``program + "_smpi"`` for SMPI).
    runs : sequence of Run
        A run's ``kinds`` (when set) restrict the kinds it checks.
    caseset : mpilab.grade.checks.collectives.CaseSet
        The harness's cases, data and verdicts.
    timeout : float
        Wall-time limit of one launch.
    case_timeout : float, optional
        Per-case limit on real MPI (default: a third of ``timeout``, at least 3 s).
    args : sequence of str
        Extra harness arguments.
    progress : callable, optional
        Called with a line before and after each launch.
    observe : callable, optional
        Called as ``observe(run, result)`` with every :class:`CaseResult` (the schedule checks
        read the messages of the cases that passed).

    Returns
    -------
    list of Case
    """
    case_timeout = case_timeout or max(3.0, timeout / 3)
    say = progress or (lambda line: None)
    out, memory = [], {}
    for run in runs:
        kinds = list(run.kinds or caseset.kinds)
        specs = caseset.specs(run.nprocs, kinds)
        results = _run_one(work, program, run, caseset, specs, timeout, case_timeout, args, say, memory)
        for r in results:
            if observe is not None:
                observe(run, r)
        out += kind_cases(run, kinds, results)
    return out


class _Skips:
    """What the hangs of a run (and of earlier runs of its flavour) say not to try again."""

    def __init__(self, run, caseset, memory):
        self.run, self.caseset = run, caseset
        self.flavour = memory.setdefault(run.flavour, {"size": None, "hung_runs": []})
        self.first_stops, self.stops = [], {}

    def before(self, specs):
        """{seq: reason} of the cases not to try at all."""
        f, out = self.flavour, {}
        if len(f["hung_runs"]) >= 2:
            first, second = f["hung_runs"][:2]
            why = f"not run: every kind hung at its first case at P = {first} and P = {second}"
            return {s.seq: why for s in specs}
        if f["size"] is not None:
            for s in specs:
                if self.caseset.message_bytes(s) >= f["size"][0]:
                    out[s.seq] = f"not run: {f['size'][1]}"
        return out

    def after_stop(self, culprit, specs, rest, hung, buffering):
        """{seq: reason} of the cases of ``rest`` not to try after ``culprit`` hung or crashed."""
        size = self.caseset.message_bytes(culprit)
        what = "hung" if hung else "ended the program"
        where = f"{culprit.name} {what} at P = {self.run.nprocs}"
        if hung and buffering:
            why = (
                f"{where} (MPI no longer buffers sends of that size); cases with as much data or "
                "more were not tried"
            )
            if self.flavour["size"] is None or size < self.flavour["size"][0]:
                self.flavour["size"] = (size, why)
            return {s.seq: f"not run: {why}" for s in rest if self.caseset.message_bytes(s) >= size}
        self.stops[culprit.kind] = self.stops.get(culprit.kind, 0) + 1
        if culprit == next(s for s in specs if s.kind == culprit.kind):
            self.first_stops.append(culprit.kind)
        if len(self.first_stops) >= 2:
            if len(self.first_stops) == 2 and hung:
                self.flavour["hung_runs"].append(self.run.nprocs)
            first, second = self.first_stops[:2]
            why = f"the first case of {first} and of {second} {what}; no other kind was tried"
            return {s.seq: f"not run: {why}" for s in rest}
        if hung:
            why = f"not run: {where}; the larger cases of its kind were not tried"
            return {
                s.seq: why for s in rest if s.kind == culprit.kind and self.caseset.message_bytes(s) >= size
            }
        if self.stops[culprit.kind] >= 2:
            why = (
                f"not run: two cases of {culprit.kind} ended the program at P = {self.run.nprocs}; "
                "the others were not tried"
            )
            return {s.seq: why for s in rest if s.kind == culprit.kind}
        return {}


def _run_one(work, program, run, caseset, specs, timeout, case_timeout, args, say, memory):
    """The :class:`CaseResult` of every spec of one run (launching as often as it takes)."""
    exe = program + ("_smpi" if run.flavour == "smpi" else "")
    skips = _Skips(run, caseset, memory)
    done = {seq: CaseResult(s, False, why) for s in specs for seq, why in skips.before([s]).items()}
    pending = [s for s in specs if s.seq not in done]
    for _ in range(MAX_LAUNCHES):
        if not pending:
            break
        gen = casedata.rng()
        inputs = {s.seq: caseset.inputs(s, run.nprocs, gen) for s in pending}
        casedata.prepare(work, pending, run.nprocs, inputs)
        extra = [] if run.flavour == "smpi" else ["--case-timeout", f"{case_timeout:.0f}"]
        kinds = ", ".join(dict.fromkeys(s.kind for s in pending))
        say(f"running {run.label} ({len(pending)} cases: {kinds}) ...")
        started = time.monotonic()
        try:
            res = execute(work, argv(work, exe, [*args, *extra], run), run, timeout=timeout)
            records, unreadable = casedata.read_records(work, run.nprocs)
            states = casedata.read_states(work, run.nprocs)
            errors = casedata.read_errors(work, run.nprocs)
        finally:
            casedata.clear(work)
        say(f"  {run.label}: {time.monotonic() - started:.1f} s")
        left = []
        for s in pending:
            if all(s.seq in records[r] for r in range(run.nprocs)):
                mine = {r: records[r][s.seq] for r in range(run.nprocs)}
                why = caseset.judge(s, run.nprocs, inputs[s.seq], mine)
                done[s.seq] = CaseResult(s, not why, why, mine)
            else:
                left.append(s)
        if not left:
            pending = []
            break
        culprit, rest = left[0], left[1:]
        why, hung, buffering = _stopped(res, run, culprit, states, errors, unreadable, caseset, case_timeout)
        done[culprit.seq] = CaseResult(culprit, False, why)
        if unreadable:  # a result file the harness did not write: nothing more of this run is believed
            for s in rest:
                done[s.seq] = CaseResult(s, False, f"not run: {why}")
        for seq, skip in skips.after_stop(culprit, specs, rest, hung, buffering).items():
            done[seq] = CaseResult(next(s for s in rest if s.seq == seq), False, skip)
        pending = [s for s in rest if s.seq not in done]
    for s in pending:
        done[s.seq] = CaseResult(s, False, "not run: the program kept failing")
    return [done[s.seq] for s in specs]


def _stopped(res, run, spec, states, errors, unreadable, caseset, case_timeout):
    """Why the first unfinished case did not finish: (message, hung, hung in blocking sends).
    An MPI error is told from the harness's report of it (``errors``, see
    :func:`mpilab.grade.casedata.read_errors`), else from what the library printed."""
    bad = [
        f"rank {r}'s results are not what the harness writes ({why})" for r, why in sorted(unreadable.items())
    ]
    if bad:
        return "; ".join(bad[:2]), False, False
    groups = casedata.groups(spec.comm, run.nprocs)
    timed = _TIMEOUT_LINE.search(res.stdout)
    hang = res.abort() is None and (
        (timed and int(timed.group(1)) == spec.seq)
        or res.timed_out
        or (run.flavour == "smpi" and "Deadlock detected" in res.stderr)
    )
    where = outcome.blocked_sentences(states, groups, spec.seq, caseset.message_bytes(spec))
    if hang:
        if run.flavour == "smpi":
            lead = "the simulator found every rank blocked, for good (a deadlock)"
        elif timed:
            lead = f"no result after {case_timeout:.0f} s"
        else:
            lead = outcome.timeout_message(res.timeout).split(" — ")[0]
        return f"{lead} — {where or outcome.DEADLOCK_HINT}", True, where.startswith("every rank is in MPI_S")
    said = _reported_error(errors, spec) or mpi_error(res)
    if said:
        ends = "an MPI error ends the program, as under MPI's default error handler"
        return f"MPI reported an error {said} ({ends})", False, False
    return failure(res, run) or "the program ended before this case", False, False


#: A failure's sentence up to its numbers: the failures of a run that differ only there are one.
_NUMBERS = re.compile(r"-?\d[\d,.]*(?:e[+-]?\d+)?")


def kind_cases(run, kinds, results):
    """The verdict's cases of one run: per kind, the share of its cases that passed; then the
    failed cases grouped by what went wrong (their sentences up to the numbers), each group one
    failed case naming its cases and saying the first one's sentence (led by that case's detail,
    "count=1 root=2: ...", when the group is a whole kind of several cases and so names none)."""
    out, groups = [], {}
    for kind in kinds:
        mine = [r for r in results if r.spec.kind == kind]
        passed = [r for r in mine if r.passed]
        if passed:
            out.append(Case(f"{run.label}, {kind}", True, weight=len(passed) / len(mine), hidden=run.hidden))
        for r in mine:
            if not r.passed:
                groups.setdefault(_NUMBERS.sub("#", r.message), []).append((r, 1.0 / len(mine)))
    for members in groups.values():
        first = members[0][0]
        named = []
        for kind in dict.fromkeys(r.spec.kind for r, _ in members):
            of_kind = [r for r, _ in members if r.spec.kind == kind]
            total = sum(1 for r in results if r.spec.kind == kind)
            details = [r.spec.detail or r.spec.name for r in of_kind]
            named.append(kind if len(of_kind) == total else f"{kind} ({_joined(details)})")
        message = first.message
        whole = sum(1 for r in results if r.spec.kind == first.spec.kind)
        if named == [first.spec.kind] and whole > 1 and first.spec.detail:
            # every case of a kind failed: its name no longer says which case the sentence is about
            message = f"{first.spec.detail}: {message}"
        out.append(
            Case(
                f"{run.label}, {', '.join(named)}",
                False,
                message,
                weight=sum(w for _, w in members),
                hidden=run.hidden,
            )
        )
    return out


def _joined(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def run_c(c_file, flavour="openmpi", nprocs=4, mapping="core", platform="orfeo-thin", timeout=RUN_TIMEOUT):
    """Compile one C file and run it under the grader's limits; return what it printed.

    The program is built and run in a fresh scratch directory that holds only a copy of
    ``c_file``, with the limits of every graded run (:func:`mpilab.grade.sandbox.run`), so a
    program that hangs or prints in a loop stops here as it would in grading, instead of hanging
    the notebook or the autograder.

    Parameters
    ----------
    c_file : str or path
        One C file (e.g. lab 0's ``hello.c``).
    flavour : {"openmpi", "mpich", "smpi"}
        Real MPI on this machine, or SimGrid SMPI on ``platform``.
    nprocs : int
    mapping : {"core", "socket", "node"}
        Where the ranks go (for SMPI: on the simulated cluster).
    platform : str
        SMPI only: the simulated cluster.
    timeout : float
        Limit of the run, seconds (:data:`RUN_TIMEOUT`).

    Returns
    -------
    str
        The program's standard output.

    Raises
    ------
    LaunchError
        The file is missing, does not compile, or the run failed: a crash (rank and signal),
        a non-zero exit or the time limit.
    ToolMissing
        The flavour's compiler or launcher is not installed.
    """
    if flavour not in COMPILERS:
        raise one_of("flavour", flavour, COMPILERS)
    c_file = os.fspath(c_file)
    if not os.path.isfile(c_file):
        raise LaunchError(f"C file {c_file!r} not found (working directory {os.getcwd()})")
    if shutil.which(COMPILERS[flavour]) is None:
        raise ToolMissing(f"{COMPILERS[flavour]!r} not found on PATH; `mpilab doctor` says how to install it")
    name = os.path.basename(c_file)
    exe = f"{os.path.splitext(name)[0]}-{flavour}"
    try:
        work = harness.build([c_file], flavour, exe)
    except harness.BuildError as exc:
        raise LaunchError(str(exc)) from None
    try:
        opts = {"platform": platform, "workdir": work} if flavour == "smpi" else {}
        cmd = launch.get_launcher(flavour, **opts).command(os.path.join(work, exe), [], nprocs, mapping)
        if shutil.which(cmd.argv[0]) is None:
            raise ToolMissing(f"{cmd.argv[0]!r} not found on PATH; `mpilab doctor` says how to install it")
        res = sandbox.run(
            cmd.argv,
            cwd=work,
            timeout=timeout,
            env={**RUN_ENV, **cmd.env},
            memory_mb=SMPI_MEMORY_MB if flavour == "smpi" else REAL_MEMORY_MB,
        )
        if not res.ok:
            where = f"{name} on {flavour}" + (
                f" ({platform}, mapping {mapping})" if flavour == "smpi" else ""
            )
            raise LaunchError(f"{where}, P = {nprocs}: {with_runtime_message(res.failure(), res)}")
        return res.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)
