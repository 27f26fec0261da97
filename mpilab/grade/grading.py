"""Checks that the labs' test cells call, one line each.

Every check raises ``AssertionError`` with a message written for the student (nbgrader marks the
cell failed and shows the message) and returns None when the answer is right. Student C code is
compiled and run through :mod:`mpilab.grade.sandbox`: fresh scratch directory, time limit per run,
memory and output caps, no network.
"""

import importlib.resources
import io
import math
import os
import re
import shutil
import warnings

import numpy as np
import pandas as pd
from nbgrader.api import Gradebook, MissingEntry

from mpilab.core.errors import LaunchError, one_of, ToolMissing, UsageError
from mpilab.core import paths
from mpilab.core.vocabulary import COMPILERS, MPIRUN
from mpilab.grade import sandbox
from mpilab.measure import launch
from mpilab.model import costs, fits as models
from mpilab.simulate import platforms

#: Process counts of the visible correctness sweep (non-powers of two included).
VISIBLE_NPROCS = (1, 2, 3, 5, 8)
#: Process counts of the hidden sweep (every P from 1 to 8).
HIDDEN_NPROCS = (1, 2, 3, 4, 5, 6, 7, 8)
#: Wall-time limit of one correctness run, seconds.
RUN_TIMEOUT = float(os.environ.get("MPILAB_RUN_TIMEOUT", "30"))
#: Function name the lab's skeletons define, per algorithm.
STUDENT_FUNCTIONS = {"ring": "student_allgather_ring", "bruck": "student_allgather_bruck"}

#: How the checks start real runs: Open MPI, as many ranks as asked on any number of cores.
MPIRUN_OPENMPI = [MPIRUN["openmpi"], "--oversubscribe", "-np"]
#: Address-space limit of one simulated run (all its ranks live in smpirun's one process, with
#: an 8 MiB stack each), MiB.
SMPI_MEMORY_MB = 4096


def _harness():
    return importlib.resources.files("mpilab") / "data" / "grading" / "check_student.c"


#: Linked into every student program the grader builds: names the rank that calls MPI_Abort.
ABORT_REPORTER = "report_abort.c"


def _abort_reporter():
    return importlib.resources.files("mpilab") / "data" / "grading" / ABORT_REPORTER


#: Simulated runs (platform, P, mapping) of the allgather check: visible, and added when hidden.
#: THIN has 24 cores per node: 13 ranks by node straddle both nodes unevenly, 48 fill them.
SMPI_VISIBLE = (("orfeo-thin", 13, "node"),)
SMPI_HIDDEN = (("orfeo-thin", 48, "core"), ("orfeo-thin", 29, "socket"))


def check_allgather_c(c_file, algorithm, hidden=False, nprocs=None, smpi_runs=None, timeout=RUN_TIMEOUT):
    """Compile a student's allgather and check every element on real Open MPI and under SMPI.

    Parameters
    ----------
    c_file : str or path
        The student's C file (defines e.g. ``student_allgather_ring`` with MPI_Allgather's
        signature).
    algorithm : {"ring", "bruck"}
        Which skeleton it implements.
    hidden : bool
        Add the hidden cases (char and double, ``MPI_IN_PLACE``, a sub-communicator), every
        P from 1 to 8, and the larger simulated runs of :data:`SMPI_HIDDEN`.
    nprocs : sequence of int, optional
        Open MPI process counts (default :data:`VISIBLE_NPROCS` or :data:`HIDDEN_NPROCS`).
    smpi_runs : sequence of (platform, P, mapping), optional
        Simulated runs (default :data:`SMPI_VISIBLE`, plus :data:`SMPI_HIDDEN` when hidden;
        ``()`` for none).
    timeout : float
        Limit of each run in seconds; a run that exceeds it fails as a probable deadlock.

    Raises
    ------
    AssertionError
        On a compile error, a wrong element, a crash (rank and signal) or a time-out, naming P
        (and the simulated cluster).
    """
    c_file = os.fspath(c_file)
    nprocs = nprocs or (HIDDEN_NPROCS if hidden else VISIBLE_NPROCS)
    if smpi_runs is None:
        smpi_runs = SMPI_VISIBLE + (SMPI_HIDDEN if hidden else ())
    args = ["--hidden"] if hidden else []
    work = _build(c_file, algorithm, "openmpi")
    try:
        for p in nprocs:
            res = sandbox.run(MPIRUN_OPENMPI + [str(p), "./check_student"] + args, cwd=work, timeout=timeout)
            if res.ok:
                continue
            fails = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
            why = fails[0][5:] if fails else res.failure()
            raise AssertionError(f"{algorithm} allgather with P = {p}: {why}")
        if smpi_runs:
            _build(c_file, algorithm, "smpi", work=work)
        _check_smpi_runs(work, "check_student_smpi", args, smpi_runs, f"{algorithm} allgather", timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build(c_file, algorithm, flavour="openmpi", work=None, reference=False):
    """Compile the harness with the student's file in a scratch directory; return the directory.

    ``flavour`` "openmpi" makes ``check_student``, "smpi" ``check_student_smpi``. With
    ``reference`` the kit's own algorithms (``c_reference/build/<flavour>/liblabcoll.a``) are
    linked in too, for ``--time-reference``.
    """
    if algorithm not in STUDENT_FUNCTIONS:
        raise one_of("skeleton algorithm", algorithm, STUDENT_FUNCTIONS)
    if not os.path.isfile(c_file):
        raise AssertionError(f"{c_file} not found: keep the skeleton file next to the notebook")
    with importlib.resources.as_file(_harness()) as harness, \
            importlib.resources.as_file(_abort_reporter()) as reporter:
        if work is None:
            work = sandbox.scratch_dir([c_file, harness, reporter])
        else:
            for f in (c_file, harness, reporter):
                shutil.copy(f, work)
    exe = "check_student" if flavour == "openmpi" else f"check_student_{flavour}"
    extra = []
    if reference:
        lib = paths.build_dir(flavour) / "liblabcoll.a"
        if not lib.exists():
            shutil.rmtree(work, ignore_errors=True)
            raise AssertionError(f"{lib} is missing: build the reference with make -C c_reference FLAVOUR={flavour}")
        extra = ["-DWITH_REFERENCE", f"-I{paths.c_reference_dir() / 'include'}"]
    cmd = [COMPILERS[flavour], "-O1", "-std=c99", f"-DSTUDENT_FN={STUDENT_FUNCTIONS[algorithm]}", *extra,
           "check_student.c", ABORT_REPORTER, os.path.basename(c_file)]
    cmd += [str(lib)] if reference else []
    build = sandbox.run(cmd + ["-o", exe], cwd=work, timeout=120)
    if not build.ok:
        shutil.rmtree(work, ignore_errors=True)
        raise AssertionError(f"{os.path.basename(c_file)} does not compile:\n{build.stderr[-2000:]}")
    return work


#: Timed iterations and warm-up ones of :func:`benchmark_c` per flavour (SMPI's time repeats exactly).
BENCH_ITERS = {"openmpi": (20, 5), "smpi": (2, 1)}


def benchmark_c(c_files, nprocs=(2, 4), flavour="openmpi", platform="orfeo-thin", mapping="core",
                reference=False, timeout=RUN_TIMEOUT):
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
        Columns algorithm, nprocs, bytes (per rank), avg_us (max over ranks of each rank's
        average over the timed calls); SMPI's times are simulated. An algorithm that fails to
        build or run is left out with a warning saying why.
    """
    if flavour not in BENCH_ITERS:
        raise one_of("flavour for benchmark_c", flavour, BENCH_ITERS)
    iters = [str(i) for i in BENCH_ITERS[flavour]]
    exe = "check_student" if flavour == "openmpi" else f"check_student_{flavour}"

    def argv(work, p, args):
        if flavour == "openmpi":
            return MPIRUN_OPENMPI + [str(p), f"./{exe}"] + args
        return _smpi_argv(work, exe, args, p, platform, mapping)

    frames = []
    for k, (algorithm, c_file) in enumerate(c_files.items()):
        modes = [["--time", algorithm] + iters] + ([["--time-reference"] + iters] if reference and k == 0 else [])
        try:
            work = _build(os.fspath(c_file), algorithm, flavour, reference=reference)
        except AssertionError as exc:
            warnings.warn(f"{algorithm} left out: {exc}")
            continue
        try:
            for p in nprocs:
                for args in modes:
                    res = sandbox.run(argv(work, p, args), cwd=work, timeout=timeout,
                                      memory_mb=SMPI_MEMORY_MB if flavour == "smpi" else 2048)
                    if not res.ok:
                        warnings.warn(f"{algorithm} left out: timing it with P = {p}: {res.failure()}")
                        break
                    frames.append(pd.read_csv(io.StringIO(res.stdout)))
                else:
                    continue
                break
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if not frames:
        raise AssertionError("no algorithm could be timed; fix the correctness checks first")
    df = pd.concat(frames, ignore_index=True)
    keep = list(c_files) + ["native"] + (["gather_bcast", "pairwise"] if reference else [])
    df = df[df["algorithm"].isin(keep)]
    return df.groupby(["algorithm", "nprocs", "bytes"], as_index=False)["avg_us"].mean()


# --- cost expressions --------------------------------------------------------------------------

#: The symbols of the cost table (mpilab.model.costs), for notebooks: ``alpha, beta, p, n``.
alpha, beta, p, n = costs.alpha, costs.beta, costs.p, costs.n


def check_cost_expression(answer, collective="allgather", name="ring"):
    """Check a student's cost expression in alpha, beta, p, n; equivalent forms pass.

    The expected cost and where it is compared (its domain, e.g. ``p power of two`` for the
    pairwise exchange) come from :data:`mpilab.model.costs.TABLE`.

    Parameters
    ----------
    answer : sympy expression or str
        The student's expression.
    collective : str
        The collective ("allgather").
    name : str
        The algorithm.

    Raises
    ------
    AssertionError
        When the expression is wrong; the message names a p and n where it differs.
    UsageError
        For a collective or algorithm that is not in the table.
    """
    result = costs.check_expression(answer, collective, name)
    if not result.equal:
        raise AssertionError(result.message)


# --- plots -------------------------------------------------------------------------------------

def check_latency_plot(fig_or_ax, results_df, x="bytes", y="avg_us", by="algorithm", log="xy"):
    """Check a latency plot: log axes, labels with units, one line per algorithm, true data.

    Parameters
    ----------
    fig_or_ax : matplotlib Figure or Axes
        The student's plot (a figure with one axes, or the axes).
    results_df : pandas.DataFrame
        The student's own results table (columns ``x``, ``y`` and ``by``).
    x, y, by : str
        Columns plotted on x, on y, and one line per value of ``by``. A count (``nprocs``)
        needs a label but no unit.
    log : str
        The axes that must be logarithmic: ``"xy"`` (default), ``"y"`` (e.g. latency against
        the number of processes, where a linear x axis is as good), ``"x"`` or ``""``.

    Raises
    ------
    AssertionError
        Naming the first thing that is missing or does not match the table.
    """
    ax = fig_or_ax.axes[0] if hasattr(fig_or_ax, "savefig") else fig_or_ax
    for col in (x, y, by):
        if col not in results_df.columns:
            raise UsageError(f"results table has no column {col!r}; columns: {', '.join(results_df.columns)}")
    problems = []
    if set(log) - {"x", "y"}:
        raise UsageError(f"bad log {log!r}; valid: 'xy', 'x', 'y' or ''")
    for axis, scale in (("x", ax.get_xscale()), ("y", ax.get_yscale())):
        if axis in log and scale != "log":
            problems.append(f"the {axis} axis is {scale}: use a log scale (ax.set_{axis}scale('log'))")
    for axis, label, col in (("x", ax.get_xlabel(), x), ("y", ax.get_ylabel(), y)):
        if not label.strip():
            problems.append(f"the {axis} axis has no label")
        elif col != "nprocs" and "(" not in label and "[" not in label:
            problems.append(f"the {axis} label {label!r} has no unit in parentheses, e.g. '(bytes)' or '(us)'")
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    if ax.get_legend() is None:
        problems.append("there is no legend (ax.legend())")
    expected = sorted(map(str, results_df[by].unique()))
    missing = [a for a in expected if a not in lines]
    if missing:
        problems.append(f"no line labelled {', '.join(missing)} (lines: {', '.join(sorted(lines)) or 'none'})")
    for name in expected:
        if name not in lines:
            continue
        sub = results_df[results_df[by].astype(str) == name].groupby(x)[y].mean().sort_index()
        xs, ys = (np.asarray(v, dtype=float) for v in lines[name].get_data())
        order = np.argsort(xs)
        if len(xs) != len(sub) or not np.allclose(xs[order], sub.index.to_numpy(float)) \
                or not np.allclose(ys[order], sub.to_numpy(float), rtol=1e-6):
            problems.append(f"the line {name!r} does not match your results table's {y} by {x}")
    if problems:
        raise AssertionError("; ".join(problems))


# --- the gradebook -----------------------------------------------------------------------------

def score_table(course_root, assignment):
    """Scores per student and graded cell, from an nbgrader course's gradebook.

    Parameters
    ----------
    course_root : str or path
        The nbgrader course root (holds ``gradebook.db``).
    assignment : str
        The assignment name, e.g. ``"lab2"``.

    Returns
    -------
    pandas.DataFrame
        One row per student; one column per graded cell (``grade_id``), then ``total`` and
        ``max``. Manually graded cells show their score so far (0 until graded).
    """
    db = os.path.join(os.fspath(course_root), "gradebook.db")
    if not os.path.exists(db):
        raise UsageError(f"no gradebook at {db}; run nbgrader generate_assignment there first")
    rows = []
    with Gradebook(f"sqlite:///{db}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            names = [a.name for a in gb.assignments]
            raise one_of("assignment", assignment, names) from None
        for sub in gb.assignment_submissions(assignment):
            row = {"student": sub.student_id}
            for nb in sub.notebooks:
                for grade in nb.grades:
                    row[grade.name] = grade.score
            row["total"], row["max"] = sub.score, sub.max_score
            rows.append(row)
    return pd.DataFrame(rows).sort_values("student").set_index("student")


# --- lab 0 ---------------------------------------------------------------------------------------

#: Open MPI process counts of the hello check; the simulated run: (platform, P, mapping).
HELLO_NPROCS = (1, 2, 3, 4)
HELLO_SMPI = ("orfeo-thin", 8, "node")
_HELLO = re.compile(r"^hello from rank (-?\d+) of (-?\d+) on (\S+)\s*$")


def _hello_lines(text, p, where):
    """Check the hello lines of one run; ``where`` names the run in messages. Returns the hosts."""
    lines = [m.groups() for m in map(_HELLO.match, text.splitlines()) if m]
    if len(lines) != p:
        raise AssertionError(f"{where}: {len(lines)} lines 'hello from rank R of P on HOST', "
                             f"expected {p} (one per rank); the output was:\n{text[-1500:]}")
    ranks = sorted(int(r) for r, _, _ in lines)
    if ranks != list(range(p)):
        raise AssertionError(f"{where}: the ranks printed were {ranks}, expected each of 0..{p - 1} "
                             "once — did you call MPI_Comm_rank on MPI_COMM_WORLD?")
    sizes = sorted({int(s) for _, s, _ in lines})
    if sizes != [p]:
        raise AssertionError(f"{where}: the sizes printed were {sizes}, expected {p} on every rank "
                             "— did you call MPI_Comm_size on MPI_COMM_WORLD?")
    hosts = {int(r): h for r, _, h in lines}
    if "?" in hosts.values():
        raise AssertionError(f"{where}: a rank printed host '?' — did you call MPI_Get_processor_name?")
    return [hosts[r] for r in range(p)]


def check_hello_c(c_file="hello.c", nprocs=HELLO_NPROCS, smpi=HELLO_SMPI, timeout=RUN_TIMEOUT):
    """Compile a student's hello world and check what every rank prints.

    It runs on real Open MPI with each of ``nprocs`` ranks, then under SMPI on a simulated
    cluster, where each rank must name the simulated core it was placed on.

    Parameters
    ----------
    c_file : str or path
        The student's ``hello.c``: every rank prints ``hello from rank R of P on HOST``.
    nprocs : sequence of int
        Open MPI process counts.
    smpi : (platform, P, mapping) or None
        The simulated run (None: none).
    timeout : float
        Limit of each run, seconds.

    Raises
    ------
    AssertionError
        On a compile error, a crash, a time-out, or a missing, repeated or wrong line.
    """
    c_file = os.fspath(c_file)
    if not os.path.isfile(c_file):
        raise AssertionError(f"{c_file} not found: keep hello.c next to the notebook")
    work = sandbox.scratch_dir([c_file])
    name = os.path.basename(c_file)
    try:
        for flavour, exe in (("openmpi", "hello"), ("smpi", "hello_smpi")):
            if flavour == "smpi" and not smpi:
                continue
            why = _compile_one(work, name, flavour, exe)
            if why:
                raise AssertionError(why)
        for p in nprocs:
            res = sandbox.run(MPIRUN_OPENMPI + [str(p), "./hello"], cwd=work, timeout=timeout)
            if not res.ok:
                raise AssertionError(f"Open MPI, P = {p}: {res.failure()}")
            _hello_lines(res.stdout, p, f"Open MPI, P = {p}")
        if smpi:
            platform, p, mapping = smpi
            argv = launch.get_launcher("smpi", platform=platform, workdir=work).command(
                os.path.join(work, "hello_smpi"), [], p, mapping).argv
            res = sandbox.run(argv, cwd=work, timeout=timeout)
            where = f"SMPI on {platform}, P = {p}, mapping {mapping}"
            if not res.ok:
                raise AssertionError(f"{where}: {res.failure()}")
            hosts = _hello_lines(res.stdout, p, where)
            want = platforms.placement(platform, p, mapping)
            if hosts != want:
                bad = next(r for r in range(p) if hosts[r] != want[r])
                raise AssertionError(f"{where}: rank {bad} says it ran on {hosts[bad]!r}, but it was "
                                     f"placed on {want[bad]!r}; print the name MPI_Get_processor_name gives")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compile_one(work, name, flavour, exe):
    """Compile ``work/name`` (with :data:`ABORT_REPORTER`) for a flavour into ``work/exe`` under
    the sandbox; None or why not."""
    with importlib.resources.as_file(_abort_reporter()) as reporter:
        shutil.copy(reporter, work)
    build = sandbox.run([COMPILERS[flavour], "-O1", "-std=c99", name, ABORT_REPORTER, "-o", exe],
                        cwd=work, timeout=120)
    return None if build.ok else f"{name} does not compile for {flavour}:\n{build.stderr[-2000:]}"


def run_c(c_file, flavour="openmpi", nprocs=4, mapping="core", platform="orfeo-thin", timeout=RUN_TIMEOUT):
    """Compile one C file and run it under the grader's limits; return what it printed.

    The program is built and run in a fresh scratch directory that holds only a copy of
    ``c_file``, with the limits of every graded run (:func:`mpilab.grade.sandbox.run`: the time limit,
    a memory and an output cap, no network), so a program that hangs or prints in a loop stops
    here as it would in grading, instead of hanging the notebook or the autograder.

    Parameters
    ----------
    c_file : str or path
        One C file (e.g. lab 0's ``hello.c``).
    flavour : {"openmpi", "mpich", "smpi"}
        Real MPI on this machine, or SimGrid SMPI on ``platform``.
    nprocs : int
        Number of ranks.
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
    work = sandbox.scratch_dir([c_file])
    try:
        why = _compile_one(work, name, flavour, exe)
        if why:
            raise LaunchError(why)
        opts = {"platform": platform, "workdir": work} if flavour == "smpi" else {}
        cmd = launch.get_launcher(flavour, **opts).command(os.path.join(work, exe), [], nprocs, mapping)
        if shutil.which(cmd.argv[0]) is None:
            raise ToolMissing(f"{cmd.argv[0]!r} not found on PATH; `mpilab doctor` says how to install it")
        res = sandbox.run(cmd.argv, cwd=work, timeout=timeout, env=cmd.env,
                          memory_mb=SMPI_MEMORY_MB if flavour == "smpi" else 2048)
        if not res.ok:
            where = f"{name} on {flavour}" + (f" ({platform}, mapping {mapping})" if flavour == "smpi" else "")
            raise LaunchError(f"{where}, P = {nprocs}: {res.failure()}")
        return res.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_px_allgather(rc, send="send", recv="recv"):
    """Check that on every engine ``recv`` holds every engine's ``send``, in rank order.

    Parameters
    ----------
    rc : ipyparallel.Client
        The client of the notebook's MPI engines.
    send, recv : str
        Names of the engines' numpy arrays.

    Raises
    ------
    AssertionError
        When an array is missing on an engine or ``recv`` is wrong (naming the rank).
    """
    try:
        view = rc[:]
        ranks = view.apply_sync(_engine_rank)
        sends = view.pull(send, block=True)
        recvs = view.pull(recv, block=True)
    except Exception as exc:  # ipyparallel wraps the engines' NameError in its own errors
        detail = " ".join(str(exc).split())[:300]
        raise AssertionError(f"could not read {send!r} and {recv!r} from the engines ({type(exc).__name__}: "
                             f"{detail}); run the %%px cells above first") from None
    if sorted(ranks) != list(range(len(ranks))):
        raise AssertionError(f"the engines' ranks are {sorted(ranks)}: they are not one MPI_COMM_WORLD "
                             "(restart the cluster with engines.mpi_cluster)")
    by_rank = dict(zip(ranks, sends))
    if len({np.asarray(a).tobytes() for a in sends}) < len(sends):
        raise AssertionError(f"two engines hold the same {send!r}: leave the given {send!r} as it is")
    expected = np.concatenate([np.asarray(by_rank[r]).ravel() for r in sorted(by_rank)])
    for r, got in zip(ranks, recvs):
        got = np.asarray(got).ravel()
        if got.shape != expected.shape or not np.array_equal(got, expected):
            raise AssertionError(f"rank {r}: {recv} = {got.tolist()[:24]}, expected {expected.tolist()[:24]} "
                                 f"(every rank's {send}, rank 0 first)")


def _engine_rank():
    # runs on an ipyparallel engine; importing mpi4py at the top would start MPI in the kernel
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank()


def check_pingpong_fit(alpha_us, beta_us_per_byte, bandwidth_GBps, pingpong_df, rtol=0.02):
    """Check α, β and the bandwidth against a Hockney fit of the student's own ping-pong rows.

    Parameters
    ----------
    alpha_us : float
        Latency α in µs.
    beta_us_per_byte : float
        Time per byte β in µs/B.
    bandwidth_GBps : float
        1/β in GB/s (10⁹ bytes per second).
    pingpong_df : pandas.DataFrame
        The rows :func:`mpilab.measure.pingpong.run` returned (columns ``bytes``, ``avg_us``).
    rtol : float
        Relative tolerance.

    Raises
    ------
    AssertionError
        Naming the quantity that differs and the value the fit gives.
    """
    df = _frame(pingpong_df, "pingpong_df")
    for name, v in (("alpha_us", alpha_us), ("beta_us_per_byte", beta_us_per_byte),
                    ("bandwidth_GBps", bandwidth_GBps)):
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
            raise AssertionError(f"{name} should be a number, got {v!r}")
    fit = models.hockney_fit(df["bytes"], df["avg_us"])
    want_bw = 1e-3 / fit["beta"]

    def close(a, b):
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=1e-12)

    if not close(alpha_us, fit["alpha"]):
        raise AssertionError(f"alpha_us = {alpha_us:.4g}, but a least-squares line through your ping-pong "
                             f"gives {fit['alpha']:.4g} µs (the intercept, in µs)")
    if not close(beta_us_per_byte, fit["beta"]):
        raise AssertionError(f"beta_us_per_byte = {beta_us_per_byte:.4g}, but the line's slope is "
                             f"{fit['beta']:.4g} µs per byte")
    if not close(bandwidth_GBps, want_bw):
        raise AssertionError(f"bandwidth_GBps = {bandwidth_GBps:.4g}, expected {want_bw:.4g}: 1/β is in "
                             "bytes per µs (= MB/s); divide by 1000 for GB/s")


# --- lab 3 ---
#
# Reductions: reduce-scatter by recursive halving, Rabenseifner's allreduce and a two-level
# (node-aware) allreduce, each checked element by element on real Open MPI (one machine: one
# node) and under SimGrid SMPI on simulated clusters of several nodes. Under SMPI every core of
# the kit's platforms is its own simulated host, and SimGrid's MPI_Comm_split_type
# (MPI_COMM_TYPE_SHARED) groups ranks by host, i.e. gives every rank a node of its own; the kit
# therefore builds lab-3 code for SMPI with data/lab3/smpi_nodes.h force-included, which makes
# that call group ranks by the simulated *node* named in the host names (see that file).

#: Lab 3's skeletons: algorithm -> (function the student defines, harness kind: 1 reduce-scatter,
#: 2 allreduce, 3 reduce).
LAB3_FUNCTIONS = {"reduce_scatter": ("student_reduce_scatter_block", 1),
                  "rabenseifner": ("student_allreduce_rabenseifner", 2),
                  "two_level": ("student_allreduce_two_level", 2)}
_LAB3_NAMES = {"reduce_scatter": "reduce-scatter", "rabenseifner": "Rabenseifner allreduce",
               "two_level": "two-level allreduce"}
#: The small simulated cluster of the checks: 3 nodes x 3 cores (hosts lab<node>-s0-c<core>).
LAB3_SMALL_CLUSTER = "lab-3x3"
#: Simulated runs of the visible check, (platform, P, mapping): 5 ranks = nodes of 3 and 2.
LAB3_SMPI_VISIBLE = ((LAB3_SMALL_CLUSTER, 5, "core"),)
#: Simulated runs of the hidden check: round-robin ("node") mappings put non-contiguous ranks
#: on a node; jupiter-32x16 has 16 cores per node.
LAB3_SMPI_HIDDEN = ((LAB3_SMALL_CLUSTER, 7, "node"), ("jupiter-32x16", 37, "node"),
                    ("jupiter-32x16", 40, "core"))

_SMPI_FAILED = re.compile(r"Execution failed with code (\d+)")


def _lab3_file(name):
    return importlib.resources.files("mpilab") / "data" / "lab3" / name


def _lab3_platform(platform, work):
    """Platform name or XML path for ``platform``; the small cluster is written into ``work``."""
    if platform != LAB3_SMALL_CLUSTER:
        return platform
    path = os.path.join(work, f"{LAB3_SMALL_CLUSTER}.xml")
    if not os.path.exists(path):
        spec = platforms.Spec("lab", 3, 1, 3, description="lab 3 checks: 3 nodes x 3 cores")
        with open(path, "w") as f:
            f.write(platforms.render_xml(spec))
    return path


def build_lab3(c_files, flavour, program, defines=(), work=None, student=None):
    """Compile lab-3 C files with Open MPI or SMPI in a scratch directory.

    For SMPI the node shim ``data/lab3/smpi_nodes.h`` is force-included and ``smpi_nodes.c``
    linked, so that ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`` groups ranks by simulated node.

    Parameters
    ----------
    c_files : list of path
        The sources; the first ones are copied in, in order (the harness or driver first).
    flavour : {"openmpi", "smpi"}
    program : str
        Name of the executable.
    defines : sequence of str
        ``-D`` definitions (without the ``-D``).
    work : str, optional
        An existing scratch directory to build in (default: a new one).
    student : path, optional
        The student's file among ``c_files``, named in a compile error (default: the last).

    Returns
    -------
    str
        The scratch directory holding the program; the caller removes it.

    Raises
    ------
    AssertionError
        When a file is missing or the build fails (the compiler's messages, shortened).
    """
    if flavour not in ("openmpi", "smpi"):
        raise one_of("flavour for lab 3", flavour, ("openmpi", "smpi"))
    c_files = [os.fspath(f) for f in c_files]
    for f in c_files:
        if not os.path.isfile(f):
            raise AssertionError(f"{f} not found: keep the skeleton file next to the notebook")
    with importlib.resources.as_file(_lab3_file("smpi_nodes.h")) as h, \
            importlib.resources.as_file(_lab3_file("smpi_nodes.c")) as c, \
            importlib.resources.as_file(_abort_reporter()) as reporter:
        extra = [reporter] + ([h, c] if flavour == "smpi" else [])
        if work is None:
            work = sandbox.scratch_dir(c_files + extra)
        else:
            for f in c_files + extra:
                shutil.copy(f, work)
    names = [os.path.basename(f) for f in c_files] + [ABORT_REPORTER]
    if flavour == "smpi":
        cmd = ["smpicc", "-O1", "-std=c99", "-include", "smpi_nodes.h"] + names + ["smpi_nodes.c"]
    else:
        cmd = [COMPILERS["openmpi"], "-O1", "-std=c99"] + names
    cmd += [f"-D{d}" for d in defines] + ["-o", program]
    build = sandbox.run(cmd, cwd=work, timeout=120)
    if not build.ok:
        student = os.path.basename(os.fspath(student or c_files[-1]))
        raise AssertionError(f"{student} does not compile:\n{(build.stderr or build.stdout)[-2000:]}")
    return work


def smpi_failure(res):
    """Why an SMPI run failed, in the words of the other checks; None if it printed PASS.

    SMPI runs every rank inside one process: a crash has no rank to name, and a deadlock is
    found by the simulator (which then exits with status 0) rather than by a time-out.
    """
    if res.timed_out:
        return sandbox.timeout_message(res.timeout)
    fails = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
    if fails:
        return fails[0][5:]
    abort = res.abort()
    if abort:
        return f"rank {abort[0]} crashed: {abort[1]}"
    if "Deadlock detected" in res.stderr:
        return f"the simulator found every rank waiting for a message nobody sends — {sandbox.DEADLOCK_HINT}"
    m = _SMPI_FAILED.search(res.stderr)
    code = int(m.group(1)) if m else res.returncode
    if code is not None and code > 128:
        sig = code - 128
        return (f"a rank crashed: signal {sig} ({sandbox.signal_name(sig)}) (the simulator runs "
                "every rank in one process and cannot say which)")
    if res.ok and "PASS" in res.stdout.split():
        return None
    last = (res.stderr.strip() or res.stdout.strip()).splitlines()[-3:]
    return f"exit status {res.returncode} without PASS: " + " | ".join(last)


def _smpi_argv(work, program, args, nprocs, platform, mapping, cfg=()):
    launcher = launch.get_launcher("smpi", platform=_lab3_platform(platform, work), workdir=work,
                                   cfg=list(cfg))
    return launcher.command(os.path.join(work, program), args, nprocs, mapping).argv


def _check_smpi_runs(work, program, args, runs, name, timeout):
    """Run a built checking program under SMPI for each (platform, P, mapping) of ``runs``.

    Raises
    ------
    AssertionError
        At the first run that fails, naming ``name``, P, the simulated cluster and why.
    """
    for platform, p, mapping in runs:
        argv = _smpi_argv(work, program, args, p, platform, mapping)
        res = sandbox.run(argv, cwd=work, timeout=timeout, memory_mb=SMPI_MEMORY_MB)
        why = smpi_failure(res)
        if why:
            raise AssertionError(f"{name} with P = {p} ({_nodes_note(platform, mapping)}): {why}")


def _nodes_note(platform, mapping):
    if platform == LAB3_SMALL_CLUSTER:
        return f"simulated, {mapping} mapping on 3 nodes x 3 cores"
    return f"simulated, {mapping} mapping on {platform}"


def check_reduction_c(c_file, algorithm, hidden=False, nprocs=None, smpi_runs=None,
                      timeout=RUN_TIMEOUT):
    """Compile a student's reduction and check every element on real Open MPI and under SMPI.

    Parameters
    ----------
    c_file : str or path
        The student's C file (``reduce_scatter.c``, ``allreduce_rabenseifner.c`` or
        ``allreduce_two_level.c``).
    algorithm : {"reduce_scatter", "rabenseifner", "two_level"}
        Which skeleton it implements (:data:`LAB3_FUNCTIONS`).
    hidden : bool
        Add the hidden cases (MPI_DOUBLE, a prime count, ``MPI_IN_PLACE``, a sub-communicator),
        every P from 1 to 8 on Open MPI, and the larger simulated runs of
        :data:`LAB3_SMPI_HIDDEN`.
    nprocs : sequence of int, optional
        Open MPI process counts (default :data:`VISIBLE_NPROCS` or :data:`HIDDEN_NPROCS`).
    smpi_runs : sequence of (platform, P, mapping), optional
        Simulated runs (default :data:`LAB3_SMPI_VISIBLE`, plus :data:`LAB3_SMPI_HIDDEN` when
        hidden; ``()`` for none).
    timeout : float
        Limit of each run in seconds; a run that exceeds it fails as a probable deadlock.

    Raises
    ------
    AssertionError
        On a compile error, a wrong element, an error code returned, a crash or a deadlock,
        naming P (and the simulated cluster) where it happened.
    """
    if algorithm not in LAB3_FUNCTIONS:
        raise one_of("lab 3 algorithm", algorithm, LAB3_FUNCTIONS)
    fn, kind = LAB3_FUNCTIONS[algorithm]
    nprocs = nprocs or (HIDDEN_NPROCS if hidden else VISIBLE_NPROCS)
    if smpi_runs is None:
        smpi_runs = LAB3_SMPI_VISIBLE + (LAB3_SMPI_HIDDEN if hidden else ())
    args = ["--hidden"] if hidden else []
    name = _LAB3_NAMES[algorithm]
    with importlib.resources.as_file(importlib.resources.files("mpilab") / "data" / "grading"
                                     / "check_reduce.c") as harness:
        sources = [harness, os.fspath(c_file)]
        defines = [f"STUDENT_FN={fn}", f"KIND={kind}"]
        work = build_lab3(sources, "openmpi", "check_reduce", defines) if nprocs else None
        try:
            for p in nprocs:
                res = sandbox.run(MPIRUN_OPENMPI + [str(p), "./check_reduce"] + args, cwd=work,
                                  timeout=timeout)
                if res.ok:
                    continue
                fails = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
                raise AssertionError(f"{name} with P = {p}: {fails[0][5:] if fails else res.failure()}")
            if smpi_runs:
                work = build_lab3(sources, "smpi", "check_reduce_smpi", defines, work=work) if work \
                    else build_lab3(sources, "smpi", "check_reduce_smpi", defines)
            _check_smpi_runs(work, "check_reduce_smpi", args, smpi_runs, name, timeout)
        finally:
            if work:
                shutil.rmtree(work, ignore_errors=True)


# --- answers as tables (lab 0) ---------------------------------------------------------------

def _frame(df, what):
    if not isinstance(df, pd.DataFrame):
        raise AssertionError(f"{what} should be a pandas DataFrame, got {type(df).__name__}")
    if df.empty:
        raise AssertionError(f"{what} is empty: run the measurement cells first")
    return df

