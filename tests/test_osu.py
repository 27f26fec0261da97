"""OSU output import: realistic files, parameters from names, malformed files append nothing."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mpilab import osu
from mpilab.errors import ParseError

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


@pytest.mark.parametrize("name,coll", [("reduce_np24_pipeline_socket.txt", "reduce"),
                                       ("allgather_np8_default_core.txt", "allgather"),
                                       ("latency_core.txt", "pt2pt")])
def test_collective_from_title(name, coll):
    assert osu.parse(DATA / name)["collective"] == coll


def test_params_from_name():
    assert osu.params_from_name("bcast_np48_basic_linear_node.txt") == {
        "collective": "bcast", "nprocs": 48, "algorithm": "basic_linear", "mapping": "node"}


def test_rows_forced_never_yes(tmp_path):
    rows = osu.to_rows(DATA / "bcast_np24_chain_core.txt")
    assert {r["forced"] for r in rows} == {"unverified"} and rows[0]["nprocs"] == 24
    rows = osu.to_rows(DATA / "allgather_np8_default_core.txt")
    assert {r["forced"] for r in rows} == {"no"}
    rows = osu.to_rows(DATA / "bcast_np24_chain_core.txt", nprocs=12, algorithm="pipeline", mapping="socket")
    assert (rows[0]["nprocs"], rows[0]["algorithm"], rows[0]["mapping"]) == (12, "pipeline", "socket")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mpilab.cli_osu", *map(str, args)],
                          capture_output=True, text=True)


def test_cli_imports_all(tmp_path):
    out = tmp_path / "r.csv"
    files = sorted(DATA.glob("*.txt"))
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
