"""The answer key's fits of lab 1: four-segment linear models of latency over P, per curve.

Lab 1 asks students to fit a segmented linear model over the process count to every curve of
their results at one message size. :func:`segmented_fit_p` does that with the kit's least-squares
segmented fit (:func:`mpilab.model.fits.segmented_fit`, every admissible choice of breakpoints
tried), so it is the reference the rubric compares a student's fits with; :func:`piecewise_r2`
scores any table of segments against the data.
"""

import numpy as np
import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.grade.checks.fits import MIN_POINTS
from mpilab.model.fits import segmented_fit


def segmented_fit_p(df, segments=2, value="avg_us", by=("collective", "algorithm", "bytes")):
    """Segmented fit of time over process count, one per group of a results table.

    Parameters
    ----------
    df : pandas.DataFrame
        Results with ``nprocs`` and ``value`` columns.
    segments : int
    value : str
    by : sequence of str
        Columns that identify one curve (those present in ``df`` are used).

    Returns
    -------
    pandas.DataFrame
        The segment rows of every curve, with the ``by`` columns in front.
    """
    for col in ("nprocs", value):
        if col not in df.columns:
            raise UsageError(f"results table has no column {col!r}; columns: {', '.join(df.columns)}")
    keys = [c for c in by if c in df.columns]
    out = []
    groups = df.groupby(keys) if keys else [((), df)]
    for key, g in groups:
        g = g.groupby("nprocs", as_index=False)[value].median()
        fit = segmented_fit(g["nprocs"], g[value], segments=segments, xname="processes")
        t = fit.table.copy()
        key = key if isinstance(key, tuple) else (key,)
        for c, v in reversed(list(zip(keys, key))):
            t.insert(0, c, v)
        t["r2_total"] = fit.r2
        out.append(t)
    return pd.concat(out, ignore_index=True)


#: The report's cuts over P (seed 000): a socket (12 cores), a node (24), a node and a half.
REPORT_CUTS = (12, 24, 36)
#: How far below the best four-segment fit's R² a student's fit may be.
R2_TOLERANCE = 0.01


def best_r2(x, y, segments=4, min_points=MIN_POINTS):
    """R² of the best ``segments``-segment least-squares fit (every set of breakpoints that leaves
    at least ``min_points`` points to each segment)."""
    return segmented_fit(x, y, segments=segments, min_points=min_points).r2


def cuts_r2(x, y, cuts=REPORT_CUTS):
    """R² of least-squares lines on the ranges between fixed ``cuts`` (a cut starts a segment).

    NaN when a range holds fewer than :data:`MIN_POINTS` distinct P (the cuts do not fit these
    points: a line through two points says nothing).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    edges = [-np.inf, *cuts, np.inf]
    yhat = np.empty_like(y)
    for lo, hi in zip(edges, edges[1:]):
        m = (x >= lo) & (x < hi)
        if len(np.unique(x[m])) < MIN_POINTS:
            return float("nan")
        yhat[m] = np.polyval(np.polyfit(x[m], y[m], 1), x[m])
    spread = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - yhat) ** 2)) / spread if spread > 0 else 1.0


def r2_needed(x, y, segments=4):
    """The R² a student's fit of one curve must reach: the best fit's less :data:`R2_TOLERANCE`,
    or the report's cuts' (:data:`REPORT_CUTS`), whichever is lower — a fit as good as either
    has defensible breakpoints.

    Returns
    -------
    (float, float, float)
        The R² needed, the best fit's R², the report cuts' R² (NaN if they do not apply).
    """
    best = best_r2(x, y, segments)
    report = cuts_r2(x, y) if segments == len(REPORT_CUTS) + 1 else float("nan")
    need = best - R2_TOLERANCE if report != report else min(best - R2_TOLERANCE, report)
    return need, best, report
