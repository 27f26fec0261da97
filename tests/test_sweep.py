import os
import signal
import subprocess
import sys
import time

import pytest

from mpilab.core import results
from mpilab.core.errors import LaunchError, UsageError
from mpilab.measure import launch, sweep


def test_parse_nprocs():
    assert sweep.parse_nprocs("1,2,4") == [1, 2, 4]
    assert sweep.parse_nprocs("2..8:2") == [2, 4, 6, 8]
    assert sweep.parse_nprocs("1..3,8") == [1, 2, 3, 8]
    for bad, match in [
        ("0", "bad process count 0"),
        ("a", "'a'"),
        ("4..2", "end 2 < start 4"),
        ("2..8:0", "bad step 0"),
    ]:
        with pytest.raises(UsageError, match=match):
            sweep.parse_nprocs(bad)


def test_validate_algorithms():
    valid = ["bruck", "ring", "native"]
    assert sweep.validate_algorithms("ring,native", valid) == ["ring", "native"]
    with pytest.raises(UsageError, match="unknown algorithm 'rign'; valid: bruck, native, ring"):
        sweep.validate_algorithms("rign", valid)


def test_mpich_warning():
    with pytest.warns(UserWarning, match=r"busy-polls.*\[8\]"):
        assert sweep.check_mpich_nprocs("mpich", [2, 8])
    assert not sweep.check_mpich_nprocs("openmpi", [8])


class FailingAfter(launch.OpenMPILauncher):
    """A real Open MPI launcher whose n-th launch fails, as a crash mid-sweep would."""

    def __init__(self, ok_launches, **kw):
        super().__init__(**kw)
        self.left = ok_launches

    def run(self, *a, **kw):
        if self.left == 0:
            raise LaunchError("simulated crash")
        self.left -= 1
        return super().run(*a, **kw)


@pytest.mark.mpi
def test_interrupted_sweep_resumes_with_only_the_rest(built_flavour, results_csv):
    built_flavour("openmpi")
    algos, nprocs = ["ring", "pairwise", "native"], [1, 2]
    with pytest.raises(LaunchError, match="simulated crash"):
        sweep.run_sweep(
            FailingAfter(4),
            results_csv,
            algos,
            nprocs,
            "32:256",
            iters=5,
            warmup=1,
            progress=False,
            timeout=120,
        )
    df = results.read_results(results_csv)
    assert len(df) == 4 * 4  # four finished launches, four sizes each, all kept
    stats = sweep.run_sweep(
        launch.get_launcher("openmpi"),
        results_csv,
        algos,
        nprocs,
        "32:256",
        iters=5,
        warmup=1,
        progress=False,
        timeout=120,
    )
    assert {k: stats[k] for k in ("launched", "skipped", "rows")} == {"launched": 2, "skipped": 4, "rows": 8}
    assert stats["order"] == [("pairwise", 2, 0), ("native", 2, 0)]  # the two launches made
    df = results.read_results(results_csv)
    assert len(df) == 24
    assert df.groupby(["algorithm", "nprocs"]).size().eq(4).all()
    again = sweep.run_sweep(
        launch.get_launcher("openmpi"),
        results_csv,
        algos,
        nprocs,
        "32:256",
        iters=5,
        warmup=1,
        progress=False,
        timeout=120,
    )
    assert again["launched"] == 0


@pytest.mark.mpi
@pytest.mark.slow
def test_killed_cli_sweep_loses_nothing_finished(built_flavour, results_csv):
    built_flavour("openmpi")
    argv = [
        sys.executable,
        "-m",
        "mpilab.cli",
        "sweep",
        "--nprocs",
        "1..2",
        "-m",
        "32:64",
        "--algos",
        "bruck,gather_bcast,pairwise,ring,native",
        "--iters",
        "3",
        "--warmup",
        "0",
        "--repetitions",
        "4",
        "-o",
        str(results_csv),
        "-q",
    ]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if results_csv.exists() and len(results_csv.read_text().splitlines()) > 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep finished before it could be killed; make it longer"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = results.read_results(results_csv)
    assert len(before) >= 2 and len(before) % 2 == 0  # only whole launches (2 sizes each)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    after = results.read_results(results_csv)
    total_launches = 5 * 2 * 4  # 4 algorithms + native, 2 process counts, 4 repetitions
    assert len(after) == total_launches * 2
    assert f"{len(before) // 2} already measured" in out.stdout
    assert not after.duplicated(list(results.KEY_COLUMNS)).any()


@pytest.mark.mpi
@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_real_sweep(built_flavour, results_csv, flavour):
    built_flavour(flavour)
    stats = sweep.run_sweep(
        launch.get_launcher(flavour),
        results_csv,
        ["gather_bcast", "native"],
        [1, 2],
        "32:1K",
        iters=10,
        warmup=2,
        check=True,
        progress=False,
        timeout=300,
    )
    assert stats["launched"] == 4 and stats["rows"] == 4 * 6
    df = results.read_results(results_csv)
    assert set(df["flavour"]) == {flavour} and set(df["platform"]) == {"local"}
    assert (df["avg_us"] > 0).all() and (df["maxrank_avg_us"] >= df["min_us"]).all()
    assert df["library"].str.contains("Open MPI" if flavour == "openmpi" else "MPICH").all()
    assert sorted(df["nprocs"].unique()) == [1, 2]


@pytest.mark.smpi
def test_smpi_sweep_is_deterministic(built_flavour, results_csv):
    pytest.importorskip("mpilab.simulate.platforms")
    built_flavour("smpi")
    lau = launch.get_launcher("smpi", platform="orfeo-thin")
    sweep.run_sweep(
        lau,
        results_csv,
        ["ring", "gather_bcast"],
        [4],
        "1K:64K",
        iters=2,
        warmup=1,
        repetitions=2,
        progress=False,
        timeout=300,
    )
    df = results.read_results(results_csv)
    assert set(df["platform"]) == {"orfeo-thin"} and set(df["launcher"]) == {"smpirun"}
    assert len(df) == 2 * 7 * 2
    piv = df.pivot_table(index=["algorithm", "bytes"], columns="repetition", values="maxrank_avg_us")
    assert (piv[0] == piv[1]).all()  # simulated time: repetitions agree exactly
    big = df[df["bytes"] == 65536].groupby("algorithm")["maxrank_avg_us"].mean()
    assert big["gather_bcast"] > big["ring"]


@pytest.mark.skipif(__import__("shutil").which("smpirun") is None, reason="SimGrid not installed")
def test_sweep_stores_the_probe(built_flavour, results_csv):
    """probe= reaches collbench for library and kit algorithms alike: probe_us is filled."""
    built_flavour("smpi")
    L = launch.get_launcher("smpi", platform="orfeo-thin")
    sweep.run_sweep(
        L, results_csv, ["binomial"], [4], "1K:2K", coll="bcast", iters=2, warmup=1, probe=8, progress=False
    )
    sweep.run_sweep(L, results_csv, ["ring"], [4], "1K:2K", iters=2, warmup=1, probe=8, progress=False)
    df = results.read_results(results_csv)
    assert len(df) == 4 and df["probe_us"].notna().all() and (df["probe_us"] > 0).all()
    assert df["command"].str.contains("--probe 8").all()


# --- the sweep CLI: order, options, repetitions -------------------------------------------


def _cli(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "mpilab.cli", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _launch_order(path):
    """(algorithm, nprocs, repetition) of each launch, in the order the rows were appended."""
    df = results.read_results(path)
    seen = []
    for key in zip(df["algorithm"], df["nprocs"], df["repetition"]):
        if key not in seen:
            seen.append(key)
    return [(a, int(p), int(r)) for a, p, r in seen]


def test_plan_shuffle_is_one_implementation():
    """sweep.plan shuffles through stats.measurement_order: same launches, another order,
    the same order again for the same seed."""
    plain = sweep.plan(["a", "b", "c"], [1, 2], 2)
    assert plain[:3] == [("a", 1, 0), ("b", 1, 0), ("c", 1, 0)]
    mixed = sweep.plan(["a", "b", "c"], [1, 2], 2, shuffle=True, seed=3)
    assert sorted(mixed) == sorted(plain) and mixed != plain
    assert mixed == sweep.plan(["a", "b", "c"], [1, 2], 2, shuffle=True, seed=3)


@pytest.mark.mpi
def test_cli_shuffle_changes_the_launch_order_not_the_set(built_flavour, tmp_path):
    built_flavour("openmpi")
    common = [
        "sweep",
        "--algos",
        "ring,pairwise,native",
        "--nprocs",
        "1,2",
        "-m",
        "32:32",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--repetitions",
        "2",
        "-q",
    ]
    r = _cli(*common, "-o", tmp_path / "plain.csv")
    assert r.returncode == 0, r.stderr
    r = _cli(*common, "--shuffle", "--seed", "7", "-o", tmp_path / "mixed.csv")
    assert r.returncode == 0, r.stderr
    assert "order shuffled with --seed 7" in r.stdout
    plain, mixed = _launch_order(tmp_path / "plain.csv"), _launch_order(tmp_path / "mixed.csv")
    assert len(plain) == 12 and sorted(plain) == sorted(mixed)
    assert plain == sweep.plan(["ring", "pairwise", "native"], [1, 2], 2)
    assert mixed == sweep.plan(["ring", "pairwise", "native"], [1, 2], 2, shuffle=True, seed=7)
    assert mixed != plain


@pytest.mark.mpi
def test_cli_sweep_options_reach_the_rows(built_flavour, tmp_path):
    """--map-by, --probe, --datatype, --root: each one is in the command and the rows."""
    built_flavour("openmpi")
    out = tmp_path / "r.csv"
    r = _cli(
        "sweep",
        "--coll",
        "bcast",
        "--algos",
        "native,basic_linear",
        "--nprocs",
        "2",
        "-m",
        "8:64",
        "--iters",
        "3",
        "--map-by",
        "socket",
        "--probe",
        "8",
        "--datatype",
        "int",
        "--root",
        "1",
        "--check",
        "-q",
        "-o",
        out,
    )
    assert r.returncode == 0, r.stderr
    df = results.read_results(out)
    assert len(df) == 2 * 4
    assert set(df["mapping"]) == {"socket"} and df["command"].str.contains("--map-by socket").all()
    assert set(df["datatype"]) == {"int"} and set(df["root"]) == {1}
    assert df["probe_us"].notna().all() and df["command"].str.contains("--probe 8").all()
    assert set(df[df.algorithm == "basic_linear"]["forced"]) == {"yes"}
    r = _cli(
        "sweep",
        "--coll",
        "bcast",
        "--algos",
        "native",
        "--nprocs",
        "2",
        "-m",
        "8:64",
        "--iters",
        "3",
        "--mapping",
        "socket",
        "--datatype",
        "int",
        "--root",
        "1",
        "-q",
        "-o",
        out,
    )
    assert r.returncode == 0 and "0 launches" in r.stdout  # --mapping: the same, already measured


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seed", "3"], "--seed only applies with --shuffle"),
        (["--shuffle", "--seed", "-1"], "bad seed '-1'"),
        (["--root", "1"], "--root 1 given for allgather, which has no root"),
        (["--coll", "bcast", "--root", "2", "--nprocs", "2,4"], "bad --root 2"),
        (["--probe", "0"], "bad --probe '0'"),
        (["--datatype", "long"], "invalid choice: 'long'"),
        (["--map-by", "numa"], "invalid choice: 'numa'"),
        (["--algos", "lib:rign"], "unknown algorithm 'lib:rign'"),
        (["--smpi-selector", "ompi"], "--smpi-selector 'ompi' only applies to --flavour smpi"),
        (["--flavour", "smpi", "--smpi-selector", "open"], "unknown SMPI selector 'open'; valid: default"),
    ],
)
def test_cli_sweep_bad_options(built_flavour, tmp_path, args, message):
    built_flavour("openmpi")
    base = ["sweep", "--nprocs", "2", "--algos", "native", "-m", "32:32", "-o", tmp_path / "r.csv"]
    r = _cli(*base, *args)  # later options win: the test's own override the defaults
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.smpi
def test_cli_smpi_selector_decides_the_default(built_flavour, tmp_path):
    """--smpi-selector reaches smpirun: SimGrid's copy of Open MPI's rules and of MPICH's pick
    different bcasts for 64 KiB on 8 ranks of THIN, so the simulated times differ."""
    built_flavour("smpi")
    times = {}
    for sel in ("ompi", "mpich"):
        out = tmp_path / f"{sel}.csv"
        r = _cli(
            "sweep",
            "--flavour",
            "smpi",
            "--coll",
            "bcast",
            "--algos",
            "default",
            "--nprocs",
            "8",
            "-m",
            "64K:64K",
            "--iters",
            "2",
            "--smpi-selector",
            sel,
            "-q",
            "-o",
            out,
        )
        assert r.returncode == 0, r.stderr
        df = results.read_results(out)
        assert df["command"].str.contains(f"--cfg=smpi/coll-selector:{sel}").all()
        times[sel] = float(df["avg_us"].iloc[0])
    assert times["ompi"] != pytest.approx(times["mpich"], rel=0.05)


@pytest.mark.mpi
def test_cli_repetitions_print_medians_and_plot_draws_boxplots(built_flavour, tmp_path):
    built_flavour("openmpi")
    out = tmp_path / "r.csv"
    r = _cli(
        "sweep",
        "--algos",
        "ring,native",
        "--nprocs",
        "1,2",
        "-m",
        "32:64",
        "--iters",
        "5",
        "--repetitions",
        "3",
        "-q",
        "-o",
        out,
    )
    assert r.returncode == 0, r.stderr
    # three repetitions: [min, max], whose coverage of the median is 75 %, said as such
    assert "medians over 3 repetitions, 75 % interval, [min, max] of 3 runs" in r.stdout
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip().startswith(("ring", "native"))]
    assert len(lines) == 2 * 2 * 2  # 2 algorithms x P in {1, 2} x sizes {32, 64}
    for ln in lines:
        n, med = int(ln[3]), float(ln[4])
        low, high = float(ln[5].strip("[,")), float(ln[6].strip("]"))
        assert n == 3 and low <= med <= high
    r = _cli("plot", out, "-o", tmp_path / "png")
    assert r.returncode == 0, r.stderr
    boxes = sorted(p.name for p in (tmp_path / "png").glob("*boxplot.png"))
    assert boxes == [
        "allgather_openmpi_local_core_native_64B_boxplot.png",
        "allgather_openmpi_local_core_ring_64B_boxplot.png",
    ]
    r = _cli(
        "sweep",
        "--algos",
        "ring",
        "--nprocs",
        "2",
        "-m",
        "32:32",
        "--iters",
        "2",
        "-q",
        "-o",
        tmp_path / "one.csv",
    )
    assert "medians" not in r.stdout  # one repetition: nothing to summarise


def test_sweep_refuses_a_point_that_does_not_fit(built_flavour, results_csv):
    """The memory estimate refuses a sweep before any launch, naming the point (P, bytes),
    the estimate and the limit; the same point with SMPI's folded buffers fits."""
    built_flavour("smpi")
    lau = launch.get_launcher("smpi", platform="orfeo-thin")
    with pytest.raises(
        UsageError,
        match=r"will not fit in memory, not launched: allgather bruck "
        r"at P = 48, 1048576 bytes per rank: about 5\.\d+ GiB "
        r"\(48 ranks x \(1 MiB sent \+ 48 MiB received \+ 48 MiB "
        r"temporary per rank\), real with --check.*the limit is "
        r"1 GiB .*without --check",
    ):
        sweep.run_sweep(
            lau,
            results_csv,
            ["bruck", "ring"],
            [4, 48],
            "1M:1M",
            check=True,
            memory_limit=1 << 30,
            progress=False,
        )
    assert not results_csv.exists()
    need, how = sweep.memory_estimate("smpi", "allgather", "bruck", 48, 1 << 20)
    assert need < 1 << 30 and "folded" in how
    need, how = sweep.memory_estimate("openmpi", "allgather", "ring", 4, 1 << 20)
    assert need == 4 * (sweep.REAL_RANK_BYTES + 5 * (1 << 20)) and "4 ranks" in how


@pytest.mark.smpi
def test_cli_refuses_a_simulation_larger_than_the_machine(built_flavour, tmp_path):
    """1,024 ranks of a checked 1 MiB allgather need a TiB of real buffers: exit 2, no launch."""
    built_flavour("smpi")
    r = _cli(
        "sweep",
        "--flavour",
        "smpi",
        "--platform",
        "jupiter-64x16",
        "--nprocs",
        "1024",
        "-m",
        "1M:1M",
        "--algos",
        "ring",
        "--check",
        "-o",
        tmp_path / "r.csv",
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert (
        "will not fit in memory, not launched: allgather ring at P = 1024, 1048576 bytes" in r.stderr
        and "TiB" in r.stderr
        and "MemAvailable" in r.stderr
    )
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.slow
@pytest.mark.smpi
def test_smpi_sweep_of_512_ranks_at_1_mib(built_flavour, results_csv):
    """A 1 MiB allgather on 512 simulated ranks completes: SMPI's folded buffers are one
    mapping each (it aborted with 'Could not map folded virtual memory' past vm.max_map_count)."""
    built_flavour("smpi")
    lau = launch.get_launcher("smpi", platform="jupiter-32x16")
    stats = sweep.run_sweep(
        lau, results_csv, ["bruck"], [512], "1M:1M", iters=1, warmup=0, progress=False, timeout=1800
    )
    df = results.read_results(results_csv)
    assert stats["launched"] == 1 and len(df) == 1
    assert df["nprocs"].iloc[0] == 512 and df["maxrank_avg_us"].iloc[0] > 0
