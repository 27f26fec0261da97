"""The kit's clones of Open MPI 4.1's forced chain and pipeline (c_reference/bcast/ompi_*.c,
c_reference/reduce/ompi_*.c): right on real Open MPI and under SMPI for every p, root, datatype,
segment size and fan-out tried, and the same simulation as SimGrid's own ports of Open MPI's code
wherever the two are the same algorithm (SimGrid fixes other fan-outs and segment sizes)."""

import os
import subprocess

import pytest

from mpilab.core import paths
from mpilab.measure import collbench, driver, launch
from mpilab.model import ompi_trees

OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
CLONES = [(c, a) for c in ("bcast", "reduce") for a in ("ompi_chain", "ompi_pipeline")]


def _mpirun(build, p, args, env=None):
    cmd = ["mpirun.openmpi", "-n", str(p), "--oversubscribe", str(build / "collbench"), *args]
    full = {**OMPI_ENV, **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **full})


@pytest.mark.parametrize("coll, algo", CLONES)
def test_every_element_on_open_mpi(built_flavour, coll, algo):
    """Every p from 1 to 7 (roots 0, p // 2, p - 1) and three datatypes, 8 B..32 KiB."""
    build = built_flavour("openmpi")
    for p, root, dtype in [(1, 0, "int"), (2, 1, "char"), (3, 1, "double"), (5, 4, "int"), (7, 3, "char")]:
        args = ["--coll", coll, "--algo", algo, "--check", "-m", "8:32K", "--iters", "1", "--warmup", "1"]
        r = _mpirun(build, p, [*args, "--datatype", dtype, "--root", str(root)])
        assert r.returncode == 0, f"p={p} root={root} {dtype}: {r.stderr[-800:]}"


@pytest.mark.parametrize("coll", ("bcast", "reduce"))
def test_segments_and_fanouts_from_open_mpis_variables(built_flavour, coll):
    """Segment sizes of a few bytes, of a non-multiple of the element and larger than the message;
    fan-outs of 1, 2 and more chains than ranks, read from OMPI_MCA_coll_tuned_* as Open MPI reads
    them."""
    build = built_flavour("openmpi")
    var = f"OMPI_MCA_coll_tuned_{coll}_algorithm_"
    for seg, fanout in [("20", "2"), ("1000", "1"), ("100000", "9"), ("3", "4")]:
        env = {var + "segmentsize": seg, var + "chain_fanout": fanout}
        for algo in ("ompi_chain", "ompi_pipeline"):
            r = _mpirun(
                build,
                6,
                ["--coll", coll, "--algo", algo, "--check", "-m", "8:64K", "--iters", "1", "--warmup", "1"]
                + ["--datatype", "double", "--root", "4"],
                env,
            )
            assert r.returncode == 0, f"{env} {algo}: {r.stderr[-800:]}"


def test_a_bad_variable_is_an_mpi_error(built_flavour):
    build = built_flavour("openmpi")
    r = _mpirun(
        build,
        2,
        ["--coll", "bcast", "--algo", "ompi_chain", "-m", "8:8", "--iters", "1", "--warmup", "1"],
        {"OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize": "lots"},
    )
    assert r.returncode == 1
    assert "algorithm ompi_chain failed at size 8 bytes" in r.stderr and "MPI_ERR_ARG" in r.stderr


def test_collbench_lists_the_clones(built_flavour):
    build = built_flavour("openmpi")
    out = subprocess.run([build / "collbench", "--coll", "reduce", "--list"], capture_output=True, text=True)
    assert out.stdout.splitlines()[1:3] == ["ompi_chain", "ompi_pipeline"]
    argv = [build / "collbench", "--coll", "reduce", "--algo", "chain"]
    bad = subprocess.run(argv, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "unknown algorithm 'chain' for reduce; valid: ompi_chain, ompi_pipeline, native" in bad.stderr


def _smpi(p, coll, algo, sizes, env=None, cfg=()):
    lau = launch.get_launcher("smpi", platform="orfeo-thin", cfg=list(cfg))
    args = ["--coll", coll, "--algo", algo, "-m", sizes, "--iters", "2", "--warmup", "1"]
    proc = lau.run(paths.collbench_path("smpi"), args, p, "socket", timeout=300, env=env)
    out = driver.parse(proc.stdout, program=collbench.PROGRAM, columns=collbench.COLUMNS)
    return [x for r in out.table for x in (r["bytes"], r["avg_us"], r["maxrank_avg_us"])]


def test_every_element_under_smpi(built_flavour):
    built_flavour("smpi")
    lau = launch.get_launcher("smpi", platform="orfeo-thin")
    for coll, algo in CLONES:
        args = ["--coll", coll, "--algo", algo, "--check", "-m", "8:16K", "--iters", "1", "--warmup", "1"]
        args += ["--datatype", "int", "--root", "5"]
        assert lau.run(paths.collbench_path("smpi"), args, 13, "socket").returncode == 0


@pytest.mark.parametrize("p", (8, 16, 30))
def test_the_same_simulation_as_simgrids_ports_where_they_are_one_algorithm(built_flavour, p):
    """SimGrid 3.32's reduce ompi_chain is Open MPI's chain with p/2 chains and 64 KiB segments:
    the clone given those two parameters simulates to the same times per point, from one segment
    to eight. SimGrid's pipelines pick 1 KiB (reduce) or 128 KiB (bcast, p > 8) segments at 1 KiB:
    one segment, which is what Open MPI's forced default gives."""
    built_flavour("smpi")
    env = {
        "OMPI_MCA_coll_tuned_reduce_algorithm_chain_fanout": str(p // 2),
        "OMPI_MCA_coll_tuned_reduce_algorithm_segmentsize": "65536",
    }
    ours = _smpi(p, "reduce", "ompi_chain", "1K:512K", env)
    theirs = _smpi(p, "reduce", "native", "1K:512K", cfg=["smpi/reduce:ompi_chain"])
    assert ours == pytest.approx(theirs, rel=1e-9)
    if p > 8:
        for coll in ("bcast", "reduce"):
            mine = _smpi(p, coll, "ompi_pipeline", "1K:1K")
            simgrid = _smpi(p, coll, "native", "1K:1K", cfg=[f"smpi/{coll}:ompi_pipeline"])
            assert mine == pytest.approx(simgrid, rel=1e-9)


def test_the_python_chain_is_open_mpis():
    """Open MPI's build_chain: 4 chains of consecutive ranks from the root, the first
    (p - 1) mod 4 one longer; fanout 1 is the pipeline; never more chains than ranks."""
    t = ompi_trees.chain(4, 12, 5)
    assert t[5] == (None, [6, 9, 0, 3])  # chains of 3, 3, 3, 2 (relative ranks 1-3, 4-6, 7-9, 10-11)
    assert t[8] == (7, []) and t[4] == (3, []) and t[0] == (5, [1])
    assert ompi_trees.chain(1, 4, 2) == {2: (None, [3]), 3: (2, [0]), 0: (3, [1]), 1: (0, [])}
    assert ompi_trees.chain(4, 3, 0)[0] == (None, [1, 2])
