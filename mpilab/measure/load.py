"""Background load on this machine, for measuring collectives on a busy node.

003_25a9e71ac18c5178.txt shows that other jobs' traffic changes which collective algorithm is
fastest. On one machine the ranks of a real run talk through shared memory, so the load that
matters is what competes with them: CPU time (``cpu`` hogs: busy loops) and memory bandwidth
(``memory`` hogs: copying a buffer much larger than the caches back and forth, the intra-node
counterpart of a busy network link).

Examples
--------
>>> from mpilab.measure import load
>>> with load.background(cpu=2) as hogs:      # doctest: +SKIP
...     rows = forcing.measure(launcher, "bcast", "binomial", 4, probe=8)
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

from mpilab.core.errors import UsageError

_CPU = "while True:\n    pass\n"
_MEMORY = (
    "import numpy as np\n"
    "a = np.ones({n} // 8); b = np.empty_like(a)\n"
    "while True:\n    np.copyto(b, a); np.copyto(a, b)\n"
)


@contextlib.contextmanager
def background(cpu=0, memory=0, cpus=None, memory_mib=256, settle=0.5):
    """Run CPU and memory-bandwidth hogs for the duration of a ``with`` block.

    With ``cpus``, this process and everything it starts in the block (the hogs, and the MPI
    ranks of a launcher made with ``bind=False``) share the same CPUs, so the load reaches the
    ranks whatever the size of the machine; without it the hogs go where the scheduler puts them.

    Parameters
    ----------
    cpu : int
        Busy-loop processes.
    memory : int
        Processes that copy a ``memory_mib`` MiB buffer back and forth without pause.
    cpus : int or set of int, optional
        Confine the block to this many CPUs (the first ones this process may use) or to this
        set of CPUs; the previous affinity is restored at the end.
    memory_mib : int
        Size of each memory hog's buffer (MiB; well above the caches).
    settle : float
        Seconds to wait after starting them, so the load is there when the block starts.

    Yields
    ------
    list of subprocess.Popen
        The hog processes (killed, with their process groups, when the block ends, also on
        an exception).
    """
    for name, v in (("cpu", cpu), ("memory", memory), ("memory_mib", memory_mib)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (name == "memory_mib" and v < 1):
            raise UsageError(f"bad {name} {v!r}; valid: an integer >= {1 if name == 'memory_mib' else 0}")
    code = [_CPU] * cpu + [_MEMORY.format(n=memory_mib << 20)] * memory
    saved = os.sched_getaffinity(0)
    if cpus is not None:
        allowed = sorted(saved)
        target = (
            set(allowed[:cpus]) if isinstance(cpus, int) and not isinstance(cpus, bool) else set(cpus) & saved
        )
        if not target or (isinstance(cpus, int) and not 1 <= cpus):
            raise UsageError(
                f"bad cpus {cpus!r}; valid: 1..{len(allowed)} or a set of the CPUs "
                f"this process may use ({', '.join(map(str, allowed))})"
            )
        os.sched_setaffinity(0, target)
    hogs = []
    try:
        for c in code:
            hogs.append(
                subprocess.Popen(
                    [sys.executable, "-c", c],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        time.sleep(settle if hogs else 0)
        dead = [h for h in hogs if h.poll() is not None]
        if dead:
            raise RuntimeError(f"{len(dead)} load process(es) exited at once (exit {dead[0].returncode})")
        yield hogs
    finally:
        for h in hogs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(h.pid, signal.SIGKILL)
            h.wait()
        os.sched_setaffinity(0, saved)
