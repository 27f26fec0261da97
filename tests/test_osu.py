"""OSU output import: realistic files, parameters from names, malformed files append nothing; and
OSU 7.4 itself built with smpicc and run under SMPI next to the kit's drivers."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mpilab.core.errors import ParseError, ToolMissing, UsageError
from mpilab.measure import forcing, launch, osu, pingpong

DATA = Path(__file__).parent / "data" / "osu"


def test_bcast_without_f():
    p = osu.parse(DATA / "bcast_np24_chain_core.txt")
    assert p["collective"] == "bcast" and p["version"] == "v7.3" and p["datatype"] == "char"
    assert [pt["bytes"] for pt in p["points"]][:3] == [2, 4, 8]
    assert p["points"][-1]["bytes"] == 1048576 and "min_us" not in p["points"][0]


def test_with_f_columns():
    p = osu.parse(DATA / "bcast_np48_basic_linear_node.txt")
    first = p["points"][0]
    assert first == {"bytes": 2, "avg_us": 9.80, "min_us": 6.86, "max_us": 12.75, "iterations": 1000}
    assert p["points"][-1]["iterations"] == 100


@pytest.mark.parametrize(
    "name,coll",
    [
        ("reduce_np24_pipeline_socket.txt", "reduce"),
        ("allgather_np8_default_core.txt", "allgather"),
        ("latency_core.txt", "pt2pt"),
    ],
)
def test_collective_from_title(name, coll):
    assert osu.parse(DATA / name)["collective"] == coll


def test_params_from_name():
    assert osu.params_from_name("bcast_np48_basic_linear_node.txt") == {
        "collective": "bcast",
        "nprocs": 48,
        "algorithm": "basic_linear",
        "mapping": "node",
    }


@pytest.mark.parametrize(
    "name,coll,want",
    [
        # unknown words are not an algorithm: osu_bcast_np4 is OSU's program name and a P
        ("osu_bcast_np4.txt", "bcast", {"collective": "bcast", "nprocs": 4}),
        (
            "osu_reduce_np4_chain_run2.txt",
            "reduce",
            {"collective": "reduce", "nprocs": 4, "algorithm": "chain"},
        ),
        (
            "run3-np8-socket-split_binary_tree.txt",
            "bcast",
            {"nprocs": 8, "mapping": "socket", "algorithm": "split_binary_tree"},
        ),
        # OSU measures the library: allgather ring in a name is the library's ring
        (
            "osu_allgather_p16_ring.txt",
            "allgather",
            {"collective": "allgather", "nprocs": 16, "algorithm": "lib:ring"},
        ),
        ("bcast_np4_ring.txt", "bcast", {"collective": "bcast", "nprocs": 4}),  # no bcast ring
    ],
)
def test_params_from_name_takes_only_known_algorithms(name, coll, want):
    assert osu.params_from_name(name, coll) == want


def test_real_osu_style_files():
    """Files as OSU names them (written by collbench --format osu on Open MPI)."""
    rows = osu.to_rows(DATA / "osu_bcast_np4.txt")
    assert {(r["algorithm"], r["nprocs"], r["forced"]) for r in rows} == {("default", 4, "no")}
    assert [r["bytes"] for r in rows][:2] == [1, 2] and len(rows) == 21
    rows = osu.to_rows(DATA / "osu_reduce_np4_chain_run2.txt")
    assert {(r["algorithm"], r["nprocs"], r["datatype"]) for r in rows} == {("chain", 4, "int")}
    rows = osu.to_rows(DATA / "osu_allgather.txt", nprocs=2, algorithm="ring")
    assert rows[0]["algorithm"] == "lib:ring" and rows[0]["min_us"] != "" and rows[0]["nprocs"] == 2


def test_missing_nprocs_names_the_file_and_the_option():
    with pytest.raises(ParseError) as e:
        osu.to_rows(DATA / "osu_allgather.txt")
    msg = str(e.value)
    assert str(DATA / "osu_allgather.txt") in msg and "number of processes" in msg
    assert "--nprocs N" in msg and "np24" in msg


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(nprocs=0), "bad --nprocs 0; valid: an integer >= 1"),
        (dict(nprocs=-3), "bad --nprocs -3"),
        (dict(nprocs=4, algorithm="chian"), "unknown bcast algorithm 'chian' .* valid: .*chain"),
    ],
)
def test_bad_parameters(kw, match):
    from mpilab.core.errors import UsageError

    with pytest.raises(UsageError, match=match):
        osu.to_rows(DATA / "osu_bcast_np4.txt", **kw)


def test_rows_forced_never_yes(tmp_path):
    rows = osu.to_rows(DATA / "bcast_np24_chain_core.txt")
    assert {r["forced"] for r in rows} == {"unverified"} and rows[0]["nprocs"] == 24
    rows = osu.to_rows(DATA / "allgather_np8_default_core.txt")
    assert {r["forced"] for r in rows} == {"no"}
    rows = osu.to_rows(DATA / "bcast_np24_chain_core.txt", nprocs=12, algorithm="pipeline", mapping="socket")
    assert (rows[0]["nprocs"], rows[0]["algorithm"], rows[0]["mapping"]) == (12, "pipeline", "socket")


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "mpilab.cli.osu", *map(str, args)], capture_output=True, text=True
    )


def test_cli_imports_all(tmp_path):
    out = tmp_path / "r.csv"
    files = sorted(f for f in DATA.glob("*.txt") if not f.name.startswith("osu_"))
    r = _cli(*files, "-o", out, "--flavour", "openmpi")
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    assert len(df) == 4 * 20 + 24
    assert set(df.collective) == {"bcast", "reduce", "allgather", "pt2pt"}
    assert set(df.launcher) == {"osu-import"} and set(df.flavour) == {"openmpi"}


def test_malformed_appends_nothing(tmp_path):
    good = DATA / "bcast_np24_chain_core.txt"
    bad = tmp_path / "bad.txt"
    lines = good.read_text().splitlines()
    lines[7] = "64   12.x5"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.csv"
    r = _cli(good, bad, "-o", out)
    assert r.returncode == 2
    assert f"{bad}:8" in r.stderr and "12.x5" in r.stderr
    assert not out.exists()
    with pytest.raises(ParseError, match="title line"):
        (tmp_path / "x.txt").write_text("2 3.4\n")
        osu.parse(tmp_path / "x.txt")


def test_cli_help():
    r = _cli("--help")
    assert r.returncode == 0 and "bcast_np24_chain_core" in r.stdout


def test_cli_missing_nprocs_appends_nothing(tmp_path):
    out = tmp_path / "r.csv"
    r = _cli(DATA / "osu_bcast_np4.txt", DATA / "osu_allgather.txt", "-o", out)
    assert r.returncode == 2
    assert "osu_allgather.txt" in r.stderr and "--nprocs N" in r.stderr
    assert not out.exists()
    r = _cli(DATA / "osu_allgather.txt", "--nprocs", "0", "-o", out)
    assert r.returncode == 2 and "bad --nprocs 0" in r.stderr and not out.exists()
    r = _cli(DATA / "osu_allgather.txt", "--nprocs", "2", "-o", out)
    assert r.returncode == 0, r.stderr
    assert set(pd.read_csv(out).nprocs) == {2}


def test_osu_programs_searches_the_given_folder_then_mpilab_osu_dir_then_path(tmp_path, monkeypatch):
    """Real OSU runs in the kit's images (tests/test_containers.py); here the search order:
    a folder given (an OSU build tree is searched below it), $MPILAB_OSU_DIR, then PATH."""
    tree = tmp_path / "osu-7.4" / "c" / "mpi" / "collective" / "blocking"
    tree.mkdir(parents=True)
    for name in ("osu_bcast", "osu_reduce"):
        (tree / name).write_text("#!/bin/sh\n")
        (tree / name).chmod(0o755)
    (tree / "osu_allgather").write_text("not executable")
    assert osu.osu_programs(osu_dir=tmp_path / "osu-7.4") == {
        "osu_bcast": str(tree / "osu_bcast"),
        "osu_reduce": str(tree / "osu_reduce"),
    }
    monkeypatch.setenv("MPILAB_OSU_DIR", str(tree))
    assert set(osu.osu_programs(["osu_bcast", "osu_latency"])) == {"osu_bcast"}
    monkeypatch.delenv("MPILAB_OSU_DIR")
    monkeypatch.setenv("PATH", str(tree))
    assert osu.osu_programs(["osu_reduce"]) == {"osu_reduce": str(tree / "osu_reduce")}
    monkeypatch.setenv("PATH", str(tmp_path))
    assert osu.osu_programs() == {}


# --- OSU itself under SMPI ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def osu_smpi(built_flavour, tmp_path_factory):
    """OSU 7.4 built with smpicc from the vendored source (skipped, with the reason, without it)."""
    if not osu.vendor_tarball().is_file():
        pytest.skip(f"no OSU source at {osu.vendor_tarball()} (../shared/vendor, or MPILAB_VENDOR)")
    built_flavour("smpi")
    return osu.build("smpi", tmp_path_factory.mktemp("osu"))


@pytest.mark.slow
def test_osu_under_smpi_agrees_with_collbench_point_by_point(osu_smpi):
    """osu_bcast and osu_reduce under SMPI on THIN, placed as seed 000 placed its ranks, against
    collbench at the same points: every statistic OSU prints (avg, min, max over ranks) agrees to
    OSU's two decimals; osu_latency against pingpong per mapping likewise."""
    lau = launch.get_launcher("smpi", platform="orfeo-thin")
    for name, coll, alg in (("osu_bcast", "bcast", "basic_linear"), ("osu_reduce", "reduce", "binomial")):
        for p in (3, 8, 24):
            mapping = "socket"
            theirs = osu.run(lau, osu_smpi[name], p, "1024:4096", 20, 5, mapping=mapping, algorithm=alg)
            ours = forcing.measure(lau, coll, alg, p, sizes="1024:4096", iters=20, warmup=5, mapping=mapping)
            assert [r["bytes"] for r in theirs] == [r["bytes"] for r in ours]
            for a, b in zip(theirs, ours):
                assert a["forced"] == "yes" and a["library"] == "OSU v7.4"
                for k in ("avg_us", "min_us", "max_us"):
                    assert a[k] == pytest.approx(b[k], abs=0.006), (name, p, a["bytes"], k)
    for m in ("core", "socket", "node"):
        theirs = osu.run(lau, osu_smpi["osu_latency"], 2, "1:1024", 20, 5, mapping=m)
        ours = pingpong.run("smpi", m, platform="orfeo-thin", sizes="1:1024", iters=20, warmup=5)
        ours = ours.set_index("bytes")["avg_us"]
        for r in theirs:
            assert r["avg_us"] == pytest.approx(float(ours.loc[r["bytes"]]), abs=0.006), (m, r["bytes"])


def test_osu_refuses_what_only_the_kits_clones_run():
    """OSU calls the library: SimGrid has no faithful Open MPI chain, so OSU cannot time one."""
    lau = launch.get_launcher("smpi", platform="orfeo-thin")
    with pytest.raises(UsageError, match="SimGrid has no faithful copy of Open MPI's chain"):
        osu.run(lau, "/nonexistent/osu_bcast", 4, "1024:1024", 2, 1, algorithm="chain")


def test_osu_build_says_where_the_source_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("MPILAB_VENDOR", str(tmp_path))
    with pytest.raises(ToolMissing, match=r"OSU's source .*osu-micro-benchmarks-7.4.tar.gz is not there"):
        osu.build("smpi", tmp_path / "b")
