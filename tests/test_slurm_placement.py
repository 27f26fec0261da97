"""The same ``--mapping`` places ranks the same way under the srun launcher and under the sbatch
sweep template: checked on a real SLURM whose node has two sockets of two cores.

This machine has two cores on one socket, so its shared test cluster (``scripts/local-slurm.sh``,
``task/none``) cannot show a socket. The fixture starts a second, private cluster next to it
(its own directory, configuration and ports) whose node is *declared* as 2 sockets x 2 cores.
What is observable there is where the controller puts a job: ``scontrol show job -d`` lists the
job's ``CPU_IDs`` (0-1 on socket 0, 2-3 on socket 1). A rank cannot be bound to CPU 2 or 3 (the
machine has no such CPU: ``task/affinity`` refuses to lay the tasks out), so the binding
itself is not tested here, only the allocation both routes ask for and get.
"""

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from mpilab.cluster import slurm
from mpilab.core import results
from mpilab.core.paths import repo_root
from mpilab.core.vocabulary import SRUN_DISTRIBUTION
from mpilab.measure import launch

ROOT = repo_root()
HOST = socket.gethostname().split(".")[0]
DIR = Path(os.environ.get("MPILAB_TEST_PLACEMENT_DIR", "/var/lib/mpilab-slurm-placement"))
PORT = os.environ.get("MPILAB_TEST_PLACEMENT_PORT", "16817")
CLUSTER_ENV = {
    "MPILAB_SLURM_DIR": str(DIR),
    "MPILAB_SLURM_CONF": str(DIR / "slurm.conf"),
    "MPILAB_SLURM_PORT": PORT,
    "MPILAB_SLURM_CLUSTER": "mpilab-placement",
    "MPILAB_SLURM_PARTITION": "sockets",
    "MPILAB_SLURM_SOCKETS": "2",
    "MPILAB_SLURM_CORES_PER_SOCKET": "2",
    "MPILAB_SLURM_ACCOUNTING": "no",
}
#: The job's CPUs each mapping asks for on an idle 2 x 2 node: one socket, or one core on each.
EXPECTED = {"core": "0-1", "socket": "0,2"}
#: What a rank prints: the job's CPUs per node, as the templates' provenance records them.
WHERE = """#!/bin/sh
if [ "$SLURM_PROCID" = 0 ]; then
    cpus=$(scontrol show job -d "$SLURM_JOB_ID" \\
        | sed -n 's/.* Nodes=\\([^ ]*\\) CPU_IDs=\\([^ ]*\\).*/\\1:\\2/p' | tr '\\n' ' ' | sed 's/ $//')
    echo "cpus: $cpus"
fi
"""
PROFILE = """name = "placement"
description = "the private test cluster of tests/test_slurm_placement.py: 1 node, 2 sockets x 2 cores"
[partitions.sockets]
nodes = 1
sockets = 2
cores_per_socket = 2
max_time = "00:30:00"
[mpi.openmpi]
modules = []
srun_mpi = "pmix"
"""


def _script(action):
    return subprocess.run(
        [str(ROOT / "scripts" / "local-slurm.sh"), action],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ, **CLUSTER_ENV),
    )


@pytest.fixture(scope="module")
def two_socket_slurm():
    """A private single-node SLURM whose node is declared as 2 sockets x 2 cores; stopped after."""
    if not (shutil.which("slurmctld") or Path("/usr/sbin/slurmctld").exists()):
        pytest.skip("slurmctld is not installed (Debian: slurm-wlm munge)")
    proc = _script("start")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield CLUSTER_ENV["MPILAB_SLURM_CONF"]
    stop = _script("stop")
    assert stop.returncode == 0, stop.stdout + stop.stderr


def _cpus(text):
    lines = [ln for ln in text.splitlines() if ln.startswith("cpus: ")]
    assert len(lines) == 1, text
    return lines[0][len("cpus: ") :]


@pytest.mark.slow
@pytest.mark.parametrize("mapping", sorted(EXPECTED))
def test_srun_launcher_and_sweep_template_get_the_same_cpus(
    two_socket_slurm, built_flavour, tmp_path, monkeypatch, mapping
):
    monkeypatch.setenv("SLURM_CONF", two_socket_slurm)
    # The srun launcher, outside an allocation: its srun asks for the job itself.
    where = tmp_path / "where.sh"
    where.write_text(WHERE)
    where.chmod(0o755)
    lau = launch.get_launcher("srun", flavour="openmpi")
    by_launcher = _cpus(lau.run(where, nprocs=2, mapping=mapping, timeout=120).stdout)
    # The sweep template: a real collbench sweep at P = 2, one array task, on the same node.
    profile = tmp_path / "placement.toml"
    profile.write_text(PROFILE)
    run = tmp_path / "run"
    script = slurm.render_to_dir(
        "sweep",
        profile,
        "sockets",
        run,
        mappings=mapping,
        nprocs="2",
        algos="native",
        sizes="32:64",
        iters=2,
        warmup=1,
        time="5",
        collbench=built_flavour("openmpi") / "collbench",
    )
    assert f"#SBATCH --distribution={SRUN_DISTRIBUTION[mapping]}" in script.read_text()
    job = slurm.submit(script)
    states = slurm.wait(job, timeout=300)
    assert [s.state for s in states] == ["COMPLETED"], slurm.collect(run).summary()
    (prov,) = [slurm.read_kv(p) for p in (run / "provenance").glob("*.txt")]
    by_template = prov["cpus"]
    assert by_launcher == by_template == f"{HOST}:{EXPECTED[mapping]}", (by_launcher, by_template)
    rows = results.read_results(run / "results.csv")
    assert set(rows["mapping"]) == {mapping} and set(rows["nprocs"]) == {2} and len(rows) == 2
