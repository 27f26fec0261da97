"""Open MPI 4.1's fixed bcast rules as the kit writes them, checked against the source's table and
against what this machine's Open MPI really runs (an LD_PRELOAD spy in front of coll/base)."""

import os
import re
import shutil
import subprocess

import pytest

from mpilab.core.errors import UsageError
from mpilab.measure import ompi_fixed


def test_rules_at_their_edges():
    # communicator size < 4: pipeline below 32 bytes, binary tree from there
    assert ompi_fixed.bcast(2, 31).algorithm == "pipeline"
    assert ompi_fixed.bcast(2, 32).algorithm == "binary_tree"
    assert ompi_fixed.bcast(3, 1 << 20).algorithm == "binary_tree"
    assert ompi_fixed.bcast(4, 1024).algorithm == "binary_tree"  # 4 <= P < 8
    assert ompi_fixed.bcast(7, 1 << 20).algorithm == "chain"
    assert ompi_fixed.bcast(16, 4095).algorithm == "knomial"  # 16 <= P < 32
    assert ompi_fixed.bcast(31, 1 << 20).algorithm == "scatter_allgather"
    assert ompi_fixed.bcast(48, 1024).algorithm == "binomial"  # seed 000's P = 48, 1 KiB
    assert ompi_fixed.bcast(48, 2048).algorithm == "knomial"
    assert ompi_fixed.bcast(200, 20000).algorithm == "basic_linear"
    assert ompi_fixed.bcast(5000, 300000).algorithm == "scatter_allgather"


def test_what_runs_is_unsegmented_and_falls_back():
    d = ompi_fixed.bcast(3, 16)
    assert (d.segsize, d.fanout) == (0, 0)
    assert d.runs.startswith("one chain, not segmented")
    low = ompi_fixed.bcast(24, 1 << 20, type_size=1)
    assert low.algorithm == "scatter_allgather" and low.runs.startswith("binomial scatter")
    # 1 MiB of 1 KiB elements is 1024 elements, fewer than P = 5000 ranks
    few = ompi_fixed.bcast(5000, 1 << 20, type_size=1 << 10)
    assert few.runs.startswith("basic_linear, because count < P")


def test_map_and_bad_input():
    m = ompi_fixed.bcast_map([2, 8], [8, 1 << 20])
    assert list(m.columns) == ["nprocs", "bytes", "algorithm", "ompi_id", "segsize", "fanout", "runs"]
    assert list(m["algorithm"]) == ["pipeline", "binary_tree", "binary_tree", "basic_linear"]
    with pytest.raises(UsageError, match="bad call P = 1"):
        ompi_fixed.bcast(1, 8)
    with pytest.raises(UsageError, match="whole number of elements"):
        ompi_fixed.bcast(4, 10, type_size=4)


_SPY_LINE = re.compile(r"^spy: bcast (\w+) count=(\d+) segsize=(-?\d+) fanout=(-?\d+)$", re.M)


@pytest.fixture(scope="module")
def spy(tmp_path_factory):
    if shutil.which("mpicc.openmpi") is None:
        pytest.skip("Open MPI not installed")
    d = tmp_path_factory.mktemp("spy")
    src = os.path.join(os.path.dirname(__file__), "data", "ompi_bcast_spy.c")
    inc = subprocess.run(["mpicc.openmpi", "--showme:incdirs"], capture_output=True, text=True).stdout.split()
    subprocess.run(
        ["cc", "-shared", "-fPIC", *[f"-I{i}" for i in inc], "-o", str(d / "spy.so"), src, "-ldl"], check=True
    )
    (d / "bc.c").write_text(
        "#include <mpi.h>\n#include <stdlib.h>\nint main(int argc, char **argv) {\n"
        "  MPI_Init(&argc, &argv);\n"
        "  for (int i = 1; i < argc; i++) { long n = atol(argv[i]); char *b = calloc(n + 1, 1);\n"
        "    MPI_Bcast(b, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD); free(b); }\n"
        "  MPI_Finalize(); return 0;\n}\n"
    )
    subprocess.run(["mpicc.openmpi", str(d / "bc.c"), "-o", str(d / "bc")], check=True)
    return d


def _spied(spy, nprocs, sizes, mca=()):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [
        "mpirun.openmpi",
        "--oversubscribe",
        "-np",
        str(nprocs),
        "-x",
        f"LD_PRELOAD={spy / 'spy.so'}",
        *mca,
        str(spy / "bc"),
        *map(str, sizes),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return [(a, int(c), int(s), int(f)) for a, c, s, f in _SPY_LINE.findall(r.stderr)]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.slow
@pytest.mark.parametrize("nprocs", [3, 5, 8])
def test_the_rules_are_what_open_mpi_runs(spy, nprocs):
    """Every threshold of the communicator-size block, and the byte below it."""
    block = next(s for below, s in ompi_fixed.BCAST_RULES if below is None or nprocs < below)
    sizes = sorted({v for below, _ in block if below for v in (below - 1, below)} | {1})
    got = _spied(spy, nprocs, sizes)
    assert [c for _, c, _, _ in got] == sizes
    for alg, count, seg, fan in got:
        want = ompi_fixed.bcast(nprocs, count)
        assert alg == want.algorithm, (nprocs, count)
        assert seg in (0, -1) and fan in (0, -1, 4), (alg, seg, fan)  # knomial's radix is 4


@pytest.mark.slow
@pytest.mark.mpi  # fixture spy builds with make/mpicc
def test_a_forced_pipeline_gets_the_segment_size(spy):
    """The kit's forced pipeline: Open MPI receives the 8 KiB segment size, so a 1 KiB message
    is one segment (seed 000's pipeline at 1 KiB is a chain of P - 1 whole-message hops)."""
    got = _spied(
        spy,
        4,
        [1024, 65536],
        [
            "--mca",
            "coll_tuned_use_dynamic_rules",
            "1",
            "--mca",
            "coll_tuned_bcast_algorithm",
            "3",
            "--mca",
            "coll_tuned_bcast_algorithm_segmentsize",
            "8192",
        ],
    )
    assert got == [("pipeline", 1024, 8192, -1), ("pipeline", 65536, 8192, -1)]
