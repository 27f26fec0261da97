"""Platforms: names, hostfiles per mapping, real smpirun ping-pongs and the THIN calibration."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mpilab import platforms
from mpilab.errors import UsageError
from mpilab.models import segmented_fit

HERE = Path(__file__).resolve().parent

# FACTS.md: first segment of the point-to-point model measured on THIN (µs, µs/byte).
REPORT = {"core": (1.1736, 0.0001), "socket": (4.3637, 0.0001), "node": (1.6064, 0.0002)}


def test_names_and_info():
    names = platforms.list_platforms()
    for n in ("orfeo-thin", "orfeo-epyc", "orfeo-fat", "jupiter-32x16", "orfeo-thin-10"):
        assert n in names
    info = platforms.platform_info("orfeo-thin")
    assert (info["nodes"], info["sockets"], info["cores_per_socket"]) == (2, 2, 12)
    assert len(info["hosts"]) == 48
    assert platforms.platform_info("orfeo-thin-4")["cores"] == 96
    assert platforms.platform_info("orfeo-fat")["sockets"] == 4


def test_unknown_name_lists_valid():
    with pytest.raises(UsageError, match="orfeo-thnn.*orfeo-thin"):
        platforms.platform_file("orfeo-thnn")
    with pytest.raises(UsageError, match="2..10 nodes, not 11"):
        platforms.platform_file("orfeo-thin-11")
    with pytest.raises(UsageError, match="does not exist"):
        platforms.platform_file("/nonexistent/p.xml")


def test_hostfile_mappings(tmp_path):
    core = platforms.placement("orfeo-thin", 26, "core")
    assert core[0] == "thin00-s0-c00" and core[11] == "thin00-s0-c11"
    assert core[12] == "thin00-s1-c00" and core[24] == "thin01-s0-c00"
    sock = platforms.placement("orfeo-thin", 26, "socket")
    assert sock[:3] == ["thin00-s0-c00", "thin00-s1-c00", "thin00-s0-c01"]
    assert sock[24] == "thin01-s0-c00"
    node = platforms.placement("orfeo-thin", 4, "node")
    assert node == ["thin00-s0-c00", "thin01-s0-c00", "thin00-s0-c01", "thin01-s0-c01"]
    p = platforms.write_hostfile("orfeo-thin", 48, "node", tmp_path / "h.txt")
    text = p.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 48
    assert len(set(text.splitlines())) == 48


def test_too_many_ranks_names_both_numbers(tmp_path):
    with pytest.raises(UsageError, match=r"49 ranks.*48 cores"):
        platforms.write_hostfile("orfeo-thin", 49, "core", tmp_path / "h")
    with pytest.raises(UsageError, match="mapping 'board'"):
        platforms.placement("orfeo-thin", 2, "board")


def test_user_xml_path(tmp_path):
    src = platforms.platform_file("orfeo-fat")
    user = tmp_path / "mine.xml"
    user.write_text(src.read_text())
    assert platforms.platform_file(user) == user.resolve()
    info = platforms.platform_info(str(user))
    assert (info["nodes"], info["sockets"], info["cores_per_socket"]) == (1, 4, 18)


@pytest.fixture(scope="module")
def pingpong(tmp_path_factory):
    if not shutil.which("smpicc") or not shutil.which("smpirun"):
        pytest.skip("SimGrid (smpicc, smpirun) is not installed")
    d = tmp_path_factory.mktemp("pp")
    exe = d / "pingpong_tiny"
    subprocess.run(["smpicc", "-O2", str(HERE / "data" / "pingpong_tiny.c"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=300)
    return exe


def simulate(exe, mapping, tmp_path, platform="orfeo-thin"):
    host = platforms.write_hostfile(platform, 2, mapping, tmp_path / f"h-{mapping}")
    out = subprocess.run(["smpirun", "-np", "2", "-platform", str(platforms.platform_file(platform)),
                          "-hostfile", str(host), "--cfg=smpi/simulate-computation:no",
                          "--log=root.thres:critical", str(exe)],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    rows = [tuple(map(float, line.split())) for line in out.splitlines() if line[:1].isdigit()]
    n, t = np.array(rows).T
    return n, t


@pytest.mark.slow
def test_three_distinct_distances(pingpong, tmp_path):
    small = {m: simulate(pingpong, m, tmp_path)[1][0] for m in REPORT}
    assert small["core"] < small["node"] < small["socket"]
    assert len({round(v, 2) for v in small.values()}) == 3


@pytest.mark.slow
@pytest.mark.parametrize("mapping", sorted(REPORT))
def test_thin_calibration_first_segment(pingpong, tmp_path, mapping):
    """Simulated THIN ping-pong, fitted with the kit's segmented fit, vs the report.

    The intercept must be within 15 % of the report's. The report rounds slopes to 4
    decimals (0.0001 stands for anything in [0.00005, 0.00015)), so the slope must round to
    the report's value and lie within 15 % of it.
    """
    n, t = simulate(pingpong, mapping, tmp_path)
    fit = segmented_fit(n, t, segments=2, min_points=3)
    first = fit.table.iloc[0]
    ref_ic, ref_sl = REPORT[mapping]
    assert abs(first["intercept"] - ref_ic) <= 0.15 * ref_ic, fit.table
    assert round(first["slope"], 4) == ref_sl, fit.table
    assert abs(first["slope"] - ref_sl) <= 0.15 * ref_sl, fit.table


def test_variant_changes_only_the_named_links(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = platforms.variant("orfeo-thin", "thin-busy", bw_nic=1.25e3, lat_nic=5.0)
    assert path == tmp_path / "mpilab" / "platforms" / "thin-busy.xml"
    text = path.read_text()
    assert '<link id="nic0" bandwidth="1.25e+09Bps" latency="5us" sharing_policy="SHARED"/>' in text
    assert text.count('latency="1.1736us"') == 4     # the sockets' links are unchanged
    assert platforms.platform_info(str(path))["cores"] == 48
    assert platforms.placement(str(path), 4, "node") == platforms.placement("orfeo-thin", 4, "node")
    with pytest.raises(UsageError, match="unknown platform parameter 'bw_disk'; valid: bw_nic"):
        platforms.variant("orfeo-thin", "x", bw_disk=1.0)
    with pytest.raises(UsageError, match="bad lat_nic -1; valid: a positive number"):
        platforms.variant("orfeo-thin", "x", lat_nic=-1)
    with pytest.raises(UsageError, match="bad platform label 'a b'"):
        platforms.variant("orfeo-thin", "a b", lat_nic=1.0)
    with pytest.raises(UsageError, match="bad platform label 'orfeo-fat'"):
        platforms.variant("orfeo-thin", "orfeo-fat", lat_nic=1.0)


@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid is not installed")
def test_busy_network_slows_only_what_leaves_the_node(built_flavour, tmp_path, monkeypatch):
    from mpilab import forcing, launch

    built_flavour("smpi")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    busy = platforms.variant("orfeo-thin", "thin-busy", bw_nic=1.25e3, lat_nic=5.0)

    def bcast(platform, p):
        L = launch.get_launcher("smpi", platform=platform)
        rows = forcing.measure(L, "bcast", "binomial", p, sizes="64K:64K", iters=2, warmup=1)
        return rows[0]

    assert bcast(busy, 4)["avg_us"] == bcast("orfeo-thin", 4)["avg_us"]    # one node: no NIC
    slow, base = bcast(busy, 48), bcast("orfeo-thin", 48)
    assert slow["platform"] == "thin-busy" and slow["avg_us"] > 1.5 * base["avg_us"]
