"""nbgrader's Execute step for the course's grader/ (grader/nbgrader_config.py selects it).

nbgrader runs a submission's cells one after the other in one kernel. Two kinds of student code
make that go wrong, and :class:`GuardedExecute` handles both:

- a cell that outlives its time limit and does not stop when interrupted (it ignores SIGINT, or
  sits in C code), or that kills its kernel: nbgrader gives up on the whole notebook, so every
  cell scores 0, those that ran fine before it too. Here the kernel is restarted instead, the
  cell gets an error saying why, and the cells below run in the fresh kernel (most of them
  fail for want of the variables the lost kernel held: 0 for those cells, the ones above keep
  their points);
- a cell that prints without end: nbclient keeps every output message in memory until the cell
  ends. Here a cell's printed text is kept up to :data:`OUTPUT_CAP` characters and the rest is
  thrown away as it arrives (nbgrader's LimitOutput then cuts what is kept to its line limit).

It also starts the kernel confined (:class:`ConfinedKernel`), where the machine allows it
(:func:`mpilab.grade.sandbox.isolation`): as the unprivileged sandbox user, in new network,
mount, PID and IPC namespaces (only loopback up: MPI and ipyparallel still talk over 127.0.0.1;
nbgrader reaches the kernel over Unix sockets in a runtime directory of the run's own), under
the ``MPILAB_KERNEL_*`` limits (:data:`mpilab.grade.outcome.LIMIT_VARS`: a capped tmpfs for its
``/tmp``, ``/var/tmp`` and ``/dev/shm``, a cgroup capping its total memory and processes, a
file-size cap) and an address-space cap on every process (:data:`KERNEL_MEMORY_MB`). The notebook
can write its own directory only (``autograded/<student>/<lab>/``, a size-capped tmpfs owned by
the sandbox user while the kernel runs, copied back when it ends); the kit, the course (hidden
but for that directory: the gradebook, ``source/``, ``submitted/``, other students) and the rest
of the machine are read-only or hidden; it sees and signals no process but its own, so it
cannot touch nbgrader or the trusted grader. A cell that hits one of those limits gets a line
saying which. Without confinement (not root) the kernel runs as today, under the address-space
cap only.
"""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.paths import jupyter_runtime_dir
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Any, Bool, Integer

from mpilab.core.errors import UsageError
from mpilab.grade import outcome, sandbox, sandbox_init

#: Characters of printed text kept per cell by default (MPILAB_CELL_OUTPUT_CAP overrides).
OUTPUT_CAP = int(os.environ.get("MPILAB_CELL_OUTPUT_CAP", "1000000"))
#: Address-space limit (RLIMIT_AS) of the grading kernel and of each process it starts, MiB;
#: MPILAB_KERNEL_MEMORY_MB overrides, 0 for none. Above the sandbox's own limits (2 GiB per MPI
#: rank, 4 GiB per simulation), which may only lower it.
KERNEL_MEMORY_MB = int(os.environ.get("MPILAB_KERNEL_MEMORY_MB", "8192"))
#: Python names a kernel spec uses for "this interpreter" (jupyter_client swaps them for
#: sys.executable, which it cannot do once the command starts with the sandbox's).
_PYTHON_NAMES = {
    "python",
    f"python{sys.version_info[0]}",
    f"python{sys.version_info[0]}.{sys.version_info[1]}",
}


def confined_argv(argv, memory_mb=KERNEL_MEMORY_MB, network=False):
    """Wrap a kernel's command in the grading limits that need no set-up: the address-space
    cap, and (unless ``network``) nothing else; :class:`ConfinedKernel` confines a kernel fully.

    Parameters
    ----------
    argv : list of str
        The kernel's command (from its kernel spec).
    memory_mb : int
        Address-space limit of the kernel and of what it starts, MiB (0: none).
    network : bool
        Unused here (kept for callers); an unconfined kernel keeps the host network.

    Returns
    -------
    (list of str, bool)
        The wrapped command, and whether it runs without the host network (False).
    """
    if memory_mb < 0:
        raise UsageError(f"memory_mb must be 0 (no limit) or a positive number of MiB, got {memory_mb!r}")
    cmd = list(argv)
    if memory_mb:
        cmd = ["prlimit", f"--as={memory_mb * 2**20}", *cmd]
    return cmd, False


def hidden_from_kernels():
    """What a grading kernel does not see: what student programs do not
    (:func:`mpilab.grade.sandbox.hidden_from_programs`: the kit's ``solutions/`` and ``grader/``,
    the course root with its gradebook, ``source/``, ``submitted/`` and every student's
    directory), but for the kernel's own directory, which :class:`ConfinedKernel` binds back."""
    return sandbox.hidden_from_programs()


class ConfinedKernel:
    """The confinement of one notebook's grading kernel, for as long as the notebook runs.

    On creation: a tmpfs capped at ``MPILAB_KERNEL_DISK_MB`` over the notebook's directory
    ``own`` (a copy of it, owned by the sandbox user), a runtime directory of the sandbox
    user's for the connection file and the kernel's Unix sockets, and a
    :class:`~mpilab.grade.sandbox.Sandbox` (cgroup, watch pipe). :meth:`argv` wraps the kernel's
    command; restarts reuse all of it. :meth:`close` (after the kernel is gone) removes the
    cgroup, copies the directory's regular files and directories back and unmounts it.
    """

    def __init__(self, own, memory_mb=KERNEL_MEMORY_MB, network=False):
        self.limits = outcome.Limits.from_env("KERNEL")
        _, self.uid, self.gid, _ = sandbox.sandbox_user()
        self.own = os.path.realpath(own)
        os.makedirs(jupyter_runtime_dir(), exist_ok=True)
        self.runtime = tempfile.mkdtemp(prefix="mpilab-kernel-", dir=jupyter_runtime_dir())
        os.chown(self.runtime, self.uid, self.gid)
        self.connection_file = os.path.join(self.runtime, "kernel.json")
        self._real = os.open(self.own, os.O_RDONLY | os.O_DIRECTORY)
        self._mounted = False
        self.box = None
        # as root the directory is a capped tmpfs for the whole notebook; not root (a user
        # namespace) each start of the kernel works on a capped copy, copied back when it ends
        root = sandbox.host_root()
        try:
            if root:
                sandbox_init.tmpfs(
                    self.own,
                    size=self.limits.disk_mb << 20,
                    inodes=self.limits.files,
                    mode=0o700,
                    name="mpilab-own",
                )
                self._mounted = True
                os.chown(self.own, self.uid, self.gid)
                sandbox_init.copy_tree(f"/proc/self/fd/{self._real}", self.own, self.uid, self.gid)
            self.box = sandbox.Sandbox(
                self.limits,
                hide=hidden_from_kernels(),
                work=not root,
                copy_back="always",
                network=network,
                keep=[(self.own, True)] * root + [(self.runtime, True)],
                read=sandbox.kit_paths(),
                nest=False,
                own=[self.connection_file],
                address_space_mb=memory_mb,
                report=False,
            )
        except BaseException:
            self.close()
            raise

    def argv(self, argv):
        """The kernel's command, confined."""
        return self.box.argv(argv)

    @property
    def pass_fds(self):
        return self.box.pass_fds

    def limit_hit(self, before):
        """The limit the kernel hit since ``before`` (a :meth:`state`), or ""."""
        oom, pids, free_before = before
        now_oom, now_pids, free = self.state()
        if now_pids > pids:
            return self.limits.message("procs")
        if now_oom > oom:
            return self.limits.message("total_memory_mb", now_oom - oom)
        if free < 1 << 20 <= free_before:
            return self.limits.message("disk_mb", where="its own directory")
        return ""

    def state(self):
        """``(OOM kills, forks refused, free bytes of its directory)`` now."""
        oom, pids = self.box.cgroups.events() if self.box and self.box.cgroups else (0, 0)
        fs = os.statvfs(self.own)
        return oom, pids, fs.f_bavail * fs.f_frsize

    def close(self):
        """Undo it all, once the kernel is gone: whatever is left of it is killed first."""
        if self.box:
            self.box.close()
            self.box = None
        if self._mounted:
            try:
                sandbox_init.copy_tree(self.own, f"/proc/self/fd/{self._real}", plain=True)
            finally:
                if subprocess.run(["umount", self.own], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "--lazy", self.own], capture_output=True)
                self._mounted = False
        if self._real is not None:
            os.close(self._real)
            self._real = None
        shutil.rmtree(self.runtime, ignore_errors=True)


class _ConfinedKernelSpecs(KernelSpecManager):
    """The notebook's own kernel spec, its command wrapped by ``wrap``."""

    wrap = Any()

    def get_kernel_spec(self, kernel_name):
        spec = super().get_kernel_spec(kernel_name)
        argv = list(spec.argv)
        if argv and argv[0] in _PYTHON_NAMES:
            argv[0] = sys.executable
        spec.argv = self.wrap(argv)
        return spec


class GuardedExecute(Execute):
    """nbgrader's Execute, which confines the kernel where it can and survives a kernel that is
    stuck or dead and a cell that prints without end (see the module's description)."""

    output_cap = Integer(OUTPUT_CAP, help="Characters of stream output kept per cell.").tag(config=True)
    kernel_memory_mb = Integer(
        KERNEL_MEMORY_MB, help="Address-space limit of the kernel, MiB (0: none)."
    ).tag(config=True)
    kernel_network = Bool(False, help="Let the kernel keep the host network.").tag(config=True)
    confine_kernel = Bool(True, help="Confine the kernel where the machine allows it.").tag(config=True)

    _confined = None

    def preprocess(self, nb, resources=None, km=None):
        own = (resources or {}).get("metadata", {}).get("path") or os.getcwd()
        if self.confine_kernel and sandbox.isolation()[0]:
            self._confined = ConfinedKernel(own, self.kernel_memory_mb, self.kernel_network)
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if self._confined:
                self._confined.close()
                self._confined = None

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if self._confined:
            km.kernel_spec_manager = _ConfinedKernelSpecs(parent=km, wrap=self._confined.argv)
            km.transport = "ipc"
            km.ip = os.path.join(self._confined.runtime, "ipc")
            km.connection_file = self._confined.connection_file
            self.log.info(
                "kernel confined as %s, limits %s", sandbox.sandbox_user()[0], self._confined.limits
            )
        else:
            wrapper, _ = confined_argv([], self.kernel_memory_mb, self.kernel_network)
            km.kernel_spec_manager = _ConfinedKernelSpecs(parent=km, wrap=lambda argv: [*wrapper, *argv])
            self.log.info(
                "kernel limits: %s (not confined: %s)", " ".join(wrapper) or "none", sandbox.isolation()[1]
            )
        return km

    async def async_start_new_kernel(self, **kwargs):
        if self._confined:  # the pipe the sandbox's first process watches (restarts reuse it)
            kwargs["pass_fds"] = self._confined.pass_fds
        return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        self._printed = 0
        self._cut = False
        before = self._confined.state() if self._confined else None
        watchdog = asyncio.ensure_future(self._stop_at_process_cap(before)) if before else None
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except (CellTimeoutError, DeadKernelError) as exc:
            if isinstance(exc, DeadKernelError):
                why = "the kernel died while this cell ran (it crashed, or it hit its memory limit)"
            else:
                why = (
                    f"this cell ran past its time limit ({self._get_timeout(cell)} s) and did not "
                    "stop when interrupted"
                )
            limit = self._confined.limit_hit(before) if self._confined else ""
            if limit:
                why += f"; this notebook hit a limit of the grader: {limit}"
            self.log.error("cell %d: %s; restarting the kernel", cell_index, why)
            await ensure_async(self.km.restart_kernel(now=True))
            await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
            cell.outputs.append(
                new_output(
                    "error",
                    ename="KernelRestarted",
                    evalue=why,
                    traceback=[
                        f"KernelRestarted: {why}. The grader restarted the kernel: the cells "
                        "below ran in a fresh kernel, without this notebook's variables."
                    ],
                )
            )
            self.nb["cells"][cell_index] = cell
            return cell
        finally:
            if watchdog:
                watchdog.cancel()
            if self._confined and before is not None:
                limit = self._confined.limit_hit(before)
                if limit and not any(
                    "hit a limit of the grader" in str(o.get("evalue", "")) for o in cell.outputs
                ):
                    cell.outputs.append(
                        new_output("stream", name="stderr", text=f"[grader] this cell hit a limit: {limit}\n")
                    )

    async def _stop_at_process_cap(self, before):
        """Kill the kernel (and all it started) as soon as a fork fails at the process cap: a
        fork bomb would spin until the cell's time limit and, interrupted, go on in the cells
        below. The cell then fails as a dead kernel, saying why, and the kernel restarts."""
        while True:
            await asyncio.sleep(sandbox.POLL_S)
            if self._confined.state()[1] > before[1]:
                self.log.error("the kernel hit its process cap; stopping it")
                await ensure_async(self.km.signal_kernel(signal.SIGKILL))
                return

    # nbclient's execute_cell wraps its own async_execute_cell, not an override
    execute_cell = run_sync(async_execute_cell)

    _printed = 0
    _cut = False

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] == "stream":
            if self._cut:
                return None
            text = msg["content"].get("text", "")
            room = self.output_cap - self._printed
            self._printed += len(text)
            if len(text) > room:
                self._cut = True
                text = (
                    text[:room]
                    + f"\n[output cut at {self.output_cap} characters; the rest was thrown away]\n"
                )
                msg = {**msg, "content": {**msg["content"], "text": text}}
        return super().output(outs, msg, display_id, cell_index)
