"""Seed 000's residual: the upper-bound argument's numbers, and the labelled unexplained cost that
draws the seed's curves, never for a ping-pong."""

import pytest

from mpilab.core.errors import UsageError
from mpilab.simulate import routes
from mpilab.studies import calibration, reference, residual


def test_the_seeds_chains_cost_more_per_process_than_its_slowest_message():
    """The pipelines add one message per process; the seed's add 7.8 and 12.6 µs per process at
    1 KiB, 1.7 and 2.8 times its own ping-pong's slowest one-way time (the socket row, 4.47 µs),
    the upper bound of what any split of that time into overheads and latency can charge."""
    t = residual.per_message_costs().set_index(["collective", "algorithm"])
    assert t["one_way_1k_max_us"].iloc[0] == pytest.approx(
        float(reference.predict("pingpong", "socket", 1024))
    )
    assert t.loc[("reduce", "pipeline"), "slope_us_per_process"] == pytest.approx(12.6042)
    assert t.loc[("bcast", "pipeline"), "times"] == pytest.approx(7.7647 / 4.4661, rel=1e-3)
    assert (t.loc[[("bcast", "pipeline"), ("reduce", "pipeline")], "times"] > 1.5).all()


def test_the_unexplained_platform_is_labelled_and_refused_for_a_ping_pong(tmp_path):
    xml = residual.unexplained_platform(9.0, path=tmp_path / "u.xml")
    text = xml.read_text()
    assert "UNEXPLAINED per-message cost of 9 us per side" in text
    assert routes.unexplained_cost(xml) == 9.0 and routes.unexplained_cost("orfeo-thin") == 0
    thin = routes.overheads("orfeo-thin")["classes"]
    mine = routes.overheads(xml)["classes"]
    for cls in ("core", "socket", "node"):  # every class, every side, the same extra
        assert mine[cls] == pytest.approx(tuple(x + 9.0 for x in thin[cls]))
    with pytest.raises(UsageError, match="unexplained per-message cost of 9 us per side"):
        calibration.pingpong_table(xml)
    with pytest.raises(UsageError, match="never used for a ping-pong"):
        calibration.check_calibration(xml, {"core": (1.0, 1e-4)})
    with pytest.raises(UsageError, match="bad unexplained cost -1"):
        residual.unexplained_platform(-1)


@pytest.mark.slow
def test_the_unexplained_cost_brings_the_median_to_the_seed(built_flavour):
    """At the frozen value the median sim / seed over the six curves is 1 (the fit's criterion);
    the physical THIN's is far below."""
    built_flavour("smpi")
    with_cost = residual.simulate(residual.unexplained_platform())
    assert with_cost["ratio"].median() == pytest.approx(1.0, abs=0.02)
    physical = residual.simulate("orfeo-thin")
    assert physical["ratio"].median() < 0.3
    both = residual.both_curves("reduce", "pipeline", nprocs=(8, 48))
    assert (both["unexplained_us"] > both["thin_us"]).all()
    fig, ax = residual.plot_both(both, "reduce pipeline")
    assert len(ax.get_lines()) == 3
