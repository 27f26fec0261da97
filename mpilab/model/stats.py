"""Statistics you can defend: repetitions, medians with intervals that carry their real coverage,
shuffled order, boxplots per process count, and measured-vs-reference comparisons (001_a968b7c01287fc38.txt:
30 launches × 100 measures, medians and boxplots, values read off the paper's figures). The
correlation of a probe with a collective per group (lab 5's graded question) is the answer key's
(``mpilab_key.stats``).

A results table holds one row per (point, repetition); each row's timing column (by default
``maxrank_avg_us``, falling back to ``avg_us`` where empty, e.g. OSU imports) is one sample.
"""

import random
from typing import NamedTuple

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


#: Fewest samples for which a percentile bootstrap of the median is given its nominal confidence:
#: below, it resamples too few distinct values (its interval is at most [min, max], whose true
#: coverage is 1 - 2^(1-n)) and :func:`median_ci` refuses it.
BOOTSTRAP_MIN = 20


class MedianCI(NamedTuple):
    """A median and an interval for it, with the interval's coverage.

    ``coverage`` is the probability that such an interval holds the true median: exact for the
    order-statistic interval of independent samples from a continuous distribution, the nominal
    confidence (approximate) for the bootstrap. It is below the confidence asked for when there
    are too few samples: the interval is then [min, max] and says so.
    """

    median: float
    low: float
    high: float
    coverage: float
    method: str


def order_interval(n, confidence=0.95):
    """The order statistics that bound the median: ``(r, coverage)``.

    With the samples sorted, ``x[r - 1] .. x[n - r]`` (1-based: the r-th smallest to the r-th
    largest) holds the true median with probability ``1 - 2·P(B <= r - 1)``, B ~ Binomial(n, 1/2):
    the number of samples below the median. ``r`` is the largest (narrowest interval) whose
    coverage reaches ``confidence``; when even [min, max] (r = 1) does not, r = 1 and its coverage,
    ``1 - 2^(1 - n)``: 50 % for 2 samples, 75 % for 3, 94 % for 5, 97 % for 6.
    """
    n = int(n)
    if n < 1:
        raise UsageError(f"order_interval needs at least one sample, got n = {n}")
    if not 0 < confidence < 1:
        raise UsageError(f"bad confidence {confidence!r}; valid: a number between 0 and 1, e.g. 0.95")
    best = 1
    for r in range(1, (n + 1) // 2 + 1):
        if 1 - 2 * _st.binom.cdf(r - 1, n, 0.5) >= confidence:
            best = r
        else:
            break
    return best, float(max(0.0, 1 - 2 * _st.binom.cdf(best - 1, n, 0.5)))


def runs_needed(confidence=0.95):
    """The fewest samples whose [min, max] is an order-statistic interval of the median with at
    least ``confidence`` coverage (6 for 95 %, 8 for 99 %)."""
    n = 1
    while order_interval(n, confidence)[1] < confidence:
        n += 1
    return n


def median_ci(samples, confidence=0.95, method="order", n_resamples=2000, seed=0):
    """Median of ``samples`` with an interval, and the interval's real coverage.

    Parameters
    ----------
    samples : array_like
    confidence : float
        The coverage asked for.
    method : {'order', 'bootstrap'}
        ``order``: the distribution-free order-statistic interval (:func:`order_interval`),
        whose coverage is exact and is returned even when it falls short of ``confidence``
        (too few samples). ``bootstrap``: percentile bootstrap of the median
        (scipy.stats.bootstrap), only from :data:`BOOTSTRAP_MIN` samples on.

    Returns
    -------
    MedianCI
        median, low, high, coverage, method (``low = high = median`` for one sample, coverage 0).

    Raises
    ------
    UsageError
        No sample; a bootstrap of fewer than :data:`BOOTSTRAP_MIN` samples; an unknown method.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise UsageError("median_ci needs at least one sample")
    med = float(np.median(x))
    if method not in ("order", "bootstrap"):
        raise UsageError(f"unknown method {method!r}; valid: order, bootstrap")
    if x.size == 1:
        return MedianCI(med, med, med, 0.0, method)
    if method == "bootstrap":
        if x.size < BOOTSTRAP_MIN:
            raise UsageError(
                f"a bootstrap interval of the median from {x.size} samples does not have its nominal "
                f"coverage; valid: at least {BOOTSTRAP_MIN} samples, or method='order' (exact coverage)"
            )
        if np.all(x == x[0]):
            return MedianCI(med, med, med, float(confidence), method)
        res = _st.bootstrap(
            (x,),
            np.median,
            confidence_level=confidence,
            method="percentile",
            n_resamples=n_resamples,
            random_state=seed,
        )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        return MedianCI(med, lo, hi, float(confidence), method)
    r, coverage = order_interval(x.size, confidence)
    return MedianCI(med, float(x[r - 1]), float(x[x.size - r]), coverage, method)


def describe_coverage(coverage, n=None):
    """Words for an interval's coverage, e.g. ``"95 % interval"`` or, below the 95 % asked for,
    ``"75 % interval, [min, max] of 3 runs"``."""
    text = f"{100 * float(coverage):.0f} % interval"
    if n is not None and order_interval(n)[0] == 1:
        text += f", [min, max] of {int(n)} runs"
    return text


def summarize(df, value="maxrank_avg_us", by=None, confidence=0.95, method="order"):
    """Median and interval per measurement point, over its repetitions (:func:`median_ci`).

    Returns
    -------
    pandas.DataFrame
        ``by`` columns plus ``n``, ``median_us``, ``ci_low_us``, ``ci_high_us`` and ``coverage``
        (the interval's real coverage: below ``confidence`` where a point has too few
        repetitions, see :func:`runs_needed`).
    """
    by = [c for c in (by or POINT) if c in df.columns]
    d = df.assign(_v=_values(df, value))
    out = []
    for key, g in d.groupby(by, dropna=False, sort=True):
        ci = median_ci(g["_v"], confidence, method)
        out.append(
            dict(
                zip(by, key if isinstance(key, tuple) else (key,)),
                n=len(g),
                median_us=ci.median,
                ci_low_us=ci.low,
                ci_high_us=ci.high,
                coverage=ci.coverage,
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
