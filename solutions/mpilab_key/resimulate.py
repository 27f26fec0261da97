"""The grader's own measurement of what a table a student hands in claims.

An answer computed from a results table (a plot, a fit, a ranking, a best segment size) is only
worth its points if the table is the student's measurement: a table typed in would pass any check
of the analysis alone. So every check that reads a table is credited only once the table passes
one mechanism:

* **the grid**: it has a row at every point the notebook's cell measures (:func:`grid_case`:
  algorithms × sizes × P), so one typed row cannot stand for a measurement;
* **measured again**: the grader measures a part of it itself, with the kit it trusts and the
  student's own C files, and compares (:func:`remeasured_case`). SimGrid's simulated time is
  deterministic: simulated points must be equal. Real times on a shared machine are not
  (the same allgather at P = 4, minutes apart, differed by 2.4 times at the median point and
  100 times at the worst, on 2 cores at load 20): real points must agree within
  :data:`REAL_FACTOR` at the median over the grid. Where the whole table takes too long to
  measure again, the part is drawn at random when the grader runs (:func:`draw`), so no part
  can be left typed in;
* the cells built on the table earn nothing while either fails
  (:func:`mpilab.grade.checks.tables.credited_only_if`).

:func:`spot_case` is the same for the library's algorithms (forced under SMPI): one fixed point of
the table and one drawn at random are simulated again.
"""

import math
import secrets

import numpy as np
import pandas as pd

from mpilab.grade.cases import Case
from mpilab.grade.checks.tables import frame
from mpilab.measure import forcing, launch, pingpong

#: Relative difference allowed between the handed-in value and the grader's simulation.
RTOL = 0.01
#: Simulated times of the students' C (printed to 0.001 us): equal within this (us).
SIM_ATOL = 0.01
#: Real times: the median over the compared points of max(mine/theirs, theirs/mine) at most this.
REAL_FACTOR = 5.0

_RANDOM = secrets.SystemRandom()
#: A row drawn for simulating again has at most this P and this many bytes (the labs' grids do).
MAX_DRAWN = (64, 1 << 22)


def draw(choices):
    """One of ``choices``, drawn when the grader runs (not predictable from the notebook)."""
    choices = list(choices)
    return choices[_RANDOM.randrange(len(choices))]


def grid_case(table, what, grid, keys=None):
    """A case: ``table`` has a row at every point of ``grid``.

    Parameters
    ----------
    table : pandas.DataFrame
    what : str
        The table's name in the notebook.
    grid : dict
        ``{column: values}``; the grid is their product (e.g. algorithm × nprocs × bytes).
    """
    title = f"{what} holds the whole measured grid"
    cols = list(grid)
    if not isinstance(table, pd.DataFrame) or not set(cols) <= set(table.columns):
        return Case(title, False, f"{what} should be the table the notebook measured ({', '.join(cols)})")
    have = set()
    for row in table[cols].itertuples(index=False):
        try:
            have.add(_point(row))
        except (TypeError, ValueError):
            continue
    points = [()]
    for c in cols:
        points = [pt + (v,) for pt in points for v in grid[c]]
    lacking = [pt for pt in points if _point(pt) not in have]
    if lacking:
        first = ", ".join(f"{c} = {v}" for c, v in zip(cols, lacking[0]))
        return Case(
            title,
            False,
            f"{len(lacking)} of its {len(points)} points are missing, e.g. {first}: hand in the "
            "table as the notebook's cell measured it",
        )
    return Case(title, True)


def _point(values):
    """A grid point as comparable values (text stays text, numbers become floats)."""
    return tuple(v if isinstance(v, str) else float(v) for v in values)


def remeasured_case(table, theirs, what, keys, value, real=False, how="the grader's own run"):
    """A case: ``table``'s ``value`` at every point of ``theirs`` (the grader's own measurement,
    same columns) is the grader's: equal within :data:`SIM_ATOL` when simulated, within
    :data:`REAL_FACTOR` at the median over the points when ``real``."""
    title = f"{what} is your measurement ({how} again)"
    keys = list(keys)
    if theirs is None or len(theirs) == 0:
        return Case(title, False, f"{how} measured nothing to compare {what} with; tell your instructor")
    if not isinstance(table, pd.DataFrame) or not set(keys) | {value} <= set(table.columns):
        return Case(title, False, f"{what} has no column {value!r} or {', '.join(keys)}")
    mine = table.assign(**{k: table[k].astype(str) for k in keys})
    mine = mine.assign(_v=pd.to_numeric(mine[value], errors="coerce")).groupby(keys)["_v"].median()
    ref = theirs.assign(**{k: theirs[k].astype(str) for k in keys}).groupby(keys)[value].median()
    ratios = []
    for point, want in ref.items():
        point = point if isinstance(point, tuple) else (point,)
        where = ", ".join(f"{k} = {v}" for k, v in zip(keys, point))
        got = mine.get(point if len(point) > 1 else point[0])
        if got is None or not math.isfinite(got):
            return Case(title, False, f"{what} has no {value} at {where}, which {how} measured")
        if not real and abs(got - want) > SIM_ATOL + 1e-6 * abs(want):
            return Case(
                title,
                False,
                f"at {where} {what} says {value} = {got:g} us; {how} gives {want:g} us "
                "(simulated times repeat exactly)",
            )
        if real:
            ratios.append(max(got / want, want / got) if got > 0 and want > 0 else math.inf)
    if real:
        median = float(np.median(ratios))
        if not median <= REAL_FACTOR:
            return Case(
                title,
                False,
                f"{what}'s times are {median:.3g} times {how}'s at the median of {len(ratios)} "
                f"points (real times vary, but not by more than {REAL_FACTOR:g} times)",
            )
    return Case(title, True)


_CACHE = {}


def simulated_row(platform, cfg, collective, algorithm, nprocs, nbytes, mapping="core"):
    """One results row of a fresh SMPI run (one timed iteration after one warm-up), memoised."""
    key = (platform, tuple(cfg), collective, algorithm, int(nprocs), int(nbytes), mapping)
    if key not in _CACHE:
        lau = launch.get_launcher("smpi", platform=platform, cfg=list(cfg))
        rows = forcing.measure(
            lau,
            collective,
            algorithm,
            int(nprocs),
            sizes=(int(nbytes), int(nbytes)),
            mapping=mapping,
            iters=1,
            warmup=1,
            iters_large=1,
            warmup_large=1,
            timeout=300,
        )
        _CACHE[key] = rows[0]
    return _CACHE[key]


def spot_case(table, what, platform, cfg=(), choices=(), value="avg_us"):
    """A case: two points of ``table`` simulated again give the same ``value``: the first of
    ``choices`` it has, and one of its rows drawn at random (:func:`draw`).

    Parameters
    ----------
    table : pandas.DataFrame
        The student's simulated rows (``collective``, ``algorithm``, ``nprocs``, ``bytes``, ``value``).
    what : str
        The table's name in the notebook, for the feedback.
    platform, cfg
        The SMPI platform and options the notebook's launcher used.
    choices : sequence of (collective, algorithm, nprocs)
        Points to try, in order; the first one the table has at one of its sizes is simulated.

    Returns
    -------
    Case
    """
    title = f"{what} is your simulation (points simulated again by the grader)"
    for coll, alg, p in choices:
        rows = table[(table["collective"] == coll) & (table["algorithm"] == alg) & (table["nprocs"] == p)]
        if rows.empty:
            continue
        nbytes = int(sorted(rows["bytes"].unique())[len(rows["bytes"].unique()) // 2])
        points = [(coll, alg, int(p), nbytes), _drawn_point(table, {(c, a) for c, a, _ in choices})]
        for coll, alg, p, nbytes in points:
            got = _median_at(table, coll, alg, p, nbytes, value)
            want = float(simulated_row(platform, cfg, coll, alg, p, nbytes)[value])
            if not (math.isfinite(got) and math.isclose(got, want, rel_tol=RTOL, abs_tol=1e-3)):
                return Case(
                    title,
                    False,
                    f"{coll} {alg} at P = {p}, {nbytes} B: your table says {value} = "
                    f"{got:.4g} us, the simulation gives {want:.4g} us",
                )
        return Case(title, True)
    return Case(
        title,
        False,
        f"{what} has none of the points the grader simulates again ("
        + "; ".join(f"{c} {a} at P = {p}" for c, a, p in choices)
        + ")",
    )


def _drawn_point(table, algorithms):
    """(collective, algorithm, nprocs, bytes) of a row of ``table`` drawn at random among the
    rows of ``algorithms`` ((collective, algorithm) pairs the grader knows how to simulate)."""
    pairs = zip(table["collective"].astype(str), table["algorithm"].astype(str))
    size = pd.to_numeric(table["nprocs"], errors="coerce"), pd.to_numeric(table["bytes"], errors="coerce")
    fits = (size[0] >= 1) & (size[0] <= MAX_DRAWN[0]) & (size[1] >= 0) & (size[1] <= MAX_DRAWN[1])
    rows = table[[pair in algorithms for pair in pairs] & fits.to_numpy()]
    row = rows.iloc[_RANDOM.randrange(len(rows))]
    return str(row["collective"]), str(row["algorithm"]), int(row["nprocs"]), int(row["bytes"])


def _median_at(table, coll, alg, p, nbytes, value):
    rows = table[
        (table["collective"] == coll)
        & (table["algorithm"] == alg)
        & (table["nprocs"] == p)
        & (table["bytes"] == nbytes)
    ]
    return float(pd.to_numeric(rows[value], errors="coerce").median()) if len(rows) else math.nan


_PINGPONGS = {}


def pingpong_gates(pp, what, **options):
    """The gates of a real ping-pong the notebook measured on this machine (``pingpong.run``
    with ``options``, Open MPI, two cores): every size it measures, and the grader's own
    ping-pong with the same options within :data:`REAL_FACTOR` at the median size."""
    key = tuple(sorted(options.items()))
    if key not in _PINGPONGS:
        try:
            _PINGPONGS[key] = pingpong.run("openmpi", "core", **options)
        except Exception as exc:  # the grader's own run: its failure is the grader's, said so
            _PINGPONGS[key] = exc
    theirs = _PINGPONGS[key]
    if isinstance(theirs, Exception):
        return [Case(f"{what} is your measurement", False, f"the grader's own ping-pong failed ({theirs})")]
    sizes = sorted(int(b) for b in theirs["bytes"].unique())
    return [
        grid_case(frame(pp), what, {"bytes": sizes}),
        remeasured_case(
            frame(pp), theirs, what, ("bytes",), "avg_us", real=True, how="the grader's own ping-pong"
        ),
    ]
