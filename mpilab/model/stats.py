"""Statistics you can defend: repetitions, medians with confidence intervals, shuffled order,
boxplots per process count, and measured-vs-reference comparisons (001_a968b7c01287fc38.txt:
30 launches × 100 measures, medians and boxplots, values read off the paper's figures). The
correlation of a probe with a collective per group (lab 5's graded question) is the answer key's
(``mpilab_key.stats``).

A results table holds one row per (point, repetition); each row's timing column (by default
``maxrank_avg_us``, falling back to ``avg_us`` where empty, e.g. OSU imports) is one sample.
"""

import random

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as _st

from mpilab.core.errors import UsageError

POINT = ["collective", "algorithm", "flavour", "platform", "mapping", "nprocs", "bytes"]


def measurement_order(points, repetitions, shuffle=True, seed=None):
    """Return the list of (point, repetition) to measure, shuffled if asked.

    Parameters
    ----------
    points : sequence
        The measurement points (any hashable description).
    repetitions : int
        R, the number of separate launches of each point.
    shuffle : bool
        Randomise the order so that drift in the machine does not look like an effect of the
        parameters (the seed's benchmark did this).
    seed : int, optional
        Random seed, for a reproducible order.
    """
    if int(repetitions) < 1:
        raise UsageError(f"repetitions must be >= 1, got {repetitions!r}")
    order = [(p, r) for r in range(int(repetitions)) for p in points]
    if shuffle:
        random.Random(seed).shuffle(order)
    return order


def _values(df, value):
    if value in df and df[value].notna().any():
        v = df[value].astype(float)
        if value == "maxrank_avg_us" and "avg_us" in df:
            v = v.fillna(df["avg_us"].astype(float))
        return v
    if "avg_us" in df:
        return df["avg_us"].astype(float)
    raise UsageError(f"no timing column {value!r}; columns: {', '.join(df.columns)}")


def median_ci(samples, confidence=0.95, method="bootstrap", n_resamples=2000, seed=0):
    """Median of ``samples`` with a confidence interval.

    Parameters
    ----------
    samples : array_like
    confidence : float
    method : {'bootstrap', 'order'}
        ``bootstrap``: percentile bootstrap of the median (scipy.stats.bootstrap).
        ``order``: distribution-free order-statistic interval from the binomial(n, 1/2).

    Returns
    -------
    (float, float, float)
        median, low, high (low = high = median for a single sample).
    """
    x = np.sort(np.asarray(samples, dtype=float))
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise UsageError("median_ci needs at least one sample")
    med = float(np.median(x))
    if x.size < 2 or np.all(x == x[0]):
        return med, med, med
    if method == "bootstrap":
        res = _st.bootstrap(
            (x,),
            np.median,
            confidence_level=confidence,
            method="percentile",
            n_resamples=n_resamples,
            random_state=seed,
        )
        return med, float(res.confidence_interval.low), float(res.confidence_interval.high)
    if method == "order":
        lo_k, hi_k = _st.binom.interval(confidence, x.size, 0.5)
        lo = max(int(lo_k) - 1, 0)
        hi = min(int(hi_k), x.size - 1)
        return med, float(x[lo]), float(x[hi])
    raise UsageError(f"unknown method {method!r}; valid: bootstrap, order")


def summarize(df, value="maxrank_avg_us", by=None, confidence=0.95, method="bootstrap"):
    """Median and confidence interval per measurement point, over its repetitions.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns plus ``n``, ``median_us``, ``ci_low_us``, ``ci_high_us``.
    """
    by = [c for c in (by or POINT) if c in df.columns]
    d = df.assign(_v=_values(df, value))
    out = []
    for key, g in d.groupby(by, dropna=False, sort=True):
        med, lo, hi = median_ci(g["_v"], confidence, method)
        out.append(
            dict(
                zip(by, key if isinstance(key, tuple) else (key,)),
                n=len(g),
                median_us=med,
                ci_low_us=lo,
                ci_high_us=hi,
            )
        )
    return pd.DataFrame(out)


def boxplot_by_nprocs(df, value="maxrank_avg_us", ax=None, title=None):
    """Boxplots of the repetitions, one box per process count. Returns ``(fig, ax)``.

    Filter ``df`` to one collective/algorithm/size first; several values in those columns
    raise a UsageError naming them.
    """
    for col in ("collective", "algorithm", "bytes"):
        if col in df and df[col].nunique() > 1:
            raise UsageError(f"boxplot_by_nprocs needs one {col}; got {sorted(df[col].unique())}")
    v = _values(df, value)
    groups = sorted(df["nprocs"].unique())
    data = [v[df["nprocs"] == p].dropna().to_numpy() for p in groups]
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4))
    else:
        fig = ax.figure
    ax.boxplot(data)
    ax.set_xticks(range(1, len(groups) + 1), [str(p) for p in groups])
    ax.set_xlabel("processes")
    ax.set_ylabel(f"{value} (µs)")
    if title:
        ax.set_title(title)
    return fig, ax


def compare_reference(measured_df, reference_table, value="maxrank_avg_us", on=("nprocs",), ax=None):
    """Put measured medians next to reference values typed in from a paper or report.

    Parameters
    ----------
    measured_df : pandas.DataFrame
        Results rows (several repetitions per point).
    reference_table : pandas.DataFrame or list of dict
        Columns ``on`` (e.g. nprocs, and bytes/algorithm if they vary) and ``reference_us``.
    on : sequence of str
        The columns that identify a point in both tables.

    Returns
    -------
    (pandas.DataFrame, (fig, ax))
        The joined table (``on``, ``median_us``, ``ci_low_us``, ``ci_high_us``,
        ``reference_us``, ``ratio`` = median / reference) and a plot of both against the first
        ``on`` column.
    """
    ref = pd.DataFrame(reference_table)
    on = list(on)
    missing = [c for c in on + ["reference_us"] if c not in ref.columns]
    if missing:
        raise UsageError(f"reference table lacks column(s) {missing}; it has {list(ref.columns)}")
    summ = summarize(measured_df, value, by=on)
    joined = summ.merge(ref[on + ["reference_us"]], on=on, how="outer").sort_values(on)
    joined["ratio"] = joined["median_us"] / joined["reference_us"]
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4))
    else:
        fig = ax.figure
    x = on[0]
    m = joined.dropna(subset=["median_us"])
    ax.errorbar(
        m[x],
        m["median_us"],
        yerr=[m["median_us"] - m["ci_low_us"], m["ci_high_us"] - m["median_us"]],
        fmt="o-",
        capsize=3,
        label="measured median (CI)",
    )
    r = joined.dropna(subset=["reference_us"])
    ax.plot(r[x], r["reference_us"], "s--", label="reference")
    ax.set_xlabel(x)
    ax.set_ylabel("latency (µs)")
    ax.legend()
    return joined.reset_index(drop=True), (fig, ax)
