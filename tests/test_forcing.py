"""Forced library algorithms run for real, are checked correct, and carry verified evidence."""

import importlib.util
import shutil

import pytest

from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import COLLECTIVES, FLAVOURS
from mpilab.measure import forcing, launch, libalgs


def _algs(flavour, colls=COLLECTIVES):
    return [(c, n) for c in colls for n in libalgs.names(c, flavour)]


# --- the verification logic on captured output ------------------------------------------


def test_default_is_never_forced():
    for fl in FLAVOURS:
        assert (
            forcing.verify(fl, "bcast", "default", "Switch to algorithm flattree for collective bcast")[0]
            == "no"
        )


def test_smpi_switch_line():
    ok = "[0.000000] [smpi_coll/INFO] Switch to algorithm flattree for collective bcast\n"
    assert forcing.verify("smpi", "bcast", "basic_linear", ok)[0] == "yes"
    assert forcing.verify("smpi", "bcast", "binomial", ok)[0] == "no"
    assert forcing.verify("smpi", "bcast", "binomial", "")[0] == "unverified"


def test_smpi_runs_the_kits_clones_of_open_mpis_chain_and_pipeline():
    """SimGrid has no faithful chain or pipeline: the kit's clones run, given Open MPI's variables."""
    for coll in ("bcast", "reduce"):
        for name in ("chain", "pipeline"):
            forced, ev = forcing.verify("smpi", coll, name, "")
            assert forced == "yes" and f"c_reference/{coll}/ompi_{name}.c" in ev
    s = forcing.prepare("smpi", "reduce", "chain", segsize=0, chain_fanout=2)
    assert s.kit == "ompi_chain" and not s.args
    assert s.env["OMPI_MCA_coll_tuned_reduce_algorithm_chain_fanout"] == "2"
    assert s.env["OMPI_MCA_coll_tuned_reduce_algorithm_segmentsize"] == "0"
    with pytest.raises(UsageError, match="segsize 8 only applies"):
        forcing.prepare("smpi", "bcast", "binomial", segsize=8)


def test_openmpi_without_dynamic_rules_is_not_forced():
    err = (
        "[vm:1] coll_tuned_bcast_algorithm=chain (environment)\n"
        "[vm:1] coll:base:comm_select: selecting       tuned, priority  30, Enabled\n"
    )
    forced, ev = forcing.verify("openmpi", "bcast", "chain", err)
    assert forced == "no" and "use_dynamic_rules=None" in ev
    err = "[vm:1] coll_tuned_use_dynamic_rules=true (environment)\n" + err
    assert forcing.verify("openmpi", "bcast", "chain", err)[0] == "yes"
    assert forcing.verify("openmpi", "bcast", "pipeline", err)[0] == "no"
    assert forcing.verify("openmpi", "bcast", "chain", "")[0] == "unverified"


def _rows(flavour, coll, name, nprocs, sizes, datatype="int"):
    return [
        dict(
            collective=coll,
            algorithm=name,
            nprocs=nprocs,
            bytes=b,
            datatype=datatype,
            forced="yes",
            evidence="launch evidence",
        )
        for b in sizes
    ]


def test_scatter_allgather_falls_back_below_one_element_per_rank():
    """Open MPI 4.1 bcast scatter_allgather runs basic_linear when count < P: 4 and 8 bytes of
    int at P = 4 (1 and 2 elements) are not the forced algorithm, 16 bytes (4 elements) is."""
    rows = [
        forcing.label_fallback(r, "openmpi", "bcast", "scatter_allgather")
        for r in _rows("openmpi", "bcast", "scatter_allgather", 4, (4, 8, 16, 1024))
    ]
    assert [r["forced"] for r in rows] == ["fallback", "fallback", "yes", "yes"]
    assert "runs basic_linear instead of scatter_allgather" in rows[0]["evidence"]
    assert "count < P" in rows[0]["evidence"] and "launch evidence" in rows[0]["evidence"]
    assert "coll_base_bcast.c" in rows[0]["evidence"]
    # the same bytes in char are 4 and 8 elements: only 2 B (count 2 < 4) falls back
    rows = [
        forcing.label_fallback(r, "openmpi", "bcast", "scatter_allgather")
        for r in _rows("openmpi", "bcast", "scatter_allgather", 4, (2, 4), datatype="char")
    ]
    assert [r["forced"] for r in rows] == ["fallback", "yes"]


@pytest.mark.parametrize(
    "flavour,coll,name,nprocs,nbytes,ts,runs",
    [
        ("openmpi", "bcast", "split_binary_tree", 4, 4, 4, "chain (fanout 1)"),  # 1 int: no halves
        ("openmpi", "bcast", "split_binary_tree", 4, 8, 4, None),
        ("openmpi", "bcast", "scatter_allgather_ring", 48, 32, 1, "basic_linear"),
        ("openmpi", "bcast", "scatter_allgather_ring", 48, 64, 1, None),
        ("openmpi", "reduce", "rabenseifner", 6, 12, 4, "basic_linear"),  # 3 < pof2(6) = 4
        ("openmpi", "reduce", "rabenseifner", 6, 16, 4, None),
        ("openmpi", "allreduce", "ring", 3, 8, 4, "recursive_doubling"),
        ("openmpi", "allreduce", "rabenseifner", 3, 4, 4, "basic_linear"),
        ("openmpi", "allreduce", "segmented_ring", 3, 1 << 20, 1, "ring"),  # segsize 0
        ("openmpi", "allgather", "recursive_doubling", 6, 1024, 1, "lib:bruck"),
        ("openmpi", "allgather", "recursive_doubling", 8, 1024, 1, None),
        ("openmpi", "allgather", "neighbor", 5, 1024, 1, "lib:ring"),
        ("smpi", "allreduce", "ring", 7, 16, 4, "default"),
        (
            "smpi",
            "allgather",
            "neighbor",
            7,
            8,
            1,
            "SimGrid's allgather ring (each rank's block sent straight to every other rank, not lib:ring)",
        ),
        ("mpich", "bcast", "scatter_allgather", 4, 1, 1, None),  # MPICH scatters empty blocks
    ],
)
def test_fallback_rules(flavour, coll, name, nprocs, nbytes, ts, runs):
    rule, got = forcing.fallback(flavour, coll, name, nbytes // ts, nprocs, ts)
    assert got == runs
    assert (rule is None) == (runs is None)


def test_segmented_ring_segments_with_the_kits_segment_size():
    """libalgs gives Open MPI 8 KiB segments: below p x 8 KiB it is still the plain ring."""
    seg = int(
        libalgs.settings("openmpi", "allreduce", "segmented_ring").mca[
            "coll_tuned_allreduce_algorithm_segmentsize"
        ]
    )
    assert seg == 8192
    assert forcing.fallback("openmpi", "allreduce", "segmented_ring", 16384, 3, 1, seg)[1] == "ring"
    assert forcing.fallback("openmpi", "allreduce", "segmented_ring", 1 << 20, 3, 1, seg) == (None, None)


def test_default_and_unverified_rows_are_left_alone():
    row = _rows("openmpi", "bcast", "scatter_allgather", 4, (4,))[0]
    row["forced"] = "unverified"
    assert forcing.label_fallback(row, "openmpi", "bcast", "scatter_allgather")["forced"] == "unverified"


# --- real runs ----------------------------------------------------------------------------


def _expected(flavour, row, name):
    """yes, or fallback where forcing.FALLBACKS names another algorithm for this row."""
    ts = forcing.TYPE_SIZES[row["datatype"]]
    rule, _ = forcing.fallback(flavour, row["collective"], name, row["bytes"] // ts, row["nprocs"], ts)
    return "fallback" if rule else "yes"


@pytest.mark.slow
@pytest.mark.parametrize("coll,name", _algs("openmpi"))
def test_openmpi_forced_runs_and_checks(built_flavour, coll, name):
    built_flavour("openmpi")
    nprocs = 2 if name == "two_proc" else (4 if coll in ("bcast", "reduce") else 3)
    if name == "neighbor":
        nprocs = 4  # Open MPI's neighbour exchange needs an even P
    rows = forcing.measure(
        launch.get_launcher("openmpi"),
        coll,
        name,
        nprocs,
        sizes="4:4K",
        check=True,
        iters=5,
        warmup=1,
        datatype="int",
        timeout=90,
    )
    assert rows and all(r["requested"] == name for r in rows)
    for r in rows:
        want = "no" if name == "default" else _expected("openmpi", r, name)
        assert r["forced"] == want, (r["bytes"], r["evidence"])


@pytest.mark.slow
def test_openmpi_scatter_allgather_rows_per_size(built_flavour):
    """A real forced launch labels each size on its own: at P = 4, 4 and 8 bytes of int are
    Open MPI's basic_linear (count < P), 16 bytes and up are the forced scatter_allgather."""
    built_flavour("openmpi")
    rows = forcing.measure(
        launch.get_launcher("openmpi"),
        "bcast",
        "scatter_allgather",
        4,
        sizes="4:32",
        check=True,
        iters=3,
        warmup=1,
        datatype="int",
        timeout=90,
    )
    assert [(r["bytes"], r["forced"]) for r in rows] == [
        (4, "fallback"),
        (8, "fallback"),
        (16, "yes"),
        (32, "yes"),
    ]
    assert "coll_tuned_bcast_algorithm=scatter_allgather" in rows[0]["evidence"]
    assert "runs basic_linear instead" in rows[0]["evidence"]
    assert "instead" not in rows[2]["evidence"]


@pytest.mark.slow
def test_openmpi_two_proc_refused_before_launch(built_flavour):
    built_flavour("openmpi")
    with pytest.raises(UsageError, match=r"cannot run allgather algorithm 'two_proc' at P=3: P != 2"):
        forcing.measure(launch.get_launcher("openmpi"), "allgather", "two_proc", 3, sizes="4:8")


@pytest.mark.slow
@pytest.mark.parametrize("coll,name", _algs("mpich"))
def test_mpich_forced_runs_and_checks(built_flavour, coll, name):
    built_flavour("mpich")
    nprocs = 2 if name == "recursive_doubling" and coll == "allgather" else 3
    # MPICH's reduce_scatter_gather needs count >= P: start at 16 bytes (4 ints)
    rows = forcing.measure(
        launch.get_launcher("mpich"),
        coll,
        name,
        nprocs,
        sizes="16:1K",
        check=True,
        iters=5,
        warmup=1,
        datatype="int",
        timeout=90,
    )
    assert {r["forced"] for r in rows} == ({"no"} if name == "default" else {"yes"})


@pytest.mark.slow
def test_mpich_inapplicable_fails_loudly(built_flavour):
    built_flavour("mpich")
    with pytest.raises(UsageError, match="refused allgather algorithm 'recursive_doubling' at P=3"):
        forcing.measure(
            launch.get_launcher("mpich"),
            "allgather",
            "recursive_doubling",
            3,
            sizes="4:64",
            check=True,
            iters=2,
            warmup=0,
        )


def test_not_available_is_clear():
    with pytest.raises(UsageError, match="not available on smpi"):
        forcing.prepare("smpi", "bcast", "knomial")


_has_platforms = importlib.util.find_spec("mpilab.simulate.platforms") is not None


@pytest.mark.slow
@pytest.mark.skipif(
    not _has_platforms, reason="mpilab.simulate.platforms (orfeo-thin) not in this checkout yet"
)
@pytest.mark.parametrize("coll,name", _algs("smpi"))
def test_smpi_forced_runs_and_checks(built_flavour, coll, name):
    built_flavour("smpi")
    # sample P: a non-power of two everywhere, 48 (two THIN nodes) for the seed's collectives
    nprocs = {"bcast": 48, "reduce": 24}.get(coll, 7)
    if name in ("neighbor",):
        nprocs = 8
    L = launch.get_launcher("smpi", platform="orfeo-thin")
    sizes = "4:16K"
    rows = forcing.measure(
        L, coll, name, nprocs, sizes=sizes, check=True, iters=3, warmup=1, datatype="int", timeout=600
    )
    for r in rows:
        want = "no" if name == "default" else _expected("smpi", r, name)
        assert r["forced"] == want, (r["bytes"], r["evidence"])


@pytest.mark.slow
def test_sweep_forces_library_algorithms(built_flavour, tmp_path):
    """`mpilab sweep` with library names forces each one and records the evidence per row."""
    import subprocess
    import sys

    import pandas as pd

    built_flavour("openmpi")
    out = tmp_path / "r.csv"
    cmd = [
        sys.executable,
        "-m",
        "mpilab.cli",
        "sweep",
        "--coll",
        "bcast",
        "--algos",
        "default,basic_linear,chain,pipeline",
        "--flavour",
        "openmpi",
        "--nprocs",
        "2,3",
        "-m",
        "2:1K",
        "--iters",
        "5",
        "--repetitions",
        "2",
        "--shuffle",
        "--check",
        "-q",
        "-o",
        str(out),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    assert len(df) == 4 * 2 * 2 * 10
    assert set(df[df.algorithm == "default"].forced) == {"no"}
    forced = df[df.algorithm != "default"]
    assert set(forced.forced) == {"yes"} and (forced.requested == forced.algorithm).all()
    assert forced.evidence.str.contains("coll_tuned_bcast_algorithm=").all()
    r = subprocess.run(cmd[:7] + ["default,knomial_x"] + cmd[8:], capture_output=True, text=True)
    assert r.returncode == 2 and "knomial_x" in r.stderr and "pipeline" in r.stderr


def test_sweep_names_unavailable_library_algorithm(tmp_path, built_flavour):
    import subprocess
    import sys

    built_flavour("smpi")  # the sweep reads the smpi build's registry before it names the algorithm

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mpilab.cli",
            "sweep",
            "--coll",
            "bcast",
            "--algos",
            "default,knomial",
            "--flavour",
            "smpi",
            "--nprocs",
            "2",
            "-o",
            str(tmp_path / "r.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "'knomial' is not available on smpi (available on: openmpi)" in r.stderr
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid not installed")
def test_run_removes_the_smpi_hostfile_directory(built_flavour):
    """forcing.run (behind measure) cleans up the launcher's /tmp/mpilab-smpi-* directory."""
    built_flavour("smpi")

    class Recording(launch.SMPILauncher):
        made = []

        def command(self, *a, **kw):
            cmd = super().command(*a, **kw)
            self.made.append(self._tmp[-1])
            return cmd

    L = Recording(platform="orfeo-thin")
    rows = forcing.measure(L, "bcast", "binomial", 2, sizes="4:8", iters=1, warmup=0, timeout=120)
    assert len(rows) == 2 and rows[0]["forced"] == "yes"
    assert len(L.made) == 1 and str(L.made[0]).split("/")[-1].startswith("mpilab-smpi-")
    assert not L.made[0].exists() and L._tmp == []


def test_segment_size_and_chain_fanout_can_be_given_to_open_mpi():
    s = libalgs.settings("openmpi", "bcast", "pipeline", segsize=0)
    assert s.env["OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize"] == "0"  # not the table's 8192
    s = libalgs.settings("openmpi", "bcast", "chain", segsize=1024, chain_fanout=1)
    assert s.mca == {
        "coll_tuned_use_dynamic_rules": "1",
        "coll_tuned_bcast_algorithm": "2",
        "coll_tuned_bcast_algorithm_segmentsize": "1024",
        "coll_tuned_bcast_algorithm_chain_fanout": "1",
    }
    with pytest.raises(UsageError, match="segsize 128 only applies to an algorithm forced on openmpi"):
        libalgs.settings("smpi", "bcast", "binomial", segsize=128)
    assert libalgs.settings("smpi", "bcast", "pipeline", segsize=128).kit == "ompi_pipeline"
    with pytest.raises(UsageError, match="chain_fanout 2 only applies"):
        libalgs.settings("openmpi", "bcast", "default", chain_fanout=2)
    with pytest.raises(UsageError, match="bad chain_fanout 0; valid: an integer >= 1"):
        libalgs.settings("openmpi", "bcast", "chain", chain_fanout=0)
    with pytest.raises(UsageError, match="bad segsize -1"):
        forcing.prepare("openmpi", "bcast", "pipeline", segsize=-1)
