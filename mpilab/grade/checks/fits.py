"""Checks of a table of segmented linear fits (lab 1): one row per segment of each curve.

A fit table has the columns ``collective``, ``algorithm``, ``lower``, ``upper`` (the range of P
the segment describes, both ends included), ``intercept`` and ``slope``. :func:`piecewise_r2`
scores the segments of one curve against its measured points: each P is predicted by the
segment whose range holds it (where two ranges share an end, by the closer of the two: a
breakpoint may belong to either side), and R² is 1 - (squared error) / (spread of the data).
This says how good a fit is, not what the best fit would be: the grader compares it with fits
it computes itself.
"""

import numpy as np

from mpilab.grade.cases import Case
from mpilab.grade.checks.tables import frame, table_case

#: The columns of a fit table.
COLUMNS = ("collective", "algorithm", "lower", "upper", "intercept", "slope")
#: Measured points a segment's range must hold: a line through two points fits them exactly,
#: so its R² would say nothing about the data.
MIN_POINTS = 3


def piecewise_r2(segments, x, y):
    """R² of a curve's segments on its points, and the P that no segment's range holds.

    Parameters
    ----------
    segments : pandas.DataFrame
        The rows of one curve (``lower``, ``upper``, ``intercept``, ``slope``).
    x, y : array_like
        Process counts and measured times.

    Returns
    -------
    (float, list of float)
        R² (NaN when a point is not covered or a value is not a number), uncovered P.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    try:
        seg = segments[["lower", "upper", "intercept", "slope"]].to_numpy(dtype=float)
    except (TypeError, ValueError):
        return float("nan"), []
    yhat = np.full_like(y, np.nan)
    uncovered = []
    for i, (xi, yi) in enumerate(zip(x, y)):
        inside = seg[(seg[:, 0] <= xi) & (xi <= seg[:, 1])]
        if len(inside) == 0:
            uncovered.append(float(xi))
            continue
        guesses = inside[:, 2] + inside[:, 3] * xi
        yhat[i] = guesses[np.argmin(np.abs(guesses - yi))]
    if uncovered or not np.isfinite(yhat).all():
        return float("nan"), uncovered
    spread = float(np.sum((y - y.mean()) ** 2))
    error = float(np.sum((y - yhat) ** 2))
    return (1.0 - error / spread if spread > 0 else (1.0 if error == 0 else 0.0)), []


def curves(table, value="avg_us"):
    """The measured curves of a results table: ``{(collective, algorithm): (P, median value)}``."""
    out = {}
    for (coll, alg), g in table.groupby(["collective", "algorithm"]):
        m = g.groupby("nprocs")[value].median().sort_index()
        out[(str(coll), str(alg))] = (m.index.to_numpy(dtype=float), m.to_numpy(dtype=float))
    return out


def thin_segments(segments, x, min_points=MIN_POINTS):
    """The ranges ``(lower, upper, points)`` of a curve's segments that hold fewer than
    ``min_points`` of its measured P (a P on a shared end counts for both sides)."""
    x = np.unique(np.asarray(x, dtype=float))
    try:
        seg = segments[["lower", "upper"]].to_numpy(dtype=float)
    except (TypeError, ValueError):
        return []
    out = []
    for lo, hi in seg:
        k = int(np.sum((x >= lo) & (x <= hi)))
        if k < min_points:
            out.append((lo, hi, k))
    return out


def fit_form_cases(fits, data, segments=4, value="avg_us", min_points=MIN_POINTS):
    """The visible checks of a fit table: one case per curve of ``data`` (the results at one
    size): it has ``segments`` segments whose ranges hold every measured P, each at least
    ``min_points`` of them.

    Returns
    -------
    list of Case
        The R² of each curve's fit is in its case's name, so the student sees it; whether it is
        good enough the grader decides, against its own fits.
    """
    bad = table_case(fits, "fits", COLUMNS) or table_case(
        data, "the results table", ("collective", "algorithm", "nprocs", value)
    )
    if bad:
        return [bad]
    fits, out = frame(fits), []
    for (coll, alg), (x, y) in curves(frame(data), value).items():
        rows = fits[(fits["collective"].astype(str) == coll) & (fits["algorithm"].astype(str) == alg)]
        title = f"{coll} {alg}"
        if len(rows) != segments:
            out.append(Case(title, False, f"{len(rows)} segment(s) in fits, expected {segments}"))
            continue
        r2, uncovered = piecewise_r2(rows, x, y)
        thin = thin_segments(rows, x, min_points)
        if uncovered:
            out.append(
                Case(
                    title,
                    False,
                    f"no segment's range (lower..upper) holds P = {', '.join(f'{u:g}' for u in uncovered)}",
                )
            )
        elif r2 != r2:
            out.append(Case(title, False, "a segment's bounds, intercept or slope is not a number"))
        elif thin:
            lo, hi, k = thin[0]
            out.append(
                Case(
                    title,
                    False,
                    f"the segment P = {lo:g}..{hi:g} holds {k} measured P: each segment needs at least "
                    f"{min_points} (a line through two points fits them exactly)",
                )
            )
        else:
            out.append(Case(f"{title} (R² = {r2:.4f})", True))
    return out
