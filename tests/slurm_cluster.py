"""A private multi-node SLURM for tests: ``scripts/local-slurm.sh`` with ``MPILAB_SLURM_NODES``.

Each node is a ``slurmd`` in a network and UTS namespace of its own (hostname ``node1``,
``node2``, ..., an address on a bridge of this machine); the controller runs here. The cluster is
private: its own slurm.conf, ports, state directory and subnet, never the shared single-node
cluster of ``/etc/slurm/slurm.conf`` that other tests use. Use it from a fixture::

    from slurm_cluster import multinode_cluster

    @pytest.fixture(scope="module")
    def cluster():
        with multinode_cluster("grading", nodes=3, cpus=2) as c:
            yield c          # c.conf, c.nodes, c.partition, c.env, c.kill_node(name), c.start()

and run SLURM's commands with ``env=c.env`` (or ``monkeypatch.setenv("SLURM_CONF", c.conf)``
for the kit's own :mod:`mpilab.cluster.slurm`). Jobs run as root, or as the user who submits
them (``runuser -u USER -- sbatch ...``), on nodes that share this machine's file systems.
"""

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "local-slurm.sh"


@dataclass
class Cluster:
    """A running private multi-node cluster (see the module's docstring)."""

    name: str
    conf: str  # its slurm.conf: SLURM_CONF for its clients
    nodes: list  # node names, node1 first
    addresses: dict  # node name -> its address
    partition: str
    cpus: int  # CPUs per node
    dir: Path  # state, spool and logs (log/slurmctld.log, log/slurmd-<node>.log, log/jobcomp.txt)
    script_env: dict = field(repr=False)  # what scripts/local-slurm.sh needs to find it

    @property
    def controller_address(self):
        """The controller's address, the bridge's on this machine: where the nodes reach it (and
        anything else that runs here, such as a course hub)."""
        conf = Path(self.conf).read_text()
        return re.search(r"^SlurmctldHost=[^(]*\(([^)]+)\)", conf, re.M).group(1)

    @property
    def env(self):
        """This process's environment with SLURM_CONF set to the cluster's."""
        return dict(os.environ, SLURM_CONF=self.conf)

    def script(self, *args, timeout=180):
        """Run ``scripts/local-slurm.sh ARGS`` for this cluster; fail the test if it fails."""
        proc = subprocess.run(
            [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=self.script_env
        )
        assert proc.returncode == 0, f"local-slurm.sh {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def start(self):
        """Start whatever is not running (a killed node comes back: ReturnToService=2)."""
        return self.script("start")

    def kill_node(self, node):
        """A node failure: SIGKILL its slurmd and every job process on it, at once."""
        return self.script("kill-node", node)

    def run(self, *argv, timeout=120, check=True):
        """Run a SLURM client command (sbatch, squeue, scontrol, ...) against this cluster."""
        proc = subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=self.env
        )
        if check:
            assert proc.returncode == 0, f"{' '.join(map(str, argv))}:\n{proc.stdout}\n{proc.stderr}"
        return proc


def _free_port():
    """A TCP port free here for slurmctld (the nodes' slurmd takes the next one in their own
    namespaces, where nothing else listens)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def have_tools():
    """Whether this machine can run the cluster: SLURM's daemons and iproute2, as root."""
    need = ("slurmctld", "slurmd", "ip", "nsenter", "unshare")
    missing = [t for t in need if not (shutil.which(t) or Path("/usr/sbin", t).exists())]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian: slurm-wlm munge iproute2 util-linux)"
    if os.geteuid() != 0:
        return "needs root (network namespaces, the daemons)"
    return ""


@contextlib.contextmanager
def multinode_cluster(name, nodes=3, cpus=2, partition="nodes", max_minutes=60, node_timeout=5):
    """Start a private cluster of ``nodes`` nodes with ``cpus`` CPUs each; stop it and remove its
    namespaces, bridge and state at the end. ``name`` tells clusters of different test modules
    apart (its ports and subnet are chosen free here). Skips the test where the tools are
    missing; fails when they are there and the cluster does not come up."""
    why = have_tools()
    if why:
        pytest.skip(why)
    port = _free_port()
    state = Path(f"/var/lib/mpilab-slurm-{name}-{port}")
    script_env = dict(
        os.environ,
        MPILAB_SLURM_DIR=str(state),
        MPILAB_SLURM_CONF=str(state / "slurm.conf"),
        MPILAB_SLURM_PORT=str(port),
        MPILAB_SLURM_CLUSTER=f"mpilab-{name}-{port}",
        MPILAB_SLURM_NODES=str(nodes),
        MPILAB_SLURM_CPUS=str(cpus),
        MPILAB_SLURM_PARTITION=partition,
        MPILAB_SLURM_MAXTIME=str(max_minutes),
        MPILAB_SLURM_NODE_TIMEOUT=str(node_timeout),
        MPILAB_SLURM_ACCOUNTING="no",
    )
    cluster = Cluster(
        name=name,
        conf=script_env["MPILAB_SLURM_CONF"],
        nodes=[],
        addresses={},
        partition=partition,
        cpus=cpus,
        dir=state,
        script_env=script_env,
    )
    try:
        cluster.start()
        for line in cluster.script("nodes").splitlines():
            node, address = line.split()[:2]
            cluster.nodes.append(node)
            cluster.addresses[node] = address
        yield cluster
    finally:
        proc = subprocess.run(
            [str(SCRIPT), "stop"], capture_output=True, text=True, timeout=180, env=script_env
        )
        if proc.returncode == 0:
            shutil.rmtree(state, ignore_errors=True)
        else:  # keep the logs of a cluster that would not stop
            print(f"local-slurm.sh stop failed; state kept in {state}:\n{proc.stdout}\n{proc.stderr}")


def wait_until(what, check, seconds, poll=0.5):
    """``check()``'s first true answer, asked every ``poll`` seconds; the test fails naming
    ``what`` when there is none within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s")
        time.sleep(poll)
