"""Statistics on synthetic data with known answers."""

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from mpilab.core.errors import UsageError
from mpilab.model import stats
from mpilab_key.stats import correlate


def _synthetic(R=30, seed=1):
    rng = np.random.default_rng(seed)
    rows = []
    for p, true in [(16, 10.0), (32, 20.0), (64, 40.0)]:
        for r in range(R):
            rows.append(
                dict(
                    collective="reduce",
                    algorithm="binomial",
                    flavour="smpi",
                    platform="x",
                    mapping="core",
                    nprocs=p,
                    bytes=8,
                    repetition=r,
                    maxrank_avg_us=true + rng.normal(0, 1),
                    avg_us=true,
                )
            )
    return pd.DataFrame(rows)


def test_order_shuffled_and_complete():
    pts = list(range(10))
    a = stats.measurement_order(pts, 3, seed=1)
    assert sorted(a) == sorted((p, r) for p in pts for r in range(3))
    assert a != stats.measurement_order(pts, 3, shuffle=False)
    assert a == stats.measurement_order(pts, 3, seed=1)
    with pytest.raises(UsageError, match="repetitions must be >= 1, got 0"):
        stats.measurement_order(pts, 0)


@pytest.mark.parametrize("method", ["bootstrap", "order"])
def test_median_ci_covers_truth(method):
    s = stats.summarize(_synthetic(), method=method)
    assert list(s.nprocs) == [16, 32, 64] and set(s.n) == {30}
    assert (s.coverage >= 0.95).all()
    for true, (_, r) in zip([10, 20, 40], s.iterrows()):
        assert r.ci_low_us < true < r.ci_high_us
        assert r.ci_high_us - r.ci_low_us < 2.0


def test_order_ci_is_order_statistics():
    x = np.arange(1, 31, dtype=float)
    ci = stats.median_ci(x, method="order")
    assert ci.median == 15.5 and ci.low in x and ci.high in x and ci.low < ci.median < ci.high
    # 30 samples: the 10th smallest to the 10th largest, coverage 1 - 2 P(B <= 9) = 95.7 %
    assert (ci.low, ci.high) == (10.0, 21.0) and ci.coverage == pytest.approx(0.95723, abs=1e-5)


@pytest.mark.parametrize("n,coverage", [(2, 0.5), (3, 0.75), (5, 0.9375), (6, 0.96875), (10, 0.978516)])
def test_few_runs_give_min_max_with_its_real_coverage(n, coverage):
    """[min, max] of 3 runs is a 75 % interval of the median, not a 95 % one: said as such, and
    checked by drawing: the fraction of intervals that hold the true median is the coverage."""
    ci = stats.median_ci(np.arange(n, dtype=float), method="order")
    assert ci.coverage == pytest.approx(coverage, abs=1e-6)
    rng = np.random.default_rng(3)
    draws = rng.lognormal(0.0, 1.0, size=(20000, n))  # true median 1
    r, _ = stats.order_interval(n)
    x = np.sort(draws, axis=1)
    held = np.mean((x[:, r - 1] <= 1.0) & (1.0 <= x[:, n - r]))
    assert held == pytest.approx(coverage, abs=0.015)
    if n < 6:
        assert ci.coverage < 0.95 and (ci.low, ci.high) == (0.0, n - 1.0)
    assert stats.runs_needed(0.95) == 6 and stats.runs_needed(0.99) == 8


def test_summary_says_the_coverage():
    s = stats.summarize(_synthetic(R=3))
    assert set(s.n) == {3} and np.allclose(s.coverage, 0.75)
    assert stats.describe_coverage(0.75, 3) == "75 % interval, [min, max] of 3 runs"
    assert stats.describe_coverage(0.9572, 30) == "96 % interval"


def test_bootstrap_needs_enough_runs():
    with pytest.raises(UsageError, match="from 3 samples does not have its nominal coverage"):
        stats.median_ci([1.0, 2.0, 3.0], method="bootstrap")
    ci = stats.median_ci(np.arange(stats.BOOTSTRAP_MIN, dtype=float), method="bootstrap")
    assert ci.coverage == 0.95 and ci.method == "bootstrap"


def test_boxplot_returns_fig_ax():
    fig, ax = stats.boxplot_by_nprocs(_synthetic())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "32", "64"]
    with pytest.raises(UsageError, match="needs one bytes"):
        stats.boxplot_by_nprocs(pd.concat([_synthetic(), _synthetic().assign(bytes=128)]))


def test_compare_reference():
    ref = [
        {"nprocs": 16, "reference_us": 10.0},
        {"nprocs": 32, "reference_us": 10.0},
        {"nprocs": 128, "reference_us": 80.0},
    ]
    table, (fig, ax) = stats.compare_reference(_synthetic(), ref)
    assert list(table.nprocs) == [16, 32, 64, 128]
    assert abs(table.ratio[0] - 1) < 0.1 and abs(table.ratio[1] - 2) < 0.1
    assert np.isnan(table.reference_us[2]) and np.isnan(table.median_us[3])
    assert len(ax.get_lines()) >= 2
    with pytest.raises(UsageError, match="reference_us"):
        stats.compare_reference(_synthetic(), [{"nprocs": 16, "ref": 1}])


def test_correlate_per_group():
    rows = []
    for alg, slope in (("binomial", 2.0), ("pipeline", -1.0)):
        for i, probe in enumerate((1.0, 2.0, 4.0, 8.0)):
            rows.append(
                dict(
                    collective="bcast",
                    algorithm=alg,
                    bytes=1024,
                    probe_us=probe,
                    avg_us=10 + slope * probe + (0.5 if i == 2 else 0),
                )
            )
    rows.append(dict(collective="bcast", algorithm="linear", bytes=1024, probe_us=1.0, avg_us=3.0))
    rows.append(dict(collective="bcast", algorithm="linear", bytes=1024, probe_us=None, avg_us=4.0))
    c = correlate(pd.DataFrame(rows)).set_index("algorithm")
    assert c.loc["binomial", "pearson_r"] > 0.99 and c.loc["binomial", "spearman_rho"] == 1.0
    assert c.loc["pipeline", "pearson_r"] < -0.99
    assert c.loc["linear", "n"] == 1 and np.isnan(c.loc["linear", "pearson_r"])  # empty probe dropped
    one = correlate(pd.DataFrame(rows[:4]), by=())
    assert list(one.columns) == ["n", "pearson_r", "pearson_p", "spearman_rho"] and one["n"][0] == 4


def test_correlate_needs_probe():
    df = pd.DataFrame({"probe_us": [None, None], "avg_us": [1.0, 2.0]})
    with pytest.raises(UsageError, match="measure with --probe"):
        correlate(df)
    with pytest.raises(UsageError, match="no column 'probe_us'"):
        correlate(pd.DataFrame({"avg_us": [1.0]}))
