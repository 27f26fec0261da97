"""Generated fat trees and tori: routes from the base platform's parameters, the parameter table
with its sources, bad input, and real smpirun ping-pongs that see the routes' latencies."""
import pytest

from mpilab.core.errors import UsageError
from mpilab.measure import pingpong
from mpilab.simulate import platforms, routes, topologies

BASE = platforms.spec("orfeo-thin")


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
    one = 2 * BASE.lat_nic + BASE.lat_switch
    assert _cost(path, 0, 3) == pytest.approx((one, 1 / BASE.bw_nic))        # same leaf
    assert _cost(path, 3, 4) == pytest.approx((one + 2 * BASE.lat_switch, 1 / BASE.bw_nic))
    # d-mod-k: to node 5 (odd) up through spine 1, to node 6 through spine 0
    text = path.read_text()
    assert '<route src="ft00-s0-c00" dst="ft05-s0-c00" symmetrical="NO">' in text
    assert 'dst="ft05-s0-c00" symmetrical="NO"><link_ctn id="port-ft00-s0-c00" direction="UP"/>' \
           '<link_ctn id="nic0" direction="UP"/><link_ctn id="leaf0"/><link_ctn id="up0.1" direction="UP"/>' \
           '<link_ctn id="up1.1" direction="DOWN"/>' in text


def test_torus_routes_count_router_hops():
    path = topologies.torus(dims=(4, 3))
    assert path.name == "torus-4x3.xml"
    one = 2 * BASE.lat_nic + BASE.lat_switch
    hop = BASE.lat_switch
    assert _cost(path, 0, 1)[0] == pytest.approx(one + hop)           # neighbours on the first ring
    assert _cost(path, 0, 3)[0] == pytest.approx(one + hop)           # the wrap-around link
    assert _cost(path, 0, 2)[0] == pytest.approx(one + 2 * hop)       # half way round
    assert _cost(path, 0, 4)[0] == pytest.approx(one + hop)           # second dimension
    assert _cost(path, 0, 10)[0] == pytest.approx(one + 3 * hop)      # (2, 2): 2 + 1 hops
    assert _cost(path, 5, 5) == (0.0, 0.0)


def test_parameters_name_their_sources():
    table = topologies.parameters(topologies.fat_tree(leaves=2, nodes_per_leaf=2, spines=1))
    assert table.loc["lat_switch", "value"] == f"{BASE.lat_switch:.6g}"
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
    slow = platforms.Spec("thin", 2, 2, 12, lat_switch=5.0, lat_nic=1.0)
    monkeypatch.setattr(platforms, "spec", lambda name: slow)
    path = topologies.fat_tree(leaves=2, nodes_per_leaf=2, spines=1)
    assert _cost(path, 0, 2)[0] == pytest.approx(2 * 1.0 + 3 * 5.0)


@pytest.mark.parametrize("call, message", [
    (lambda: topologies.fat_tree(leaves=0), "bad leaves 0; valid: an integer >= 1"),
    (lambda: topologies.fat_tree(leaves=40, nodes_per_leaf=8), "a fat tree of 40 x 8 = 320 nodes; valid: 2..256"),
    (lambda: topologies.torus(dims=(2, 4)), "bad torus dimension 2; valid: an integer >= 3"),
    (lambda: topologies.torus(label="orfeo-thin"), "bad platform label 'orfeo-thin'"),
    (lambda: topologies.torus(base="orfeo-thinn"), "unknown platform 'orfeo-thinn'"),
])
def test_bad_input_says_what_is_valid(call, message):
    with pytest.raises(UsageError, match=message):
        call()


@pytest.mark.slow
def test_smpi_sees_the_routes(built_flavour):
    """A simulated ping-pong between the two nodes of a 2-leaf tree and of a 3-ring torus costs
    the route's latency (SMPI adds about 0.01 us, see mpilab.simulate.platforms)."""
    built_flavour("smpi")
    for path, hops in ((topologies.fat_tree(leaves=2, nodes_per_leaf=1, spines=1), 3),
                       (topologies.torus(dims=(3,)), 2)):
        df = pingpong.run("smpi", "node", platform=str(path), sizes="0:8", iters=3, warmup=1)
        zero = float(df[df["bytes"] == 0]["avg_us"].iloc[0])
        want = 2 * BASE.lat_nic + hops * BASE.lat_switch
        assert zero == pytest.approx(want, abs=0.05), (path.name, zero, want)
