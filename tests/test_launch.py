import os
import shutil
import sys

import pytest

from mpilab.core import results, units
from mpilab.core.errors import LaunchError, ParseError, UsageError
from mpilab.core.vocabulary import COMPILERS, SRUN_DISTRIBUTION
from mpilab.measure import collbench, driver, launch
from mpilab.measure.driver import BenchOptions

DATA = os.path.join(os.path.dirname(__file__), "data")


def test_openmpi_argv_and_root_env():
    lau = launch.get_launcher("openmpi", cores=2)
    cmd = lau.command("./cb", ["-m", "1K"], 2, mapping="socket")
    assert cmd.argv == [
        "mpirun.openmpi",
        "-n",
        "2",
        "--map-by",
        "socket",
        "--bind-to",
        "socket",
        "./cb",
        "-m",
        "1K",
    ]
    want = {"PMIX_MCA_psec": "^munge"} if "PMIX_MCA_psec" not in os.environ else {}
    if os.geteuid() == 0:
        want.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    assert cmd.env == want
    assert lau.flavour == "openmpi" and lau.name == "mpirun" and lau.platform == "local"


def test_openmpi_leaves_a_pmix_security_choice_alone(monkeypatch):
    """The kit skips PMIx's munge plugin (2.3 s of retries without a munged) unless the user
    chose a plugin."""
    monkeypatch.setenv("PMIX_MCA_psec", "munge")
    cmd = launch.get_launcher("openmpi", cores=2).command("./cb", [], 2)
    assert "PMIX_MCA_psec" not in cmd.env
    monkeypatch.delenv("PMIX_MCA_psec")
    assert launch.get_launcher("openmpi", cores=2).command("./cb", [], 2).env["PMIX_MCA_psec"] == "^munge"


def test_openmpi_oversubscribes_past_the_cores():
    cmd = launch.get_launcher("openmpi", cores=2).command("./cb", [], 4, mapping="node")
    assert cmd.argv[:8] == [
        "mpirun.openmpi",
        "-n",
        "4",
        "--oversubscribe",
        "--map-by",
        "node",
        "--bind-to",
        "none",
    ]


def test_node_mapping_binds_to_a_core():
    """Neither Open MPI nor hydra has a "node" binding object (both refuse to start with it)."""
    cmd = launch.get_launcher("openmpi", cores=2).command("./cb", [], 2, mapping="node")
    assert cmd.argv[3:7] == ["--map-by", "node", "--bind-to", "core"]
    cmd = launch.get_launcher("mpich").command("./cb", [], 2, mapping="node")
    assert cmd.argv[3:7] == ["-bind-to", "core", "-ppn", "1"]


def test_mpich_argv():
    cmd = launch.get_launcher("mpich").command("./cb", ["--iters", "3"], 3, mapping="core")
    assert cmd.argv == [
        "mpirun.mpich",
        "-n",
        "3",
        "-bind-to",
        "core",
        "-map-by",
        "core",
        "./cb",
        "--iters",
        "3",
    ]
    assert cmd.env == {}


def test_srun_argv():
    assert launch.get_launcher("srun").command("cb", ["x"], 4).argv == [
        "srun",
        "--mpi=pmix",
        "-n",
        "4",
        "--distribution=block:block",
        "--cpu-bind=cores",
        "cb",
        "x",
    ]
    cmd = launch.get_launcher("srun", flavour="mpich").command("cb", [], 8, mapping="node")
    assert cmd.argv == [
        "srun",
        "--mpi=pmi2",
        "-n",
        "8",
        "--distribution=cyclic:block",
        "--cpu-bind=cores",
        "cb",
    ]
    # the same mapping places ranks the same way under srun and in the sbatch templates
    for mapping in ("core", "socket", "node"):
        argv = launch.get_launcher("srun").command("cb", [], 2, mapping=mapping).argv
        assert f"--distribution={SRUN_DISTRIBUTION[mapping]}" in argv
    with pytest.raises(UsageError, match="'pmix3'"):
        launch.get_launcher("srun", mpi="pmix3")


def test_apptainer_wraps_an_inner_launcher():
    lau = launch.get_launcher("apptainer", image="kit.sif", binds=["/scratch"], inner="srun")
    cmd = lau.command("/opt/cb", ["-m", "1K"], 4)
    assert cmd.argv[:6] == ["srun", "--mpi=pmix", "-n", "4", "--distribution=block:block", "--cpu-bind=cores"]
    assert cmd.argv[6:] == [
        "apptainer",
        "exec",
        "--bind",
        "/scratch",
        "--env",
        "OMPI_MCA_btl_vader_single_copy_mechanism=none",
        "kit.sif",
        "/opt/cb",
        "-m",
        "1K",
    ]
    assert cmd.env["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"
    inner = launch.get_launcher("apptainer", image="kit.sif", inner="openmpi", cores=2)
    assert inner.command("cb", [], 2).argv[0] == "mpirun.openmpi"
    with pytest.raises(UsageError, match="image"):
        launch.get_launcher("apptainer", image="")


def test_smpi_argv(tmp_path):
    pytest.importorskip("mpilab.simulate.platforms")
    lau = launch.get_launcher("smpi", platform="orfeo-thin", coll={"allgather": "ring"}, workdir=tmp_path)
    cmd = lau.command("./cb", ["-m", "1K"], 4, mapping="socket")
    a = cmd.argv
    assert a[:3] == ["smpirun", "-np", "4"]
    # THIN charges each class its own overheads: the platform is the loader beside its XML file
    # (mpilab.simulate.overheads), a file that exists
    platform = a[a.index("-platform") + 1]
    assert platform.endswith((".xml", ".xml.so")) and os.path.exists(platform), platform
    hostfile = a[a.index("-hostfile") + 1]
    assert open(hostfile).read().endswith("\n")
    for cfg in (
        "--cfg=smpi/simulate-computation:no",
        "--cfg=smpi/display-timing:no",
        "--cfg=smpi/allgather:ring",
        "--cfg=smpi/shared-malloc-blocksize:268435456",
    ):
        assert cfg in a
    assert any(x.startswith("--cfg=smpi/host-speed:") for x in a)
    assert a[-3:] == ["./cb", "-m", "1K"]
    assert lau.platform == "orfeo-thin" and lau.flavour == "smpi"


@pytest.mark.parametrize("bad, match", [(0, "bad number of processes 0"), (-2, "-2"), ("4", "'4'")])
def test_bad_nprocs(bad, match):
    with pytest.raises(UsageError, match=match):
        launch.get_launcher("openmpi").command("cb", [], bad)


def test_bad_mapping_and_launcher():
    with pytest.raises(UsageError, match="unknown mapping 'numa'; valid: core, node, socket"):
        launch.get_launcher("mpich").command("cb", [], 2, mapping="numa")
    with pytest.raises(UsageError, match="unknown launcher 'mvapich'; valid: apptainer, mpich"):
        launch.get_launcher("mvapich")


class _Local(launch.Launcher):
    """Runs the program directly: lets us test run()'s failure handling without MPI."""

    name = "local"

    def command(self, program, args=(), nprocs=1, mapping="core"):
        return launch.Command([program, *args], {})


def test_run_failure_reports_command_code_and_stderr():
    with pytest.raises(LaunchError) as e:
        _Local().run(sys.executable, ["-c", "import sys; sys.stderr.write('boom here'); sys.exit(3)"])
    msg = str(e.value)
    assert "exit code 3" in msg and "boom here" in msg and sys.executable in msg


def test_run_timeout_kills_the_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
        f"'import time; time.sleep(300)']); open({str(marker)!r}, 'w').write(str(p.pid)); "
        f"time.sleep(300)"
    )
    with pytest.raises(LaunchError, match="timed out after 3 s"):
        _Local().run(sys.executable, ["-c", code], timeout=3)
    pid = int(marker.read_text())
    import time

    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        # a killed child of ours may linger as a zombie of init only briefly
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {pid} survived the timeout")


def test_parse_golden_output():
    text = open(os.path.join(DATA, "collbench_openmpi_p2.csv")).read()
    out = driver.parse(text, program="collbench", columns=collbench.COLUMNS)
    assert (out.program, out.version) == ("collbench", "1")
    assert out.meta["algorithm"] == "pairwise" and out.meta["nprocs"] == "2"
    assert out.meta["library"].startswith("Open MPI v4.1.4")
    assert [r["bytes"] for r in out.table] == [32, 64, 128, 256]
    assert out.table[0]["probe_us"] is None and out.table[0]["avg_us"] > 0
    rows = results.rows(out.meta, out.table, launcher="mpirun", platform="local")
    assert rows[0]["flavour"] == "openmpi" and rows[0]["nprocs"] == 2 and rows[0]["forced"] == "yes"
    assert rows[0]["evidence"] == "kit implementation" and rows[0]["warmup"] == int(out.meta["warmup"])


def test_parse_malformed_names_the_line():
    text = open(os.path.join(DATA, "collbench_openmpi_p2.csv")).read()
    broken = text.replace("64,64,10,", "64,64,ten,")
    with pytest.raises(ParseError, match=r"line 18: non-numeric"):
        driver.parse(broken)
    with pytest.raises(ParseError, match="line 3: expected '# key: value'"):
        driver.parse(text.replace("# flavour: openmpi", "# flavour openmpi"))
    with pytest.raises(ParseError, match="no table header"):
        driver.parse("# collbench 1\n")
    with pytest.raises(ParseError, match=r"line 17: expected 9 fields"):
        driver.parse(text.replace("32,32,10,", "32,10,"))
    with pytest.raises(ParseError, match=r"line 1: expected the output of pingpong, got '# collbench 1'"):
        driver.parse(text, program="pingpong")
    with pytest.raises(ParseError, match=r"line 16: expected header bytes,iterations"):
        driver.parse(text, columns=("bytes", "iterations"))


def test_collbench_args_and_sizes():
    assert units.parse_size_range("32:1M") == (32, 1 << 20)
    assert units.parse_size_range("1K") == (1, 1024)
    assert units.sizes_in_range(32, 256) == [32, 64, 128, 256]
    a = collbench.collbench_args("ring", "allgather", BenchOptions(sizes="32:1K", iters=5, check=True))
    assert a == [
        "--coll",
        "allgather",
        "--algo",
        "ring",
        "-m",
        "32:1024",
        "--format",
        "csv",
        "--iters",
        "5",
        "--check",
    ]
    with pytest.raises(UsageError, match="bad iters-large 0; valid: an integer >= 1"):
        BenchOptions(iters_large=0)
    with pytest.raises(UsageError, match="unknown datatype 'long'; valid: char, double, float, int"):
        BenchOptions(datatype="long")
    with pytest.raises(UsageError, match="pingpong does not take probe"):
        BenchOptions(probe=8).argv("pingpong")
    with pytest.raises(UsageError, match="bad size '1X'"):
        units.parse_size_range("32:1X")
    with pytest.raises(UsageError, match="'64:32'"):
        units.parse_size_range("64:32")


@pytest.mark.parametrize("flavour", ["openmpi", "mpich", "smpi"])
def test_compile_c_builds_a_program_that_runs(tmp_path, flavour):
    if shutil.which(COMPILERS[flavour]) is None:
        pytest.skip(f"{COMPILERS[flavour]} not installed")
    src = tmp_path / "hi.c"
    src.write_text(
        "#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int r, p;\n"
        "  MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &p);\n"
        '  printf("%d/%d\\n", r, p); MPI_Finalize(); return 0; }\n'
    )
    exe = launch.compile_c(src, flavour)
    assert exe == (tmp_path / f"hi-{flavour}").resolve() and exe.exists()
    out = launch.get_launcher(flavour).run(exe, nprocs=2, timeout=120).stdout
    assert sorted(out.split()) == ["0/2", "1/2"]


@pytest.mark.mpi  # launches it (tests/conftest.py LAUNCHES)
def test_compile_c_errors_name_the_file_and_the_flavour(tmp_path):
    with pytest.raises(ValueError, match="unknown flavour 'gcc'; valid: mpich, openmpi, smpi"):
        launch.compile_c("x.c", "gcc")
    with pytest.raises(LaunchError, match="C file 'nope.c' not found"):
        launch.compile_c("nope.c", "openmpi")
    if shutil.which("mpicc.openmpi"):
        bad = tmp_path / "bad.c"
        bad.write_text("int main( {\n")
        with pytest.raises(LaunchError, match=r"compiling failed: mpicc.openmpi .*bad.c.*\n.*error"):
            launch.compile_c(bad, "openmpi")
