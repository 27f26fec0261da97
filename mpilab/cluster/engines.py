"""ipyparallel clusters whose engines are MPI ranks, for the notebooks.

An engine is a Python kernel; started by ``mpirun``, the engines of one cluster are the ranks of
one ``MPI_COMM_WORLD``, and a notebook drives them with ``%%px`` cells (mpi4py inside):

>>> cluster = mpi_cluster(n=4)                         # doctest: +SKIP
>>> rc = cluster.start_and_connect_sync()              # doctest: +SKIP
>>> rc.activate()                                      # doctest: +SKIP
>>> # %%px  from mpi4py import MPI; MPI.COMM_WORLD.Get_rank()
>>> cluster.stop_cluster_sync()                        # doctest: +SKIP

mpi4py loads one MPI library (the one it was compiled against; a PyPI wheel of mpi4py 4 picks
one at import), so the engines must be started by that MPI's ``mpirun`` (under the other one
every engine would be a rank 0 of its own, a "singleton"). :func:`mpi4py_flavour` asks which
one it is and :func:`mpi_cluster` uses its launcher,
with the settings this kit always needs for Open MPI (running as root, more ranks than cores).
"""

import functools
import os
import sys

from mpilab.core import process
from mpilab.core.errors import ToolMissing, UsageError
from mpilab.core.vocabulary import MPIRUN, REAL_FLAVOURS, check, openmpi_env

#: Extra mpirun arguments per flavour; Open MPI needs --oversubscribe past the cores.
MPIRUN_ARGS = {"openmpi": ["--oversubscribe"], "mpich": []}


@functools.cache
def mpi4py_flavour(python=sys.executable):
    """Which MPI library this Python's mpi4py loads: ``"openmpi"`` or ``"mpich"``.

    Asked in a separate process, so that the notebook's own kernel does not start MPI.

    Raises
    ------
    ToolMissing
        mpi4py is not installed, or its MPI is neither Open MPI nor MPICH.
    """
    code = "from mpi4py import MPI; print(MPI.Get_library_version())"
    proc = process.run([python, "-c", code], timeout=60, env={**os.environ, **openmpi_env()})
    if proc.timed_out:
        raise ToolMissing("mpi4py did not answer within 60 s (is its MPI installed?)")
    if proc.returncode != 0:
        raise ToolMissing(
            f"mpi4py cannot start in {python}: {proc.stderr.strip()[-500:]}; "
            "install it with: pip install -e '.[lab]'"
        )
    version = proc.stdout
    if "Open MPI" in version:
        return "openmpi"
    if "MPICH" in version:
        return "mpich"
    raise ToolMissing(f"mpi4py runs on an MPI this kit does not launch: {version.strip()[:200]}")


def mpi_cluster(n=4, flavour=None, **kwargs):
    """An ipyparallel cluster of ``n`` engines started as the ranks of one ``mpirun``.

    Parameters
    ----------
    n : int
        Number of engines (MPI ranks); more than the cores is allowed (slower).
    flavour : {"openmpi", "mpich"}, optional
        The MPI whose launcher starts the engines (default: the one mpi4py loads;
        another one is refused, because its engines would not share one MPI_COMM_WORLD).
    **kwargs
        Passed to :class:`ipyparallel.Cluster` (e.g. ``log_level``).

    Returns
    -------
    ipyparallel.Cluster
        Not started yet: ``rc = cluster.start_and_connect_sync()``, and
        ``cluster.stop_cluster_sync()`` when done.
    """
    try:  # an optional dependency (the 'lab' extra): say how to get it when it is missing
        import ipyparallel as ipp
    except ImportError:
        raise ToolMissing("ipyparallel is not installed; install it with: pip install -e '.[lab]'") from None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise UsageError(f"bad number of engines {n!r}; valid: an integer >= 1")
    built = mpi4py_flavour()
    flavour = flavour or built
    check("flavour for MPI engines", flavour, REAL_FLAVOURS)
    if flavour != built:
        raise UsageError(
            f"mpi4py here runs on {built}, so the engines must be started by "
            f"{MPIRUN[built]}, not {MPIRUN[flavour]} (they would all be rank 0); "
            f"use flavour={built!r}"
        )
    # ERROR: stopping the engines ends mpirun with a non-zero status, which ipyparallel would
    # answer with every engine's log at WARNING level.
    kwargs.setdefault("log_level", 40)
    cluster = ipp.Cluster(engines="mpi", n=n, **kwargs)
    cluster.config.MPILauncher.mpi_cmd = [MPIRUN[flavour]]
    cluster.config.MPILauncher.mpi_args = list(MPIRUN_ARGS[flavour])
    # Open MPI refuses root without it (harmless otherwise), and starts faster without munge
    cluster.config.MPILauncher.environment = openmpi_env()
    return cluster


def _engine_rank():
    # runs on an engine; importing mpi4py at the top of this module would start MPI in the kernel
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def pull(rc, *names):
    """What the engines hold: their MPI ranks and the named variables, one entry per engine.

    Parameters
    ----------
    rc : ipyparallel.Client
        The client of the engines (``cluster.start_and_connect_sync()``).
    *names : str
        Variables to read on every engine (e.g. numpy arrays a ``%%px`` cell made).

    Returns
    -------
    dict
        ``{"rank": [r0, r1, ...], name: [value on engine 0, ...], ...}``, in the engines' order.

    Raises
    ------
    UsageError
        When a variable is missing on an engine (run the ``%%px`` cells first).
    """
    view = rc[:]
    try:
        out = {"rank": list(view.apply_sync(_engine_rank))}
        for name in names:
            out[name] = list(view.pull(name, block=True))
    except Exception as exc:  # ipyparallel wraps the engines' NameError in its own errors
        detail = " ".join(str(exc).split())[:300]
        raise UsageError(
            f"could not read {', '.join(map(repr, names))} from the engines "
            f"({type(exc).__name__}: {detail}); run the %%px cells above first"
        ) from None
    return out
