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

#: ``mpirun.openmpi --map-by <mapping> --bind-to <object>``: there is no "node" binding
#: object, so a node-mapped rank is bound to one core of its node.
OPENMPI_BIND = {"core": "core", "socket": "socket", "node": "core"}
#: ``mpirun.mpich`` (hydra) options per mapping: hydra maps over hosts with ``-ppn 1``, it has
#: no ``-map-by node``.
MPICH_PLACEMENT = {"core": ("-bind-to", "core", "-map-by", "core"),
                   "socket": ("-bind-to", "socket", "-map-by", "socket"),
                   "node": ("-bind-to", "core", "-ppn", "1")}

#: ``srun --mpi=<plugin>`` of each real flavour (Open MPI speaks PMIx, MPICH PMI-2).
SRUN_MPI = {"openmpi": "pmix", "mpich": "pmi2"}
#: The plugins ``srun --mpi`` accepts here (``srun --mpi=list``).
SRUN_MPI_PLUGINS = ("pmix", "pmi2", "none")
#: ``srun --distribution=<over nodes>:<over the sockets of a node>`` per mapping, used by the
#: srun launcher and by every sbatch template alike.
SRUN_DISTRIBUTION = {"core": "block:block", "socket": "block:cyclic", "node": "cyclic:block"}
#: ``srun --cpu-bind`` per mapping.
SRUN_CPU_BIND = {"core": "cores", "socket": "sockets", "node": "cores"}


def check(kind, value, valid):
    """Return ``value`` if it is one of ``valid``; raise :class:`UsageError` naming both otherwise."""
    if value not in valid:
        raise one_of(kind, value, valid)
    return value
