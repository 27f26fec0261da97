"""Checks that the labs' test cells call, one line each.

Every check raises ``AssertionError`` with a message written for the student (nbgrader marks the
cell failed and shows the message) and returns None when the answer is right. Student C code is
compiled and run through :mod:`mpilab.grade.sandbox`: fresh scratch directory, time limit per run,
memory and output caps, no network.
"""

import importlib.resources
import io
import itertools
import math
import os
import re
import shutil
import warnings

import numpy as np
import pandas as pd
from nbgrader.api import Gradebook, MissingEntry

from mpilab.core.errors import one_of, ParseError, UsageError
from mpilab.core import paths
from mpilab.core.vocabulary import COMPILERS, MPIRUN
from mpilab.grade import runner, sandbox
from mpilab.measure import launch, rules, trace
from mpilab.model import costs, decision, fits as models, p2p, schedules, stats, timeline
from mpilab.simulate import platforms, routes

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


# --- lab 4 ---------------------------------------------------------------------------------------

#: α (µs) and β (µs/B) under which lab 4's schedule checks time the students' schedules.
SCHEDULE_ALPHA, SCHEDULE_BETA = 1.5, 0.001
#: Extra SMPI runs (algorithm, P, bytes) of the hidden test of :func:`check_model_options`:
#: sizes on both sides of SMPI's 64 KiB eager limit, and P that cross THIN's sockets.
HIDDEN_TRACES = (("pairwise", 5, 32768), ("binomial", 16, 65535), ("gather_bcast", 6, 65536),
                 ("ring", 13, 8192))


def check_bcast_schedule(build, name="basic_linear", hidden=False, nbytes=1000):
    """Check a broadcast schedule written with :class:`mpilab.model.schedules.Program`.

    The schedule must give every rank the ``nbytes`` buffer, a rank may only send the buffer
    once it has it, nothing may deadlock or stay unreceived, and its time under the α-β event
    model (one message in and out of a rank at a time) must be the cost of ``name`` in
    :mod:`mpilab.model.costs`.

    Parameters
    ----------
    build : callable
        ``build(p, n, root)`` returns a list of ``p`` Programs, one per rank.
    name : str
        The broadcast of the cost table it implements (e.g. ``"basic_linear"``).
    hidden : bool
        Add more process counts and roots other than 0.
    nbytes : int

    Raises
    ------
    AssertionError
        Naming p, the root and what went wrong.
    """
    costs.cost("bcast", name)
    cases = [(q, 0) for q in (1, 2, 3, 5, 8)]
    if hidden:
        cases += [(q, r) for q in (4, 7, 13) for r in (1, q - 1)]
    for q, root in cases:
        where = f"p = {q}, root = {root}"
        try:
            progs = build(q, nbytes, root)
        except Exception as exc:   # the student's code: any error is a failed check
            raise AssertionError(f"{where}: your function raised {type(exc).__name__}: {exc}") from None
        if not isinstance(progs, (list, tuple)) or len(progs) != q \
                or not all(isinstance(x, schedules.Program) for x in progs):
            raise AssertionError(f"{where}: return a list of {q} schedules.Program, one per rank "
                                 f"(got {type(progs).__name__} {progs!r:.80})")
        wrong = [r for r, prog in enumerate(progs) if prog.rank != r]
        if wrong:
            raise AssertionError(f"{where}: list item {wrong[0]} is the program of rank "
                                 f"{progs[wrong[0]].rank}; put rank r's program at index r")
        try:
            calls, msgs = schedules.simulate(progs, SCHEDULE_ALPHA, SCHEDULE_BETA)
        except UsageError as exc:
            raise AssertionError(f"{where}: {exc}") from None
        has = {root: 0.0}
        for m in msgs.sort_values("send_us", kind="stable").itertuples():
            if m.recv_us is None or m.recv_us != m.recv_us:
                raise AssertionError(f"{where}: the message of rank {m.src} to rank {m.dst} is "
                                     "never received")
            if m.src not in has or has[m.src] > m.send_us + 1e-9:
                raise AssertionError(f"{where}: rank {m.src} sends to rank {m.dst} at "
                                     f"{m.send_us:g} us, before it has the buffer")
            if m.bytes >= nbytes:
                has[m.dst] = min(has.get(m.dst, math.inf), m.recv_us)
        missing = [r for r in range(q) if r not in has]
        if missing:
            raise AssertionError(f"{where}: rank(s) {missing} never receive the {nbytes}-byte buffer")
        total = float(calls["end_us"].max()) if len(calls) else 0.0
        want = float(costs.evaluate("bcast", name, q, nbytes, SCHEDULE_ALPHA, SCHEDULE_BETA))
        if not math.isclose(total, want, rel_tol=1e-9, abs_tol=1e-9):
            raise AssertionError(f"{where}: your schedule takes {total:g} us under the alpha-beta "
                                 f"model (alpha = {SCHEDULE_ALPHA} us, beta = {SCHEDULE_BETA} us/B, "
                                 f"n = {nbytes} B); the {name} broadcast takes {want:g} us")


def check_messages_from_rank0(answer, nprocs=8):
    """Check how many messages rank 0 sends in the ring, recursive doubling and binomial tree.

    Parameters
    ----------
    answer : dict
        ``{"ring": int, "pairwise": int, "binomial": int}``, read off the timing diagrams.
    nprocs : int

    Raises
    ------
    AssertionError
        Naming each algorithm whose count is wrong, with the count in the diagram.
    """
    want = {algo: sum(1 for op in schedules.schedule(algo, nprocs, 1)[0].ops
                      if op.dst is not None and op.dst != 0)
            for algo in ("ring", "pairwise", "binomial")}
    if not isinstance(answer, dict) or set(answer) != set(want):
        raise AssertionError(f"give a dict with the keys {sorted(want)} (got {answer!r:.80})")
    wrong = [f"{a}: you counted {answer[a]!r}, the diagram at P = {nprocs} has {want[a]} arrows "
             f"leaving rank 0" for a in sorted(want) if answer[a] != want[a]]
    if wrong:
        raise AssertionError("; ".join(wrong))


def _model_matches(options, measured, rtol=0.01):
    """None if the α-β model with ``options`` reproduces a measured SMPI timeline, else why."""
    meta = measured.meta
    pair = routes.platform_model(meta["platform"], measured.nprocs, meta.get("mapping", "core"))
    pred = timeline.predict(meta["algorithm"], measured.nprocs, meta["bytes"], **pair,
                            start_us=measured.rank_start_us(), **options)
    got, want = pred.rank_end_us().to_numpy(), measured.rank_end_us().to_numpy()
    bad = np.flatnonzero(np.abs(got - want) > rtol * np.abs(want) + 0.01)
    if len(bad):
        r = int(bad[np.argmax(np.abs(got - want)[bad])])
        return (f"{meta['algorithm']}, P = {measured.nprocs}, {meta['bytes']} B: with {options} "
                f"the model ends rank {r} at {got[r]:.3f} us, SMPI at {want[r]:.3f} us")
    return None


def check_model_options(options, traces=(), hidden=False):
    """Check model options that make the α-β event model reproduce SMPI's traced runs.

    Parameters
    ----------
    options : dict
        Keyword arguments of :func:`mpilab.model.timeline.predict`: ``ports`` and ``eager_bytes``.
    traces : sequence of Timeline
        Measured SMPI timelines (:func:`mpilab.measure.trace.run_traced`); the model, with the
        platform's α, β and port sharing (:func:`mpilab.simulate.routes.platform_model`) and each
        run's start times, must end every rank within 1 %.
    hidden : bool
        Also check fresh SMPI runs of :data:`HIDDEN_TRACES`.

    Raises
    ------
    AssertionError
        Naming the first run the model misses, and by how much.
    """
    valid = {"ports", "eager_bytes"}
    if not isinstance(options, dict) or not set(options) <= valid:
        raise AssertionError(f"give a dict with the keys ports and eager_bytes (got {options!r:.80})")
    try:
        timeline.predict("ring", 2, 1, 1.0, 1.0, **options)
    except UsageError as exc:
        raise AssertionError(str(exc)) from None
    runs = list(traces)
    if hidden:
        runs += [trace.run_traced(a, q, b, flavour="smpi", platform="orfeo-thin", reps=1,
                                     warmup=0, timeout=RUN_TIMEOUT * 4) for a, q, b in HIDDEN_TRACES]
    if not runs:
        raise AssertionError("no SMPI traces to compare with: run the cells above first")
    for measured in runs:
        if measured.meta.get("flavour") != "smpi":
            raise AssertionError("compare with SMPI runs (flavour 'smpi'); real runs vary from run to run")
        why = _model_matches(options, measured)
        if why:
            raise AssertionError(why)


def check_error_table(errors, worst, results, alpha, beta):
    """Check a model-vs-measurement table (:func:`mpilab.model.costs.compare_model`) and its worst row.

    Parameters
    ----------
    errors : pandas.DataFrame
        The student's table: ``algorithm`` and ``mape`` per algorithm.
    worst : str
        The algorithm whose model is worst (largest MAPE).
    results : pandas.DataFrame
        The measurements the table was computed from.
    alpha, beta : float
        The α (µs) and β (µs/B) the table must use.

    Raises
    ------
    AssertionError
        When the table is not the one of ``results`` with ``alpha`` and ``beta``, or ``worst``
        is not its largest error.
    """
    want = costs.compare_model(results, alpha, beta).set_index("algorithm")["mape"]
    if not isinstance(errors, pd.DataFrame) or not {"algorithm", "mape"} <= set(errors.columns):
        raise AssertionError("errors must be the DataFrame of costs.compare_model (columns "
                             "algorithm and mape)")
    got = errors.set_index("algorithm")["mape"]
    if set(got.index) != set(want.index):
        raise AssertionError(f"the table has the algorithms {sorted(got.index)}, the results "
                             f"{sorted(want.index)}")
    off = [a for a in want.index if not math.isclose(got[a], want[a], rel_tol=1e-6)]
    if off:
        raise AssertionError(f"{off[0]}: your MAPE is {got[off[0]]:.3g} %, with alpha = {alpha:g} us "
                             f"and beta = {beta:g} us/B it is {want[off[0]]:.3g} %")
    if worst != want.idxmax():
        raise AssertionError(f"worst = {worst!r}, but the largest error in the table is "
                             f"{want.idxmax()!r} ({want.max():.3g} %)")


def check_calibrated_platform(platform, pingpong_rows):
    """Check that a platform's core link is the first segment of a fit of one's own ping-pong.

    Parameters
    ----------
    platform : str or path
        The SimGrid platform file written by :func:`mpilab.simulate.calibration.calibrate`.
    pingpong_rows : pandas.DataFrame
        The ping-pong the platform was calibrated to (:func:`mpilab.measure.pingpong.run`, mapping
        ``core``).

    Raises
    ------
    AssertionError
        When the platform's latency and time per byte between two cores of one socket are not
        the intercept and slope of the first segment of a 1-, 2- or 3-segment fit of the rows
        (of their medians or of their averages).
    """
    try:
        hosts = platforms.placement(platform, 2, "core")
        a, b = routes.route_cost(platform, hosts[0], hosts[1])
    except UsageError as exc:
        raise AssertionError(f"cannot read the platform {str(platform)!r}: {exc}") from None
    rows = pingpong_rows[pingpong_rows["mapping"] == "core"]
    fits = []
    values = [v for v in ("maxrank_median_us", "avg_us") if v in rows.columns]
    for value, segments in itertools.product(values, (1, 2, 3)):
        try:
            first = p2p.fit(rows, segments=segments, value=value).iloc[0]
        except UsageError:
            continue
        fits.append(f"{first['intercept']:.4g} us + {first['slope']:.4g} us/B ({segments} "
                    f"segment(s) of {value})")
        if math.isclose(a, first["intercept"], rel_tol=1e-3, abs_tol=1e-6) \
                and math.isclose(b, first["slope"], rel_tol=1e-3):
            return
    raise AssertionError(f"the platform's core link costs {a:.4g} us + {b:.4g} us/B; a fit of your "
                         f"ping-pong gives {' or '.join(fits) or 'nothing'}: calibrate with "
                         f"calibration.calibrate(pp, ...)")


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


# --- lab 1 ---------------------------------------------------------------------------------------

def _frame(df, what):
    if not isinstance(df, pd.DataFrame):
        raise AssertionError(f"{what} should be a pandas DataFrame, got {type(df).__name__}")
    if df.empty:
        raise AssertionError(f"{what} is empty: run the measurement cells first")
    return df


def _no_answer(answer, what):
    if answer is None or answer is Ellipsis:
        raise AssertionError(f"no answer yet: assign {what}")


def check_segmented_fits(fits, results_df, nbytes, segments=4, value="avg_us"):
    """Check segmented fits over P against the same fit of the student's own results.

    Parameters
    ----------
    fits : pandas.DataFrame
        The student's table: one row per (collective, algorithm, segment) with ``intercept``
        and ``slope`` (as :func:`mpilab.model.fits.segmented_fit_p` returns it).
    results_df : pandas.DataFrame
        The student's results (any sizes; the rows at ``nbytes`` are fitted).
    nbytes : int
        The fixed message size the fits are for.
    segments : int
        Segments per curve.
    value : str
        Timing column fitted.

    Raises
    ------
    AssertionError
        Naming the first curve or segment that differs (a fit of another size, metric or
        number of segments).
    """
    _no_answer(fits, "the fitted table to fits")
    fits = _frame(fits, "fits")
    results_df = _frame(results_df, "the results table")
    missing = [c for c in ("collective", "algorithm", "intercept", "slope") if c not in fits.columns]
    if missing:
        raise AssertionError(f"fits has no column(s) {', '.join(missing)}; columns: {', '.join(fits.columns)}")
    at = results_df[results_df["bytes"] == nbytes]
    if at.empty:
        raise AssertionError(f"your results have no rows at {nbytes} bytes; sizes measured: "
                             f"{sorted(results_df['bytes'].unique().tolist())}")
    want = models.segmented_fit_p(at, segments=segments, value=value,
                                  by=("collective", "algorithm"))
    for (coll, alg), w in want.groupby(["collective", "algorithm"]):
        g = fits[(fits["collective"] == coll) & (fits["algorithm"] == alg)]
        if g.empty:
            raise AssertionError(f"fits has no rows for {coll} {alg}")
        if len(g) != len(w):
            raise AssertionError(f"{coll} {alg}: {len(g)} segments in fits, expected {len(w)}")
        order = [c for c in ("segment", "lower") if c in g.columns]
        got = g.sort_values(order[0]) if order else g
        for k, ((_, a), (_, b)) in enumerate(zip(got.iterrows(), w.iterrows()), 1):
            for col in ("intercept", "slope"):
                if not math.isclose(float(a[col]), float(b[col]), rel_tol=1e-3, abs_tol=1e-3):
                    raise AssertionError(
                        f"{coll} {alg}, segment {k}: {col} {float(a[col]):.4f}, expected "
                        f"{float(b[col]):.4f} (a {segments}-segment fit of {value} over P at "
                        f"{nbytes} B of your results)")
    extra = set(map(tuple, fits[["collective", "algorithm"]].drop_duplicates().values)) - \
        set(map(tuple, want[["collective", "algorithm"]].drop_duplicates().values))
    if extra:
        raise AssertionError(f"fits has curves your results do not have at {nbytes} B: {sorted(extra)}")


def check_ranking(ranking, results_df, nbytes, value="avg_us"):
    """Check a ranking of algorithms (fastest first) per collective at one message size.

    Parameters
    ----------
    ranking : dict
        ``{collective: [algorithm, ...]}``, fastest first.
    results_df : pandas.DataFrame
        The student's results; the expected order is
        :func:`mpilab.model.decision.ranking` of its rows at ``nbytes`` (mean over the process
        counts every algorithm was measured at).
    nbytes : int
    value : str

    Raises
    ------
    AssertionError
        Naming the collective and the expected order.
    """
    _no_answer(ranking, "a dict {collective: [algorithms, fastest first]} to ranking")
    if not isinstance(ranking, dict):
        raise AssertionError(f"ranking should be a dict {{collective: [algorithms]}}, got {type(ranking).__name__}")
    results_df = _frame(results_df, "the results table")
    at = results_df[results_df["bytes"] == nbytes]
    if at.empty:
        raise AssertionError(f"your results have no rows at {nbytes} bytes")
    want = decision.ranking(at, value=value)
    for coll, g in want.groupby("collective"):
        order = g.sort_values("rank")["algorithm"].tolist()
        got = list(ranking.get(coll, []))
        if got != order:
            means = ", ".join(f"{a} {m:.1f}" for a, m in zip(g["algorithm"], g["mean_us"]))
            raise AssertionError(f"{coll}: your ranking is {got or 'missing'}; your results give "
                                 f"{order} (mean {value} over P at {nbytes} B, us: {means})")


# --- lab 5 ---------------------------------------------------------------------------------------

def check_decision_table(table, results_df, value="maxrank_avg_us"):
    """Check a decision table against :func:`mpilab.model.decision.decision_table` of the results.

    Raises
    ------
    AssertionError
        Naming the first range whose algorithm or bounds differ.
    """
    _no_answer(table, "the decision table to table")
    table = _frame(table, "table")
    want = decision.decision_table(_frame(results_df, "the results table"), value=value)
    cols = ["collective", "nprocs_min", "nprocs_max", "bytes_min", "bytes_max", "algorithm"]
    missing = [c for c in cols if c not in table.columns]
    if missing:
        raise AssertionError(f"table has no column(s) {', '.join(missing)}")
    got = table[cols].sort_values(cols[:5]).reset_index(drop=True)
    want = want[cols].sort_values(cols[:5]).reset_index(drop=True)
    def row(t, i):
        if i >= len(t):
            return "nothing"
        r = t.loc[i]
        return (f"{r['collective']} P {int(r['nprocs_min'])}..{int(r['nprocs_max'])}, "
                f"{int(r['bytes_min'])}..{int(r['bytes_max'])} B: {r['algorithm']}")

    for i in range(max(len(got), len(want))):
        if row(got, i) != row(want, i):
            raise AssertionError(f"row {i} of the decision table is {row(got, i)}; from your "
                                 f"results (fastest by median {value}) it is {row(want, i)}")


def check_regret(regret, results_df, value="maxrank_avg_us"):
    """Check mean and worst regret per fixed algorithm against the results.

    Parameters
    ----------
    regret : pandas.DataFrame
        Columns algorithm, mean_regret, max_regret (and collective), as
        :func:`mpilab.model.decision.regret` returns.

    Raises
    ------
    AssertionError
        Naming the algorithm whose regret differs and the expected value.
    """
    _no_answer(regret, "the regret table to regret")
    regret = _frame(regret, "regret")
    want = decision.regret(_frame(results_df, "the results table"), value=value)
    for col in ("algorithm", "mean_regret", "max_regret"):
        if col not in regret.columns:
            raise AssertionError(f"regret has no column {col!r}")
    keys = ["collective", "algorithm"] if "collective" in regret.columns else ["algorithm"]
    for _, w in want.iterrows():
        sel = np.logical_and.reduce([regret[k] == w[k] for k in keys])
        g = regret[sel]
        name = " ".join(str(w[k]) for k in keys)
        if g.empty:
            raise AssertionError(f"regret has no row for {name}")
        for col in ("mean_regret", "max_regret"):
            if not math.isclose(float(g[col].iloc[0]), float(w[col]), rel_tol=1e-6, abs_tol=1e-9):
                raise AssertionError(f"{name}: {col} {float(g[col].iloc[0]):.4f}, expected "
                                     f"{float(w[col]):.4f} (time / best time - 1 at each point, by "
                                     f"median {value})")


def check_rules_file(path, table):
    """Check that an Open MPI rules file, read back, picks the table's algorithm everywhere.

    Every range of the decision table is looked up at its corners (smallest and largest P and
    message size) as Open MPI's coll/tuned would look it up in the file.

    Raises
    ------
    AssertionError
        The file is missing or unreadable, or a lookup gives another algorithm.
    """
    _no_answer(path, "the rules file's path to rules_path")
    table = _frame(table, "table")
    if not os.path.isfile(os.fspath(path)):
        raise AssertionError(f"rules file {os.fspath(path)!r} not found")
    try:
        file_rules = rules.read_ompi_rules(path)
    except ParseError as exc:
        raise AssertionError(f"Open MPI could not read it: {exc}") from None
    for _, r in table.iterrows():
        for p in sorted({int(r["nprocs_min"]), int(r["nprocs_max"])}):
            for b in sorted({int(r["bytes_min"]), int(r["bytes_max"])}):
                got = rules.rules_choose(file_rules, r["collective"], p, b)
                if got != r["algorithm"]:
                    raise AssertionError(f"{r['collective']} at P = {p}, {b} B: the file makes Open "
                                         f"MPI run {got or 'its fixed rules'}, the table says "
                                         f"{r['algorithm']}")


def check_correlation(answer, results_df, x="probe_us", y="avg_us", by=("collective", "algorithm", "bytes")):
    """Check correlations of ``x`` with ``y`` against :func:`mpilab.model.stats.correlate`.

    Parameters
    ----------
    answer : float or pandas.DataFrame
        One Pearson r for all the rows of ``results_df`` (then ``by`` is ignored), or a table
        with the ``by`` columns and ``pearson_r``.

    Raises
    ------
    AssertionError
        Naming the group whose r differs.
    """
    _no_answer(answer, "the correlation")
    results_df = _frame(results_df, "the results table")
    if not isinstance(answer, pd.DataFrame):
        want = float(stats.correlate(results_df, x, y, by=())["pearson_r"].iloc[0])
        try:
            got = float(answer)
        except (TypeError, ValueError):
            raise AssertionError(f"the correlation should be a number, got {answer!r}") from None
        if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
            raise AssertionError(f"r = {got:.4f}; Pearson's r of {x} and {y} over your rows is {want:.4f}")
        return
    want = stats.correlate(results_df, x, y, by=by)
    keys = [c for c in by if c in want.columns]
    if "pearson_r" not in answer.columns or any(k not in answer.columns for k in keys):
        raise AssertionError(f"the table needs columns {keys + ['pearson_r']}")
    for _, w in want.iterrows():
        g = answer[np.logical_and.reduce([answer[k] == w[k] for k in keys])] if keys else answer
        name = ", ".join(f"{k} {w[k]}" for k in keys) or "all rows"
        if g.empty:
            raise AssertionError(f"no correlation for {name}")
        a, b = float(g["pearson_r"].iloc[0]), float(w["pearson_r"])
        if not (math.isnan(a) and math.isnan(b)) and not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9):
            raise AssertionError(f"{name}: r = {a:.4f}, expected {b:.4f} from your rows")
