"""Platforms: names, hostfiles per mapping, real smpirun ping-pongs, the THIN calibration,
calibration to a user's own ping-pong, and the contention-free alpha-beta platforms."""

import re
import subprocess

import numpy as np
import pandas as pd
import pytest

from mpilab import cli
from mpilab.core import paths, results, units
from mpilab.core.errors import UsageError
from mpilab.measure import pingpong
from mpilab.model import p2p
from mpilab.model.fits import segmented_fit
from mpilab.simulate import calibration, clusters, overheads, platform_xml, platforms, routes
from mpilab.studies.calibration import check_calibration

# The calibrated THIN (mpilab.simulate.clusters): one-way time of a small message (µs) and time
# per byte (µs/B) per distance, fitted to seed 000's ping-pong table (made monotone).
THIN = dict(clusters.THIN_PINGPONG_FIT)


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


def test_thin_like_and_jupiter_like_sizes(tmp_path):
    """More ranks than ORFEO's THIN or the seed's jupiter have cores: the same nodes, more of
    them, one rank per core; a platform too large to list its routes is refused."""
    info = platforms.platform_info("thin-like-43")
    assert (info["nodes"], info["sockets"], info["cores_per_socket"], info["cores"]) == (43, 2, 12, 1032)
    assert "THIN-like" in info["description"]
    assert platforms.platform_info("jupiter-64x16")["cores"] == 1024
    assert platforms.placement("jupiter-64x16", 1024)[-1] == "jupiter63-s0-c15"
    xml = platform_xml.render_xml(platforms._spec("thin-like-3"))
    assert xml == platform_xml.render_xml(platforms._spec("orfeo-thin-3")).replace(
        platforms._spec("orfeo-thin-3").description, platforms._spec("thin-like-3").description
    )
    with pytest.raises(UsageError, match="for more nodes of THIN's kind use thin-like-11"):
        platforms.platform_file("orfeo-thin-11")
    with pytest.raises(
        UsageError,
        match=r"'thin-like-46': 46 nodes, 1104 cores; valid: .*at "
        r"most 1100 cores",
    ):
        platforms.platform_file("thin-like-46")
    with pytest.raises(UsageError, match=r"jupiter-0x16.*N = 1..68"):
        platforms.platform_file("jupiter-0x16")
    with pytest.raises(
        UsageError,
        match=r"512 ranks do not fit .* 240 cores.*thin-like-22 or "
        r"jupiter-32x16",
    ):
        platforms.write_hostfile("orfeo-thin-10", 512, "core", tmp_path / "h")


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
def simulated(built_flavour):
    """Simulated ping-pong of c_reference's pingpong on THIN, one run per mapping (0 B..4 MiB)."""
    built_flavour("smpi")
    runs = {}

    def get(mapping, platform="orfeo-thin"):
        if (mapping, platform) not in runs:
            df = pingpong.run(
                "smpi", mapping, platform=platform, iters=5, warmup=1, iters_large=2, warmup_large=1
            )
            runs[(mapping, platform)] = (df["bytes"].to_numpy(float), df["avg_us"].to_numpy(float))
        return runs[(mapping, platform)]

    return get


@pytest.mark.slow
def test_the_seeds_table_as_printed(simulated):
    """core < node < socket at small sizes, as the report's table has it (the socket row, 4.36 µs,
    was measured with ranks bound to sockets: docs/CALIBRATION.md keeps it)."""
    small = {m: simulated(m)[1][1] for m in THIN}  # 1 byte
    assert small["core"] < small["node"] < small["socket"]
    for m in THIN:
        assert small[m] == pytest.approx(THIN[m][0] + 17 * THIN[m][1], abs=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("mapping", sorted(THIN))
def test_thin_pingpong_is_the_calibrated_model(simulated, mapping):
    """SMPI's ping-pong on THIN: one_way + β (n + 16) below the eager limit (4 KiB), and without
    the two overheads from there on (SMPI charges them to eager messages only)."""
    n, t = simulated(mapping)
    assert n[0] == 0 and n[-1] == 4 << 20
    a, b = THIN[mapping]
    o = routes.overheads("orfeo-thin")
    o_send, o_recv, _ = o["classes"][mapping]  # each class its own CPU overheads
    eager = n < o["eager_bytes"]
    want = np.where(eager, a + b * (n + 16), a - o_send - o_recv + b * (n + 16))
    np.testing.assert_allclose(t, want, rtol=2e-3, atol=0.02)


def test_variant_changes_only_the_named_links(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = platforms.variant("orfeo-thin", "thin-busy", bw_switch=1.5625e3, lat_nic=5.0)
    assert path == tmp_path / "mpilab" / "platforms" / "thin-busy.xml"
    text = path.read_text()
    assert '<link id="nic0" bandwidth="1.5625e+09Bps" latency="5us" sharing_policy="SPLITDUPLEX"/>' in text
    spec = platforms._spec("orfeo-thin")
    for lat, links in ((spec.lat_socket, r"sock\d\.\d"), (spec.lat_node, r"node\d")):  # unchanged
        assert (
            len(re.findall(rf'<link id="{links}" bandwidth="[^"]+" latency="{lat:.9g}us"', text))
            == {
                r"sock\d\.\d": 4,
                r"node\d": 2,
            }[links]
        )
    assert platforms.platform_info(str(path))["cores"] == 48
    assert platforms.placement(str(path), 4, "node") == platforms.placement("orfeo-thin", 4, "node")
    with pytest.raises(
        UsageError, match="unknown platform parameter 'bw_disk'; valid: bw_mem, bw_nic, bw_node, bw_port"
    ):
        platforms.variant("orfeo-thin", "x", bw_disk=1.0)
    with pytest.raises(UsageError, match="bad lat_nic -1; valid: a positive number"):
        platforms.variant("orfeo-thin", "x", lat_nic=-1)
    with pytest.raises(UsageError, match="bad platform label 'a b'"):
        platforms.variant("orfeo-thin", "a b", lat_nic=1.0)
    with pytest.raises(UsageError, match="bad platform label 'orfeo-fat'"):
        platforms.variant("orfeo-thin", "orfeo-fat", lat_nic=1.0)


def test_busy_network_slows_only_what_leaves_the_node(built_flavour, tmp_path, monkeypatch):
    from mpilab.measure import forcing, launch

    built_flavour("smpi")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    busy = platforms.variant("orfeo-thin", "thin-busy", bw_switch=1.5625e3, lat_nic=5.0)

    def bcast(platform, p):
        L = launch.get_launcher("smpi", platform=platform)
        rows = forcing.measure(L, "bcast", "binomial", p, sizes="64K:64K", iters=2, warmup=1)
        return rows[0]

    assert bcast(busy, 4)["avg_us"] == bcast("orfeo-thin", 4)["avg_us"]  # one node: no NIC
    slow, base = bcast(busy, 48), bcast("orfeo-thin", 48)
    assert slow["platform"] == "thin-busy" and slow["avg_us"] > 1.5 * base["avg_us"]


# --- calibration to a user's own ping-pong ---------------------------------------------------

#: A made-up cluster unlike THIN: (intercept us, slope us/B) of the first segment per mapping,
#: the size where the second segment starts, and the second segment.
SYNTHETIC = {
    "core": ((0.45, 4e-5), 262144, (-8.0, 7e-5)),
    "socket": ((2.2, 7e-5), 1048576, (-30.0, 1.0e-4)),
    "node": ((3.0, 3e-4), 65536, (12.0, 1.5e-4)),
}


def synthetic_rows():
    """Ping-pong rows of the made-up cluster, 0 B..4 MiB, with 1 % multiplicative noise."""
    rng = np.random.default_rng(7)
    rows = []
    for mapping, ((a1, b1), bp, (a2, b2)) in SYNTHETIC.items():
        for n in units.sizes_in_range(0, 4 << 20):
            t = a1 + b1 * n if n < bp else a2 + b2 * n
            rows.append(
                {
                    "collective": "pingpong",
                    "flavour": "openmpi",
                    "platform": "mycluster",
                    "mapping": mapping,
                    "bytes": n,
                    "avg_us": t * rng.normal(1, 0.01),
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_calibrate_to_a_synthetic_cluster(built_flavour, tmp_path):
    """Calibrate from raw ping-pong rows; the simulated ping-pong, fitted with the kit's
    segmented fit, gives back the cluster's first segment within 15 % for every mapping."""
    built_flavour("smpi")
    xml = calibration.calibrate(synthetic_rows(), base="orfeo-thin", path=tmp_path / "mine.xml")
    assert xml == tmp_path / "mine.xml" and "calibrated by mpilab" in xml.read_text()
    for mapping, ((ic, sl), _, _) in SYNTHETIC.items():
        df = pingpong.run("smpi", mapping, platform=xml, iters=3, warmup=1, iters_large=2)
        first = segmented_fit(df["bytes"], df["avg_us"], segments=2, min_points=3).table.iloc[0]
        assert abs(first["intercept"] - ic) <= 0.15 * ic, (mapping, first)
        assert abs(first["slope"] - sl) <= 0.15 * sl, (mapping, first)
    # the same from the fitted table, and the check helper agrees
    table = p2p.fit(synthetic_rows())
    xml2 = calibration.calibrate(table, path=tmp_path / "again.xml")
    check = check_calibration(xml2, {m: v[0] for m, v in SYNTHETIC.items()})
    assert list(check["mapping"]) == ["core", "socket", "node"]
    assert (check["intercept_error_pct"].abs() < 15).all() and (check["slope_error_pct"].abs() < 15).all()


def test_calibrate_sets_the_links(tmp_path):
    xml = calibration.calibrate(
        {"core": (0.5, 5e-5), "socket": (2.0, 8e-5), "node": (4.0, 4e-4)}, path=tmp_path / "c.xml"
    )
    hosts = platforms.placement(xml, 25, "core")
    for (a, b), want in (((0, 1), (0.5, 5e-5)), ((0, 12), (2.0, 8e-5)), ((0, 24), (4.0, 4e-4))):
        assert routes.route_cost(xml, hosts[a], hosts[b]) == pytest.approx(want, rel=1e-6)
    text = xml.read_text()
    # a core's port is as fast as the fastest pair (core: 1/5e-5 B/us), not THIN's 10.8 GB/s;
    # the node's card keeps THIN's 100 Gb/s, the memory Intel's figure
    assert '<link id="port-thin00-s0-c00" bandwidth="2e+10Bps" latency="0us"' in text
    assert (
        '<link id="nic0" bandwidth="1.25e+10Bps"' in text
        and '<link id="mem0.0" bandwidth="6.4e+10Bps"' in text
    )
    # THIN's overheads (0.536 µs) leave 0.5 µs no room: they shrink to the bound
    o = routes.overheads(xml)
    assert o["o_send"] == pytest.approx((0.5 - 0.1 - 16 * 5e-5) / 2)
    assert platforms.platform_info(str(tmp_path / "c.xml"))["cores"] == 48


def test_calibrate_bad_input(tmp_path):
    out = tmp_path / "x.xml"
    with pytest.raises(UsageError, match="intercept -0.5 us is negative"):
        calibration.calibrate({"core": (-0.5, 1e-4)}, path=out)
    with pytest.raises(UsageError, match="slope 0 us/byte must be positive"):
        calibration.calibrate({"core": (0.5, 0)}, path=out)
    with pytest.raises(UsageError, match="unknown mapping 'board'"):
        calibration.calibrate({"board": (0.5, 1e-4)}, path=out)
    with pytest.raises(UsageError, match="overhead 0.3 us; valid: 0..0.19"):
        calibration.calibrate({"core": (0.5, 1e-4)}, path=out, overhead=0.3)
    with pytest.raises(UsageError, match="'jupiter-32x16' has one socket per node"):
        calibration.calibrate({"socket": (0.5, 1e-4)}, base="jupiter-32x16", path=out)
    with pytest.raises(UsageError, match="'orfeo-fat' has one node"):
        calibration.calibrate({"node": (0.5, 1e-4)}, base="orfeo-fat", path=out)
    with pytest.raises(UsageError, match="unknown platform 'thin'"):
        calibration.calibrate({"core": (0.5, 1e-4)}, base="thin", path=out)
    with pytest.raises(UsageError, match="base must be a shipped platform name, not a file: 'my.xml'"):
        calibration.calibrate({"core": (0.5, 1e-4)}, base="my.xml", path=out)
    with pytest.warns(UserWarning, match=r"mapping\(s\) socket, node; they keep 'orfeo-thin'"):
        calibration.calibrate({"core": (0.5, 1e-4)}, path=out)
    assert not list(tmp_path.glob(".*tmp*"))


def test_alpha_beta_platform(tmp_path):
    x = platform_xml.alpha_beta_xml(3, 10.0, 1e-3)
    assert x.count("<link ") == 3 and x.count("<route ") == 3 and "FATPIPE" in x
    assert '<prop id="smpi/send-is-detached-thresh" value="0"/>' in x
    s = platform_xml.alpha_beta_xml(3, 10.0, 1e-3, ports="single")
    assert s.count("<link ") == 6 and s.count("<route ") == 6 and 'latency="5us"' in s
    p = platform_xml.alpha_beta_platform(4, 2.0, 1e-4, tmp_path / "ab.xml")
    assert platforms.placement(str(p), 4, "node") == platforms.placement(str(p), 4, "core")
    with pytest.raises(UsageError, match="unknown ports 'three'"):
        platform_xml.alpha_beta_xml(3, 1, 1, ports="three")
    with pytest.raises(UsageError, match="need alpha >= 0 and beta > 0"):
        platform_xml.alpha_beta_xml(3, 1, 0)
    with pytest.raises(UsageError, match="2..512, not 1"):
        platform_xml.alpha_beta_xml(1, 1, 1)


def test_cli_calibrate(built_flavour, tmp_path, capsys):
    built_flavour("smpi")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["calibrate", "--help"])
    assert exit_.value.code == 0 and "mpilab calibrate" in capsys.readouterr().out
    out = tmp_path / "mine.xml"
    assert (
        cli.main(["calibrate", "--table", "core=0.6,5e-5", "node=3.2,4e-4", "-o", str(out), "--check"]) == 0
    )
    got = capsys.readouterr()
    assert f"wrote {out}" in got.out and "keep 'orfeo-thin''s values" in got.err
    assert "core" in got.out and "slope_error_pct" in got.out
    csv = tmp_path / "r.csv"
    results.append_rows(
        csv,
        [
            dict(r, launcher="mpirun", nprocs=2, datatype="char", root=0, repetition=0, algorithm="blocking")
            for r in synthetic_rows().to_dict("records")
        ],
    )
    assert cli.main(["calibrate", str(csv), "-o", str(tmp_path / "from_rows.xml")]) == 0
    assert "wrote" in capsys.readouterr().out
    for args, msg in (
        (["--table", "core=1"], "bad --table entry 'core=1'"),
        ([], "give one ping-pong"),
        (["--table", "core=-1,1e-4"], "intercept -1 us is negative"),
    ):
        assert cli.main(["calibrate", *args, "-o", str(tmp_path / "x.xml")]) == 2
        assert msg in capsys.readouterr().err, args


def test_shipped_files_are_what_the_generator_writes():
    """mpilab/data/platforms is regenerated (python -m mpilab.simulate.platforms) whenever the model
    changes."""
    for name in platforms._SHIPPED:
        shipped = (platforms.DATA_DIR / f"{name}.xml").read_text()
        assert shipped == platform_xml.render_xml(platforms._spec(name)), (
            f"{name}.xml is stale: run python -m mpilab.simulate.platforms"
        )


def test_cached_platform_is_rewritten_when_the_generator_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = platforms.platform_file("orfeo-thin-3")
    assert first.parent == tmp_path / "mpilab" / "platforms" and "port-" in first.read_text()
    monkeypatch.setattr(platforms, "_generator_key", lambda: "another-kit")
    second = platforms.platform_file("orfeo-thin-3")
    assert second != first and second.read_text() == first.read_text()


def test_each_class_pays_its_own_overheads_through_smpis_cost_callbacks(built_flavour, tmp_path):
    """A platform with per-class overheads runs through the kit's loader (SimGrid's cost callbacks):
    each mapping's simulated one-way time is its own class's. The same file given to smpirun by hand
    charges every message the core class's overheads (its smpi/os, smpi/or): the loader does it."""
    built_flavour("smpi")
    given = {"core": (0.6, 5e-5), "socket": (3.0, 6e-5), "node": (1.5, 2e-4)}
    xml = calibration.calibrate(given, path=tmp_path / "classes.xml", monotone=False)
    assert 'id="mpilab/overheads"' in xml.read_text()[:20000]
    launcher = overheads.smpirun_platform(xml)
    assert launcher.name == "classes.xml.so" and (launcher.parent / "classes.xml").resolve() == xml.resolve()
    for m, (a, _) in given.items():
        df = pingpong.run("smpi", m, platform=xml, sizes="0:1", iters=2, warmup=1)
        assert float(df["avg_us"].iloc[0]) == pytest.approx(a, abs=0.01), m
    hosts = "\n".join(platforms.placement(xml, 2, "socket")) + "\n"
    (tmp_path / "h").write_text(hosts)
    by_hand = subprocess.run(
        [
            "smpirun",
            "-np",
            "2",
            "-platform",
            str(xml),
            "-hostfile",
            str(tmp_path / "h"),
            "--cfg=smpi/host-speed:1Gf",
            "--cfg=smpi/simulate-computation:no",
            str(paths.build_dir("smpi") / "pingpong"),
            "-m",
            "0:0",
            "--iters",
            "2",
            "--warmup",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    row = [ln for ln in by_hand.stdout.splitlines() if ln.startswith("0,")][0]
    o_core = routes.overheads(xml)["classes"]["core"][0]
    o_socket = routes.overheads(xml)["classes"]["socket"][0]
    assert float(row.split(",")[2]) == pytest.approx(3.0 - 2 * (o_socket - o_core), abs=0.01)


def test_the_loader_sits_beside_a_file_that_names_files(tmp_path):
    """A platform whose links name profile files by relative paths (a loaded platform of lab 5)
    gets its loader link beside it, so SimGrid finds the files; others get it in the cache."""
    spec = platforms._spec("orfeo-thin")
    text = platform_xml.render_xml(spec, link_attrs={"switch": 'bandwidth_file="bw.txt"'})
    xml = tmp_path / "loaded.xml"
    xml.write_text(text)
    assert overheads.smpirun_platform(xml) == tmp_path / "loaded.xml.so"
    plain = tmp_path / "plain.xml"
    plain.write_text(platform_xml.render_xml(spec))
    link = overheads.smpirun_platform(plain)
    assert link.parent != tmp_path and link.name == "plain.xml.so"
    uniform = platforms.platform_file("jupiter-32x16")  # every class the same: no loader
    assert overheads.smpirun_platform(uniform) == uniform.resolve()
