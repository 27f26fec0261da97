"""Cost table: lookups, numeric evaluation, MAPE against data, and the student-answer checker."""
import numpy as np
import pandas as pd
import pytest

from mpilab import costs
from mpilab.errors import UsageError

p, n, a, b = costs.p, costs.n, costs.alpha, costs.beta


def test_table_covers_kit_and_library():
    for algo in ("gather_bcast", "pairwise", "ring", "bruck"):
        assert ("allgather", algo) in costs.TABLE
    for key in (("bcast", "binomial"), ("reduce", "rabenseifner"), ("allreduce", "ring")):
        assert key in costs.TABLE
    with pytest.raises(UsageError, match="rign.*ring"):
        costs.cost("allgather", "rign")


def test_evaluate_numbers():
    # ring, p = 8, n = 1000 B, alpha = 2 us, beta = 0.001 us/B: 7 * (2 + 1) = 21 us
    assert costs.evaluate("allgather", "ring", 8, 1000, 2.0, 1e-3) == pytest.approx(21.0)
    # bruck, p = 5: ceil(log2 5) = 3 rounds
    assert costs.evaluate("allgather", "bruck", 5, 0, 1.0, 0.0) == pytest.approx(3.0)


def test_compare_model_mape():
    df = pd.DataFrame({"collective": "allgather", "algorithm": "ring",
                       "nprocs": [4, 8], "bytes": [1000, 1000], "avg_us": [3 * 3.0, 7 * 3.3]})
    out = costs.compare_model(df, 2.0, 1e-3)
    assert out.loc[0, "mape"] == pytest.approx((0 + 100 * (7 * 3.3 - 21) / (7 * 3.3)) / 2)
    fig, ax = costs.plot_model(out)
    assert ax.get_xlabel() == "processes"


def test_check_equivalent_forms():
    assert costs.check_expression("(p-1)*alpha + (p-1)*n*beta", "allgather", "ring").equal
    assert costs.check_expression((p - 1) * (a + n * b), "allgather", "pairwise").ok
    assert costs.check_expression("ceiling(log(p,2))*alpha + (p-1)*n*beta", "allgather", "bruck").equal


def test_check_wrong_names_point_and_values():
    r = costs.check_expression("p*(alpha + n*beta)", "allgather", "ring")
    assert not r.equal
    assert "p = 1, n = 1" in r.message and "yours gives" in r.message and "expected" in r.message


def test_check_rejects_unknown_symbols_and_code():
    r = costs.check_expression("(p-1)*gamma", "allgather", "ring")
    assert not r.equal and "gamma" in r.message and "valid" in r.message
    r = costs.check_expression("__import__('os').system('true')", "allgather", "ring")
    assert not r.equal
