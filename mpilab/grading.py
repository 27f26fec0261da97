"""Checks that the labs' test cells call, one line each.

Every check raises ``AssertionError`` with a message written for the student (nbgrader marks the
cell failed and shows the message) and returns None when the answer is right. Student C code is
compiled and run through :mod:`mpilab.sandbox`: fresh scratch directory, time limit per run,
memory and output caps, no network.
"""

import importlib.resources
import os
import shutil
import warnings

import numpy as np

from mpilab import costs, sandbox
from mpilab.errors import UsageError, one_of

#: Process counts of the visible correctness sweep (non-powers of two included).
VISIBLE_NPROCS = (1, 2, 3, 5, 8)
#: Process counts of the hidden sweep (every P from 1 to 8).
HIDDEN_NPROCS = (1, 2, 3, 4, 5, 6, 7, 8)
#: Wall-time limit of one correctness run, seconds.
RUN_TIMEOUT = float(os.environ.get("MPILAB_RUN_TIMEOUT", "30"))
#: Function name the lab's skeletons define, per algorithm.
STUDENT_FUNCTIONS = {"ring": "student_allgather_ring", "bruck": "student_allgather_bruck"}

_OPENMPI = {"mpicc": "mpicc.openmpi", "mpirun": ["mpirun.openmpi", "--oversubscribe", "-np"]}


def _harness():
    return importlib.resources.files("mpilab") / "data" / "grading" / "check_student.c"


def check_allgather_c(c_file, algorithm, hidden=False, nprocs=None, timeout=RUN_TIMEOUT):
    """Compile a student's allgather and check every element on real Open MPI.

    Parameters
    ----------
    c_file : str or path
        The student's C file (defines e.g. ``student_allgather_ring`` with MPI_Allgather's
        signature).
    algorithm : {"ring", "bruck"}
        Which skeleton it implements.
    hidden : bool
        Add the hidden cases (char and double, ``MPI_IN_PLACE``, a sub-communicator) and every
        P from 1 to 8.
    nprocs : sequence of int, optional
        Process counts to run (default :data:`VISIBLE_NPROCS` or :data:`HIDDEN_NPROCS`).
    timeout : float
        Limit of each run in seconds; a run that exceeds it fails as a probable deadlock.

    Raises
    ------
    AssertionError
        On a compile error, a wrong element, a crash (rank and signal) or a time-out.
    """
    c_file = os.fspath(c_file)
    nprocs = nprocs or (HIDDEN_NPROCS if hidden else VISIBLE_NPROCS)
    work = _build(c_file, algorithm)
    try:
        for p in nprocs:
            args = ["./check_student"] + (["--hidden"] if hidden else [])
            res = sandbox.run(_OPENMPI["mpirun"] + [str(p)] + args, cwd=work, timeout=timeout)
            if res.ok:
                continue
            fails = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
            why = fails[0][5:] if fails else res.failure()
            raise AssertionError(f"{algorithm} allgather with P = {p}: {why}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build(c_file, algorithm):
    """Compile the harness with the student's file in a fresh scratch directory; return it."""
    if algorithm not in STUDENT_FUNCTIONS:
        raise one_of("skeleton algorithm", algorithm, STUDENT_FUNCTIONS)
    if not os.path.isfile(c_file):
        raise AssertionError(f"{c_file} not found: keep the skeleton file next to the notebook")
    with importlib.resources.as_file(_harness()) as harness:
        work = sandbox.scratch_dir([c_file, harness])
    build = sandbox.run([_OPENMPI["mpicc"], "-O1", "-std=c99", f"-DSTUDENT_FN={STUDENT_FUNCTIONS[algorithm]}",
                         "check_student.c", os.path.basename(c_file), "-o", "check_student"],
                        cwd=work, timeout=120)
    if not build.ok:
        shutil.rmtree(work, ignore_errors=True)
        raise AssertionError(f"{os.path.basename(c_file)} does not compile:\n{build.stderr[-2000:]}")
    return work


def benchmark_c(c_files, nprocs=(2, 4), timeout=RUN_TIMEOUT):
    """Time students' allgathers and MPI_Allgather (``native``) on real Open MPI.

    Parameters
    ----------
    c_files : dict
        Algorithm name ("ring", "bruck") to C file.
    nprocs : sequence of int
        Process counts.
    timeout : float
        Limit of each run in seconds.

    Returns
    -------
    pandas.DataFrame
        Columns algorithm, nprocs, bytes (per rank), avg_us (max over ranks of the average).
        An algorithm that fails to build or run is left out with a warning saying why.
    """
    import io

    import pandas as pd

    frames = []
    for algorithm, c_file in c_files.items():
        try:
            work = _build(os.fspath(c_file), algorithm)
        except AssertionError as exc:
            warnings.warn(f"{algorithm} left out: {exc}")
            continue
        try:
            for p in nprocs:
                res = sandbox.run(_OPENMPI["mpirun"] + [str(p), "./check_student", "--time", algorithm],
                                  cwd=work, timeout=timeout)
                if not res.ok:
                    warnings.warn(f"{algorithm} left out: timing it with P = {p}: {res.failure()}")
                    break
                frames.append(pd.read_csv(io.StringIO(res.stdout)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if not frames:
        raise AssertionError("no algorithm could be timed; fix the correctness checks first")
    df = pd.concat(frames, ignore_index=True)
    df = df[df["algorithm"].isin(list(c_files) + ["native"])]
    return df.groupby(["algorithm", "nprocs", "bytes"], as_index=False)["avg_us"].mean()


# --- cost expressions --------------------------------------------------------------------------

#: The symbols of the cost table (mpilab.costs), for notebooks: ``alpha, beta, p, n``.
alpha, beta, p, n = costs.alpha, costs.beta, costs.p, costs.n


def check_cost_expression(answer, collective="allgather", name="ring"):
    """Check a student's cost expression in alpha, beta, p, n; equivalent forms pass.

    The expected cost and where it is compared (its domain, e.g. ``p power of two`` for the
    pairwise exchange) come from :data:`mpilab.costs.TABLE`.

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

def check_latency_plot(fig_or_ax, results_df, x="bytes", y="avg_us", by="algorithm"):
    """Check a latency plot: log axes, labels with units, one line per algorithm, true data.

    Parameters
    ----------
    fig_or_ax : matplotlib Figure or Axes
        The student's plot (a figure with one axes, or the axes).
    results_df : pandas.DataFrame
        The student's own results table (columns ``x``, ``y`` and ``by``).
    x, y, by : str
        Columns plotted on x, on y, and one line per value of ``by``.

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
    for axis, scale in (("x", ax.get_xscale()), ("y", ax.get_yscale())):
        if scale != "log":
            problems.append(f"the {axis} axis is {scale}: use a log scale (ax.set_{axis}scale('log'))")
    for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        if not label.strip():
            problems.append(f"the {axis} axis has no label")
        elif "(" not in label and "[" not in label:
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
    import pandas as pd
    from nbgrader.api import Gradebook, MissingEntry

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
