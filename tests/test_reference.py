"""The ORFEO report's tables (seed 000) as typed in, their model values and rankings."""

import numpy as np
import pytest

from mpilab.core.errors import UsageError
from mpilab.studies import reference


def test_tables_as_in_the_report():
    b = reference.orfeo_report("bcast")
    assert len(b) == 12 and set(b["algorithm"]) == {"basic_linear", "chain", "pipeline"}
    chain = b[b["algorithm"] == "chain"]
    assert chain["upper"].tolist() == [12, 24, 36, 48] and chain["lower"].tolist() == [0, 12, 24, 36]
    assert chain["intercept"].tolist() == [1.6616, 15.3920, 79.4132, 82.1021]
    r = reference.orfeo_report("reduce")
    assert r[r["algorithm"] == "pipeline"]["slope"].tolist() == [13.6258, 11.5444, 12.3004, 12.6042]
    pp = reference.orfeo_report("pingpong")
    first = pp[pp["segment"] == 1].set_index("mapping")
    assert first.loc["core", "intercept"] == 1.1736 and first.loc["node", "slope"] == 0.0002
    assert first.loc["node", "upper"] == 83862


def test_predict_uses_the_segment_holding_x():
    # P = 11 is in "< 12", P = 12 in "< 24"; P = 48 belongs to the last segment "< 48"
    assert reference.predict("bcast", "basic_linear", 11) == pytest.approx(-4.9230 + 6.2399 * 11)
    assert reference.predict("bcast", "basic_linear", 12) == pytest.approx(-38.9755 + 9.0776 * 12)
    assert reference.predict("bcast", "basic_linear", 48) == pytest.approx(5.2882 + 3.9336 * 48)
    assert np.isnan(reference.predict("bcast", "basic_linear", 50))
    got = reference.predict("pingpong", "node", [0, 83862])
    assert got.tolist() == pytest.approx([1.6064, 10.2541 + 0.0001 * 83862])


def test_ranking_matches_the_report_text():
    # "The chain algorithm has the lowest latency ..., followed by basic_linear and pipeline"
    for coll in ("bcast", "reduce"):
        assert reference.ranking(coll)["algorithm"].tolist() == ["chain", "basic_linear", "pipeline"]


def test_bad_names():
    with pytest.raises(UsageError, match="unknown report table 'allgather'; valid: bcast, pingpong, reduce"):
        reference.orfeo_report("allgather")
    with pytest.raises(UsageError, match="'binomial'.*basic_linear, chain, pipeline"):
        reference.predict("bcast", "binomial", 4)
    with pytest.raises(UsageError, match="pingpong"):
        reference.ranking("pingpong")
