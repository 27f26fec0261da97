"""The ping-pong: the C program for every flavour, its errors, the Python entry and the CLI."""

import os
import subprocess
import warnings

import pytest

from mpilab import cli
from mpilab.core import results, units
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import MAPPINGS
from mpilab.measure import driver, launch, pingpong
from mpilab.measure.driver import BenchOptions
from mpilab.model import p2p
from mpilab.simulate import clusters

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def mpirun(build, args, nprocs=2, timeout=120):
    env = dict(os.environ, **ROOT_ENV)
    return subprocess.run(
        ["mpirun.openmpi", "-n", str(nprocs), "--oversubscribe", str(build / "pingpong"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_sizes_and_args():
    assert units.parse_size_range("4M", smallest=0) == (0, 4 << 20)
    assert units.parse_size_range("8:1K", smallest=0) == (8, 1024)
    assert units.sizes_in_range(0, 8) == [0, 1, 2, 4, 8]
    assert len(units.sizes_in_range(0, 4 << 20)) == 24
    assert BenchOptions(sizes="1K", iters=5).argv("pingpong") == ["-m", "0:1024", "--iters", "5"]
    with pytest.raises(UsageError, match="bad size range '9:3'"):
        units.parse_size_range("9:3", smallest=0)
    with pytest.raises(UsageError, match="bad iters '0'"):
        BenchOptions(iters="0")
    with pytest.raises(UsageError, match="bad iters 0"):
        pingpong.run("smpi", "core", iters=0)
    with pytest.raises(UsageError, match="unknown mapping 'board'; valid: core, node, socket"):
        pingpong.run("smpi", "board")


@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_built_for_every_flavour(built_flavour, flavour):
    assert (built_flavour(flavour) / "pingpong").is_file()


def test_output_contract_openmpi(built_flavour):
    build = built_flavour("openmpi")
    proc = mpirun(build, ["-m", "0:16K", "--iters", "20", "--warmup", "2", "--iters-large", "4"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# pingpong 1\n# library: Open MPI")
    out = driver.parse(proc.stdout, program=pingpong.PROGRAM, columns=pingpong.COLUMNS)
    meta, rows = out.meta, out.table
    assert meta["flavour"] == "openmpi" and meta["nprocs"] == "2"
    assert meta["collective"] == "pingpong" and meta["iterations"] == "20"
    assert len(meta["rank_hosts"].split(",")) == 2 and len(meta["rank_cpus"].split(",")) == 2
    assert [r["bytes"] for r in rows] == [0] + [2**k for k in range(15)]
    assert [r["iterations"] for r in rows][-2:] == [20, 4]  # 8 KiB small, 16 KiB large
    for r in rows:
        assert 0 < r["min_us"] <= r["median_us"] <= r["max_us"] and r["min_us"] <= r["avg_us"]


def smpirun(build, args, nprocs=2, timeout=120):
    cmd = launch.get_launcher("smpi", platform="orfeo-thin").command(build / "pingpong", args, nprocs)
    return subprocess.run([str(a) for a in cmd.argv], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "args, nprocs, message",
    [
        ([], 3, "needs exactly 2 processes, got 3"),
        ([], 1, "needs exactly 2 processes, got 1"),
        (["-m", "9:3"], 2, "bad size range '9:3' for -m; MIN 9 is larger than MAX 3"),
        (["-m", "x"], 2, "bad size range 'x'"),
        (["-m", "2G"], 2, "bad size range '2G'"),
        (["--iters", "0"], 2, "bad value '0' for --iters"),
        (["--iters"], 2, "option --iters needs a value"),
        (["--bogus"], 2, "unknown option '--bogus'; valid: -m, --iters"),
    ],
)
def test_usage_errors_exit_2(built_flavour, args, nprocs, message):
    """Under smpirun (fast to start); the same C code as every flavour's."""
    proc = smpirun(built_flavour("smpi"), args, nprocs)
    assert proc.returncode == 2 and f"pingpong: {message}" in proc.stderr, proc.stderr
    assert "bytes,iterations" not in proc.stdout


@pytest.mark.parametrize(
    "args, nprocs, message",
    [
        ([], 3, "needs exactly 2 processes, got 3"),
        (["--bogus"], 2, "unknown option '--bogus'"),
    ],
)
def test_usage_errors_exit_2_real(built_flavour, args, nprocs, message):
    proc = mpirun(built_flavour("openmpi"), args, nprocs)
    assert proc.returncode == 2 and f"pingpong: {message}" in proc.stderr, proc.stderr


def test_help_on_one_rank(built_flavour):
    proc = mpirun(built_flavour("openmpi"), ["--help"], 1)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: pingpong")


def test_real_core_run_rows(built_flavour, tmp_path):
    built_flavour("openmpi")
    out = tmp_path / "r.csv"
    df = pingpong.run("openmpi", "core", sizes="0:64", iters=20, output=out)
    assert list(df["bytes"]) == [0, 1, 2, 4, 8, 16, 32, 64]
    assert set(df["collective"]) == {"pingpong"} and set(df["nprocs"]) == {2}
    assert "--map-by core --bind-to core" in df["command"][0]
    assert df["evidence"][0].startswith("kit implementation; rank 0 on ")
    assert (df["maxrank_avg_us"] == df["avg_us"]).all()
    back = results.read_results(out)
    assert len(back) == 8 and (back["avg_us"] > 0).all()


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_node_mapping_on_one_machine_is_flagged(built_flavour, flavour):
    """One machine cannot give two nodes: the run still happens, says so, and the row too."""
    built_flavour(flavour)
    with pytest.warns(pingpong.PlacementWarning, match="NOT a node mapping: both ranks ran on host"):
        df = pingpong.run(flavour, "node", sizes="0:8", iters=10)
    assert df["evidence"].str.contains("NOT a node mapping").all()
    assert set(df["mapping"]) == {"node"}


def test_smpi_places_ranks_by_platform_hostfile(built_flavour):
    built_flavour("smpi")
    hosts = {}
    for m in MAPPINGS:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pingpong.PlacementWarning)
            df = pingpong.run("smpi", m, platform="orfeo-thin", sizes="0:1K", iters=3, warmup=1)
        hosts[m] = df["evidence"][0]
        assert set(df["platform"]) == {"orfeo-thin"} and set(df["launcher"]) == {"smpirun"}
    assert hosts["core"].endswith("rank 0 on thin00-s0-c00, rank 1 on thin00-s0-c01")
    assert hosts["socket"].endswith("rank 1 on thin00-s1-c00")
    assert hosts["node"].endswith("rank 1 on thin01-s0-c00")


@pytest.mark.parametrize(
    "platform,mapping,got", [("orfeo-fat", "node", "core"), ("jupiter-32x16", "socket", "core")]
)
def test_smpi_mapping_the_platform_cannot_give_is_flagged(built_flavour, platform, mapping, got):
    """FAT is one node, jupiter one socket per node: the row says which distance was measured."""
    built_flavour("smpi")
    with pytest.warns(
        pingpong.PlacementWarning,
        match=f"NOT a {mapping} mapping: the platform placed the ranks at {got} distance",
    ):
        df = pingpong.run("smpi", mapping, platform=platform, sizes="0:1", iters=2, warmup=1)
    assert df["evidence"].str.contains(f"NOT a {mapping} mapping").all()


def test_measure_resumes_and_fit(built_flavour, tmp_path):
    built_flavour("smpi")
    out = tmp_path / "r.csv"
    kw = dict(platform="orfeo-thin", sizes="0:64K", iters=3, warmup=1, iters_large=2)
    s1 = pingpong.measure("smpi", "core,node", out, **kw)
    assert (s1["launched"], s1["skipped"], s1["rows"]) == (2, 0, 36)
    s2 = pingpong.measure("smpi", ["core", "node", "socket"], out, **kw)
    assert (s2["launched"], s2["skipped"]) == (1, 2)
    table = p2p.fit(out)
    first = p2p.first_segment(table)
    assert set(first) == {"core", "socket", "node"}
    # the calibrated platform (mpilab.simulate.clusters): core 1.1736 us one way, node 1.32e-4 us/B
    assert first["core"][0] == pytest.approx(clusters.THIN_PINGPONG_FIT["core"][0], abs=0.02)
    assert first["node"][1] == pytest.approx(clusters.THIN_PINGPONG_FIT["node"][1], rel=1e-3)
    # the fit's quality: an exact two-piece platform leaves tiny residuals
    assert (table["r2_fit"] > 0.99).all()
    for f in p2p.fits(out).values():
        assert abs(f.residuals()).max() < 0.05 * f.y.max()
    fig, axes = p2p.residual_plot(out)
    assert [a.get_title().split(":")[0] for a in axes] == ["core", "node", "socket"]
    with pytest.raises(UsageError, match="no ping-pong rows"):
        p2p.fit(table.assign(collective="bcast", bytes=1, avg_us=1.0))


def test_custom_launcher_is_used(built_flavour):
    built_flavour("smpi")
    lau = launch.get_launcher("smpi", platform="orfeo-fat")
    df = pingpong.run(launcher=lau, mapping="socket", sizes="0:1", iters=2)
    assert set(df["platform"]) == {"orfeo-fat"} and "fat00-s1-c00" in df["evidence"][0]


def test_cli_help_run_fit_and_errors(built_flavour, tmp_path, capsys):
    built_flavour("smpi")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["pingpong", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "mpilab pingpong" in out and "--mapping" in out
    out = tmp_path / "r.csv"
    assert (
        cli.main(
            [
                "pingpong",
                "--flavour",
                "smpi",
                "--platform",
                "orfeo-thin",
                "--mapping",
                "socket",
                "-m",
                "0:64K",
                "--iters",
                "3",
                "--iters-large",
                "2",
                "-o",
                str(out),
                "--fit",
                "--residuals",
                str(tmp_path / "res.png"),
            ]
        )
        == 0
    )
    got = capsys.readouterr().out
    assert "1 launches (18 rows appended" in got
    assert "socket" in got and "intercept" in got and "r2_fit" in got
    assert f"residuals: {tmp_path / 'res.png'}" in got and (tmp_path / "res.png").stat().st_size > 0
    assert len(results.read_results(out)) == 18
    for args, msg in (
        (["--mapping", "board"], "unknown mapping 'board'"),
        (["-m", "9:3"], "bad size range '9:3'"),
        (["--iters", "0"], "bad iters '0'"),
        (
            ["--flavour", "openmpi", "--platform", "orfeo-thin"],
            "--platform 'orfeo-thin' only applies to --flavour smpi",
        ),
    ):
        assert cli.main(["pingpong", *args, "-o", str(out)]) == 2
        assert f"mpilab: {msg}" in capsys.readouterr().err, args
