"""The grader's spot check of simulated measurements a student hands in.

An answer computed from a results table is only worth its points if the table is the student's
measurement: a table typed in to make the analysis easy would pass any check of the analysis
alone. SimGrid's simulated time is deterministic, so the grader simulates one point of the table
again, with the kit it trusts, and compares. A mismatch fails the cells built on that table.
"""

import math

from mpilab.grade.cases import Case
from mpilab.measure import forcing, launch

#: Relative difference allowed between the handed-in value and the grader's simulation.
RTOL = 0.01

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
    """A case: one point of ``table`` simulated again gives the same ``value``.

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
    title = f"{what} is your simulation (one point simulated again by the grader)"
    for coll, alg, p in choices:
        rows = table[(table["collective"] == coll) & (table["algorithm"] == alg) & (table["nprocs"] == p)]
        if rows.empty:
            continue
        nbytes = int(sorted(rows["bytes"].unique())[len(rows["bytes"].unique()) // 2])
        got = float(rows[rows["bytes"] == nbytes][value].median())
        want = float(simulated_row(platform, cfg, coll, alg, p, nbytes)[value])
        ok = math.isclose(got, want, rel_tol=RTOL, abs_tol=1e-3)
        return Case(
            title,
            ok,
            f"{coll} {alg} at P = {p}, {nbytes} B: your table says {value} = "
            f"{got:.4g} us, the simulation gives {want:.4g} us",
        )
    return Case(
        title,
        False,
        f"{what} has none of the points the grader simulates again ("
        + "; ".join(f"{c} {a} at P = {p}" for c, a, p in choices)
        + ")",
    )
