"""The MPI libraries' own collective algorithms, named once, and how to force each one.

One table, :data:`TABLE`, maps (collective, kit name) to the way each back-end forces it:

- Open MPI 4.1 (coll/tuned): ``coll_tuned_use_dynamic_rules=1`` **and**
  ``coll_tuned_<coll>_algorithm=<id>`` (without the first the second is ignored silently),
  optionally ``coll_tuned_<coll>_algorithm_segmentsize``. Ids checked on this machine with
  ``ompi_info --param coll tuned --level 9`` (Open MPI 4.1.4).
- MPICH 4.0: ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<name>`` with
  ``MPIR_CVAR_DEVICE_COLLECTIVES=none`` (so the ch4 device does not pick its own) and
  ``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` (an inapplicable choice fails instead of silently
  running another algorithm).
- SimGrid 3.32 SMPI: ``--cfg=smpi/<coll>:<name>``; names checked against the list smpirun
  prints for an unknown name. Where SimGrid has no faithful copy of Open MPI's algorithm, the
  column names the kit's C clone instead, ``kit:<name>`` (collbench runs it, given Open MPI's own
  ``OMPI_MCA_coll_tuned_<coll>_algorithm_segmentsize`` and ``_chain_fanout``): Open MPI's chain
  and pipeline, bcast and reduce (``c_reference/bcast/ompi_*.c``, ``c_reference/reduce/ompi_*.c``).

``None`` in a column means the library has no such algorithm: :func:`settings` then raises a
:class:`~mpilab.core.errors.UsageError` saying which back-ends do have it.

Names. A library algorithm is named by the kit's name for it (``chain``, ``pipeline``, ...).
Where that name is also one of the kit's own C algorithms of the same collective
(``c_reference/registry.c``: allgather ``ring`` and ``bruck``), the library's is spelled with the
prefix ``lib:`` (``lib:ring``, ``lib:bruck``) everywhere: in sweeps, in the results table's
``algorithm`` column, in decision tables. ``ring`` alone always means the kit's code. Any library
algorithm may be written with the prefix (``lib:pipeline`` is ``pipeline``); :func:`canonical`
gives the one spelling the kit stores.

Notes on near-equivalents that the table deliberately does *not* pretend are equal:
Open MPI's bcast ``chain`` is a chain with fanout ``coll_tuned_bcast_algorithm_chain_fanout``
(4 by default), ``pipeline`` is a single chain (fanout 1) cut into segments. SimGrid 3.32 has no
bcast chain, its reduce ``ompi_chain`` has p/2 chains and 64 KiB segments, and its
``ompi_pipeline`` algorithms choose their own segment sizes (bcast 16 to 128 KiB, reduce 1 to 64 KiB) from P
and the size instead of the one Open MPI is given: under SMPI the kit runs its clones of the four
(``kit:``), with the segment size and fan-out Open MPI would get.

Segments. Open MPI cuts a message into segments of ``coll_tuned_<coll>_algorithm_segmentsize``
bytes, and **0, its default, means no segmentation** (the parameter's own help text in
``coll_tuned_bcast_decision.c``; ``COLL_BASE_COMPUTED_SEGCOUNT`` in ``coll_base_functions.h``
keeps the whole count as one segment): a forced ``pipeline`` with no segment size, as seed 000
forced it, is one chain that forwards the whole message P - 1 times. The kit forces Open MPI's
segmented algorithms with :attr:`LibAlgorithm.ompi_segsize` bytes (8 KiB: the kit's choice, not
Open MPI's). SimGrid's own copies take no segment size: each picks its own from P and the message
size, with the constants of the Open MPI 1.x decision functions they were copied from
(:func:`smpi_segment`); that is why SMPI runs the kit's clones instead. "pipeline" still names
three algorithms across the kit's sources and the seeds: name it by its segments
(:func:`describe`) wherever two of them meet.

SMPI's ``ompi_split_bintree`` (bcast ``split_binary_tree``) is "not available" in the kit: in
SimGrid 3.32 at P=48 on orfeo-thin it delivered wrong data (8 bytes: rank 1 got -1) or aborted
in its SMP_linear fallback (1 KiB..16 KiB), found by collbench --check.
SMPI's ``SMP_binary`` is not offered as bcast ``binary_tree``: it is SimGrid's SMP-aware tree
(a binary tree between nodes, another one inside each), not Open MPI's binary tree, and a curve
measured with it under Open MPI's name compared two different algorithms; SimGrid 3.32 has no
port of Open MPI's binary-tree broadcast, so ``binary_tree`` is Open MPI's only.
MPICH's ``smp`` algorithms are left out: with ``MPIR_CVAR_DEVICE_COLLECTIVES=none`` MPICH 4.0.2
hung in bcast ``smp`` at P=3 on one node (killed after 300 s), so the kit does not offer them.
SMPI's reduce ``rab`` (reduce ``rabenseifner``) is "not available" too: SimGrid 3.32 aborts in it
on ``MPI_CHAR``, the datatype of every sweep (it runs with ``MPI_INT``).
"""

from dataclasses import dataclass, field

from mpilab.core.errors import UsageError, one_of
from mpilab.core.vocabulary import COLLECTIVES, FLAVOURS


@dataclass(frozen=True)
class LibAlgorithm:
    """One library algorithm of one collective and how each back-end forces it.

    Attributes
    ----------
    collective, name : str
        The collective and the kit's name of the algorithm.
    ompi_id : int or None
        Open MPI 4.1 coll/tuned id (``None``: not available).
    ompi_segsize : int
        Segment size in bytes the kit gives Open MPI when it forces this algorithm (0: none given,
        so Open MPI's default, 0 = no segmentation).
    mpich : str or None
        Value of ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` (``None``: not available).
    smpi : str or None
        SMPI algorithm name for ``--cfg=smpi/<coll>:<name>`` (``None``: not available).
    description : str
        One line for ``--help`` and tables.
    """

    collective: str
    name: str
    ompi_id: object
    mpich: object
    smpi: object
    description: str
    ompi_segsize: int = 0

    def available(self, flavour):
        """Return True when ``flavour`` has this algorithm."""
        check_flavour(flavour)
        return {"openmpi": self.ompi_id, "mpich": self.mpich, "smpi": self.smpi}[flavour] is not None


def _t(coll, rows):
    return {r[0]: LibAlgorithm(coll, *r) for r in rows}


# (name, Open MPI id, MPICH CVAR value, SMPI name, description[, Open MPI segment size])
TABLE = {
    "bcast": _t(
        "bcast",
        [
            ("default", 0, "auto", "default", "the library's own decision rules"),
            ("basic_linear", 1, None, "flattree", "root sends to every rank in turn"),
            ("chain", 2, None, "kit:ompi_chain", "root feeds fanout chains (Open MPI: 4 chains by default)"),
            (
                "pipeline",
                3,
                None,
                "kit:ompi_pipeline",
                "one chain, message cut into segments (Open MPI: 8 KiB, the kit's choice)",
                8192,
            ),
            ("split_binary_tree", 4, None, None, "two halves down a binary tree, then swap"),
            ("binary_tree", 5, None, None, "binary tree, two children per rank"),
            ("binomial", 6, "binomial", "binomial_tree", "binomial tree, log2(p) rounds"),
            ("knomial", 7, None, None, "k-nomial tree (radix 4)"),
            (
                "scatter_allgather",
                8,
                "scatter_recursive_doubling_allgather",
                "scatter_rdb_allgather",
                "scatter then recursive-doubling allgather",
            ),
            (
                "scatter_allgather_ring",
                9,
                "scatter_ring_allgather",
                "scatter_LR_allgather",
                "scatter then ring allgather",
            ),
        ],
    ),
    "reduce": _t(
        "reduce",
        [
            ("default", 0, "auto", "default", "the library's own decision rules"),
            ("basic_linear", 1, None, "ompi_basic_linear", "root receives from every rank in turn"),
            ("chain", 2, None, "kit:ompi_chain", "fanout chains towards the root (Open MPI: 4 chains)"),
            (
                "pipeline",
                3,
                None,
                "kit:ompi_pipeline",
                "one chain, message cut into segments (Open MPI: 8 KiB, the kit's choice)",
                8192,
            ),
            ("binary", 4, None, "ompi_binary", "binary tree"),
            ("binomial", 5, "binomial", "ompi_binomial", "binomial tree"),
            ("in_order_binary", 6, None, "ompi_in_order_binary", "binary tree keeping operand order"),
            ("rabenseifner", 7, "reduce_scatter_gather", None, "reduce-scatter then gather"),
        ],
    ),
    "allreduce": _t(
        "allreduce",
        [
            ("default", 0, "auto", "default", "the library's own decision rules"),
            ("basic_linear", 1, None, None, "reduce to 0 then broadcast, linear"),
            ("nonoverlapping", 2, None, "redbcast", "reduce then bcast"),
            ("recursive_doubling", 3, "recursive_doubling", "rdb", "recursive doubling"),
            ("ring", 4, None, "lr", "ring reduce-scatter + allgather"),
            ("segmented_ring", 5, None, "ompi_ring_segmented", "ring in phases of s-byte pieces", 8192),
            ("rabenseifner", 6, "reduce_scatter_allgather", "rab_rdb", "reduce-scatter then allgather"),
            ("smp", None, None, "smp_binomial", "intra-node then inter-node"),
        ],
    ),
    "allgather": _t(
        "allgather",
        [
            ("default", 0, "auto", "default", "the library's own decision rules"),
            ("linear", 1, None, "GB", "gather to 0 then broadcast"),
            (
                "lib:bruck",
                2,
                "brucks",
                "bruck",
                "Bruck's log(p) rounds (the library's; 'bruck' is the kit's)",
            ),
            (
                "recursive_doubling",
                3,
                "recursive_doubling",
                "rdb",
                "recursive doubling (MPICH: p power of two)",
            ),
            (
                "lib:ring",
                4,
                "ring",
                "NTSLR",
                "ring: each block passes from neighbour to neighbour (the library's; 'ring' is the kit's; "
                "on SMPI SimGrid's NTSLR, because SimGrid's 'ring' sends each block straight to its "
                "destination)",
            ),
            ("neighbor", 5, None, "ompi_neighborexchange", "neighbour exchange (even p)"),
            ("two_proc", 6, None, None, "two processes only"),
        ],
    ),
}


def check_flavour(flavour):
    """Raise a UsageError unless ``flavour`` is one of :data:`FLAVOURS`."""
    if flavour not in FLAVOURS:
        raise one_of("flavour", flavour, FLAVOURS)


PREFIX = "lib:"
#: An SMPI column that names the kit's clone of the algorithm (see the module's docstring).
KIT_PREFIX = "kit:"


def canonical(collective, name):
    """The stored spelling of library algorithm ``name``: ``lib:pipeline`` -> ``pipeline``,
    ``lib:ring`` -> ``lib:ring`` (allgather ``ring`` is also a kit algorithm).

    Raises
    ------
    UsageError
        For an unknown collective or algorithm, listing the valid ones; a kit name that the
        library also has (``ring``) is told to use ``lib:ring``.
    """
    if collective not in TABLE:
        raise one_of("collective", collective, COLLECTIVES)
    algs = TABLE[collective]
    name = str(name)
    if name in algs:
        return name
    if name.startswith(PREFIX) and name[len(PREFIX) :] in algs:
        return name[len(PREFIX) :]
    if PREFIX + name in algs:
        raise UsageError(
            f"{collective} algorithm {name!r} is the kit's own C algorithm "
            f"(c_reference), not a library one; the library's is {PREFIX + name!r}"
        )
    raise one_of(f"{collective} library algorithm", name, algs)


def is_library(collective, name):
    """True when ``name`` (with or without ``lib:``) names a library algorithm of ``collective``."""
    try:
        canonical(collective, name)
    except UsageError:
        return False
    return True


def lookup(collective, name):
    """Return the :class:`LibAlgorithm` named ``name`` (see :func:`canonical`) for ``collective``.

    Raises
    ------
    UsageError
        For an unknown collective or algorithm, listing the valid ones.
    """
    name = canonical(collective, name)
    return TABLE[collective][name]


def names(collective, flavour=None):
    """List the kit names of ``collective``'s algorithms (available on ``flavour`` if given)."""
    if collective not in TABLE:
        raise one_of("collective", collective, COLLECTIVES)
    return [n for n, a in TABLE[collective].items() if flavour is None or a.available(flavour)]


@dataclass
class Settings:
    """How to launch with one algorithm forced.

    Attributes
    ----------
    env : dict
        Environment variables (Open MPI ``OMPI_MCA_*``, MPICH ``MPIR_CVAR_*``).
    mca : dict
        Open MPI MCA parameters (the same as ``env``, for ``--mca k v`` on a command line).
    args : list of str
        Extra program arguments (SMPI ``--cfg=...``).
    forcing : bool
        False for ``default`` (nothing is forced; a row must never say forced=yes).
    kit : str or None
        SMPI: the kit's C clone that collbench runs instead of the library's call (its
        ``--algo``), given ``env``, Open MPI's own variables.
    """

    env: dict = field(default_factory=dict)
    mca: dict = field(default_factory=dict)
    args: list = field(default_factory=list)
    forcing: bool = True
    kit: str | None = None


def settings(flavour, collective, name, segsize=None, chain_fanout=None):
    """Return the :class:`Settings` that force algorithm ``name`` of ``collective`` on ``flavour``.

    Parameters
    ----------
    flavour : {'openmpi', 'mpich', 'smpi'}
    collective : {'bcast', 'reduce', 'allreduce', 'allgather'}
    name : str
        The kit's algorithm name (``default`` forces nothing).
    segsize : int, optional
        Open MPI (and the kit's clones of its algorithms under SMPI): the segment size in bytes
        (``coll_tuned_<coll>_algorithm_segmentsize``; 0 = no segmenting) instead of the table's.
    chain_fanout : int, optional
        Open MPI (and the clones): the number of chains
        (``coll_tuned_<coll>_algorithm_chain_fanout``, 4 by default) of the chain algorithms.

    Raises
    ------
    UsageError
        Unknown flavour/collective/name, or an algorithm the flavour does not have (the message
        names the back-ends that have it and the ones this flavour offers instead); a segment
        size or fan-out for another flavour than Open MPI, or a negative one.
    """
    check_flavour(flavour)
    alg = lookup(collective, name)
    name = alg.name
    smpi_name = alg.smpi or ""
    clone = smpi_name[len(KIT_PREFIX) :] if flavour == "smpi" and smpi_name.startswith(KIT_PREFIX) else None
    for what, v, low in (("segsize", segsize, 0), ("chain_fanout", chain_fanout, 1)):
        if v is None:
            continue
        if not (flavour == "openmpi" or clone) or name == "default":
            raise UsageError(
                f"{what} {v!r} only applies to an algorithm forced on openmpi "
                f"(coll_tuned_{collective}_algorithm_{what.replace('segsize', 'segmentsize')}) "
                "or to the kit's clones of Open MPI's chain and pipeline on smpi"
            )
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise UsageError(f"bad {what} {v!r}; valid: an integer >= {low}")
    if not alg.available(flavour):
        others = [f for f in FLAVOURS if alg.available(f)]
        raise UsageError(
            f"{collective} algorithm {name!r} is not available on {flavour} "
            f"(available on: {', '.join(others) or 'none'}); "
            f"{flavour} offers: {', '.join(names(collective, flavour))}"
        )
    if name == "default":
        return Settings(forcing=False)
    if flavour == "openmpi" or clone:
        mca = {"coll_tuned_use_dynamic_rules": "1", f"coll_tuned_{collective}_algorithm": str(alg.ompi_id)}
        seg = alg.ompi_segsize if segsize is None else segsize
        if seg or segsize is not None:
            mca[f"coll_tuned_{collective}_algorithm_segmentsize"] = str(seg)
        if chain_fanout is not None:
            mca[f"coll_tuned_{collective}_algorithm_chain_fanout"] = str(chain_fanout)
        return Settings(env={f"OMPI_MCA_{k}": v for k, v in mca.items()}, mca=mca, kit=clone)
    if flavour == "mpich":
        env = {
            f"MPIR_CVAR_{collective.upper()}_INTRA_ALGORITHM": alg.mpich,
            "MPIR_CVAR_DEVICE_COLLECTIVES": "none",
            "MPIR_CVAR_COLLECTIVE_FALLBACK": "error",
        }
        return Settings(env=env)
    return Settings(args=[f"--cfg=smpi/{collective}:{alg.smpi}"])


#: Where SimGrid 3.32 decides the segments of its copies of Open MPI's algorithms.
SMPI_SEGMENT_SOURCES = {
    ("bcast", "pipeline"): "src/smpi/colls/bcast/bcast-ompi-pipeline.cpp",
    ("reduce", "chain"): "src/smpi/colls/reduce/reduce-ompi.cpp (reduce__ompi_chain)",
    ("reduce", "pipeline"): "src/smpi/colls/reduce/reduce-ompi.cpp (reduce__ompi_pipeline)",
    ("reduce", "binary"): "src/smpi/colls/reduce/reduce-ompi.cpp (reduce__ompi_binary)",
    ("reduce", "binomial"): "src/smpi/colls/reduce/reduce-ompi.cpp (reduce__ompi_binomial)",
    ("allreduce", "segmented_ring"): "src/smpi/colls/allreduce/allreduce-ompi-ring-segmented.cpp",
}

#: SimGrid 3.32's rules, in words (for tables and notebooks): (short, in full); n is the
#: message in bytes.
SMPI_SEGMENT_RULES = {
    ("bcast", "pipeline"): (
        "16 or 128 KiB",
        "128 KiB segments, but 16 KiB where 2.11 + 1.61e-6 n <= P < 8.79 + 3.21e-6 n (up to 1 MiB: "
        "P = 3..8, and P = 10..12 from 512 KiB; 64 KiB appears only above 1.2 MB)",
    ),
    ("reduce", "chain"): ("P/2 chains, 64 KiB", "P/2 chains (fan-out P/2), 64 KiB segments"),
    ("reduce", "pipeline"): (
        "1, 32 or 64 KiB",
        "1 KiB segments where P > 9.71 + 4.0e-5 n, else 32 KiB where P > 1.68 + 3.2e-6 n, else 64 KiB",
    ),
    ("reduce", "binary"): ("32 KiB", "32 KiB segments"),
    ("reduce", "binomial"): (
        "none or 1 KiB",
        "unsegmented below 2 KiB (and below 20 KiB at P < 8), else 1 KiB segments where "
        "P > 1.35 + 5.9e-4 n, else unsegmented",
    ),
    ("allreduce", "segmented_ring"): ("1 MiB", "1 MiB segments"),
}


def smpi_segment(collective, name, nprocs, nbytes):
    """The segment size (bytes; 0: one segment) SimGrid 3.32 uses for its copy of an Open MPI
    algorithm at ``nprocs`` processes and an ``nbytes`` message.

    SimGrid takes no segment size: ``bcast__ompi_pipeline`` and the ``reduce__ompi_*`` functions
    choose their own, with the constants of the Open MPI 1.x decision functions they were copied
    from (:data:`SMPI_SEGMENT_SOURCES`; :data:`SMPI_SEGMENT_RULES` in words). A segment at least
    as large as the message is one segment: the message goes whole.
    """
    name = canonical(collective, name)
    n, p = float(nbytes), int(nprocs)
    if (collective, name) == ("bcast", "pipeline"):
        if p < 1.6134e-6 * n + 2.1102:
            return 128 << 10
        if p < 2.3679e-6 * n + 1.1787:
            return 64 << 10
        if p < 3.2118e-6 * n + 8.7936:
            return 16 << 10
        return 128 << 10
    if (collective, name) == ("reduce", "chain"):
        return 64 << 10
    if (collective, name) == ("reduce", "pipeline"):
        if p > 0.0410 / 1024 * n + 9.7128:
            return 1 << 10
        if p > 0.0033 / 1024 * n + 1.6761:
            return 32 << 10
        return 64 << 10
    if (collective, name) == ("reduce", "binary"):
        return 32 << 10
    if (collective, name) == ("reduce", "binomial"):
        if (p < 8 and n < 20480) or n < 2048:
            return 0
        return 1 << 10 if p > 0.6016 / 1024 * n + 1.3496 else 0
    if (collective, name) == ("allreduce", "segmented_ring"):
        return 1 << 20
    return 0


def segmented(collective, name):
    """True when the kit's forced runs of ``name`` cut messages into segments on some back-end
    (Open MPI with :attr:`LibAlgorithm.ompi_segsize`, or SimGrid's own choice)."""
    alg = lookup(collective, name)
    return bool(alg.ompi_segsize) or (collective, alg.name) in SMPI_SEGMENT_RULES


def segment_size(flavour, collective, name, nprocs, nbytes, segsize=None):
    """The segment size in bytes (0: the whole message at once) with which ``flavour`` runs
    library algorithm ``name`` at ``nprocs`` processes and ``nbytes`` bytes, forced by the kit.

    Open MPI, and the kit's clones of its algorithms under SMPI (``kit:``): ``segsize`` if given,
    else :attr:`LibAlgorithm.ompi_segsize` for the algorithms that segment (0 = no segmentation,
    Open MPI's default); SimGrid's own copies: :func:`smpi_segment`; MPICH's
    forced broadcasts and reductions are not segmented (0). A segment at least as large as the
    message counts as 0: the schedules are the same.
    """
    check_flavour(flavour)
    alg = lookup(collective, name)
    if flavour == "smpi" and not (alg.smpi or "").startswith(KIT_PREFIX):
        seg = smpi_segment(collective, alg.name, nprocs, nbytes)
    elif flavour in ("openmpi", "smpi"):  # SMPI: the kit's clone, given Open MPI's segment size
        seg = alg.ompi_segsize if segsize is None else int(segsize)
    else:
        seg = 0
    return 0 if seg >= int(nbytes) else seg


def _size(nbytes):
    b = int(nbytes)
    return (
        f"{b >> 20} MiB"
        if b and b % (1 << 20) == 0
        else f"{b >> 10} KiB"
        if b and b % 1024 == 0
        else f"{b} B"
    )


def describe(flavour, collective, name, segsize=None):
    """A name that says how the algorithm cuts its messages, e.g. ``"pipeline, 8 KiB segments"``
    (Open MPI as the kit forces it), ``"chain, unsegmented"`` (``segsize=0``, seed 000's forced
    pipeline) or ``"binary, SimGrid's 32 KiB segments"`` (reduce ``binary`` under SMPI, which runs
    SimGrid's own copy; the pipelines and chains run as the kit's clones there and are named like
    Open MPI's); the plain name for an algorithm that does not segment.
    """
    check_flavour(flavour)
    alg = lookup(collective, name)
    if (
        flavour == "smpi"
        and (collective, alg.name) in SMPI_SEGMENT_RULES
        and not (alg.smpi or "").startswith(KIT_PREFIX)
    ):
        return f"{alg.name}, SimGrid's {SMPI_SEGMENT_RULES[(collective, alg.name)][0]} segments"
    clone = flavour == "smpi" and (alg.smpi or "").startswith(KIT_PREFIX)
    seg = alg.ompi_segsize if segsize is None else int(segsize)
    if not (flavour == "openmpi" or clone) or (
        not seg and alg.ompi_segsize == 0 and segsize is None and alg.name != "chain"
    ):
        return alg.name
    if seg == 0 and alg.name == "pipeline":
        return "chain, unsegmented (a pipeline forced with segment size 0, Open MPI's default)"
    if alg.name == "chain" and (flavour == "openmpi" or clone):
        cut = f"{_size(seg)} segments" if seg else "unsegmented"
        return f"chain, 4 chains (Open MPI's default fan-out), {cut}"
    return f"{alg.name}, {_size(seg)} segments" if seg else f"{alg.name}, unsegmented"


def table_rows():
    """Return the table as a list of dicts (one per collective × algorithm), for display."""
    rows = []
    for coll, algs in TABLE.items():
        for a in algs.values():
            rows.append(
                {
                    "collective": coll,
                    "algorithm": a.name,
                    "openmpi": "n/a" if a.ompi_id is None else a.ompi_id,
                    "mpich": a.mpich or "n/a",
                    "smpi": a.smpi or "n/a",
                    "description": a.description,
                }
            )
    return rows
