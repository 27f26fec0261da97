"""Calibration: the ping-pong fit (monotone one-way times, or the table as measured), the overhead
bound, per-class CPU overheads, the platform a calibration writes, and the collective-curve fit on
a platform whose overhead is known."""

import numpy as np
import pandas as pd
import pytest

from mpilab import cli
from mpilab.core import units
from mpilab.core.errors import UsageError
from mpilab.simulate import calibration, clusters, platforms, routes
from mpilab.studies import calibration as study
from mpilab.studies import reference


def test_pool_adjacent_violators():
    assert calibration.pool_monotone([1.0, 2.0, 3.0], [1, 1, 1]) == [1.0, 2.0, 3.0]
    assert calibration.pool_monotone([1.0, 4.0, 2.0], [1, 1, 3]) == [1.0, 2.5, 2.5]
    assert calibration.pool_monotone([3.0, 1.0], [1, 1]) == [2.0, 2.0]


#: A made-up cluster: one-way time of the smallest message (µs) and time per byte (µs/B).
KNOWN = {"core": (0.45, 4e-5), "socket": (0.9, 6e-5), "node": (2.5, 2e-4)}


def known_rows(noise=0.0):
    rng = np.random.default_rng(3)
    rows = []
    for m, (a, b) in KNOWN.items():
        for n in units.sizes_in_range(0, 1 << 20):
            rows.append(
                {
                    "collective": "pingpong",
                    "flavour": "openmpi",
                    "platform": "mine",
                    "mapping": m,
                    "bytes": n,
                    "avg_us": (a + b * n) * rng.normal(1, noise),
                }
            )
    return pd.DataFrame(rows)


def test_fit_pingpong_recovers_a_known_cluster():
    exact = calibration.fit_pingpong(KNOWN).set_index("mapping")
    for m, (a, b) in KNOWN.items():
        assert exact.loc[m, "one_way_us"] == a and exact.loc[m, "beta_us_per_byte"] == b
    fit = calibration.fit_pingpong(known_rows(noise=0.01), segments=1, beta="fit").set_index("mapping")
    for m, (a, b) in KNOWN.items():
        assert fit.loc[m, "one_way_us"] == pytest.approx(a, rel=0.05)
        assert fit.loc[m, "beta_us_per_byte"] == pytest.approx(b, rel=0.05)
    assert not fit["pooled"].any()


def test_fit_pingpong_pools_a_non_monotone_table_by_segment_length():
    table = pd.DataFrame(
        [
            dict(mapping="core", segment=1, lower=0, upper=1 << 20, intercept=1.0, slope=1e-4),
            dict(mapping="socket", segment=1, lower=0, upper=1 << 20, intercept=4.0, slope=1e-4),
            dict(mapping="node", segment=1, lower=0, upper=1 << 16, intercept=2.0, slope=2e-4),
        ]
    )
    fit = calibration.fit_pingpong(table).set_index("mapping")
    # weights 1/2^20 and 1/2^16: (4 + 16 * 2) / 17
    assert fit.loc["socket", "one_way_us"] == pytest.approx(36 / 17)
    assert fit.loc["node", "one_way_us"] == pytest.approx(36 / 17)
    assert fit.loc["core", "one_way_us"] == 1.0 and list(fit["pooled"]) == [False, True, True]


def test_seed000_table_gives_the_shipped_thin_numbers():
    """THIN keeps the seed's table as printed (the socket row, 4.36 us, not pooled) and charges
    each intra-node class's whole one-way time, less 0.1 us of link, as CPU overhead."""
    table = reference.orfeo_report("pingpong")
    fit = calibration.fit_pingpong(table, beta="fit", monotone=False).set_index("mapping")
    for m, (a, b) in clusters.THIN_PINGPONG_FIT.items():
        assert fit.loc[m, "one_way_us"] == pytest.approx(a, rel=1e-5)
        assert fit.loc[m, "beta_us_per_byte"] == pytest.approx(b, rel=1e-5)
    assert fit.loc["socket", "one_way_us"] == 4.3637 and not fit["pooled"].any()
    pooled = calibration.fit_pingpong(table, beta="fit").set_index("mapping")  # the kit's old THIN
    assert pooled.loc["socket", "one_way_us"] == pooled.loc["node", "one_way_us"] == pytest.approx(1.810592)
    params, _ = platforms.cluster_params("orfeo-thin")
    v = {k: p.value for k, p in params.items()}
    assert v["cpu_share"] == clusters.THIN_CPU_SHARE == 1
    for cls, o in (("core", v["o_send"]), ("socket", v["overhead_socket"])):
        link = v[f"one_way_{cls}"] - 2 * o - 16 * v[f"beta_{cls}"]
        assert link == pytest.approx(calibration.MIN_LINK_LATENCY_US)
    assert v["overhead_node"] == v["o_send"] == v["o_recv"] == v["o_isend"]


def test_cpu_share_follows_a_users_one_way_times(tmp_path):
    """A calibration on THIN's base keeps its per-class overheads: the share of each of *your*
    intra-node one-way times; a single overhead (with_overhead) drops them."""
    params, prefix = platforms.cluster_params("orfeo-thin")
    mine = calibration.with_pingpong(params, calibration.fit_pingpong(KNOWN), "mine")
    assert mine["o_send"].value == pytest.approx((0.45 - 0.1 - 16 * 4e-5) / 2)
    assert mine["overhead_socket"].value == pytest.approx((0.9 - 0.1 - 16 * 6e-5) / 2)
    half = calibration.with_cpu_share(mine, 0.5, "half")
    assert half["overhead_socket"].value == pytest.approx(mine["overhead_socket"].value / 2)
    with pytest.raises(UsageError, match="bad CPU share 1.5"):
        calibration.with_cpu_share(mine, 1.5, "x")
    one = calibration.with_overhead(mine, 0.1, "one o")
    assert "overhead_socket" not in one and "cpu_share" not in one
    xml = calibration.write_platform(one, tmp_path / "one.xml", prefix=prefix)
    assert "mpilab/overheads" not in xml.read_text()[:20000]


def test_fit_pingpong_refuses_bad_input():
    with pytest.raises(UsageError, match="intercept -1 us is negative"):
        calibration.fit_pingpong({"core": (-1.0, 1e-4)})
    with pytest.raises(UsageError, match="mapping 'rack'"):
        calibration.fit_pingpong({"rack": (1.0, 1e-4)})
    with pytest.raises(UsageError, match="beta method 'best'"):
        calibration.fit_pingpong(KNOWN, beta="best")


def test_calibrated_platform_reads_back_its_ping_pong(tmp_path):
    xml = calibration.calibrate(KNOWN, base="orfeo-thin", path=tmp_path / "mine.xml")
    text = xml.read_text()
    assert "one_way_core = 0.45 us: fit: your ping-pong" in text
    hosts = {m: platforms.placement(xml, 26, m) for m in ("core", "socket", "node")}
    pairs = {
        "core": (hosts["core"][0], hosts["core"][1]),
        "socket": (hosts["socket"][0], hosts["socket"][1]),
        "node": (hosts["node"][0], hosts["node"][1]),
    }
    for m, (a, b) in KNOWN.items():
        assert routes.route_cost(xml, *pairs[m]) == pytest.approx((a, b), rel=1e-6)
    o = routes.overheads(xml)
    # THIN's per-class overheads follow the new one-way times: its share (1) of each
    assert (
        o["o_send"] == o["o_recv"] == pytest.approx((0.45 - calibration.MIN_LINK_LATENCY_US - 16 * 4e-5) / 2)
    )
    assert o["classes"]["socket"][0] == pytest.approx((0.9 - calibration.MIN_LINK_LATENCY_US - 16 * 6e-5) / 2)
    assert o["eager_bytes"] == 4096


def test_overhead_bound_is_enforced():
    params, _ = platforms.cluster_params("orfeo-thin")
    bound = calibration.overhead_bound(params)
    assert bound == pytest.approx((1.1736 - 0.1 - 16 * clusters.THIN_PINGPONG_FIT["core"][1]) / 2)
    with pytest.raises(UsageError, match=r"overhead 0.7 us; valid: 0..0.536"):
        calibration.with_overhead(params, 0.7, "test")


def test_cli_calibrate_from_the_seed_table(tmp_path, capsys):
    assert cli.main(["calibrate", "--seed", "000", "--beta", "fit", "-o", str(tmp_path / "t.xml")]) == 0
    out = capsys.readouterr().out
    assert "socket" in out and "4.3637" in out and "1.81059" not in out and "wrote" in out
    assert cli.main(["calibrate", "--seed", "001", "-o", str(tmp_path / "x.xml")]) == 2
    assert "bad --seed '001'" in capsys.readouterr().err


def test_fit_to_curve_recovers_a_known_overhead(built_flavour, tmp_path):
    """Simulate a linear broadcast on a platform whose overhead is known (0.3 µs), then fit the
    overhead of the same platform with another value back to that curve."""
    built_flavour("smpi")
    params, prefix = platforms.cluster_params("orfeo-thin")
    truth = calibration.with_cpu_share(params, 0.4, "known")
    xml = calibration.write_platform(truth, tmp_path / "truth.xml", prefix=prefix)
    sim = study.simulate_curve(xml, "bcast", "basic_linear", [8, 16, 24], 1024, mapping=study.SEED000_MAPPING)
    curve = dict(
        collective="bcast",
        algorithm="basic_linear",
        bytes=1024,
        nprocs=[8, 16, 24],
        reference_us=list(sim["avg_us"]),
    )
    fit = study.fit_to_curve(
        params,
        lambda p, x: calibration.with_cpu_share(p, x, "trial"),
        (0.0, 1.0),
        curve,
        prefix=prefix,
        mapping=study.SEED000_MAPPING,
        workdir=tmp_path,
        xatol=1e-3,
    )
    assert fit["value"] == pytest.approx(0.4, abs=0.01) and not fit["at_bound"]
    assert (fit["table"]["ratio"] - 1).abs().max() < 0.02


def test_seed_placement_and_statistics():
    assert [study.placement_of(study.SEED000_MAPPING, p) for p in (2, 3, 48)] == ["core", "socket", "socket"]
    assert study.placement_of("node", 8) == "node"
    with pytest.raises(UsageError, match="mapping 'rack'"):
        study.placement_of("rack", 8)
    assert study.SEED000_METRIC == "avg_us" and study.SEED001_METRIC == "maxrank_median_us"
    with pytest.raises(UsageError, match="metric 'slowest'"):
        study.calibrate(KNOWN, metric="slowest")


@pytest.mark.slow
def test_thin_cpu_share_fit_is_the_shipped_one(built_flavour, tmp_path):
    """Refit the share of THIN's intra-node one-way times charged as CPU overhead to seed 000's bcast
    basic_linear (OSU's average, the seed's placement): it stops at its bound, 1."""
    built_flavour("smpi")
    xml, rep = study.calibrate_thin(workdir=tmp_path, path=tmp_path / "thin.xml")
    assert rep["fitted"] == "cpu_share" and rep["curve_fit"]["at_bound"]
    assert rep["curve_fit"]["value"] == pytest.approx(clusters.THIN_CPU_SHARE, abs=2e-3)


@pytest.mark.slow
def test_jupiter_fit_is_the_shipped_one(built_flavour, tmp_path):
    """Refit jupiter's intra-node one-way time to seed 001's two points inside one node."""
    built_flavour("smpi")
    params, fit = study.calibrate_jupiter(workdir=tmp_path)
    assert fit["value"] == pytest.approx(clusters.JUPITER_CORE_FIT, rel=2e-3) and not fit["at_bound"]
    assert list(fit["table"]["algorithm"]) == ["binomial", "recursive_doubling"]
