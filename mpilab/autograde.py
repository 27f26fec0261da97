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
"""

import os

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Integer

#: Characters of printed text kept per cell by default (MPILAB_CELL_OUTPUT_CAP overrides).
OUTPUT_CAP = int(os.environ.get("MPILAB_CELL_OUTPUT_CAP", "1000000"))


class GuardedExecute(Execute):
    """nbgrader's Execute, which survives a kernel that is stuck or dead and a cell that prints
    without end (see the module's description)."""

    output_cap = Integer(OUTPUT_CAP, help="Characters of stream output kept per cell.").tag(config=True)

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
