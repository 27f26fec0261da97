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

It also starts the kernel under limits (:func:`confined_argv`): an address-space cap on the
kernel and on every process it starts (:data:`KERNEL_MEMORY_MB`), and its own network namespace
with only loopback up where ``unshare --net`` works (:func:`mpilab.grade.sandbox.network_isolation`),
so a notebook reaches no other machine while MPI and ipyparallel still talk over 127.0.0.1
inside it. nbgrader then reaches the kernel over IPC (Unix sockets in Jupyter's runtime
directory), since a new network namespace has its own 127.0.0.1. In the same stroke the kernel
gets its own mount namespace (:func:`hidden_from_kernels`): the kit's solutions and the course's
source and submissions are hidden and the course root is read-only but for the kernel's own
directory, so a notebook cannot read the answers or write the gradebook.
"""

import os
import uuid

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.paths import jupyter_runtime_dir
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, List

from mpilab.core.errors import UsageError
from mpilab.core import paths
from mpilab.grade import sandbox

#: Characters of printed text kept per cell by default (MPILAB_CELL_OUTPUT_CAP overrides).
OUTPUT_CAP = int(os.environ.get("MPILAB_CELL_OUTPUT_CAP", "1000000"))
#: Address-space limit (RLIMIT_AS) of the grading kernel and of each process it starts, MiB;
#: MPILAB_KERNEL_MEMORY_MB overrides, 0 for none. Above the sandbox's own limits (2 GiB per MPI
#: rank, 4 GiB per simulation), which may only lower it.
KERNEL_MEMORY_MB = int(os.environ.get("MPILAB_KERNEL_MEMORY_MB", "8192"))


def confined_argv(argv, memory_mb=KERNEL_MEMORY_MB, network=False):
    """Wrap a kernel's command in the grading limits.

    Parameters
    ----------
    argv : list of str
        The kernel's command (from its kernel spec).
    memory_mb : int
        Address-space limit of the kernel and of what it starts, MiB (0: none).
    network : bool
        Keep the host network (default: a new network namespace with loopback up, when
        :func:`mpilab.grade.sandbox.network_isolation` says the machine allows it).

    Returns
    -------
    (list of str, bool)
        The wrapped command, and whether it runs without the host network.
    """
    if memory_mb < 0:
        raise UsageError(f"memory_mb must be 0 (no limit) or a positive number of MiB, got {memory_mb!r}")
    cmd = list(argv)
    if memory_mb:
        cmd = ["prlimit", f"--as={memory_mb * 2**20}", *cmd]
    isolated = False if network else sandbox.network_isolation()[0]
    if isolated:
        cmd, env = sandbox.confine(cmd, **hidden_from_kernels())
        # the kernel spec's argv is all a KernelSpecManager passes on: the settings ride in it
        cmd = ["env", *(f"{k}={v}" for k, v in env.items()), *cmd]
    return cmd, isolated


def hidden_from_kernels():
    """``confine`` arguments of a grading kernel: the kit's ``solutions/`` and the course's
    ``source/`` (hidden tests) and ``submitted/`` (everyone's files) hidden, the course root
    (``$MPILAB_COURSE_ROOT``) read-only but for the kernel's own directory, so a notebook can
    neither read the answers nor touch the gradebook or another student's files."""
    course = os.environ.get(sandbox.COURSE_ENV, "")
    hide = [paths.repo_root() / "solutions"]
    if course:
        hide += [os.path.join(course, "source"), os.path.join(course, "submitted")]
    return {"hide": [str(d) for d in hide if os.path.isdir(d)], "readonly": course or None}


class _ConfinedKernelSpecs(KernelSpecManager):
    """The notebook's own kernel spec, its command wrapped by :func:`confined_argv`."""

    wrapper = List()

    def get_kernel_spec(self, kernel_name):
        spec = super().get_kernel_spec(kernel_name)
        spec.argv = [*self.wrapper, *spec.argv]
        return spec


class GuardedExecute(Execute):
    """nbgrader's Execute, which survives a kernel that is stuck or dead and a cell that prints
    without end (see the module's description)."""

    output_cap = Integer(OUTPUT_CAP, help="Characters of stream output kept per cell.").tag(config=True)
    kernel_memory_mb = Integer(KERNEL_MEMORY_MB, help="Address-space limit of the kernel, MiB (0: none).").tag(
        config=True)
    kernel_network = Bool(False, help="Let the kernel keep the host network.").tag(config=True)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        wrapper, isolated = confined_argv([], self.kernel_memory_mb, self.kernel_network)
        km.kernel_spec_manager = _ConfinedKernelSpecs(parent=km, wrapper=wrapper)
        if isolated:
            os.makedirs(jupyter_runtime_dir(), exist_ok=True)
            km.transport = "ipc"
            km.ip = os.path.join(jupyter_runtime_dir(), f"mpilab-grading-{uuid.uuid4().hex[:12]}")
        self.log.info("kernel limits: %s", " ".join(wrapper) or "none")
        return km

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        self._printed = 0
        self._cut = False
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except (CellTimeoutError, DeadKernelError) as exc:
            if isinstance(exc, DeadKernelError):
                why = "the kernel died while this cell ran (it crashed, or it hit its memory limit)"
            else:
                why = (f"this cell ran past its time limit ({self._get_timeout(cell)} s) and did not "
                       "stop when interrupted")
            self.log.error("cell %d: %s; restarting the kernel", cell_index, why)
            await ensure_async(self.km.restart_kernel(now=True))
            await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
            cell.outputs.append(new_output(
                "error", ename="KernelRestarted", evalue=why,
                traceback=[f"KernelRestarted: {why}. The grader restarted the kernel: the cells "
                           "below ran in a fresh kernel, without this notebook's variables."]))
            self.nb["cells"][cell_index] = cell
            return cell

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
                text = text[:room] + f"\n[output cut at {self.output_cap} characters; the rest was thrown away]\n"
                msg = {**msg, "content": {**msg["content"], "text": text}}
        return super().output(outs, msg, display_id, cell_index)
