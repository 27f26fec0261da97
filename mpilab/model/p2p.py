"""The point-to-point model: segmented fits of ping-pong tables, one curve per mapping.

The rows come from :func:`mpilab.measure.pingpong.run` (collective ``pingpong``) or from an OSU
``osu_latency`` import (collective ``pt2pt``). The first segment's intercept and slope of each
mapping are the α and β of that distance, the numbers the ORFEO report gives per mapping and
:func:`mpilab.simulate.calibration.calibrate` turns into a platform.
"""

import os

import matplotlib.pyplot as plt
import pandas as pd

from mpilab.core import results
from mpilab.core.errors import UsageError
from mpilab.model.fits import segmented_fit

#: The collectives whose rows are point-to-point times (the kit's ping-pong, OSU's osu_latency).
COLLECTIVES = ("pingpong", "pt2pt")


def _frame(df_or_path):
    if isinstance(df_or_path, (str, os.PathLike)):
        df = results.read_results(df_or_path)
    elif isinstance(df_or_path, pd.DataFrame):
        df = df_or_path
    else:
        df = pd.DataFrame(list(df_or_path))
    for col in ("mapping", "bytes", "avg_us"):
        if col not in df.columns:
            raise UsageError(f"ping-pong results need column {col!r}; columns: {', '.join(df.columns)}")
    if "collective" in df.columns:
        df = df[df["collective"].isin(COLLECTIVES)]
    if df.empty:
        raise UsageError(
            "no ping-pong rows (collective 'pingpong', or 'pt2pt' from an OSU "
            "osu_latency import) in the results"
        )
    return df


def fits(df, segments=2, value="avg_us", min_points=3, by=("flavour", "platform", "mapping")):
    """Segmented fits of the one-way time over bytes, one per curve, as model objects.

    Same parameters as :func:`fit`.

    Returns
    -------
    dict
        ``{key: mpilab.model.fits.SegmentedFit}``, ``key`` a tuple of ``(column, value)`` pairs of
        the ``by`` columns present (``dict(key)`` names the curve); a fit's ``r2``,
        ``residuals()`` and ``residual_plot()`` tell how good it is.
    """
    df = _frame(df)
    keys = [c for c in by if c in df.columns]
    out = {}
    for key, g in df.groupby(keys, sort=True):
        g = g.assign(**{value: pd.to_numeric(g[value], errors="coerce")}).dropna(subset=[value])
        g = g.groupby("bytes", as_index=False)[value].median()
        f = segmented_fit(g["bytes"], g[value], segments=segments, min_points=min_points)
        out[tuple(zip(keys, key if isinstance(key, tuple) else (key,)))] = f
    return out


def fit(df, segments=2, value="avg_us", min_points=3, by=("flavour", "platform", "mapping")):
    """Segmented fit of the one-way time over bytes, one per mapping (and flavour, platform).

    Parameters
    ----------
    df : pandas.DataFrame, path, or list of rows
        Ping-pong rows (collective ``pingpong``, or ``pt2pt`` imported from OSU osu_latency).
    segments : int
        Linear pieces (1..4); the first one is the small-message α and β.
    value : str
        Column to fit (``avg_us``; ``maxrank_median_us`` holds the median).
    min_points : int
        Fewest sizes per piece.
    by : sequence of str
        Columns that name one curve (those present are used).

    Returns
    -------
    pandas.DataFrame
        One row per segment: the ``by`` columns, ``segment``, ``intercept`` (µs), ``slope``
        (µs/byte), ``lower``, ``upper``, ``points``, ``r2`` (of that segment) and ``r2_fit``
        (of the whole piecewise curve). Repetitions are averaged by their median per size first.
    """
    out = []
    for key, f in fits(df, segments, value, min_points, by).items():
        t = f.table.copy()
        for c, v in reversed(key):
            t.insert(0, c, v)
        t["r2_fit"] = f.r2
        out.append(t)
    return pd.concat(out, ignore_index=True)


def residual_plot(df, segments=2, value="avg_us", min_points=3):
    """Residuals of :func:`fits`, one panel per curve (mapping), breakpoints marked.

    Returns
    -------
    (fig, axes)
    """
    found = fits(df, segments, value, min_points)
    fig, axes = plt.subplots(1, len(found), figsize=(5 * len(found), 3.5), squeeze=False)
    for ax, (key, f) in zip(axes[0], found.items()):
        f.residual_plot(ax=ax)
        ax.set_title(f"{dict(key).get('mapping', '')}: R² = {f.r2:.4f}")
    fig.tight_layout()
    return fig, axes[0]


def first_segment(table):
    """``{mapping: (intercept, slope)}`` from a :func:`fit` table (its first segment per mapping).

    Raises
    ------
    UsageError
        Two curves for one mapping (fit one flavour and platform at a time).
    """
    first = table[table["segment"] == 1]
    if first["mapping"].duplicated().any():
        raise UsageError(
            "the fit has several curves for one mapping (flavours or platforms); "
            "select one flavour and platform first"
        )
    return {r.mapping: (float(r.intercept), float(r.slope)) for r in first.itertuples()}
