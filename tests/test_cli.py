import json
import os
import subprocess
import sys

import pytest

from mpilab import cli

SUBS = ["list", "sweep", "plot", "model", "costs", "doctor", "demo"]


def run(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "mpilab.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("mpilab ")


@pytest.mark.parametrize("sub", SUBS)
def test_help(sub):
    r = run(sub, "--help")
    assert r.returncode == 0 and f"mpilab {sub}" in r.stdout


def test_every_registered_subcommand_has_help(capsys):
    parser = cli.build_parser()
    names = parser._subparsers._group_actions[0].choices.keys()
    assert set(SUBS) <= set(names)


@pytest.mark.parametrize(
    "args, message",
    [
        (["sweep", "--nprocs", "0"], "bad process count 0"),
        (["sweep", "--nprocs", "x"], "'x'"),
        (["sweep", "-m", "1Q"], "bad size '1Q'"),
        (["sweep", "--algos", "rign"], "unknown algorithm 'rign'; valid: bruck, "),
        (["sweep", "--iters", "0"], "bad iters '0'"),
        (["sweep", "--mapping", "numa"], "invalid choice: 'numa'"),
        (["sweep", "--flavour", "mvapich"], "invalid choice: 'mvapich'"),
        (["sweep", "--platform", "x.xml"], "--platform 'x.xml' only applies to --flavour smpi"),
        (["list", "--flavour", "lam"], "invalid choice: 'lam'"),
        (["plot", "/nonexistent.csv"], "results file '/nonexistent.csv' does not exist"),
        (["doctor", "--require", "lam"], "unknown tool 'lam'"),
        (["nosuch"], "invalid choice: 'nosuch'"),
    ],
)
def test_bad_arguments(built_flavour, args, message, tmp_path):
    built_flavour("openmpi")
    r = run(*args, "-o", str(tmp_path / "r.csv")) if args[0] == "sweep" else run(*args)
    assert r.returncode == 2, r
    assert "mpilab: " in r.stderr and message in r.stderr


def test_list_json(built_flavour):
    built_flavour("openmpi")
    r = run("list", "--json")
    assert r.returncode == 0
    names = [a["name"] for a in json.loads(r.stdout)["algorithms"]]
    assert {"gather_bcast", "pairwise", "ring", "bruck"} <= set(names)
    assert "native" in run("list").stdout


@pytest.mark.image  # launches it (tests/conftest.py LAUNCHES)
def test_doctor():
    r = run("doctor")
    assert r.returncode == 0 and "openmpi" in r.stdout and "smpi" in r.stdout
    assert run("doctor", "--require", "openmpi").returncode == 0
    r = run("doctor", "--require", "apptainer")
    if "apptainer  MISSING" in r.stdout:
        assert r.returncode == 1 and "required but missing: apptainer" in r.stdout
    d = json.loads(run("doctor", "--json").stdout)
    assert {i["name"] for i in d} >= {"openmpi", "mpich", "smpi", "slurm", "apptainer"}


@pytest.mark.mpi
def test_sweep_then_plot(built_flavour, tmp_path):
    built_flavour("openmpi")
    out = tmp_path / "r.csv"
    r = run(
        "sweep",
        "--nprocs",
        "1,2",
        "--algos",
        "ring,native",
        "-m",
        "32:128",
        "--iters",
        "5",
        "--check",
        "-q",
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert "4 launches (12 rows" in r.stdout
    r = run(
        "sweep",
        "--nprocs",
        "1,2",
        "--algos",
        "ring,native",
        "-m",
        "32:128",
        "--iters",
        "5",
        "-q",
        "-o",
        str(out),
    )
    assert "0 launches" in r.stdout and "4 already measured" in r.stdout
    r = run("plot", str(out), "-o", str(tmp_path / "png"))
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "png").glob("*.png"))) == 3


def _model_results(path):
    """A results CSV of a ring that follows alpha = 2 us, beta = 0.001 us/B exactly, but 10 % slow at P =
    8."""
    import pandas as pd

    from mpilab.core import results

    rows = [
        dict(
            collective="allgather",
            algorithm="ring",
            flavour="smpi",
            launcher="smpirun",
            platform="t",
            mapping="core",
            nprocs=p,
            bytes=b,
            datatype="char",
            root=0,
            repetition=0,
            maxrank_avg_us=(p - 1) * (2 + b * 1e-3) * (1.1 if p == 8 else 1),
        )
        for p in (4, 8)
        for b in (32, 1024, 65536)
    ]
    results.append_rows(path, rows)
    return pd.DataFrame(rows)


def test_model_compares_costs_with_results(tmp_path):
    _model_results(tmp_path / "r.csv")
    r = run(
        "model", str(tmp_path / "r.csv"), "--alpha", "2", "--beta", "0.001", "-o", str(tmp_path / "m.png")
    )
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "ring" in ln)
    assert line.split()[-2:] == ["0.0", "9.1"]  # exact at P = 4; |1 - 1.1| / 1.1 at P = 8
    assert (tmp_path / "m.png").stat().st_size > 10000


def test_model_takes_alpha_beta_from_a_pingpong(tmp_path):
    """--pingpong fits the ping-pong rows and uses the first segment of --mapping."""
    from mpilab.core import results

    _model_results(tmp_path / "r.csv")
    pp = [
        dict(
            collective="pingpong",
            algorithm="blocking",
            flavour="smpi",
            launcher="smpirun",
            platform="t",
            mapping=m,
            nprocs=2,
            bytes=b,
            datatype="char",
            root=0,
            repetition=0,
            avg_us=a + b * 1e-3,
        )
        for m, a in (("core", 2.0), ("node", 5.0))
        for b in [0] + [2**k for k in range(13)]
    ]
    results.append_rows(tmp_path / "pp.csv", pp)
    r = run("model", str(tmp_path / "r.csv"), "--pingpong", str(tmp_path / "pp.csv"), "--mapping", "core")
    assert r.returncode == 0, r.stderr
    assert "alpha = 2 us" in r.stdout
    assert next(ln for ln in r.stdout.splitlines() if "ring" in ln).split()[-2:] == ["0.0", "9.1"]
    r = run("model", str(tmp_path / "r.csv"), "--pingpong", str(tmp_path / "pp.csv"), "--mapping", "socket")
    assert r.returncode == 2 and "unknown mapping 'socket'; valid: core, node" in r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--alpha", "2"], "give --alpha (us) and --beta (us/byte)"),
        (["--alpha", "2", "--beta", "0"], "beta > 0"),
        (["--alpha", "2", "--beta", "1e-3", "--nprocs", "16"], "no rows at nprocs [16]"),
        (["--alpha", "2", "--beta", "1e-3", "--value", "median"], "unknown value 'median'"),
    ],
)
def test_model_bad_arguments(tmp_path, args, message):
    _model_results(tmp_path / "r.csv")
    r = run("model", str(tmp_path / "r.csv"), *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_a_reader_that_stops_early_gets_no_traceback():
    """`mpilab list | head -1`: the reader goes away; mpilab stops quietly with 141.

    The reading end is closed before mpilab writes anything (its output, 7 kB, would otherwise
    fit in the pipe and leave with one write at exit, before a reader could close: a race)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mpilab.cli", "list"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    stderr = proc.stderr.decode()
    assert proc.returncode == 141 and "Traceback" not in stderr, stderr
