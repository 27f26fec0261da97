"""Checks that the labs' test cells call, one line each.

Every check raises ``AssertionError`` with a message written for the student (nbgrader marks the
cell failed and shows the message) and returns None when the answer is right. Student C code is
compiled and run through :mod:`mpilab.sandbox`: fresh scratch directory, time limit per run,
memory and output caps, no network.
"""

import importlib.resources
import math
import os
import shutil
import warnings

import numpy as np
import sympy

from mpilab import sandbox
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

alpha, beta, p, n = sympy.symbols("alpha beta p n", positive=True)

#: Cost of each allgather algorithm of the lab (n = bytes contributed by each rank), used when
#: the models package is not available.
_COSTS = {
    "gather_bcast": 2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta,
    "pairwise": (p - 1) * (alpha + n * beta),
    "ring": (p - 1) * (alpha + n * beta),
    "bruck": sympy.ceiling(sympy.log(p, 2)) * alpha + (p - 1) * n * beta,
}


def check_cost_expression(answer, collective="allgather", name="ring"):
    """Check a student's cost expression in alpha, beta, p, n; equivalent forms pass.

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
    """
    try:
        from mpilab.costs import check_expression
    except ImportError:
        check_expression = None
    if check_expression is not None:
        result = check_expression(answer, collective, name)
        ok = getattr(result, "ok", result)
        if ok is True:
            return
        if ok is False or isinstance(result, str):
            raise AssertionError(getattr(result, "message", None) or getattr(result, "hint", None) or str(result))
    _fallback_check(answer, collective, name)


def _fallback_check(answer, collective, name):
    if collective != "allgather":
        raise one_of("collective", collective, ["allgather"])
    if name not in _COSTS:
        raise one_of("algorithm", name, _COSTS)
    if answer is None or answer is Ellipsis:
        raise AssertionError("no answer yet: assign a sympy expression in alpha, beta, p, n")
    try:
        expr = sympy.sympify(answer, locals={"alpha": alpha, "beta": beta, "p": p, "n": n})
    except (sympy.SympifyError, TypeError) as exc:
        raise AssertionError(f"cannot read {answer!r} as an expression: {exc}") from None
    expr = expr.subs({sympy.Symbol(s): v for s, v in (("alpha", alpha), ("beta", beta), ("p", p), ("n", n))})
    extra = expr.free_symbols - {alpha, beta, p, n}
    if extra:
        raise AssertionError(f"unknown symbols {sorted(map(str, extra))}; use alpha, beta, p, n")
    expected = _COSTS[name]
    for pv in (1, 2, 3, 5, 8, 13, 64):
        for nv in (1, 1024, 1 << 20):
            vals = {alpha: sympy.Rational(3, 2), beta: sympy.Rational(1, 1000), p: pv, n: nv}
            got, want = float(expr.subs(vals)), float(expected.subs(vals))
            if not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
                raise AssertionError(f"the {name} cost differs at p = {pv}, n = {nv} bytes "
                                     f"(alpha = 1.5 us, beta = 0.001 us/B): yours gives {got:g} us, "
                                     f"expected {want:g} us")


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


def _frame(df, what):
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise AssertionError(f"{what} should be a pandas DataFrame, got {type(df).__name__}")
    if df.empty:
        raise AssertionError(f"{what} is empty: run the measurement cells first")
    return df


def _no_answer(answer, what):
    if answer is None or answer is Ellipsis:
        raise AssertionError(f"no answer yet: assign {what}")


# --- lab 1 ---

def check_segmented_fits(fits, results_df, nbytes, segments=4, value="avg_us"):
    """Check segmented fits over P against the same fit of the student's own results.

    Parameters
    ----------
    fits : pandas.DataFrame
        The student's table: one row per (collective, algorithm, segment) with ``intercept``
        and ``slope`` (as :func:`mpilab.models.segmented_fit_p` returns it).
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
    from mpilab import models

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
        :func:`mpilab.selection.ranking` of its rows at ``nbytes`` (mean over the process
        counts every algorithm was measured at).
    nbytes : int
    value : str

    Raises
    ------
    AssertionError
        Naming the collective and the expected order.
    """
    from mpilab import selection

    _no_answer(ranking, "a dict {collective: [algorithms, fastest first]} to ranking")
    if not isinstance(ranking, dict):
        raise AssertionError(f"ranking should be a dict {{collective: [algorithms]}}, got {type(ranking).__name__}")
    results_df = _frame(results_df, "the results table")
    at = results_df[results_df["bytes"] == nbytes]
    if at.empty:
        raise AssertionError(f"your results have no rows at {nbytes} bytes")
    want = selection.ranking(at, value=value)
    for coll, g in want.groupby("collective"):
        order = g.sort_values("rank")["algorithm"].tolist()
        got = list(ranking.get(coll, []))
        if got != order:
            means = ", ".join(f"{a} {m:.1f}" for a, m in zip(g["algorithm"], g["mean_us"]))
            raise AssertionError(f"{coll}: your ranking is {got or 'missing'}; your results give "
                                 f"{order} (mean {value} over P at {nbytes} B, us: {means})")


# --- lab 5 ---

def check_decision_table(table, results_df, value="maxrank_avg_us"):
    """Check a decision table against :func:`mpilab.selection.decision_table` of the results.

    Raises
    ------
    AssertionError
        Naming the first range whose algorithm or bounds differ.
    """
    from mpilab import selection

    _no_answer(table, "the decision table to table")
    table = _frame(table, "table")
    want = selection.decision_table(_frame(results_df, "the results table"), value=value)
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
        :func:`mpilab.selection.regret` returns.

    Raises
    ------
    AssertionError
        Naming the algorithm whose regret differs and the expected value.
    """
    from mpilab import selection

    _no_answer(regret, "the regret table to regret")
    regret = _frame(regret, "regret")
    want = selection.regret(_frame(results_df, "the results table"), value=value)
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
    from mpilab import selection
    from mpilab.errors import ParseError

    _no_answer(path, "the rules file's path to rules_path")
    table = _frame(table, "table")
    if not os.path.isfile(os.fspath(path)):
        raise AssertionError(f"rules file {os.fspath(path)!r} not found")
    try:
        rules = selection.read_ompi_rules(path)
    except ParseError as exc:
        raise AssertionError(f"Open MPI could not read it: {exc}") from None
    for _, r in table.iterrows():
        for p in sorted({int(r["nprocs_min"]), int(r["nprocs_max"])}):
            for b in sorted({int(r["bytes_min"]), int(r["bytes_max"])}):
                got = selection.rules_choose(rules, r["collective"], p, b)
                if got != r["algorithm"]:
                    raise AssertionError(f"{r['collective']} at P = {p}, {b} B: the file makes Open "
                                         f"MPI run {got or 'its fixed rules'}, the table says "
                                         f"{r['algorithm']}")


def check_correlation(answer, results_df, x="probe_us", y="avg_us", by=("collective", "algorithm", "bytes")):
    """Check correlations of ``x`` with ``y`` against :func:`mpilab.stats.correlate`.

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
    from mpilab import stats

    _no_answer(answer, "the correlation")
    results_df = _frame(results_df, "the results table")
    import pandas as pd

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
