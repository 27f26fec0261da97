"""Hockney and segmented fits recover known parameters from synthetic data."""

import numpy as np
import pandas as pd
import pytest

from mpilab.core.errors import UsageError
from mpilab.model.fits import hockney_fit, segmented_fit
from mpilab_key.fits import segmented_fit_p


def sizes():
    return np.array([0] + [2**k for k in range(0, 23)], dtype=float)


def test_hockney_recovers_alpha_beta():
    rng = np.random.default_rng(1)
    n = sizes()
    t = 3.5 + 2e-4 * n + rng.normal(0, 0.05, n.size)
    fit = hockney_fit(n, t)
    assert fit["alpha"] == pytest.approx(3.5, abs=0.1)
    assert fit["beta"] == pytest.approx(2e-4, rel=0.01)
    assert fit["r2"] > 0.999


def test_segmented_finds_breakpoint_and_lines():
    n = sizes()
    bp = 65536
    t = np.where(n < bp, 1.2 + 1e-4 * n, -20 + 4e-4 * n)
    fit = segmented_fit(n, t, segments=2)
    assert fit.breakpoints == [bp]
    a, b = fit.table.iloc[0], fit.table.iloc[1]
    assert a["intercept"] == pytest.approx(1.2, abs=1e-6) and a["slope"] == pytest.approx(1e-4)
    assert b["intercept"] == pytest.approx(-20, abs=1e-6) and b["slope"] == pytest.approx(4e-4)
    assert fit.r2 == pytest.approx(1.0)
    rep = fit.report_table()
    assert list(rep["size range"])[0] == f"< {bp}"
    fig, ax = fit.residual_plot()
    assert ax.get_xlabel() == "bytes"


def test_three_segments():
    x = np.arange(1, 31, dtype=float)
    y = np.piecewise(
        x,
        [x < 10, (x >= 10) & (x < 20), x >= 20],
        [lambda v: 2 * v, lambda v: 20 + 0.5 * (v - 10), lambda v: 25 + 3 * (v - 20)],
    )
    fit = segmented_fit(x, y, segments=3)
    assert fit.breakpoints == [10.0, 20.0]
    assert list(fit.table["slope"].round(6)) == [2.0, 0.5, 3.0]


def test_segmented_over_p():
    p = np.arange(2, 49)
    df = pd.DataFrame(
        {
            "collective": "allgather",
            "algorithm": "ring",
            "bytes": 1024,
            "nprocs": p,
            "avg_us": np.where(p <= 24, 5.0 * p, 120 + 20.0 * (p - 24)),
        }
    )
    out = segmented_fit_p(df)
    assert list(out.columns[:3]) == ["collective", "algorithm", "bytes"]
    assert out["slope"].round(6).tolist() == [5.0, 20.0]


def test_bad_input():
    with pytest.raises(UsageError, match="at least 2 points"):
        hockney_fit([1], [1])
    with pytest.raises(UsageError, match="segments must be 1..4, not 7"):
        segmented_fit(sizes(), sizes(), segments=7)
    with pytest.raises(UsageError, match="no column 'nprocs'"):
        segmented_fit_p(pd.DataFrame({"avg_us": [1.0]}))
