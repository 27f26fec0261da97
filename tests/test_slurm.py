"""SLURM profiles and templates, checked by rendering and by running them on a real SLURM.

The session fixture starts a single-node SLURM with ``scripts/local-slurm.sh start`` (skipped
only when slurmctld is not installed; CI installs it). Jobs really run: the job-array sweep with
``srun --mpi=pmix`` (Open MPI) and ``srun --mpi=pmi2`` (MPICH), a sweep killed by its time limit
and resumed, and a broken script whose failure ``collect`` must explain.
"""

import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mpilab.cluster import slurm
from mpilab.core import results
from mpilab.core.errors import UsageError
from mpilab.core.paths import collbench_path, repo_root

ROOT = repo_root()
DATA = ROOT / "tests" / "data" / "slurm"
PY = sys.executable
HOST = socket.gethostname().split(".")[0]
#: scripts/local-slurm.sh starts slurmdbd (and sacct answers) where it is installed, as in CI.
ACCOUNTING = bool(shutil.which("slurmdbd") or Path("/usr/sbin/slurmdbd").exists())
#: Lmod's shell set-up, which the templates source when `module` is not defined.
LMOD = Path("/usr/share/lmod/lmod/init/bash")


def cli(*args, check=True):
    """Run ``python -m mpilab.cli.slurm`` (what ``mpilab slurm`` runs) and return the process."""
    proc = subprocess.run(
        [PY, "-m", "mpilab.cli.slurm", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"mpilab slurm {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------- no SLURM needed


def test_profiles_describe_orfeo_and_local():
    assert {"orfeo", "local"} <= set(slurm.list_profiles())
    orfeo = slurm.load_profile("orfeo")
    assert sorted(orfeo.partitions) == ["EPYC", "FAT", "THIN"]
    assert orfeo.partition("THIN").cores_per_node == 24
    assert orfeo.partition("EPYC").cores_per_node == 128
    assert orfeo.partition("FAT").cores_per_node == 72
    assert orfeo.mpi_for("openmpi") == {"modules": ["openMPI/4.1.5/gnu/12.2.1"], "srun_mpi": "pmix"}
    local = slurm.load_profile("local")
    assert local.mpi_for("mpich")["srun_mpi"] == "pmi2"
    out = cli("profiles").stdout
    assert "THIN" in out and "24 cores/node" in out and "openMPI/4.1.5/gnu/12.2.1" in out


@pytest.mark.parametrize(
    "text, seconds",
    [("1", 60), ("0:30", 30), ("01:00:00", 3600), ("2-00:00:00", 172800), ("1-2", 93600), ("1-2:30", 95400)],
)
def test_parse_time(text, seconds):
    assert slurm.parse_time(text) == seconds


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(profile="orfoe"), "unknown SLURM profile 'orfoe'; valid: local, orfeo"),
        (dict(partition="thin"), "unknown partition of profile 'orfeo' 'thin'; valid: EPYC, FAT, THIN"),
        (dict(nprocs="2,49", nodes=2), "49 tasks need more cores than the 48 of 2 node(s)"),
        (dict(nprocs="25"), "ask for --nodes 2"),
        (dict(time="3-00:00:00"), "is above the 2-00:00:00 limit of partition 'THIN'"),
        (dict(time="soon"), "bad time limit 'soon'"),
        (dict(flavour="mpich"), "no module line for flavour 'mpich'"),
        (dict(nodes=11), "--nodes 11 is not available in partition 'THIN' of profile 'orfeo': valid 1..10"),
        (dict(template="sweeep"), "unknown SLURM template 'sweeep'"),
        (dict(mappings="core,ring"), "unknown mapping 'ring'; valid: core, node, socket"),
        (dict(mappings="node"), "mapping 'node' spreads ranks round-robin over nodes"),
        (dict(sizes="32:1X"), "bad size '1X'"),
        (dict(sizes="64:32"), "bad size range '64:32'"),
        (dict(iters=0), "bad iters 0; valid: an integer >= 1"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, kwargs, message):
    args = dict(template="sweep", profile="orfeo", partition="THIN", nprocs="2,24")
    args.update(kwargs)
    run_dir = tmp_path / "run"
    with pytest.raises(UsageError) as err:
        slurm.render_to_dir(args.pop("template"), args.pop("profile"), args.pop("partition"), run_dir, **args)
    assert message in str(err.value)
    assert not run_dir.exists()


def test_profile_without_module_line_is_refused(tmp_path):
    bad = tmp_path / "mycluster.toml"
    bad.write_text(
        'name = "mycluster"\n[mpi.openmpi]\nsrun_mpi = "pmix"\n'
        '[partitions.batch]\nnodes = 4\nsockets = 2\ncores_per_socket = 8\nmax_time = "60"\n'
    )
    with pytest.raises(UsageError, match=r"has no module line for flavour 'openmpi'.*modules = "):
        slurm.render("sweep", str(bad), "batch", run_dir=tmp_path / "r")
    # The CLI says the same, exits 2 and writes nothing.
    proc = cli("render", "sweep", "--profile", bad, "--partition", "batch", "-o", tmp_path / "r", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mpilab: profile 'mycluster'") and "no module line" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_cli_names_valid_partitions(tmp_path):
    proc = cli(
        "render", "sweep", "--profile", "orfeo", "--partition", "GPU", "-o", tmp_path / "r", check=False
    )
    assert proc.returncode == 2
    assert "unknown partition of profile 'orfeo' 'GPU'; valid: EPYC, FAT, THIN" in proc.stderr


@pytest.mark.parametrize("sub", ["profiles", "render", "submit", "collect", "ingest"])
def test_every_slurm_subcommand_has_help(sub):
    out = cli(sub, "--help").stdout
    assert out.startswith(f"usage: mpilab slurm {sub}")
    if sub == "render":
        out = re.sub(r"(\w-)\s+(\w)", r"\1\2", out)  # argparse wraps after a hyphen
        out = " ".join(out.split())
        assert "sweep, sweep-apptainer, jupyter, jupyter-exchange, ipyparallel, osu-seed" in out
        assert "local, orfeo" in out


@pytest.mark.nbgrader  # launches it (tests/conftest.py LAUNCHES)
@pytest.mark.parametrize("template", sorted(slurm.TEMPLATES))
def test_every_template_renders_to_valid_bash_with_provenance(tmp_path, template):
    extra = {
        "sweep-apptainer": {"image": "/images/mpilab-openmpi.sif"},
        "jupyter-exchange": {"exchange": "/srv/nbgrader/exchange"},
    }.get(template, {})
    path = slurm.render_to_dir(
        template,
        "orfeo",
        "THIN",
        tmp_path / template,
        nodes=2,
        nprocs="2,24,48",
        mappings="core,socket,node",
        time="01:00:00",
        command="mpilab slurm render (test)",
        **extra,
    )
    text = path.read_text()
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert text.startswith("#!/bin/bash\n#SBATCH --job-name=")
    assert "#SBATCH --partition=THIN" in text and "#SBATCH --time=01:00:00" in text
    assert "# profile: orfeo" in text and "# parameters: template=" + template in text
    assert "# command: mpilab slurm render (test)" in text
    assert "module load openMPI/4.1.5/gnu/12.2.1" in text
    # what the job records next to its results
    assert 'echo "nodelist: ${SLURM_JOB_NODELIST:-}"' in text
    assert "module -t list" in text and "mpirun --version" in text


def test_osu_seed_job_matches_the_seed_header(tmp_path):
    text = slurm.render(
        "osu-seed",
        "orfeo",
        "THIN",
        run_dir=tmp_path,
        nodes=2,
        nprocs="2,24,48",
        mappings="core,socket,node",
        sizes="2:1M",
        osu_dir="/opt/osu/collective",
    )
    for line in (
        "#SBATCH --partition=THIN",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=24",
        "#SBATCH --exclusive",
        "module load openMPI/4.1.5/gnu/12.2.1",
        "export OMPI_MCA_coll_tuned_use_dynamic_rules=1",
    ):
        assert line in text.splitlines(), line
    assert '"bcast basic_linear 1" "bcast chain 2" "bcast pipeline 3"' in text
    assert '"reduce basic_linear 1" "reduce chain 2" "reduce pipeline 3"' in text
    assert 'env "OMPI_MCA_coll_tuned_${coll}_algorithm=$id"' in text
    assert 'srun --mpi=pmix -n "$np" "${placement[@]}" "${bench[@]}"' in text
    assert "#SBATCH --exclusive" in text
    assert '("$OSU_DIR/osu_${coll}" -m 2:1M -i 100 -x 10 -f)' in text


def test_apptainer_sweep_command_lines(tmp_path):
    text = slurm.render(
        "sweep-apptainer",
        "orfeo",
        "THIN",
        run_dir=tmp_path / "r",
        nodes=2,
        algos="ring,bruck",
        nprocs="24,48",
        image="/scratch/me/mpilab-openmpi.sif",
    )
    lines = [ln.strip() for ln in text.splitlines()]
    assert "#SBATCH --array=0-3" in lines
    assert "IMAGE=/scratch/me/mpilab-openmpi.sif" in lines
    assert 'CMD=(srun --mpi=pmix -n "$NP" "${PLACEMENT[@]}"' in lines
    assert 'apptainer exec --bind "$RUN_DIR" "$IMAGE"' in lines
    assert (
        '/opt/mpilab/c_reference/build/openmpi/collbench --coll allgather --algo "$ALGO" '
        "-m 32:1024 --iters 100 --warmup 10 --format csv"
    ) in text
    for setting in (
        "export OMPI_MCA_btl_vader_single_copy_mechanism=none",
        "export PMIX_MCA_gds=hash",
        "LAUNCHER=apptainer",
    ):
        assert setting in lines
    assert 'apptainer exec --bind "$RUN_DIR" "$IMAGE" python3 -m mpilab.cli.slurm ingest' in text


def test_local_cluster_matches_the_local_profile():
    """scripts/local-slurm.sh configures the partition that profiles/local.toml describes."""
    conf = subprocess.run(
        [str(ROOT / "scripts" / "local-slurm.sh"), "conf"], capture_output=True, text=True, check=True
    ).stdout
    local = slurm.load_profile("local")
    ((name, part),) = local.partitions.items()
    assert f"PartitionName={name} " in conf and f"MaxTime={part.max_time // 60} " in conf
    assert f" CPUs={part.cores_per_node} " in conf
    assert "JobCompType=jobcomp/filetxt" in conf and "SlurmUser=root" in conf
    env = dict(os.environ, MPILAB_SLURM_PARTITION="THIN", MPILAB_SLURM_CPUS="24")
    conf = subprocess.run(
        [str(ROOT / "scripts" / "local-slurm.sh"), "conf"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert "PartitionName=THIN " in conf and " CPUs=24 " in conf
    # Accounting through slurmdbd, or none; the job completion log is kept either way.
    for choice, line in (
        ("yes", "AccountingStorageType=accounting_storage/slurmdbd\n"),
        ("no", "AccountingStorageType=accounting_storage/none\n"),
    ):
        conf = subprocess.run(
            [str(ROOT / "scripts" / "local-slurm.sh"), "conf"],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, MPILAB_SLURM_ACCOUNTING=choice),
        ).stdout
        assert line in conf and "JobCompType=jobcomp/filetxt" in conf
    bad = subprocess.run(
        [str(ROOT / "scripts" / "local-slurm.sh"), "conf"],
        capture_output=True,
        text=True,
        env=dict(os.environ, MPILAB_SLURM_ACCOUNTING="maybe"),
    )
    assert bad.returncode == 1 and "MPILAB_SLURM_ACCOUNTING='maybe'; valid: yes, no, auto" in bad.stderr


# ----------------------------------------------------------------------------- sacct and jobcomp
# The files under tests/data/slurm are real output of the local cluster for one array job of
# three tasks whose task 1 asked collbench for an unknown algorithm.


def test_sacct_output_of_an_array_with_one_failed_task():
    text = (DATA / "sacct_array_one_failed.txt").read_text()
    states = slurm.parse_sacct(text, "sacct_array_one_failed.txt")
    assert [(t.label, t.state, t.exit_code, t.raw_id) for t in states] == [
        ("7_0", "COMPLETED", "0:0", "8"),
        ("7_1", "FAILED", "1:0", "9"),
        ("7_2", "COMPLETED", "0:0", "7"),
    ]
    assert [t.label for t in states if t.failed] == ["7_1"]
    assert all(t.done and t.source == "sacct" and t.name == "mpilab-sweep" for t in states)
    reason = slurm.collection._failure_reason(states[1])
    assert reason == "state FAILED; exit code 1"  # sacct's Reason "None" says nothing


# Real sacct lines of the local cluster: a held array, the same array cancelled, a job killed
# at its 1-minute limit; the last one is made up (COMPLETED with a non-zero exit code).
@pytest.mark.parametrize(
    "line, label, failed, done",
    [
        ("10_[0-3]|10|wrap|PENDING|0:0|JobHeldUser|None assigned", "10_[0-3]", False, False),
        ("10_[0-3]|10|wrap|CANCELLED by 0|0:0|JobHeldUser|None assigned", "10_[0-3]", True, True),
        ("11|11|wrap|TIMEOUT|0:0|None|vm", "11", True, True),
        ("12|12|wrap|COMPLETED|2:0|None|vm", "12", True, True),
    ],
)
def test_sacct_states(line, label, failed, done):
    (t,) = slurm.parse_sacct(line + "\n")
    assert (t.label, t.failed, t.done) == (label, failed, done)
    if t.state == "TIMEOUT":
        assert "killed at its time limit" in slurm.collection._failure_reason(t)
    if t.state.startswith("CANCELLED"):
        assert slurm.collection._failure_reason(t).startswith("state CANCELLED by 0; reason JobHeldUser")


def test_sacct_output_with_other_fields_is_a_parse_error():
    from mpilab.core.errors import ParseError

    with pytest.raises(ParseError, match=r"sacct -j 7: line 2: 5 fields, expected 7 \(JobID\|JobIDRaw"):
        slurm.parse_sacct("7_0|8|mpilab-sweep|COMPLETED|0:0|None|vm\n7_1|FAILED|1:0|None|vm\n", "sacct -j 7")


def test_jobcomp_log_says_what_sacct_says():
    """The job completion log (the fallback without accounting) gives the same tasks, states
    and exit codes as sacct for the same real job."""
    comp = slurm.parse_jobcomp((DATA / "jobcomp_array_one_failed.txt").read_text(), {"7"})
    sacct = slurm.parse_sacct((DATA / "sacct_array_one_failed.txt").read_text())
    key = lambda t: (t.label, t.state, t.exit_code, t.raw_id, t.name, t.nodelist)  # noqa: E731
    assert sorted(map(key, comp)) == sorted(map(key, sacct))
    assert {t.source for t in comp} == {"jobcomp"}
    assert slurm.parse_jobcomp((DATA / "jobcomp_array_one_failed.txt").read_text(), {"8"})[0].label == "7_0"
    assert slurm.parse_jobcomp((DATA / "jobcomp_array_one_failed.txt").read_text(), {"99"}) == []


def test_log_paths_follow_the_sbatch_patterns(tmp_path):
    script = tmp_path / "sweep.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --job-name=mpilab-sweep\n#SBATCH --array=0-2\n"
        "#SBATCH --output=/runs/logs/%x_%A_%a.out\n#SBATCH --error=/runs/logs/%x_%A_%a.err\n"
    )
    task = slurm.TaskState("7", "1", "FAILED", "1:0", raw_id="9", name="mpilab-sweep")
    assert slurm.log_paths(script, task) == (
        "/runs/logs/mpilab-sweep_7_1.out",
        "/runs/logs/mpilab-sweep_7_1.err",
    )
    script.write_text("#!/bin/bash\n#SBATCH --job-name=seed\n#SBATCH --output=logs/%x_%j.txt\n")
    task = slurm.TaskState("12", "", "FAILED", "1:0", raw_id="12")
    assert slurm.log_paths(script, task) == (str(tmp_path / "logs/seed_12.txt"),) * 2
    script.write_text("#!/bin/bash\n")
    assert slurm.log_paths(script, task) == (str(tmp_path / "slurm-12.out"),) * 2


# ----------------------------------------------------------------------------- real SLURM


def built(flavour):
    """Path of collbench for a flavour, built with the kit's Makefile if needed.

    ``MPILAB_TEST_COLLBENCH_DIR=DIR`` runs the SLURM tests with ``DIR/<flavour>/collbench``
    instead (another build of the driver), without building ``c_reference``.
    """
    other = os.environ.get("MPILAB_TEST_COLLBENCH_DIR")
    if other:
        path = Path(other) / flavour / "collbench"
        assert path.exists(), f"MPILAB_TEST_COLLBENCH_DIR: {path} does not exist"
        return path
    path = collbench_path(flavour)
    if not path.exists():
        proc = subprocess.run(
            ["make", "-C", str(ROOT / "c_reference"), f"FLAVOUR={flavour}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            pytest.fail(
                f"building collbench for {flavour} failed "
                f"(make -C c_reference FLAVOUR={flavour}):\n{proc.stdout}{proc.stderr}"
            )
    assert path.exists(), f"{path} was not built"
    return path


@pytest.fixture(scope="module")
def timelimit_job(local_slurm, tmp_path_factory):
    """A 16-point sweep with a 1-minute limit: submitted first, checked last (it takes ~1.5 min).

    Each point sleeps 8 s after measuring (``--cooldown 8``), so 16 points need over two minutes;
    SLURM kills the task 60..90 s after it starts.
    """
    bench = built("openmpi")
    run = tmp_path_factory.mktemp("timelimit")
    script = slurm.render_to_dir(
        "sweep",
        "local",
        "local",
        run,
        collbench=bench,
        time="1",
        algos="native",
        nprocs="1",
        sizes="32:64",
        iters=5,
        warmup=1,
        repetitions=16,
        cooldown=8,
    )
    return run, script, slurm.submit(script), time.monotonic()


def test_timelimit_job_is_running(timelimit_job):
    run, script, job, _ = timelimit_job
    assert slurm.job_states(job)[0].state in ("PENDING", "RUNNING", "COMPLETING")


def test_sweep_job_array_with_openmpi_and_pmix(local_slurm, tmp_path):
    bench = built("openmpi")
    run = tmp_path / "sweep"
    proc = cli(
        "render",
        "sweep",
        "--profile",
        "local",
        "--partition",
        "local",
        "-o",
        run,
        "--collbench",
        bench,
        "--algos",
        "native,ring",
        "--nprocs",
        "1,2",
        "-m",
        "32:64",
        "--iters",
        "10",
        "--time",
        "5",
    )
    script = Path(proc.stdout.strip())
    assert script == run / "sweep.sbatch"
    assert "srun --mpi=pmix" in script.read_text()
    job = cli("submit", script).stdout.strip()
    states = slurm.wait(job, timeout=240)
    assert sorted(s.array_task for s in states) == ["0", "1", "2", "3"]
    assert all(s.state == "COMPLETED" for s in states), states
    proc = cli("collect", run)
    assert f"job {job}_3: COMPLETED" in proc.stdout
    rows = read_rows(run / "results.csv")
    assert len(rows) == 2 * 2 * 2  # algorithms x process counts x sizes
    assert {(r["algorithm"], r["nprocs"]) for r in rows} == {
        ("native", "1"),
        ("native", "2"),
        ("ring", "1"),
        ("ring", "2"),
    }
    assert {r["bytes"] for r in rows} == {"32", "64"}
    for r in rows:
        assert r["launcher"] == "srun" and r["platform"] == "local/local" and r["flavour"] == "openmpi"
        assert "Open MPI" in r["library"] and float(r["avg_us"]) > 0
        assert r["command"].startswith("srun --mpi=pmix -n ")
    # provenance of each array task: node list, MPI version, modules
    prov = [slurm.read_kv(p) for p in sorted((run / "provenance").glob("*.txt"))]
    assert len(prov) == 4
    assert {p["nodelist"] for p in prov} == {HOST}
    assert all("Open MPI" in p["mpi_version"] for p in prov)
    # every row names the array task that measured it, the key of its provenance record
    assert {r["job"] for r in rows} == {f"{job}_{i}" for i in range(4)} == {p["job"] for p in prov}
    # collecting again adds nothing: the points are in the table already
    assert "0 new rows" in cli("collect", run).stdout
    assert len(read_rows(run / "results.csv")) == 8


def test_sweep_with_mpich_and_pmi2(local_slurm, tmp_path):
    bench = built("mpich")
    script = slurm.render_to_dir(
        "sweep",
        "local",
        "local",
        tmp_path,
        flavour="mpich",
        collbench=bench,
        algos="native",
        nprocs="2",
        sizes="1K:1K",
        iters=10,
        time="5",
    )
    assert 'srun --mpi=pmi2 -n "$NP"' in script.read_text()
    job = slurm.submit(script)
    states = slurm.wait(job, timeout=240)
    assert [s.state for s in states] == ["COMPLETED"], slurm.collect(tmp_path).summary()
    rows = read_rows(tmp_path / "results.csv")
    assert [(r["flavour"], r["nprocs"], r["bytes"]) for r in rows] == [("mpich", "2", "1024")]
    assert "MPICH" in rows[0]["library"]


def test_broken_script_fails_with_its_reason(local_slurm, tmp_path):
    bench = built("openmpi")
    script = slurm.render_to_dir(
        "sweep",
        "local",
        "local",
        tmp_path,
        collbench=bench,
        algos="native",
        nprocs="1",
        sizes="32",
        iters=5,
        time="5",
    )
    # A typo a person could make when editing the script by hand.
    text = script.read_text().replace("set -eo pipefail\n", "set -eo pipefail\nmodul load openmpi\n", 1)
    script.write_text(text)
    job = slurm.submit(script)
    slurm.wait(job, timeout=120)
    proc = cli("collect", tmp_path, check=False)
    assert proc.returncode == 1, proc.stdout
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 1 and failed[0].startswith(f"FAILED {job}_0: state FAILED")
    assert "exit code 127" in failed[0]
    assert "modul: command not found" in failed[0]
    assert not (tmp_path / "results.csv").exists()


def test_array_with_one_bad_algorithm_fails_only_that_task(local_slurm, tmp_path):
    """Three array tasks, the middle one asks for an algorithm that does not exist: collect
    reports that task alone as FAILED, with the reason from sacct (where the cluster has
    accounting) and collbench's own message; the other two tasks' rows arrive, each joined to
    its provenance record by the ``job`` column."""
    bench = built("openmpi")
    script = slurm.render_to_dir(
        "sweep",
        "local",
        "local",
        tmp_path,
        collbench=bench,
        algos="ring,rign,bruck",
        nprocs="2",
        sizes="32:64",
        iters=5,
        warmup=1,
        time="5",
    )
    job = slurm.submit(script)
    states = slurm.wait(job, timeout=240)
    assert [(s.label, s.state) for s in states] == [
        (f"{job}_0", "COMPLETED"),
        (f"{job}_1", "FAILED"),
        (f"{job}_2", "COMPLETED"),
    ]
    assert {s.source for s in states} == ({"sacct"} if ACCOUNTING else {"scontrol"})
    proc = cli("collect", tmp_path, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 1, proc.stdout
    assert failed[0].startswith(f"FAILED {job}_1: state FAILED; exit code 1; ")
    assert "collbench: unknown algorithm 'rign'; valid: gather_bcast, pairwise, ring, bruck" in failed[0]
    assert f"job {job}_1: FAILED exit 1:0 ({'sacct' if ACCOUNTING else 'scontrol'})" in proc.stdout
    # The job completion log, what collect falls back on without accounting, agrees.
    comp = {t.label: (t.state, t.exit_code) for t in slurm.jobs._jobcomp({job})}
    assert comp == {
        f"{job}_0": ("COMPLETED", "0:0"),
        f"{job}_1": ("FAILED", "1:0"),
        f"{job}_2": ("COMPLETED", "0:0"),
    }
    # The good tasks' results, every row joined to its task's provenance.
    rows = read_rows(tmp_path / "results.csv")
    assert sorted({(r["algorithm"], r["job"]) for r in rows}) == [("bruck", f"{job}_2"), ("ring", f"{job}_0")]
    assert len(rows) == 2 * 2
    prov = {p["job"]: p for p in read_rows(tmp_path / "provenance.csv")}
    assert set(prov) == {f"{job}_0", f"{job}_1", f"{job}_2"}  # the failed task recorded its too
    for r in rows:
        p = prov[r["job"]]
        assert p["nodelist"] == HOST and p["array_task_id"] == r["job"].split("_")[1]
        assert "Open MPI" in p["mpi_version"] and p["modules"]


@pytest.mark.skipif(not LMOD.exists(), reason="Lmod is not installed (Debian: lmod)")
def test_module_lines_run_and_the_loaded_modules_are_recorded(local_slurm, tmp_path):
    """A profile with a module line, as ORFEO's: the job loads it with Lmod (set up by the
    template in sbatch's non-login shell) and `module list` lands in the provenance record
    that the point's rows join."""
    bench = built("openmpi")
    modules = tmp_path / "modulefiles"
    (modules / "openMPI").mkdir(parents=True)
    (modules / "openMPI" / "4.1.4.lua").write_text(
        'whatis("the host Open MPI, as a module for this test")\n'
        'setenv("MPILAB_TEST_MODULE", "openMPI/4.1.4")\n'
    )
    profile = tmp_path / "modcluster.toml"
    profile.write_text(
        (ROOT / "slurm_templates" / "profiles" / "local.toml")
        .read_text()
        .replace('name = "local"', 'name = "modcluster"')
        .replace("[mpi.openmpi]\nmodules = []", '[mpi.openmpi]\nmodules = ["openMPI/4.1.4"]')
    )
    run = tmp_path / "run"
    script = slurm.render_to_dir(
        "sweep",
        str(profile),
        "local",
        run,
        collbench=bench,
        algos="ring",
        nprocs="2",
        sizes="32:32",
        iters=5,
        time="5",
    )
    text = script.read_text()
    assert "module purge\nmodule load openMPI/4.1.4\n" in text
    job = slurm.submit(script, env={"MODULEPATH": str(modules)})
    assert [s.state for s in slurm.wait(job, timeout=240)] == ["COMPLETED"], slurm.collect(run).summary()
    report = slurm.collect(run)
    assert [p["modules"] for p in report.provenance] == ["openMPI/4.1.4"]
    (row,) = read_rows(run / "results.csv")
    (prov,) = read_rows(run / "provenance.csv")
    assert row["job"] == prov["job"] == f"{job}_0" and row["platform"] == "modcluster/local"
    assert f"provenance {job}_0: nodes {HOST}; MPI mpirun (Open MPI)" in report.summary()
    assert "modules openMPI/4.1.4" in report.summary()


@pytest.mark.slow
def test_jupyter_on_a_compute_node_prints_the_tunnel(local_slurm, tmp_path):
    pytest.importorskip("jupyterlab")
    script = slurm.render_to_dir("jupyter", "local", "local", tmp_path, time="5", notebook_dir=str(tmp_path))
    job = slurm.submit(script)
    try:
        out = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            logs = list((tmp_path / "logs").glob("*.out")) + list((tmp_path / "logs").glob("*.err"))
            text = "".join(p.read_text() for p in logs)
            found = re.search(r"http://127\.0\.0\.1:\d+/lab\?token=([0-9a-f]+)", text)
            if found:
                out, token = text, found.group(1)
                break
            time.sleep(1)
        assert out, f"JupyterLab did not start: {text}"
        tunnel = (tmp_path / "tunnel.txt").read_text().strip()
        port = tunnel.split()[3].split(":")[0]
        assert (
            tunnel == f"ssh -N -L {port}:{HOST}:{port} {os.environ.get('USER', 'root')}@{HOST}"
            or tunnel.startswith(f"ssh -N -L {port}:{HOST}:{port} ")
        )
        assert tunnel in out
        # The server answers on the node and port the tunnel points at, to a request that
        # arrives as through the tunnel (Host: 127.0.0.1:PORT).
        req = urllib.request.Request(
            f"http://{HOST}:{port}/api/status?token={token}", headers={"Host": f"127.0.0.1:{port}"}
        )
        with _urlopen_when_listening(req) as resp:
            assert b"started" in resp.read()
    finally:
        subprocess.run(["scancel", job], check=False)


def _urlopen_when_listening(req, seconds=60):
    """``urlopen(req)``, retried while the connection is refused: Jupyter Server 2 prints its URL
    before it listens (serverapp.py binds the port in an I/O-loop callback that runs only once the
    loop starts), so a request right after the URL appears can find nothing there yet."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return urllib.request.urlopen(req, timeout=60)
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _wait_for_jupyter(run_dir, seconds=120):
    """The text of a jupyter job's logs and the token of the URL it printed."""
    deadline, text = time.monotonic() + seconds, ""
    while time.monotonic() < deadline:
        logs = list((run_dir / "logs").glob("*.out")) + list((run_dir / "logs").glob("*.err"))
        text = "".join(p.read_text() for p in logs)
        found = re.search(r"http://127\.0\.0\.1:\d+/lab\?token=([0-9a-f]+)", text)
        if found:
            return text, found.group(1)
        time.sleep(1)
    pytest.fail(f"JupyterLab did not start: {text}")


def test_jupyter_exchange_needs_an_absolute_exchange(tmp_path):
    with pytest.raises(UsageError, match=r"needs --exchange, an absolute path .* \(got 'exchange'\)"):
        slurm.render("jupyter-exchange", "local", "local", run_dir=tmp_path, exchange="exchange")
    with pytest.raises(UsageError, match=r"course id 'a b' is not valid"):
        slurm.render("jupyter-exchange", "local", "local", run_dir=tmp_path, exchange="/x", course="a b")


@pytest.mark.slow
def test_jupyter_exchange_lists_the_released_lab_and_hides_formgrader(local_slurm, tmp_path):
    """The student's JupyterLab job of a course: its Assignment List (nbgrader's own API, as the
    page calls it) lists what the instructor released in the shared exchange, Formgrader is off."""
    pytest.importorskip("nbgrader")
    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o1777)
    exchange.chmod(0o1777)
    course_root = tmp_path / "course"
    course_root.mkdir()
    nbgrader = Path(sys.executable).with_name("nbgrader")
    release = subprocess.run(
        [
            str(nbgrader),
            "release_assignment",
            "lab2",
            f"--Exchange.root={exchange}",
            "--CourseDirectory.course_id=hpc-test",
            f"--CourseDirectory.root={course_root}",
            f"--CourseDirectory.release_directory={ROOT / 'labs'}",
        ],
        cwd=course_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert release.returncode == 0, release.stderr[-2000:]
    home = tmp_path / "home"
    home.mkdir()
    script = slurm.render_to_dir(
        "jupyter-exchange",
        "local",
        "local",
        tmp_path / "run",
        time="5",
        notebook_dir=str(home),
        exchange=str(exchange),
        course="hpc-test",
    )
    job = slurm.submit(script)
    try:
        out, token = _wait_for_jupyter(tmp_path / "run")
        assert f"course hpc-test: assignments from {exchange}" in out
        port = (tmp_path / "run" / "tunnel.txt").read_text().split()[3].split(":")[0]

        def get(path):  # as through the tunnel (Host: 127.0.0.1:PORT)
            return _urlopen_when_listening(
                urllib.request.Request(
                    f"http://{HOST}:{port}{path}?course_id=hpc-test&token={token}",
                    headers={"Host": f"127.0.0.1:{port}"},
                )
            )

        with get("/assignments") as resp:
            listed = json.loads(resp.read())
        assert listed["success"], listed
        assert [(a["course_id"], a["assignment_id"], a["status"]) for a in listed["value"]] == [
            ("hpc-test", "lab2", "released")
        ]
        with pytest.raises(urllib.error.HTTPError) as err:
            get("/formgrader")
        assert err.value.code == 404
    finally:
        subprocess.run(["scancel", job], check=False)


@pytest.mark.slow
def test_ipyparallel_mpi_engines_under_srun(local_slurm, tmp_path):
    ipp = pytest.importorskip("ipyparallel")
    pytest.importorskip("mpi4py")
    script = slurm.render_to_dir("ipyparallel", "local", "local", tmp_path, nprocs="2", time="5")
    job = slurm.submit(script)
    client_file = tmp_path / "ipython" / "security" / "ipcontroller-client.json"
    try:
        hint = f'rc = ipp.Client("{client_file}")'
        out = tmp_path / "logs" / f"mpilab-ipyparallel_{job}.out"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (
            client_file.is_file() and out.is_file() and hint in out.read_text()
        ):
            time.sleep(0.5)
        assert client_file.is_file() and hint in out.read_text(), slurm.collect(tmp_path).summary()
        rc = ipp.Client(str(client_file))
        try:
            rc.wait_for_engines(2, timeout=90)
            # what %px runs in a notebook
            rc[:].execute(
                "from mpi4py import MPI\n"
                "got = (MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size, MPI.Get_library_version())",
                block=True,
            )
            got = sorted(rc[:].pull("got", block=True))
        finally:
            rc.close()
        assert [(r, s) for r, s, _ in got] == [(0, 2), (1, 2)]  # one MPI world across engines
        assert all("Open MPI" in lib for _, _, lib in got)
    finally:
        subprocess.run(["scancel", job], check=False)


def test_osu_seed_job_scaled_down_to_one_node(local_slurm, tmp_path):
    """The seed's job on the local node: 1 node x 2 tasks, every forced algorithm, OSU output."""
    bench = built("openmpi")
    # Not exclusive here: the test cluster's one node is shared with the other tests' jobs.
    script = slurm.render_to_dir(
        "osu-seed",
        "local",
        "local",
        tmp_path,
        collbench=bench,
        ntasks_per_node=2,
        nprocs="2",
        sizes="4:8",
        iters=5,
        warmup=1,
        time="5",
        exclusive=False,
    )
    text = script.read_text()
    assert "#SBATCH --exclusive" not in text and "#SBATCH --ntasks-per-node=2" in text
    job = slurm.submit(script)
    states = slurm.wait(job, timeout=240)
    assert [s.state for s in states] == ["COMPLETED"], slurm.collect(tmp_path).summary()
    index = read_rows(tmp_path / "osu" / "index.csv")
    assert [(r["collective"], r["algorithm"], r["coll_tuned_id"]) for r in index] == [
        ("bcast", "default", "0"),
        ("bcast", "basic_linear", "1"),
        ("bcast", "chain", "2"),
        ("bcast", "pipeline", "3"),
        ("reduce", "default", "0"),
        ("reduce", "basic_linear", "1"),
        ("reduce", "chain", "2"),
        ("reduce", "pipeline", "3"),
    ]
    for r in index:
        assert r["nodelist"] == HOST and r["mapping"] == "core" and r["nprocs"] == "2"
        assert r["command"].startswith(
            f"OMPI_MCA_coll_tuned_{r['collective']}_algorithm={r['coll_tuned_id']} srun --mpi=pmix -n 2"
        )
        out = (tmp_path / "osu" / r["file"]).read_text()
        assert "# OSU MPI" in out
        assert re.search(r"^4\s+\d+\.\d\d$", out, re.M) and re.search(r"^8\s+\d+\.\d\d$", out, re.M)
    # Submitting again measures nothing twice.
    job2 = slurm.submit(script)
    slurm.wait(job2, timeout=240)
    log = (tmp_path / "logs" / f"mpilab-osu-seed_{job2}.out").read_text()
    assert log.count("skip (done)") == 8
    # The OSU files go into the results table, named as mpilab.measure.libalgs names the algorithms.
    assert slurm.collect_osu(tmp_path) == 8 * 2
    rows = read_rows(tmp_path / "results.csv")
    assert {(r["collective"], r["algorithm"]) for r in rows} >= {
        ("reduce", "basic_linear"),
        ("bcast", "chain"),
    }
    assert {r["platform"] for r in rows} == {"local/local"} and {r["launcher"] for r in rows} == {"srun"}
    assert {r["job"] for r in rows} == {job}  # the job that measured them (not job2)


COLLBENCH_OUTPUT = """# collbench 1
# library: Open MPI v4.1.4, package: Debian OpenMPI
# flavour: openmpi
# nprocs: 4
# host: node7
# date: 2026-11-22T23:50:00Z
# collective: allgather
# algorithm: ring
# datatype: char
# root: 0
# iterations: 100
# warmup: 10
# iterations_large: 20
# warmup_large: 2
# probe_bytes: 0
bytes,count,iterations,avg_us,min_us,max_us,maxrank_avg_us,maxrank_median_us,probe_us
32,32,100,1.234,1.100,1.400,1.500,1.450,
16384,16384,20,9.5,9.0,10.0,11.0,10.5,
"""


def test_point_rows_follow_the_results_contract(tmp_path):
    meta = {
        "flavour": "openmpi",
        "launcher": "srun",
        "platform": "orfeo/THIN",
        "mapping": "socket",
        "repetition": "3",
        "requested": "ring",
        "command": "srun ...",
    }
    rows = slurm.point_rows(COLLBENCH_OUTPUT, meta)
    assert list(rows[0]) == list(results.COLUMNS)
    assert rows[0]["platform"] == "orfeo/THIN" and rows[0]["mapping"] == "socket"
    # typed as every producer's rows (they once stayed strings here)
    assert (rows[0]["nprocs"], rows[0]["bytes"], rows[0]["warmup"]) == (4, 32, 10)
    assert (rows[1]["iterations"], rows[1]["warmup"]) == (20, 2)  # large messages
    assert (rows[0]["avg_us"], rows[0]["probe_us"], rows[0]["repetition"]) == (1.234, None, 3)
    assert rows[0]["forced"] == "yes" and rows[0]["library"].startswith("Open MPI v4.1.4")
    table = tmp_path / "results.csv"
    assert slurm.append_results(rows, table) == 2
    assert slurm.append_results(rows, table) == 0  # same keys: skipped
    other = [dict(r, repetition=4) for r in rows]
    assert slurm.append_results(other, table) == 2
    assert len(read_rows(table)) == 4


def test_collbench_output_without_table_is_a_parse_error():
    from mpilab.core.errors import ParseError

    with pytest.raises(ParseError, match="point.csv: line 2: expected header bytes,count,"):
        slurm.point_rows("# collbench 1\ncollbench: unknown algorithm 'rign'\n", {}, "point.csv")
    with pytest.raises(ParseError, match="point.csv: no table header"):
        slurm.point_rows("# collbench 1\n", {}, "point.csv")


# Last, so that the jobs above ran while this one waited for its time limit.
def test_timelimit_kill_then_resume_loses_nothing(timelimit_job):
    run, script, job, t0 = timelimit_job
    states = slurm.wait(job, timeout=200)
    assert [s.state for s in states] == ["TIMEOUT"], states
    report = slurm.collect(run)
    assert len(report.failed) == 1
    assert "killed at its time limit" in report.failed[0].reason
    before = read_rows(run / "results.csv")
    done = len(before) // 2
    assert 1 <= done < 16, f"{done} points finished before the kill"
    # Resubmit the same script: finished points are skipped, the rest measured, no cooldown.
    job2 = slurm.submit(script, sbatch_args=["--time=5"], env={"MPILAB_COOLDOWN": "0"})
    assert [s.state for s in slurm.wait(job2, timeout=200)] == ["COMPLETED"]
    after = read_rows(run / "results.csv")
    assert after[: len(before)] == before  # nothing finished was lost or redone
    reps = sorted(int(r["repetition"]) for r in after)
    assert reps == sorted(list(range(16)) * 2)  # every point exactly once
    log = (run / "logs" / f"mpilab-sweep_{job2}_0.out").read_text()
    assert log.count("skip (done)") == done


def test_collect_osu_names_algorithms_and_skips_known_rows(tmp_path):
    osu = tmp_path / "osu"
    osu.mkdir()
    entries = [
        ("bcast_chain_core_p24.txt", "bcast", "chain", 2, "bcast_np24_chain_core.txt"),
        ("reduce_linear_socket_p24.txt", "reduce", "linear", 1, "reduce_np24_pipeline_socket.txt"),
    ]
    with open(osu / "index.csv", "w") as f:
        f.write("file,collective,algorithm,coll_tuned_id,mapping,nprocs,nodelist,command\n")
        for name, coll, alg, tid, src in entries:
            shutil.copy(ROOT / "tests" / "data" / "osu" / src, osu / name)
            mapping = name.split("_")[2]
            f.write(f'{name},{coll},{alg},{tid},{mapping},24,"n[1-2]","srun -n 24 ..."\n')
    n = slurm.collect_osu(tmp_path, platform="orfeo/THIN")
    rows = read_rows(tmp_path / "results.csv")
    assert n == len(rows) > 0
    assert {(r["collective"], r["algorithm"], r["mapping"]) for r in rows} == {
        ("bcast", "chain", "core"),
        ("reduce", "basic_linear", "socket"),
    }
    assert {r["forced"] for r in rows} == {"unverified"} and {r["nprocs"] for r in rows} == {"24"}
    assert slurm.collect_osu(tmp_path, platform="orfeo/THIN") == 0
    with pytest.raises(UsageError, match="index.csv does not exist"):
        slurm.collect_osu(tmp_path / "nothing")


def test_cluster_answers_needs_a_controller(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no sinfo
    assert slurm.cluster_answers() is False
    fake = tmp_path / "sinfo"
    fake.write_text(
        "#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    (tmp_path / "sbatch").symlink_to(fake)
    assert slurm.cluster_answers() is False  # installed, no controller


def test_cluster_answers_fast_when_the_controller_port_is_closed(monkeypatch, tmp_path):
    """A slurm.conf whose controller refuses connections: False at once, without sinfo's retries."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=x\nSlurmctldHost=nohost(127.0.0.1)\nSlurmctldPort={port}\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    start = time.monotonic()
    assert slurm.jobs._controller_refuses() is True
    if shutil.which("sinfo"):
        assert slurm.cluster_answers() is False
    assert time.monotonic() - start < 2
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing.conf"))
    assert slurm.jobs._controller_refuses() is False  # no conf: sinfo decides


def test_cluster_answers_with_the_local_cluster(local_slurm):
    assert slurm.cluster_answers() is True


@pytest.mark.parametrize(
    "mappings, allocation",
    [
        ("core", "#SBATCH --distribution=block:block"),
        ("socket", "#SBATCH --distribution=block:cyclic"),
        ("node", "#SBATCH --distribution=cyclic:block"),
        ("core,socket", "#SBATCH --exclusive"),
    ],
)
def test_sweeps_place_ranks_as_the_srun_launcher(tmp_path, mappings, allocation):
    """Every step of a sweep runs with the srun launcher's placement options for its mapping;
    the job asks for its CPUs with the mapping's distribution (one mapping) or for whole nodes
    (several), so that the step can get the CPUs the launcher's srun would."""
    from mpilab.core.vocabulary import srun_placement
    from mpilab.measure import launch

    text = slurm.render("sweep", "orfeo", "THIN", run_dir=tmp_path, nodes=2, nprocs="2,4", mappings=mappings)
    lines = [ln.strip() for ln in text.splitlines()]
    assert allocation in lines
    assert sum(ln.startswith("#SBATCH --distribution=") for ln in lines) == (1 if "," not in mappings else 0)
    for m in ("core", "socket", "node"):
        opts = srun_placement(m)
        assert f"{m}) PLACEMENT=({' '.join(opts)}) ;;" in lines
        argv = launch.get_launcher("srun").command("collbench", [], 2, m).argv
        assert argv[argv.index("-n") + 2 :][:2] == opts
