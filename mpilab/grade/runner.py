"""Building and running a student's C code under the grader's limits.

Everything the labs and the grader run of a student's C goes through here, in a fresh scratch
directory holding only the files it needs and under :mod:`mpilab.grade.sandbox`'s limits:

* :mod:`mpilab.grade.harness` compiles the student's file with a checking harness (or alone);
* :func:`run_cases` runs a harness that prints one ``CASE`` line per case (the protocol of
  ``mpilab/data/grading/check_student.c``) over several process counts and simulated clusters,
  and turns what it printed, a crash or a hang into :class:`mpilab.grade.cases.Case` results;
* :func:`run_c` compiles and runs one program and returns its output (lab 0's hello cells);
* :func:`benchmark_c` times students' allgathers next to ``MPI_Allgather`` (lab 2);
* :func:`benchmark_bcast` does the same for lab 6's broadcasts.
"""

import datetime as dt
import io
import os
import re
import shutil
import time
import warnings
from dataclasses import dataclass

import pandas as pd

from mpilab.core.errors import LaunchError, ToolMissing, one_of
from mpilab.core.vocabulary import COMPILERS, MPIRUN
from mpilab.grade import harness, outcome, references, sandbox, sealed
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
    """Run a command of :func:`argv` in the sandbox with the flavour's memory cap."""
    return sandbox.run(
        command,
        cwd=work,
        timeout=timeout,
        env=RUN_ENV,
        memory_mb=SMPI_MEMORY_MB if run.flavour == "smpi" else REAL_MEMORY_MB,
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


_CASE = re.compile(r"^CASE (\S+)(?: (.*?))?\t(PASS|FAIL|TIMEOUT)(?:\t(.*))?$")


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


def parse_cases(stdout):
    """``CASE`` lines of a harness: a list of ``(kind, detail, status, message)``."""
    out = []
    for line in stdout.splitlines():
        m = _CASE.match(line)
        if m:
            out.append((m.group(1), m.group(2) or "", m.group(3), m.group(4) or ""))
    return out


def run_cases(work, program, runs, kinds, timeout=RUN_TIMEOUT, case_timeout=None, args=(), progress=None):
    """Run a case harness for every run and return one :class:`Case` per (run, kind).

    A kind passes when every case the harness ran of it passed (every count); its message is
    the first failure and how many of its cases failed. A kind the run never reported (the
    program crashed or hung before it) fails with the run's failure; the kinds after it get one
    more run. On a real MPI a case that hangs past ``case_timeout`` seconds is reported by the
    harness itself; when the first kind hangs, the other kinds of that run are not tried (they
    share its schedule), and after two such runs the rest of the real runs are skipped, to bound
    the time a deadlocked submission costs.

    Parameters
    ----------
    work : str
        The scratch directory with the built programs (``program`` for real flavours,
        ``program + "_smpi"`` for SMPI).
    runs : sequence of Run
        A run's own ``kinds`` (when set) replace ``kinds``.
    kinds : sequence of str
        The harness's kinds, in the order it runs them.
    timeout : float
        Wall-time limit of one launch.
    case_timeout : float, optional
        Per-case limit on real MPI (default: a third of ``timeout``, at least 3 s).
    args : sequence of str
        Extra harness arguments.
    progress : callable, optional
        Called with a line before and after each launch (the notebook's checks print them, so a
        long wait shows which run it is and how long it has taken).

    Returns
    -------
    list of Case
    """
    case_timeout = case_timeout or max(3.0, timeout / 3)
    say = progress or (lambda line: None)
    out, hung_first = [], []
    for run in runs:
        run_kinds = list(run.kinds or kinds)
        exe = program + ("_smpi" if run.flavour == "smpi" else "")
        if run.flavour != "smpi" and len(hung_first) >= 2:
            out += [
                Case(
                    f"{run.label}, {k}",
                    False,
                    f"not run: the first case hung at P = {hung_first[0]} and P = {hung_first[1]}",
                    hidden=run.hidden,
                )
                for k in run_kinds
            ]
            continue
        left, tries = list(run_kinds), 0
        while left and tries < 2:
            tries += 1
            extra = ["--kinds", ",".join(left)]
            if run.flavour != "smpi":
                extra += ["--case-timeout", f"{case_timeout:.0f}"]
            say(f"running {run.label} ({', '.join(left)}) ...")
            started = time.monotonic()
            key = sealed.prepare(work, run.nprocs)
            try:
                res = execute(work, argv(work, exe, [*args, *extra], run), run, timeout=timeout)
            finally:
                sealed.clear(work)
            say(f"  {run.label}: {time.monotonic() - started:.1f} s")
            lines, forged = sealed.unseal(res.stdout, key)
            by_kind = {}
            for kind, detail, status, msg in parse_cases("\n".join(lines)):
                by_kind.setdefault(kind, []).append((detail, status, msg))
            hung = None
            for kind in [k for k in left if k in by_kind]:
                group = by_kind[kind]
                bad = [(d, s, m) for d, s, m in group if s != "PASS"]
                if any(s == "TIMEOUT" for _, s, _ in bad):
                    hung = kind
                message = ""
                if bad:
                    d, s, m = bad[0]
                    m = (
                        f"no result after {case_timeout:.0f} s — {outcome.DEADLOCK_HINT}"
                        if s == "TIMEOUT"
                        else m
                    )
                    message = f"{d}: {m}" if d else m
                    if len(group) > 1:
                        message += f" ({len(bad)} of the {len(group)} cases of this kind failed)"
                out.append(Case(f"{run.label}, {kind}", not bad, message, hidden=run.hidden))
                left.remove(kind)
            if hung is not None:
                if hung == run_kinds[0]:
                    hung_first.append(run.nprocs)
                    out += [
                        Case(f"{run.label}, {k}", False, f"not run: the {hung} case hung", hidden=run.hidden)
                        for k in left
                    ]
                    left = []
                continue
            if not left:
                break
            why = failure(res, run) or (
                "the program printed no result" if not by_kind else "the program ended before this case"
            )
            if forged:
                why += (
                    f" ({forged} CASE line{'s' if forged > 1 else ''} without the harness's seal "
                    "counted for nothing: only the harness reports results)"
                )
            out.append(Case(f"{run.label}, {left.pop(0)}", False, why, hidden=run.hidden))
        out += [
            Case(f"{run.label}, {k}", False, "not run: the program kept failing", hidden=run.hidden)
            for k in left
        ]
    return out


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


#: Timed iterations and warm-up ones of :func:`benchmark_c` per flavour (SMPI's time repeats exactly).
BENCH_ITERS = {"openmpi": (20, 5), "smpi": (2, 1)}
#: SMPI's MPI_Allgather (``native``) in a timing run picks its algorithm as Open MPI 4.1's tuned
#: component does (SimGrid's ``ompi`` selector), as ORFEO's Open MPI would. SimGrid's default
#: allgather posts all P - 1 sends and receives at once: P = 48 took 25 s to simulate, 0.8 s this way.
BENCH_SMPI_CFG = ("smpi/coll-selector:ompi",)
#: The allgather harness's kinds of case, in the order it runs them.
ALLGATHER_KINDS = ("int", "char", "double", "in-place", "sub-communicator")


def benchmark_bcast(
    c_files,
    nprocs=(2, 4),
    sizes=(8, 1024, 65536),
    segsizes=(8192,),
    flavour="openmpi",
    platform="orfeo-thin",
    mapping="core",
    native=True,
    iters=None,
    warmup=None,
    timeout=RUN_TIMEOUT,
):
    """Time students' broadcasts (and MPI_Bcast, ``native``), for real or simulated.

    All the files are built into one program, which checks every byte of one broadcast of an
    algorithm before it times it at each size (a wrong result leaves that algorithm out from
    there, with a warning). A file that does not compile is left out with a warning; when a run
    crashes or hangs, each algorithm is timed on its own so that one bad file costs only itself.

    Parameters
    ----------
    c_files : dict
        Algorithm name (:data:`BCAST_FUNCTIONS`) to C file, or to the kit's compiled reference
        of that algorithm (:func:`mpilab.grade.references.reference`; SMPI, timed on its own).
    nprocs : sequence of int
    sizes : sequence of int
        Bytes broadcast (MPI_BYTE) from rank 0.
    segsizes : sequence of int
        The pipeline's segment sizes in bytes (each size is timed with each).
    flavour : {"openmpi", "smpi"}
    platform, mapping : str
        SMPI only: the simulated cluster (a name or an XML path) and how ranks are placed.
    native : bool
        Also time ``MPI_Bcast`` (the library's own choice; SMPI's default selector).
    iters, warmup : int, optional
        Timed and warm-up calls per point (default :data:`BENCH_ITERS` of the flavour).
    timeout : float
        Limit of each launch in seconds.

    Returns
    -------
    pandas.DataFrame
        algorithm, nprocs, bytes, segsize (0 but for the pipeline), maxrank_avg_us (the slowest
        rank's average over the timed calls; SMPI: simulated µs), date (when the launch that
        measured the row started, UTC).
    """
    if flavour not in BENCH_ITERS:
        raise one_of("flavour for benchmark_bcast", flavour, BENCH_ITERS)
    unknown = [a for a in c_files if a not in harness.BCAST_FUNCTIONS]
    if unknown:
        raise one_of("broadcast algorithm", unknown[0], harness.BCAST_FUNCTIONS)
    it, wu = BENCH_ITERS[flavour]
    iters, warmup = it if iters is None else int(iters), wu if warmup is None else int(warmup)
    # a compiled reference (mpilab.grade.references) is a program ready to run: timed on its own
    files = {a: f if isinstance(f, references.Compiled) else os.fspath(f) for a, f in c_files.items()}
    args = [
        "--sizes",
        ",".join(str(int(b)) for b in sizes),
        "--segsizes",
        ",".join(str(int(s)) for s in segsizes),
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
    ]
    exe = "check_bcast" + ("_smpi" if flavour == "smpi" else "")
    frames = []

    def time_group(algorithms, with_native, strict):
        """Build ``algorithms`` together and time them (and native) at every P; False when the
        build or a launch fails and ``strict`` (the caller then times one at a time)."""
        compiled = [files[a] for a in algorithms if isinstance(files[a], references.Compiled)]
        if compiled and (len(algorithms) > 1 or flavour != references.FLAVOUR):
            if strict:
                return False
            warnings.warn(f"{algorithms[0]} left out: {compiled[0]} runs on {references.FLAVOUR} only, alone")
            return True
        try:
            work = (
                compiled[0].scratch()
                if compiled
                else harness.build_bcast([files[a] for a in algorithms], flavour, require=algorithms)
            )
        except harness.BuildError as exc:
            if strict:
                return False
            warnings.warn(f"{algorithms[0]} left out: {exc}")
            return True
        names = list(algorithms) + (["native"] if with_native else [])
        got = []
        try:
            for p in nprocs:
                run = Run(flavour, p, platform if flavour == "smpi" else None, mapping)
                when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
                res = execute(work, argv(work, exe, ["--time", ",".join(names), *args], run), run, timeout)
                if not res.ok:
                    if strict:
                        return False
                    warnings.warn(
                        f"{', '.join(names)} left out at P = {p}: {failure(res, run) or 'it failed'}"
                    )
                    continue
                for line in res.stdout.splitlines():
                    if line.startswith("# SKIP"):
                        warnings.warn(f"P = {p}: {line[2:]}")
                got.append(pd.read_csv(io.StringIO(res.stdout), comment="#").assign(date=when))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        frames.extend(got)
        return True

    if not time_group(list(files), native, strict=len(files) > 1):
        for algorithm in files:  # one bad file costs only itself
            time_group([algorithm], False, strict=False)
        if native:
            time_group([], True, strict=False)
    if not frames:
        raise AssertionError("no broadcast could be timed; fix the correctness checks first")
    return pd.concat(frames, ignore_index=True)


def benchmark_c(
    c_files,
    nprocs=(2, 4),
    flavour="openmpi",
    platform="orfeo-thin",
    mapping="core",
    reference=False,
    timeout=RUN_TIMEOUT,
):
    """Time students' allgathers and MPI_Allgather (``native``), for real or simulated.

    Parameters
    ----------
    c_files : dict
        Algorithm name ("ring", "bruck") to C file.
    nprocs : sequence of int
        Process counts.
    flavour : {"openmpi", "smpi"}
        Real Open MPI on this machine, or SimGrid SMPI on ``platform``.
    platform, mapping : str
        SMPI only: the simulated cluster and how ranks are placed on it.
    reference : bool
        Also time the kit's ``gather_bcast`` and ``pairwise`` (from ``c_reference``).
    timeout : float
        Limit of each run in seconds.

    Returns
    -------
    pandas.DataFrame
        Columns algorithm, nprocs, bytes (per rank), maxrank_avg_us (the slowest rank's average
        over the timed calls, as the results table's column of that name); SMPI's times are
        simulated; ``date``, when the launch that measured the row started (UTC). An algorithm
        that fails to build, fails its correctness check or fails to run is left out with a
        warning saying why.
    """
    if flavour not in BENCH_ITERS:
        raise one_of("flavour for benchmark_c", flavour, BENCH_ITERS)
    iters = [str(i) for i in BENCH_ITERS[flavour]]
    exe = "check_student" + ("_smpi" if flavour == "smpi" else "")
    frames = []
    # Real times are noisy: MPI_Allgather is timed in the same launch as each algorithm, side by
    # side. Simulated times repeat exactly: its curve, and the references', are simulated once.
    native_timed = reference_timed = False
    for algorithm, c_file in c_files.items():
        once = flavour == "smpi" and native_timed
        modes = [["--time-alone" if once else "--time", algorithm] + iters]
        if reference and not reference_timed:
            modes.append(["--time-reference"] + iters)
        try:
            work = harness.build_allgather(os.fspath(c_file), algorithm, flavour, reference=reference)
        except harness.BuildError as exc:
            warnings.warn(f"{algorithm} left out: {exc}")
            continue
        try:
            # a wrong algorithm's time means nothing: check it first (every kind, at the
            # smallest P above 1 that is timed)
            run = Run(
                flavour,
                min([q for q in nprocs if q > 1] or nprocs),
                platform if flavour == "smpi" else None,
                mapping,
            )
            wrong = [
                c for c in run_cases(work, "check_student", [run], ALLGATHER_KINDS, timeout) if not c.passed
            ]
            if wrong:
                warnings.warn(
                    f"{algorithm} left out: it is not right yet, so its time would mean nothing "
                    f"({wrong[0].name}: {wrong[0].message})"
                )
                continue
            for p in nprocs:
                run = Run(flavour, p, platform if flavour == "smpi" else None, mapping)
                for args in modes:
                    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
                    res = execute(work, argv(work, exe, args, run, cfg=BENCH_SMPI_CFG), run, timeout)
                    if not res.ok:
                        warnings.warn(f"{algorithm} left out: timing it with P = {p}: {res.failure()}")
                        break
                    frames.append(pd.read_csv(io.StringIO(res.stdout)).assign(date=when))
                else:
                    continue
                break
            else:
                native_timed = True
                reference_timed = reference_timed or reference
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if not frames:
        raise AssertionError("no algorithm could be timed; fix the correctness checks first")
    df = pd.concat(frames, ignore_index=True)
    keep = list(c_files) + ["native"] + (["gather_bcast", "pairwise"] if reference else [])
    df = df[df["algorithm"].isin(keep)]
    return df.groupby(["algorithm", "nprocs", "bytes"], as_index=False).agg(
        maxrank_avg_us=("maxrank_avg_us", "mean"), date=("date", "min")
    )
