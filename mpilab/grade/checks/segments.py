"""Checks of lab 6's segment-size study: the best segment size read off a sweep, and the optimal
number of segments k* against the segment size that minimises the simulated time.

They hold no answer: the best sizes are compared with the sweep the student handed in, and k*
(an expression of the student's) with that sweep's minimum; the expected k* expression and the
α and β of the platform are the grader's arguments. :func:`rerun_case` lets the grader check that
the sweep is real: it times the submitted pipeline again in SMPI, which is deterministic.
"""

import math

import numpy as np
import pandas as pd

from mpilab.grade import bench, harness, references
from mpilab.grade.cases import Case
from mpilab.grade.checks import costs as cost_checks
from mpilab.model import costs

#: The columns of a sweep (bench.benchmark_bcast) and of the table of best segment sizes.
SWEEP_COLUMNS = ("platform", "nprocs", "segsize", "maxrank_avg_us")
BEST_COLUMNS = ("platform", "nprocs", "segsize")
#: A best segment size is accepted when its time is within this share of the sweep's minimum
#: (two sizes that time alike are both defensible answers).
TIE = 0.02


def _table(value, columns, what):
    if not isinstance(value, pd.DataFrame):
        return None, Case(
            f"{what} is a table", False, f"hand in {what} as a pandas DataFrame, not {type(value).__name__}"
        )
    lacking = [c for c in columns if c not in value.columns]
    if lacking:
        return None, Case(
            f"{what} is a table", False, f"{what} has no column {lacking[0]!r}; it needs {', '.join(columns)}"
        )
    return value, None


def best_segment_cases(best, sweep, platforms, nprocs):
    """Cases: for every (platform, P) of the grid, the best segment size the student read off is
    one whose time in their sweep is within :data:`TIE` of the minimum.

    Parameters
    ----------
    best : pandas.DataFrame
        platform, nprocs, segsize: one row per (platform, P).
    sweep : pandas.DataFrame
        The sweep it was read from (platform, nprocs, segsize, maxrank_avg_us).
    platforms, nprocs : sequence
        The grid the lab sweeps.
    """
    sweep, bad = _table(sweep, SWEEP_COLUMNS, "sweep")
    if bad:
        return [bad]
    best, bad = _table(best, BEST_COLUMNS, "best_seg")
    if bad:
        return [bad]
    out = []
    for plat in platforms:
        for p in nprocs:
            name = f"{plat}, P = {p}"
            s = sweep[(sweep["platform"].astype(str) == plat) & (sweep["nprocs"] == p)]
            if s.empty:
                out.append(Case(name, False, "the sweep has no row there: run the sweep cell as given"))
                continue
            times = s.groupby("segsize")["maxrank_avg_us"].median()
            b = best[(best["platform"].astype(str) == plat) & (best["nprocs"] == p)]
            if len(b) != 1:
                out.append(Case(name, False, f"best_seg has {len(b)} rows there; give one"))
                continue
            seg = int(b["segsize"].iloc[0])
            if seg not in times.index:
                out.append(
                    Case(
                        name,
                        False,
                        f"segment size {seg} B was not swept; the sweep has "
                        f"{', '.join(str(int(x)) for x in times.index)}",
                    )
                )
                continue
            ok = times[seg] <= times.min() * (1 + TIE)
            out.append(
                Case(
                    name,
                    bool(ok),
                    f"{seg} B takes {times[seg]:.1f} us in your sweep, "
                    f"{int(times.idxmin())} B takes {times.min():.1f} us",
                )
            )
    return out


def k_form_cases(answer, name="k_opt"):
    """The visible checks of an optimal number of segments: an expression in p, n, alpha, beta
    that gives a positive number at p = 8, n = 1 MiB."""
    try:
        expr = cost_checks.to_expression(answer)
    except ValueError as exc:
        return [Case(f"{name} reads as an expression", False, str(exc))]
    v = cost_checks._value(expr, 8, 1 << 20)
    return [
        Case(f"{name} reads as an expression", True),
        Case(f"{name} is a positive number at p = 8, n = 1 MiB", v is not None and v > 0, f"it gives {v}"),
    ]


def k_value_cases(answer, expected, points=((3, 1024), (8, 1 << 20), (32, 65536), (48, 12345)), name="k_opt"):
    """The grader's check of k* against the expected expression (relative 1e-6, at ``points``)."""
    try:
        got = cost_checks.to_expression(answer)
    except ValueError as exc:
        return [Case(name, False, str(exc))]
    for pv, nv in points:
        g, w = cost_checks._value(got, pv, nv), cost_checks._value(expected, pv, nv)
        if g is None or not math.isclose(g, w, rel_tol=1e-6):
            return [
                Case(
                    f"{name} is the number of segments that minimises your pipeline's cost",
                    False,
                    f"at p = {pv}, n = {nv} bytes (alpha = {cost_checks.ALPHA}, beta = "
                    f"{cost_checks.BETA}) yours gives {g}, expected {w:.6g}",
                )
            ]
    return [Case(f"{name} is the number of segments that minimises your pipeline's cost", True)]


def k_simulated_case(answer, sweep, platform, nprocs, nbytes, alpha_us, beta_us_per_byte, tolerance=0.25):
    """One case: the segment size n / k* (the student's k* at the platform's α and β) is close to
    the one that minimises the simulated time: the swept size nearest to it (on a log scale)
    takes at most ``tolerance`` more than the sweep's minimum at (``platform``, ``nprocs``)."""
    name = f"your k* against the simulation ({platform}, P = {nprocs}, {nbytes} B)"
    try:
        expr = cost_checks.to_expression(answer)
        k = float(
            expr.subs({costs.p: nprocs, costs.n: nbytes, costs.alpha: alpha_us, costs.beta: beta_us_per_byte})
        )
    except (ValueError, TypeError) as exc:
        return Case(name, False, f"k* gives no number there: {exc}")
    sweep, bad = _table(sweep, SWEEP_COLUMNS, "sweep")
    if bad:
        return Case(name, False, bad.message)
    s = sweep[(sweep["platform"].astype(str) == platform) & (sweep["nprocs"] == nprocs)]
    if s.empty or not math.isfinite(k) or k <= 0:
        return Case(name, False, "no sweep there" if s.empty else f"k* = {k} is not a positive number")
    times = s.groupby("segsize")["maxrank_avg_us"].median()
    seg = nbytes / k
    nearest = int(times.index[np.argmin(np.abs(np.log2(times.index.to_numpy(dtype=float)) - math.log2(seg)))])
    ok = times[nearest] <= times.min() * (1 + tolerance)
    return Case(
        name,
        bool(ok),
        f"k* = {k:.3g} gives segments of {seg:.0f} B; the nearest swept size, "
        f"{nearest} B, takes {times[nearest]:.1f} us, the best ({int(times.idxmin())} B) "
        f"{times.min():.1f} us",
    )


def _rerun_mismatch(c_file, sweep, platform, nprocs, nbytes, segsizes, where=None):
    """Why the sweep's rows at (``platform``, ``nprocs``) are not what ``c_file`` (a file or a
    compiled reference) gives there, or None when they are. ``where`` is the platform to
    simulate on when ``platform`` only names it in the sweep (a generated topology's file)."""
    try:
        got = bench.benchmark_bcast(
            {"pipeline": c_file},
            nprocs=(nprocs,),
            sizes=(nbytes,),
            segsizes=segsizes,
            flavour="smpi",
            platform=platform if where is None else where,
            native=False,
        )
    except (AssertionError, harness.BuildError) as exc:
        return f"the grader could not time it: {exc}"
    timed = set(got["segsize"]) if "segsize" in getattr(got, "columns", ()) else set()
    untimed = [g for g in segsizes if g not in timed]
    if untimed:  # nothing the grader ran agrees with anything (an unbuilt skeleton gives no row)
        return f"the grader's run of it gave no time for segments of {untimed[0]} B"
    mine = sweep[(sweep["platform"].astype(str) == platform) & (sweep["nprocs"] == nprocs)]
    theirs = mine.groupby("segsize")["maxrank_avg_us"].median()
    for r in got.itertuples():
        if r.segsize not in theirs.index or abs(theirs[r.segsize] - r.maxrank_avg_us) > 0.01:
            have = f"{theirs[r.segsize]:.3f} us" if r.segsize in theirs.index else "no row"
            return (
                f"segments of {r.segsize} B: the grader's run gives {r.maxrank_avg_us:.3f} us, "
                f"your sweep {have}"
            )
    return None


def rerun_case(c_file, sweep, platform, nprocs, nbytes, segsizes, hidden=True, where=None):
    """One case: the sweep's rows at (``platform``, ``nprocs``) are what the grader's own SMPI run
    of the submitted ``pipeline.c`` gives — or, when the notebook ran the section on the kit's
    compiled reference (the student's file did not work yet:
    :func:`mpilab.grade.references.or_reference`), what the reference gives: the section's grade
    does not depend on the earlier C task (SMPI is deterministic: the times agree to the
    harness's printed precision, 0.001 µs; 0.01 µs is allowed). ``where`` is the platform to
    simulate on when ``platform`` only names it in the sweep (a generated topology's file)."""
    name = f"your sweep is what your pipeline.c gives ({platform}, P = {nprocs})"
    sweep, bad = _table(sweep, SWEEP_COLUMNS, "sweep")
    if bad:
        return Case(name, False, bad.message, hidden=hidden)
    why = (
        "pipeline.c is not in the submission"
        if c_file is None
        else _rerun_mismatch(c_file, sweep, platform, nprocs, nbytes, segsizes, where)
    )
    if why is None:
        return Case(name, True, hidden=hidden)
    reference = references.reference("pipeline")
    if _rerun_mismatch(reference, sweep, platform, nprocs, nbytes, segsizes, where) is None:
        return Case(
            name, True, "the sweep is the kit's compiled reference's, as the notebook ran it", hidden=hidden
        )
    return Case(name, False, f"{why} (nor is it the kit's compiled reference's)", hidden=hidden)


def credited_if(gate, cases):
    """``gate`` followed by ``cases``, which earn nothing when ``gate`` failed (content first)."""
    if gate.passed:
        return [gate] + list(cases)
    return [gate] + [
        Case(c.name, False, "not credited: " + gate.name + " fails", c.weight, c.hidden) for c in cases
    ]
