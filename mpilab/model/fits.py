"""Fitting point-to-point and collective timings: Hockney and segmented linear models.

Hockney's model is ``t = alpha + beta * n`` (alpha: latency in µs, beta: µs per byte).
Real curves bend where a library changes protocol (eager to rendezvous) or a message leaves
the cache, so :func:`segmented_fit` fits a piecewise-linear model whose breakpoints are found
from the data: every admissible choice of breakpoints among the measured sizes is tried, each
segment gets an ordinary least-squares line (``scipy.stats.linregress``), and the choice with
the smallest total squared error wins. The result reads like the report's table: one row per
segment with its intercept, slope and the size it holds up to.

The same fit works over the process count ``p`` of one collective curve; lab 1 asks students to
fit every curve of their results (the answer key's ``mpilab_key.fits`` does it for the rubric).

Examples
--------
>>> import numpy as np
>>> n = np.array([0, 1024, 4096, 16384, 65536])
>>> fit = hockney_fit(n, 2.0 + 1e-4 * n)
>>> round(fit["alpha"], 6), round(fit["beta"], 8)
(2.0, 0.0001)
"""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from mpilab.core.errors import UsageError


def _arrays(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise UsageError(f"x and y must be 1-d and the same length, got {x.shape} and {y.shape}")
    if len(x) < 2:
        raise UsageError(f"a fit needs at least 2 points, got {len(x)}")
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def _r2(y, yhat):
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    ss_res = float(np.sum((y - yhat) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def hockney_fit(n, t):
    """Least-squares fit of ``t = alpha + beta * n``.

    Parameters
    ----------
    n : array_like
        Message sizes in bytes.
    t : array_like
        Times in µs.

    Returns
    -------
    dict
        ``alpha`` (µs), ``beta`` (µs/byte), ``bandwidth`` (bytes/µs = MB/s), ``r2``.
    """
    x, y = _arrays(n, t)
    if np.ptp(x) == 0:
        raise UsageError("a Hockney fit needs at least two different message sizes")
    lr = stats.linregress(x, y)
    beta = float(lr.slope)
    return dict(
        alpha=float(lr.intercept),
        beta=beta,
        bandwidth=(1.0 / beta if beta > 0 else float("inf")),
        r2=_r2(y, lr.intercept + lr.slope * x),
    )


def _segment_sse(x, y):
    if len(x) < 2 or np.ptp(x) == 0:
        return np.inf, None
    lr = stats.linregress(x, y)
    res = y - (lr.intercept + lr.slope * x)
    return float(np.sum(res**2)), lr


class SegmentedFit:
    """Result of :func:`segmented_fit`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per segment: ``segment``, ``intercept``, ``slope``, ``lower``, ``upper``
        (``x`` range of the points in it), ``points``, ``r2``.
    breakpoints : list of float
        First ``x`` of every segment after the first.
    r2 : float
        R² of the whole piecewise model.
    """

    def __init__(self, x, y, table, breakpoints, xname):
        self.x, self.y, self.table, self.breakpoints = x, y, table, breakpoints
        self.xname = xname
        self.r2 = _r2(y, self.predict(x))

    def predict(self, x):
        """Model value at ``x`` (each ``x`` uses the segment whose range holds it)."""
        x = np.asarray(x, dtype=float)
        idx = np.searchsorted(np.asarray(self.breakpoints, dtype=float), x, side="right")
        ic = self.table["intercept"].to_numpy()[idx]
        sl = self.table["slope"].to_numpy()[idx]
        return ic + sl * x

    def residuals(self):
        """Measured minus fitted, at the measured points."""
        return self.y - self.predict(self.x)

    def report_table(self, decimals=4):
        """The table as in the report: intercept, slope and "< upper" size range."""
        t = self.table
        nxt = list(self.breakpoints) + [None]
        rng = [f"< {int(b)}" if b is not None else f"<= {int(u)}" for b, u in zip(nxt, t["upper"])]
        return pd.DataFrame(
            {
                "intercept": t["intercept"].round(decimals),
                "slope": t["slope"].round(decimals),
                "size range": rng,
            }
        )

    def residual_plot(self, ax=None, logx=True):
        """Residuals against ``x``, with the breakpoints marked.

        Returns
        -------
        (fig, ax)
        """
        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 3.5))
        else:
            fig = ax.figure
        ax.axhline(0, color="grey", lw=0.8)
        ax.plot(self.x, self.residuals(), "o", ms=4)
        for b in self.breakpoints:
            ax.axvline(b, color="C3", ls="--", lw=0.8)
        if logx and np.all(self.x > 0):
            ax.set_xscale("log")
        ax.set_xlabel(self.xname)
        ax.set_ylabel("residual (µs)")
        ax.set_title(f"segmented fit residuals, R² = {self.r2:.4f}")
        return fig, ax

    def __repr__(self):
        return f"<SegmentedFit {len(self.table)} segments, R²={self.r2:.4f}>\n{self.table}"


def segmented_fit(x, y, segments=2, min_points=2, xname="bytes"):
    """Piecewise-linear least-squares fit with breakpoints chosen from the data.

    Parameters
    ----------
    x, y : array_like
        Sizes (or process counts) and times in µs.
    segments : int
        Number of linear pieces (1..4).
    min_points : int
        Fewest points a piece may hold (at least 2).
    xname : str
        Label of ``x`` for plots.

    Returns
    -------
    SegmentedFit
    """
    x, y = _arrays(x, y)
    if not 1 <= int(segments) <= 4:
        raise UsageError(f"segments must be 1..4, not {segments!r}")
    segments, min_points = int(segments), max(2, int(min_points))
    if len(x) < segments * min_points:
        raise UsageError(
            f"{segments} segments of at least {min_points} points need "
            f"{segments * min_points} points, got {len(x)}"
        )
    # candidate cut positions: indices where x changes (ties stay in one segment)
    cuts = [i for i in range(1, len(x)) if x[i] != x[i - 1]]
    best = (np.inf, None)
    for combo in itertools.combinations(cuts, segments - 1):
        bounds = [0, *combo, len(x)]
        if any(b - a < min_points for a, b in zip(bounds, bounds[1:])):
            continue
        total, fits = 0.0, []
        for a, b in zip(bounds, bounds[1:]):
            sse, lr = _segment_sse(x[a:b], y[a:b])
            total += sse
            fits.append((a, b, lr))
            if total >= best[0]:
                break
        else:
            if total < best[0]:
                best = (total, fits)
    if best[1] is None:
        raise UsageError(
            f"no way to cut {len(x)} points into {segments} segments of at least {min_points} distinct sizes"
        )
    rows = []
    for k, (a, b, lr) in enumerate(best[1]):
        xs, ys = x[a:b], y[a:b]
        rows.append(
            dict(
                segment=k + 1,
                intercept=float(lr.intercept),
                slope=float(lr.slope),
                lower=float(xs[0]),
                upper=float(xs[-1]),
                points=int(b - a),
                r2=_r2(ys, lr.intercept + lr.slope * xs),
            )
        )
    table = pd.DataFrame(rows)
    bps = [float(x[a]) for a, _, _ in best[1][1:]]
    return SegmentedFit(x, y, table, bps, xname)
