"""Figures from the results table, returned as ``(fig, ax)`` so notebooks and graders can
restyle or inspect them."""

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

from mpilab.core import units
from mpilab.core.errors import UsageError, one_of
from mpilab.model.stats import boxplot_by_nprocs

METRICS = ("maxrank_avg_us", "avg_us", "min_us", "max_us", "maxrank_median_us")


def _select(df, **eq):
    for col, val in eq.items():
        if val is None:
            continue
        vals = sorted(df[col].dropna().unique().tolist(), key=str)
        if val not in vals:
            raise one_of(col, val, vals)
        df = df[df[col] == val]
    return df


def _single(df, col, given):
    if given is not None:
        return given
    vals = sorted(df[col].dropna().unique().tolist(), key=str)
    if len(vals) != 1:
        raise UsageError(f"the results hold several {col} values {vals}; choose one with {col}=")
    return vals[0]


def latency_vs_size(
    df,
    nprocs=None,
    flavour=None,
    platform=None,
    collective=None,
    mapping=None,
    metric="maxrank_avg_us",
    algorithms=None,
    ax=None,
):
    """Latency against message size, log-log, one line per algorithm (mean over repetitions).

    Parameters
    ----------
    df : pandas.DataFrame
        A results table (:func:`mpilab.core.results.read_results`).
    nprocs, flavour, platform, collective, mapping : optional
        Selections; each must be unique in ``df`` after selecting if not given.
    metric : str
        A timing column (default ``maxrank_avg_us``, the seed's metric).
    algorithms : list of str, optional
        Which lines to draw (default: all present).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
    """
    return _plot(
        df,
        "bytes",
        dict(nprocs=nprocs, flavour=flavour, platform=platform, collective=collective, mapping=mapping),
        metric,
        algorithms,
        ax,
    )


def latency_vs_nprocs(
    df,
    bytes,
    flavour=None,
    platform=None,
    collective=None,
    mapping=None,
    metric="maxrank_avg_us",
    algorithms=None,
    ax=None,
):
    """Latency against the number of processes at one message size, one line per algorithm.

    Parameters
    ----------
    df : pandas.DataFrame
    bytes : int
        The message size (per process, for allgather) to plot.
    flavour, platform, collective, mapping, metric, algorithms, ax
        As in :func:`latency_vs_size`.

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
    """
    return _plot(
        df,
        "nprocs",
        dict(bytes=int(bytes), flavour=flavour, platform=platform, collective=collective, mapping=mapping),
        metric,
        algorithms,
        ax,
    )


def _plot(df, x, sel, metric, algorithms, ax):
    if metric not in METRICS:
        raise one_of("metric", metric, METRICS)
    if df.empty:
        raise UsageError("no results to plot (the table is empty)")
    chosen = {}
    for col, val in sel.items():
        if col in ("bytes", "nprocs") and val is not None:
            df = _select(df, **{col: val})
            chosen[col] = val
    for col in ("flavour", "platform", "collective", "mapping") + (("nprocs",) if x == "bytes" else ()):
        val = _single(df, col, sel.get(col))
        df = _select(df, **{col: val})
        chosen[col] = val
    if algorithms is not None:
        df = df[df["algorithm"].isin(list(algorithms))]
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    mean = df.groupby(["algorithm", x])[metric].mean().reset_index()
    for algo, g in mean.groupby("algorithm", sort=True):
        g = g.sort_values(x)
        ax.plot(g[x], g[metric], marker="o", markersize=3, label=algo)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    nice = {
        "maxrank_avg_us": "slowest-rank latency",
        "avg_us": "mean latency over ranks",
        "min_us": "fastest-rank latency",
        "max_us": "slowest-rank mean latency",
        "maxrank_median_us": "median slowest-rank latency",
    }[metric]
    ax.set_ylabel(f"{nice} (µs)")
    where = chosen["flavour"] + (f" on {chosen['platform']}" if chosen["platform"] != "local" else " (local)")
    if x == "bytes":
        ax.set_xlabel("message size per process (bytes)")
        ax.set_title(f"{chosen['collective']}: {where}, P = {chosen['nprocs']}, {chosen['mapping']} mapping")
    else:
        ax.set_xlabel("number of processes P")
        ax.set_title(
            f"{chosen['collective']}: {where}, {units.format_bytes(chosen['bytes'])} per process, "
            f"{chosen['mapping']} mapping"
        )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="algorithm")
    fig.tight_layout()
    return fig, ax


def save(fig, path):
    """Save ``fig`` to ``path`` (PNG, 120 dpi) and close it; returns the path."""
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_all(df, outdir, sizes_for_nprocs=(1024, 1 << 20)):
    """Write one latency-vs-size PNG per (flavour, platform, mapping, nprocs) and latency-vs-P
    PNGs at ``sizes_for_nprocs`` (or the largest size measured, if none of them was) where
    several P were measured. Where a point was measured in several repetitions, also one
    boxplot per algorithm at those sizes: the repetitions' spread per process count
    (:func:`mpilab.model.stats.boxplot_by_nprocs`). Returns the written paths."""
    matplotlib.use("Agg")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    groups = ["collective", "flavour", "platform", "mapping"]
    for (coll, fl, pf, mp), g in df.groupby(groups):
        for p in sorted(g["nprocs"].unique()):
            fig, _ = latency_vs_size(g, nprocs=p, flavour=fl, platform=pf, collective=coll, mapping=mp)
            written.append(save(fig, outdir / f"{coll}_{fl}_{pf}_{mp}_P{p}_vs_size.png"))
        present = set(g["bytes"])
        at = [b for b in sizes_for_nprocs if b in present] or [max(present)]
        if g["nprocs"].nunique() > 1:
            for b in at:
                fig, _ = latency_vs_nprocs(g, b, flavour=fl, platform=pf, collective=coll, mapping=mp)
                written.append(save(fig, outdir / f"{coll}_{fl}_{pf}_{mp}_{b}B_vs_nprocs.png"))
        if g["repetition"].nunique() > 1:
            for b in at:
                for algo, ga in g[g["bytes"] == b].groupby("algorithm"):
                    where = f"{fl} on {pf}" if pf != "local" else f"{fl} (local)"
                    fig, _ = boxplot_by_nprocs(
                        ga,
                        title=f"{coll} {algo}: {where}, {units.format_bytes(b)}, "
                        f"{ga['repetition'].nunique()} repetitions",
                    )
                    safe = str(algo).replace(":", "-")
                    written.append(save(fig, outdir / f"{coll}_{fl}_{pf}_{mp}_{safe}_{b}B_boxplot.png"))
    return written
