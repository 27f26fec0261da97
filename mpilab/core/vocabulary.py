"""The MPI vocabulary of the kit, defined once: flavours, collectives, mappings, and for each
flavour its compiler and launcher, and for each launcher how a mapping places the ranks.

A mapping names the distance between consecutive ranks:

``core``
    fill the cores of a socket, then the next socket, then the next node;
``socket``
    deal the ranks of a node round-robin over its sockets;
``node``
    deal the ranks round-robin over the nodes.

Every launcher turns a mapping into its own options here, so ``--mapping socket`` means the
same placement under ``mpirun``, ``srun`` and an sbatch script.
"""

import os

from mpilab.core.errors import one_of

#: The three ways the kit builds and runs C: two real MPI libraries and SimGrid's simulator.
FLAVOURS = ("openmpi", "mpich", "smpi")
#: The flavours that run on real processors (and under SLURM).
REAL_FLAVOURS = ("openmpi", "mpich")
#: The collectives the drivers measure.
COLLECTIVES = ("allgather", "bcast", "reduce", "allreduce")
#: How ranks are placed (see the module's docstring).
MAPPINGS = ("core", "socket", "node")
#: The launchers :func:`mpilab.measure.launch.get_launcher` knows.
LAUNCHERS = ("openmpi", "mpich", "smpi", "srun", "apptainer")

#: The C compiler wrapper of each flavour (Debian's names; plain ``mpicc`` is Open MPI there).
COMPILERS = {"openmpi": "mpicc.openmpi", "mpich": "mpicc.mpich", "smpi": "smpicc"}
#: The launcher program of each flavour outside SLURM.
MPIRUN = {"openmpi": "mpirun.openmpi", "mpich": "mpirun.mpich", "smpi": "smpirun"}
#: Open MPI refuses to run as root without these.
OPENMPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
#: Open MPI 4.1's PMIx tries its munge security plugin first when libmunge is installed (Debian's
#: libpmix2 depends on it, for SLURM) and, when no munged answers, retries munge's socket for
#: about 2.3 s before it falls back: measured here, ``mpirun.openmpi -n 1`` of an empty program
#: takes 2.6 s with it and 0.33 s without. mpirun's own PMIx server and its ranks agree on the
#: uid-based "native" plugin instead. A PMIX_MCA_psec already in the environment wins.
OPENMPI_PMIX_ENV = {"PMIX_MCA_psec": "^munge"}


def openmpi_env(environ=None):
    """What an ``mpirun.openmpi`` launch adds to ``environ`` (default ``os.environ``): the root
    allowances when run as root, and :data:`OPENMPI_PMIX_ENV` unless the environment sets it."""
    environ = os.environ if environ is None else environ
    env = dict(OPENMPI_ROOT_ENV) if os.geteuid() == 0 else {}
    env.update({k: v for k, v in OPENMPI_PMIX_ENV.items() if k not in environ})
    return env


#: ``mpirun.openmpi --map-by <mapping> --bind-to <object>``: there is no "node" binding
#: object, so a node-mapped rank is bound to one core of its node.
OPENMPI_BIND = {"core": "core", "socket": "socket", "node": "core"}
#: ``mpirun.mpich`` (hydra) options per mapping: hydra maps over hosts with ``-ppn 1``, it has
#: no ``-map-by node``.
MPICH_PLACEMENT = {
    "core": ("-bind-to", "core", "-map-by", "core"),
    "socket": ("-bind-to", "socket", "-map-by", "socket"),
    "node": ("-bind-to", "core", "-ppn", "1"),
}

#: ``srun --mpi=<plugin>`` of each real flavour (Open MPI speaks PMIx, MPICH PMI-2).
SRUN_MPI = {"openmpi": "pmix", "mpich": "pmi2"}
#: The plugins ``srun --mpi`` accepts here (``srun --mpi=list``).
SRUN_MPI_PLUGINS = ("pmix", "pmi2", "none")
#: ``srun --distribution=<over nodes>:<over the sockets of a node>`` per mapping.
SRUN_DISTRIBUTION = {"core": "block:block", "socket": "block:cyclic", "node": "cyclic:block"}
#: ``srun --cpu-bind`` per mapping (a node-mapped rank is bound to a core, as under mpirun).
SRUN_CPU_BIND = {"core": "cores", "socket": "sockets", "node": "cores"}


def srun_placement(mapping):
    """srun's options that place the ranks of a step by ``mapping``.

    The srun launcher (:class:`mpilab.measure.launch.SrunLauncher`) and every sbatch template's
    ``srun`` use these, and a sweep job of one mapping also asks for its allocation with the
    same ``--distribution`` (``#SBATCH``): without it SLURM deals a job's CPUs round-robin over
    the sockets, and a ``core`` step would run on two sockets (docs/DEVELOPING.md section 4).
    """
    check("mapping", mapping, MAPPINGS)
    return [f"--distribution={SRUN_DISTRIBUTION[mapping]}", f"--cpu-bind={SRUN_CPU_BIND[mapping]}"]


def check(kind, value, valid):
    """Return ``value`` if it is one of ``valid``; raise :class:`UsageError` naming both otherwise."""
    if value not in valid:
        raise one_of(kind, value, valid)
    return value
