"""Generated fat trees and tori: routes from the base platform's parameters, the parameter table
with its sources, bad input, and real smpirun ping-pongs that see the routes' latencies."""

import dataclasses

import pytest

from mpilab.core.errors import UsageError
from mpilab.measure import pingpong
from mpilab.simulate import platforms, routes, topologies

BASE = platforms.spec("orfeo-thin")
# THIN's physical parameters (mpilab.simulate.clusters): a message between two of its nodes
# costs ONE_WAY + (n + 16) BETA (overheads included, what a ping-pong measures), and a further
# switch costs HOP: half the link latency left once the overheads and the 16-byte envelope are
# taken out (platforms.spec_of gives a quarter to each card and half to the switch).
PARAMS = {k: p.value for k, p in platforms.cluster_params("orfeo-thin")[0].items()}
ONE_WAY, BETA = PARAMS["one_way_node"], PARAMS["beta_node"]
HOP = (ONE_WAY - PARAMS["o_send"] - PARAMS["o_recv"] - 16 * BETA) / 2


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))


def _cost(path, a, b):
    hosts = platforms.platform_info(path)["hosts"]
    return routes.route_cost(path, hosts[a], hosts[b])


def test_fat_tree_routes_cross_one_or_three_switches():
    path = topologies.fat_tree(leaves=4, nodes_per_leaf=4, spines=2)
    assert path.name == "fattree-4x4-2spines.xml"
    info = platforms.platform_info(path)
    assert info["nodes"] == 16 and info["cores"] == 16
    assert platforms.placement(path, 3, "node") == platforms.placement(path, 3, "core")
    assert _cost(path, 0, 3) == pytest.approx((ONE_WAY, BETA))  # same leaf: THIN
    assert _cost(path, 3, 4) == pytest.approx((ONE_WAY + 2 * HOP, BETA))  # up and down a spine
    # SMPI's config: THIN's overheads; one core per node, so every message is of the node class
    # (THIN's socket class, dearer, has no message here)
    got, thin = routes.overheads(path), routes.overheads("orfeo-thin")
    assert got.keys() == thin.keys()
    for key in thin.keys() - {"classes"}:
        assert got[key] == thin[key], key
    assert got["classes"]["node"] == thin["classes"]["node"]
    # d-mod-k: to node 5 (odd) up through spine 1, to node 6 through spine 0
    text = path.read_text()
    assert '<route src="ft00-s0-c00" dst="ft05-s0-c00" symmetrical="NO">' in text
    assert (
        'dst="ft05-s0-c00" symmetrical="NO"><link_ctn id="port-ft00-s0-c00" direction="UP"/>'
        '<link_ctn id="mem0"/><link_ctn id="nic0" direction="UP"/><link_ctn id="leaf0"/>'
        '<link_ctn id="up0.1" direction="UP"/><link_ctn id="up1.1" direction="DOWN"/>' in text
    )


def test_torus_routes_count_router_hops():
    path = topologies.torus(dims=(4, 3))
    assert path.name == "torus-4x3.xml"
    assert _cost(path, 0, 1) == pytest.approx((ONE_WAY + HOP, BETA))  # neighbours on the first ring
    assert _cost(path, 0, 3)[0] == pytest.approx(ONE_WAY + HOP)  # the wrap-around link
    assert _cost(path, 0, 2)[0] == pytest.approx(ONE_WAY + 2 * HOP)  # half way round
    assert _cost(path, 0, 4)[0] == pytest.approx(ONE_WAY + HOP)  # second dimension
    assert _cost(path, 0, 10)[0] == pytest.approx(ONE_WAY + 3 * HOP)  # (2, 2): 2 + 1 hops
    assert _cost(path, 5, 5) == (0.0, 0.0)


def test_parameters_name_their_sources():
    table = topologies.parameters(topologies.fat_tree(leaves=2, nodes_per_leaf=2, spines=1))
    assert table.loc["lat_switch", "value"] == f"{HOP:.6g}"
    assert table.loc["eager_bytes", "value"] == str(PARAMS["eager_bytes"])
    assert table.loc["o_recv", "value"] == f"{PARAMS['o_recv']:.6g}"
    assert "one_way_node" not in table.index  # the base's own sources stay in their block
    assert table.loc["lat_switch", "source"].startswith("the orfeo-thin platform's lat_switch")
    assert table.loc["spines", "source"].startswith("assumption: 2:1 oversubscription")
    for name in ("leaves", "nodes_per_leaf", "uplink bandwidth", "uplink latency", "routing"):
        assert table.loc[name, "source"].startswith("assumption: "), name
    assert all(table["source"].str.len() > 20)
    torus = topologies.parameters(topologies.torus(dims=(3, 3, 3)))
    assert torus.loc["dims", "value"] == "3x3x3"
    with pytest.raises(UsageError, match="no parameter block"):
        topologies.parameters("orfeo-thin")


def test_a_recalibrated_base_flows_in(monkeypatch):
    slow = dataclasses.replace(
        BASE, lat_switch=5.0, lat_nic=1.0, o_send=2.0, o_recv=3.0, o_isend=4.0, eager_bytes=1024
    )
    monkeypatch.setattr(platforms, "spec", lambda name: slow)
    path = topologies.fat_tree(leaves=2, nodes_per_leaf=2, spines=1)
    assert _cost(path, 0, 2) == pytest.approx((2.0 + 2 * 1.0 + 3 * 5.0 + 16 * BETA + 3.0, BETA))
    o = routes.overheads(path)
    assert (o["o_send"], o["o_isend"], o["o_recv"], o["eager_bytes"]) == pytest.approx((2.0, 4.0, 3.0, 1024))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: topologies.fat_tree(leaves=0), "bad leaves 0; valid: an integer >= 1"),
        (
            lambda: topologies.fat_tree(leaves=40, nodes_per_leaf=8),
            "a fat tree of 40 x 8 = 320 nodes; valid: 2..256",
        ),
        (lambda: topologies.torus(dims=(2, 4)), "bad torus dimension 2; valid: an integer >= 3"),
        (lambda: topologies.torus(label="orfeo-thin"), "bad platform label 'orfeo-thin'"),
        (lambda: topologies.torus(base="orfeo-thinn"), "unknown platform 'orfeo-thinn'"),
    ],
)
def test_bad_input_says_what_is_valid(call, message):
    with pytest.raises(UsageError, match=message):
        call()


@pytest.mark.slow
def test_smpi_sees_the_routes(built_flavour):
    """A simulated ping-pong between the two nodes of a 2-leaf tree and of a 3-ring torus costs
    THIN's one-way time between nodes plus the switches the route crosses beyond THIN's one (SMPI
    adds about 0.01 us, see mpilab.simulate.platforms)."""
    built_flavour("smpi")
    for path, hops in (
        (topologies.fat_tree(leaves=2, nodes_per_leaf=1, spines=1), 2),
        (topologies.torus(dims=(3,)), 1),
    ):
        df = pingpong.run("smpi", "node", platform=str(path), sizes="0:8", iters=3, warmup=1)
        zero = float(df[df["bytes"] == 0]["avg_us"].iloc[0])
        want = ONE_WAY + hops * HOP
        assert zero == pytest.approx(want, abs=0.05), (path.name, zero, want)
