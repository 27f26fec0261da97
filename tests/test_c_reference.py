"""The C reference: build every flavour, sweep check_allgather over the registry and many
process counts, and check collbench's output contract and its bad-input messages."""

import csv
import fcntl
import io
import json
import os
import shutil
import subprocess

import pytest

from mpilab.core import paths
from mpilab.model import algorithms

OMPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}
TIMEOUT = 600
CSV_COLUMNS = [
    "bytes",
    "count",
    "iterations",
    "avg_us",
    "min_us",
    "max_us",
    "maxrank_avg_us",
    "maxrank_median_us",
    "probe_us",
]


def registry_names():
    """Algorithm names from the registry (build/openmpi/registry.json, built without MPI).

    Built under the lock of conftest's ``built_flavour``: in a fresh clone both xdist workers
    collect this file at once, and one ran ``registry_dump`` while the other was still linking it
    ("Permission denied")."""
    with open(paths.c_reference_dir() / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(
            ["make", "-C", str(paths.c_reference_dir()), "FLAVOUR=openmpi", "build/openmpi/registry.json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((paths.c_reference_dir() / "build/openmpi/registry.json").read_text())
    return [a["name"] for a in data["algorithms"]]


ALGOS = registry_names() + ["native"]


@pytest.fixture(scope="module")
def smpi_platform(tmp_path_factory):
    """A 48-host SMPI cluster and its hostfile (one rank per host)."""
    d = tmp_path_factory.mktemp("smpi")
    (d / "cluster.xml").write_text(
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1">\n'
        '  <cluster id="c" prefix="node-" suffix="" radical="0-47" speed="1Gf" bw="10Gbps"'
        ' lat="1us" bb_bw="100Gbps" bb_lat="1us"/>\n</platform>\n'
    )
    (d / "hosts").write_text("".join(f"node-{i}\n" for i in range(48)))
    return d


def launch(flavour, build, program, args, nprocs, platform=None, timeout=TIMEOUT):
    """Run build/<flavour>/<program> on nprocs ranks; returns the CompletedProcess."""
    exe = str(build / program)
    env = dict(os.environ)
    if flavour == "openmpi":
        argv = ["mpirun.openmpi", "--oversubscribe", "-np", str(nprocs), exe, *args]
        env.update(OMPI_ENV)
    elif flavour == "mpich":
        argv = ["mpirun.mpich", "-np", str(nprocs), exe, *args]
    else:
        argv = [
            "smpirun",
            "-np",
            str(nprocs),
            "-platform",
            str(platform / "cluster.xml"),
            "-hostfile",
            str(platform / "hosts"),
            "--cfg=smpi/host-speed:1Gf",
            "--log=root.thres:critical",
            exe,
            *args,
        ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def assert_sweep_passed(proc, algo, nprocs):
    lines = proc.stdout.splitlines()
    fails = [line for line in lines if line.startswith("FAIL")]
    assert proc.returncode == 0 and not fails, (
        f"{algo} at P={nprocs}: rc {proc.returncode}\n" + "\n".join(fails[:20]) + proc.stderr[-2000:]
    )
    summary = [line for line in lines if " passed, " in line]
    assert summary and summary[-1].split()[2] == "0", summary
    passed = int(summary[-1].split()[0])
    assert passed > 0
    assert sum(line.startswith(f"PASS {algo} ") for line in lines) == passed


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 5, 7, 8])
def test_sweep_openmpi(built_flavour, algo, nprocs):
    build = built_flavour("openmpi")
    proc = launch("openmpi", build, "check_allgather", ["--algo", algo], nprocs)
    assert_sweep_passed(proc, algo, nprocs)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_sweep_mpich(built_flavour, algo, nprocs):
    build = built_flavour("mpich")
    proc = launch("mpich", build, "check_allgather", ["--algo", algo, "--quick"], nprocs)
    assert_sweep_passed(proc, algo, nprocs)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("nprocs", [1, 2, 3, 5, 8, 13, 16, 31, 48])
def test_sweep_smpi(built_flavour, smpi_platform, algo, nprocs):
    build = built_flavour("smpi")
    proc = launch(
        "smpi", build, "check_allgather", ["--algo", algo, "--quick"], nprocs, platform=smpi_platform
    )
    assert_sweep_passed(proc, algo, nprocs)


def test_check_allgather_rejects_unknown_algorithm(built_flavour):
    build = built_flavour("openmpi")
    proc = launch("openmpi", build, "check_allgather", ["--algo", "rign"], 2, timeout=120)
    assert proc.returncode == 2
    assert "unknown algorithm 'rign'; valid: " in proc.stderr and "ring" in proc.stderr


def parse_csv(stdout):
    header = [line for line in stdout.splitlines() if line.startswith("# ")]
    body = "\n".join(line for line in stdout.splitlines() if not line.startswith("#"))
    rows = list(csv.DictReader(io.StringIO(body)))
    meta = dict(line[2:].split(": ", 1) for line in header if ": " in line)
    return meta, rows


@pytest.mark.parametrize("algo", ALGOS)
def test_collbench_csv(built_flavour, algo):
    build = built_flavour("openmpi")
    proc = launch(
        "openmpi",
        build,
        "collbench",
        [
            "--algo",
            algo,
            "-m",
            "32:16K",
            "--check",
            "--iters",
            "5",
            "--warmup",
            "1",
            "--iters-large",
            "3",
            "--warmup-large",
            "1",
            "--datatype",
            "int",
        ],
        3,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    meta, rows = parse_csv(proc.stdout)
    assert proc.stdout.startswith("# collbench 1\n# library: ")
    assert meta["flavour"] == "openmpi" and meta["nprocs"] == "3"
    assert meta["algorithm"] == algo and meta["collective"] == "allgather"
    assert meta["datatype"] == "int" and meta["probe_bytes"] == "0"
    assert meta["date"].endswith("Z") and "Open MPI" in meta["library"]
    assert list(rows[0].keys()) == CSV_COLUMNS
    assert [int(r["bytes"]) for r in rows] == [32 << i for i in range(10)]
    assert [int(r["count"]) for r in rows] == [(32 << i) // 4 for i in range(10)]
    assert [int(r["iterations"]) for r in rows] == [5] * 9 + [3]  # 16 KiB is large
    for r in rows:
        lo, avg, hi = float(r["min_us"]), float(r["avg_us"]), float(r["max_us"])
        assert 0 < lo <= avg <= hi
        assert float(r["maxrank_avg_us"]) >= avg * 0.999
        assert r["probe_us"] == ""


def test_collbench_probe_and_other_collectives(built_flavour):
    build = built_flavour("openmpi")
    proc = launch(
        "openmpi", build, "collbench", ["-m", "8:64", "--iters", "3", "--probe", "1K"], 2, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    meta, rows = parse_csv(proc.stdout)
    assert meta["probe_bytes"] == "1024" and all(float(r["probe_us"]) > 0 for r in rows)
    for coll in ["bcast", "reduce", "allreduce"]:
        for dt in ["char", "double"]:
            proc = launch(
                "openmpi",
                build,
                "collbench",
                [
                    "--coll",
                    coll,
                    "--root",
                    "2",
                    "--datatype",
                    dt,
                    "-m",
                    "8:64K",
                    "--check",
                    "--iters",
                    "3",
                    "--iters-large",
                    "2",
                ],
                3,
                timeout=300,
            )
            assert proc.returncode == 0, (coll, dt, proc.stderr)
            meta, rows = parse_csv(proc.stdout)
            assert meta["collective"] == coll and meta["root"] == "2" and len(rows) == 14


def test_collbench_osu_format(built_flavour):
    build = built_flavour("openmpi")
    proc = launch("openmpi", build, "collbench", ["--format", "osu", "-m", "1:4", "--iters", "3"], 2)
    lines = proc.stdout.split("\n")
    assert lines[0] == "" and lines[1] == "# OSU MPI Allgather Latency Test v7.3"
    assert lines[2] == "# Datatype: MPI_CHAR."
    assert lines[3] == f"{'# Size':<10}{'Avg Latency(us)':>20}"
    assert [line[:10].strip() for line in lines[4:7]] == ["1", "2", "4"]
    assert all(len(line) == 30 for line in lines[4:7])
    proc = launch(
        "openmpi",
        build,
        "collbench",
        ["--coll", "bcast", "--format", "osu", "--full", "-m", "2:2", "--iters", "3"],
        2,
    )
    lines = proc.stdout.split("\n")
    assert lines[1] == "# OSU MPI Broadcast Latency Test v7.3"
    assert lines[3].split("  ")[-1].strip() == "Iterations"
    assert lines[4].split()[0] == "2" and lines[4].split()[-1] == "3" and len(lines[4]) == 82


def test_collbench_list_json(built_flavour):
    build = built_flavour("openmpi")
    proc = launch("openmpi", build, "collbench", ["--list", "--json"], 1)
    data = json.loads(proc.stdout)
    assert data["collective"] == "allgather"
    names = [a["name"] for a in data["algorithms"]]
    assert names == ALGOS[:-1] and "native" not in names
    assert names == [a.name for a in algorithms.compiled("allgather")]  # the one registry's order
    assert {"bruck", "gather_bcast", "pairwise", "ring"} <= set(names)
    for a in data["algorithms"]:
        assert set(a) == {"name"}  # the rest of each record: mpilab.model.algorithms
    assert json.loads((build / "registry.json").read_text()) == data
    for coll in ["bcast", "reduce", "allreduce"]:  # sweeps name library algorithms there: none
        proc = launch("openmpi", build, "collbench", ["--coll", coll, "--list", "--json"], 1)
        assert json.loads(proc.stdout) == {"collective": coll, "algorithms": []}
    helptext = launch("openmpi", build, "collbench", ["--help"], 1).stdout
    assert all(n in helptext for n in names)
    assert (
        "mpilab list" in helptext
        and "mpilab list" in launch("openmpi", build, "collbench", ["--list"], 1).stdout
    )


BAD = [
    (
        ["--algo", "rign"],
        "collbench: unknown algorithm 'rign'; valid: gather_bcast, pairwise, ring, bruck, native",
    ),
    (
        ["--coll", "bcast", "--algo", "ring"],
        "collbench: unknown algorithm 'ring' for bcast; valid: binomial, ompi_chain, ompi_pipeline, native",
    ),
    (
        ["--coll", "allreduce", "--algo", "ring"],
        "collbench: unknown algorithm 'ring' for allreduce; valid: native",
    ),
    (["--coll", "gather"], "collbench: unknown collective 'gather'; valid: "),
    (["-m", "64:32"], "collbench: bad size range '64:32' for -m; MIN 64 is larger than MAX 32"),
    (["-m", "0:32"], "collbench: bad size range '0:32'"),
    (
        ["-m", "2:16", "--datatype", "double"],
        "collbench: size 2 bytes is not a multiple of the double datatype size (8 bytes)",
    ),
    (["--datatype", "long"], "collbench: unknown datatype 'long'; valid: char, double, float, int"),
    (["--root", "7"], "collbench: bad root 7; valid: 0..1"),
    (["--format", "json"], "collbench: unknown format 'json'; valid: csv, osu"),
    (["--iters", "x"], "collbench: bad value 'x' for --iters"),
    (["--bogus"], "collbench: unknown option '--bogus'"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_collbench_bad_input(built_flavour, args, message):
    build = built_flavour("openmpi")
    proc = launch("openmpi", build, "collbench", args, 2, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count(message) == 1, proc.stderr  # only rank 0 prints
    assert proc.stdout == ""


@pytest.mark.parametrize("flavour", ["mpich", "smpi"])
def test_collbench_other_flavours(built_flavour, smpi_platform, flavour):
    build = built_flavour(flavour)
    proc = launch(
        flavour,
        build,
        "collbench",
        ["--algo", "pairwise", "-m", "1K:1M", "--check", "--iters", "3", "--iters-large", "2"],
        3,
        platform=smpi_platform,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    meta, rows = parse_csv(proc.stdout)
    assert meta["flavour"] == flavour and len(rows) == 11
    bad = launch(flavour, build, "collbench", ["--algo", "rign"], 3, platform=smpi_platform)
    assert bad.returncode == 2 and bad.stderr.count("collbench: unknown algorithm 'rign'") == 1


@pytest.mark.slow
def test_collbench_smpi_48_ranks_1mib(built_flavour, smpi_platform):
    """P=48 x 1 MiB fits in memory under SMPI (shared buffers) and reports simulated time."""
    build = built_flavour("smpi")
    proc = launch(
        "smpi",
        build,
        "collbench",
        ["--algo", "ring", "-m", "1M:1M", "--iters-large", "3", "--warmup-large", "1"],
        48,
        platform=smpi_platform,
    )
    assert proc.returncode == 0, proc.stderr
    meta, rows = parse_csv(proc.stdout)
    # ring on a 10 Gbps cluster: 47 steps of 1 MiB is at least 47 * 8.4e-4 s of simulated time
    assert float(rows[0]["avg_us"]) > 47 * 838


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_make_rejects_unknown_flavour():
    proc = subprocess.run(
        ["make", "-C", str(paths.c_reference_dir()), "FLAVOUR=lam"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "unknown FLAVOUR 'lam'; valid: openmpi mpich smpi" in proc.stderr


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_all_flavours_builds_each_present_compiler():
    proc = subprocess.run(
        ["make", "-C", str(paths.c_reference_dir()), "all-flavours"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    for flavour, cc in {"openmpi": "mpicc.openmpi", "mpich": "mpicc.mpich", "smpi": "smpicc"}.items():
        if shutil.which(cc):
            for f in ["liblabcoll.a", "collbench", "check_allgather", "registry.json"]:
                assert (paths.build_dir(flavour) / f).exists()


@pytest.fixture(scope="module")
def broken_collbench(built_flavour, tmp_path_factory):
    """collbench built with the test-only rows of tests/broken_allgather.h (registry.c's
    LAB_TEST_ALGORITHMS hook) and the rest of liblabcoll: the shipped build has none of them."""
    build = built_flavour("openmpi")
    c = paths.c_reference_dir()
    exe = tmp_path_factory.mktemp("broken") / "collbench"
    argv = [
        "mpicc.openmpi",
        "-O2",
        "-Wall",
        "-std=c11",
        f"-I{c / 'include'}",
        f"-I{c}",
        '-DLAB_FLAVOUR="openmpi"',
        '-DLAB_TEST_ALGORITHMS="tests/broken_allgather.h"',
        str(c / "collbench.c"),
        str(c / "registry.c"),
        str(c / "tests" / "broken_allgather.c"),
        str(build / "liblabcoll.a"),
        "-o",
        str(exe),
        "-lm",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    shipped = launch("openmpi", build, "collbench", ["--list"], 1).stdout
    assert "test_wrong_data" not in shipped and "test_fail_late" not in shipped
    return exe


def test_collbench_check_fails_naming_algorithm_size_rank_and_index(broken_collbench):
    """--check for real: the last of 3 ranks corrupts element 3, which exists from 2 bytes per
    process on (3 x 2 elements); 1 byte passes."""
    proc = launch(
        "openmpi",
        broken_collbench.parent,
        broken_collbench.name,
        ["--algo", "test_wrong_data", "-m", "1:16", "--check", "--iters", "2"],
        3,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    msg = (
        "collbench: check failed: algorithm test_wrong_data, size 2 bytes, rank 2, "
        "first wrong index 3: got 42 expected 8"
    )  # element 3 = rank 1's element 1: 1*7+1
    assert proc.stderr.count(msg) == 1, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln and ln[0].isdigit()]
    assert [r.split(",")[0] for r in rows] == ["1"]  # 1 byte was measured, then it stopped


def test_collbench_rank_failing_alone_mid_loop_stops_every_rank(broken_collbench):
    """Rank 1's 5th call fails, the others' succeed: every rank must leave the timing loop
    together (before, rank 1 left alone and the others waited for it in the next barrier)."""
    proc = launch(
        "openmpi",
        broken_collbench.parent,
        broken_collbench.name,
        ["--algo", "test_fail_late", "-m", "4:8", "--iters", "10", "--warmup", "0"],
        3,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert (
        proc.stderr.count(
            "collbench: algorithm test_fail_late failed at size 4 bytes on rank 1: MPI_ERR_OTHER"
        )
        == 1
    ), proc.stderr


def test_collbench_list_other_collectives_says_native_only(built_flavour):
    """allreduce has no kit algorithm: only the library's own; bcast lists the kit's clones of
    Open MPI's broadcasts, which sweeps ask for by the library's names."""
    build = built_flavour("openmpi")
    out = launch("openmpi", build, "collbench", ["--coll", "allreduce", "--list"], 1).stdout
    assert "no kit algorithms for allreduce" in out and "mpilab libalgs --coll allreduce" in out
    assert "native" in out and "MPI_Allreduce" in out
    out = launch("openmpi", build, "collbench", ["--coll", "bcast", "--list"], 1).stdout
    assert "the library's algorithms they clone (mpilab libalgs --coll bcast)" in out
    listed = {line.split()[0] for line in out.splitlines()}
    assert {"binomial", "ompi_chain", "ompi_pipeline", "native"} <= listed
    assert "native" in launch("openmpi", build, "collbench", ["--list"], 1).stdout


PROVENANCE_PROGRAM = r"""
#include "labprov.h"
int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        lab_print_provenance("myharness", 3);
        printf("algorithm,nprocs,bytes,maxrank_avg_us\nring,2,4,1.5\n");
    }
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_provenance_header_is_includable_by_any_harness(tmp_path, smpi_platform, flavour):
    """labprov.h, included with -I c_reference/include by a program outside the kit's Makefile
    (as the grader's check_student.c, compiled -std=c99 without LAB_FLAVOUR), prints the block
    that mpilab.measure.driver.parse reads, naming the flavour from the MPI's own header."""
    from mpilab.core import results
    from mpilab.core.vocabulary import COMPILERS
    from mpilab.measure import driver

    if shutil.which(COMPILERS[flavour]) is None:
        pytest.skip(f"{COMPILERS[flavour]} not installed")
    (tmp_path / "harness.c").write_text(PROVENANCE_PROGRAM)
    build = subprocess.run(
        [
            COMPILERS[flavour],
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{paths.c_reference_dir() / 'include'}",
            "harness.c",
            "-o",
            "harness",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    proc = launch(flavour, tmp_path, "harness", [], 2, platform=smpi_platform)
    assert proc.returncode == 0, proc.stderr
    out = driver.parse(
        proc.stdout, program="myharness", columns=("algorithm", "nprocs", "bytes", "maxrank_avg_us")
    )
    assert out.version == "3" and out.meta["flavour"] == flavour and out.meta["nprocs"] == "2"
    assert set(out.meta) == {"library", "flavour", "nprocs", "host", "date"}
    (row,) = results.rows(out.meta, out.table, collective="allgather", launcher="mpirun", mapping="core")
    assert (row["algorithm"], row["nprocs"], row["bytes"], row["maxrank_avg_us"]) == ("ring", 2, 4, 1.5)
    assert row["library"] == out.meta["library"] and "\n" not in row["library"]
