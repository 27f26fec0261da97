"""Checks that the labs' test cells call, one line each.

Every check raises ``AssertionError`` with a message written for the student (nbgrader marks the
cell failed and shows the message) and returns None when the answer is right. Student C code is
compiled and run through :mod:`mpilab.grade.sandbox`: fresh scratch directory, time limit per run,
memory and output caps, no network.
"""

import importlib.resources
import io
import os
import re
import shutil
import warnings

import numpy as np
import pandas as pd
from nbgrader.api import Gradebook, MissingEntry

from mpilab.core.errors import one_of, UsageError
from mpilab.core import paths
from mpilab.core.vocabulary import COMPILERS, MPIRUN
from mpilab.grade import runner, sandbox
from mpilab.measure import launch
from mpilab.model import costs
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
    if not rows:   # every student stopped before nbgrader recorded a submission
        return pd.DataFrame(columns=["student", "total", "max"]).set_index("student")
    return pd.DataFrame(rows).sort_values("student").set_index("student")


# --- lab 0 ---------------------------------------------------------------------------------------

#: Lab 0's notebook now calls :func:`mpilab.grade.runner.run_c`; its checks are in
#: :mod:`mpilab.grade.checks.hello` and :mod:`mpilab.grade.checks.pxcell`.
run_c = runner.run_c


# --- SMPI runs of the allgather check above ---------------------------------------------------

#: The small simulated cluster: 3 nodes x 3 cores (hosts lab<node>-s0-c<core>).
LAB3_SMALL_CLUSTER = runner.SMALL_CLUSTER
_SMPI_FAILED = re.compile(r"Execution failed with code (\d+)")


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
        return (f"a rank crashed: signal {sig} ({sandbox._signal_name(sig)}) (the simulator runs "
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
