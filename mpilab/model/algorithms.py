"""The registry of the kit's algorithms: one record per collective algorithm written in C.

Every algorithm the kit implements, or a lab asks students to implement, is one
:class:`Algorithm` here: its name, the collective, the lab that asks for it, what it does, its
restrictions, which side of the kit holds its reference implementation, the C functions (the
reference's and the student skeleton's), its α-β cost and its schedule (the messages every rank
sends, for :mod:`mpilab.model.timeline`). The CLI (``mpilab list``, ``mpilab timeline``), the
costs, the schedules, the graders' harnesses and the tests read it; the C registry
(``c_reference/registry.c``) holds only the names and functions compiled into collbench, and a
test checks that the two agree.

Two sides fill the records. The student's side (this module, :data:`KIT`) has every record, with
the reference C function, the cost and the schedule only where the student's kit ships the
reference (the allgathers ``gather_bcast`` and ``pairwise``, whose C code students read). The
answer key (``mpilab_key.algorithms``, :mod:`mpilab.core.key`) completes the others in an
instructor's checkout, and adds every cost: the costs answer the labs' questions.

Examples
--------
>>> from mpilab.model import algorithms
>>> ring = algorithms.entry("allgather", "ring")
>>> ring.skeleton, ring.side, ring.lab
('student_allgather_ring', 'key', 'lab2')
>>> [a.name for a in algorithms.of("bcast")]
['linear', 'chain', 'pipeline', 'binomial', 'scatter_allgather', 'ompi_chain', 'ompi_pipeline']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from mpilab.core import key
from mpilab.core.errors import UsageError, one_of
from mpilab.model import ompi_trees, schedules

#: Where an algorithm's reference implementation is: ``kit``, shipped with the student's side
#: (students read it); ``key``, in the answer key only (a lab asks students to write it).
SIDES = ("kit", "key")


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of the registry.

    Attributes
    ----------
    collective : str
        ``allgather``, ``bcast``, ``reduce``, ``allreduce`` or ``reduce_scatter_block``.
    name : str
        Its name, unique within the collective (collbench's ``--algo``).
    description : str
        What it does, in one sentence.
    restrictions : str
        The process counts, roots, datatypes and sizes it must handle (or cannot).
    side : str
        One of :data:`SIDES`.
    lab : str or None
        The lab that asks for it (its skeleton, cost or study), or None.
    skeleton : str or None
        The C function a student's skeleton file defines (the graders' harnesses call it).
    skeleton_file : str or None
        The skeleton's file in ``labs/<lab>/``.
    function : str or None
        The reference's C function in collbench's registry (``c_reference/registry.c``), for
        the algorithms collbench and the tracer run by name; None for those the kit times from a
        student's or the key's file. A ``key`` algorithm's function is compiled in only where
        the answer key is (:func:`compiled`).
    source : str or None
        The reference's C file (relative to the repository), when this installation has it.
    point_to_point : bool
        Built from point-to-point messages only (False: from the library's collectives).
    schedule : callable or None
        ``schedule(p, n, root) -> [Program]``, the messages of its C code
        (:mod:`mpilab.model.schedules`), when this installation has it.
    cost : mpilab.model.costs.Cost or None
        Its α-β cost, in the notation of :mod:`mpilab.model.costs`, when this installation has it.
    cost_note : str
        Why there is no single α-β cost, when there is none (e.g. a two-level algorithm).
    """

    collective: str
    name: str
    description: str
    restrictions: str
    side: str
    lab: str | None = None
    skeleton: str | None = None
    skeleton_file: str | None = None
    function: str | None = None
    source: str | None = None
    point_to_point: bool = True
    schedule: Callable | None = None
    cost: object = None
    cost_note: str = ""


_ANY = "any communicator, any basic datatype"
_LAB3 = "MPI_IN_PLACE, MPI_INT and MPI_DOUBLE, any communicator; a commutative op"
_FOLDED = f"any p (pairs of ranks fold in and out), any count (blocks may be empty), {_LAB3}"
_TWO_LEVELS = "two levels with their own α and β (inside a node, between nodes): no single α-β cost"
_OMPI_COST = (
    "a library's algorithm cloned to simulate it; its single chain is lab 6's (chain, pipeline), "
    "whose cost lab 6 asks for: none here"
)


def _task(collective, name, lab, description, restrictions, skeleton=None, skeleton_file=None, **more):
    """A record whose reference is in the answer key and that ``lab`` asks students to write in
    ``labs/<lab>/<name>.c``, defining ``student_<collective>_<name>`` unless said otherwise."""
    return Algorithm(
        collective,
        name,
        description,
        restrictions,
        "key",
        lab=lab,
        skeleton=skeleton or f"student_{collective}_{name}",
        skeleton_file=skeleton_file or f"{name}.c",
        **more,
    )


#: The student's side of the registry (see the module's docstring).
KIT = (
    Algorithm(
        "allgather",
        "gather_bcast",
        "gather to rank 0, then broadcast the p blocks, from MPI_Isend/MPI_Irecv/MPI_Wait* only "
        "(the homework's first algorithm)",
        f"none: any p, MPI_IN_PLACE, {_ANY}",
        "kit",
        lab="lab2",
        function="lab_allgather_gather_bcast",
        source="c_reference/allgather/gather_bcast.c",
        schedule=schedules.gather_bcast,
    ),
    Algorithm(
        "allgather",
        "pairwise",
        "pairwise exchange (recursive doubling) with MPI_Sendrecv, the data doubling each step "
        "(the homework's second algorithm)",
        f"none: any p (the ranks above the largest power of two fold in and out), MPI_IN_PLACE, {_ANY}",
        "kit",
        lab="lab2",
        function="lab_allgather_pairwise",
        source="c_reference/allgather/pairwise.c",
        schedule=schedules.pairwise,
    ),
    _task(
        "allgather",
        "ring",
        "lab2",
        "ring: p - 1 steps of MPI_Sendrecv with the neighbours, one block per step",
        f"none: any p, MPI_IN_PLACE, {_ANY}",
        function="lab_allgather_ring",
    ),
    _task(
        "allgather",
        "bruck",
        "lab2",
        "Bruck: ceil(log2 p) steps of MPI_Sendrecv to rank - 2^k, blocks rotated at the end",
        f"none: any p, MPI_IN_PLACE, {_ANY}; a temporary buffer of p blocks",
        function="lab_allgather_bruck",
    ),
    _task(
        "bcast",
        "linear",
        "lab6",
        "the root sends the whole buffer to every other rank (MPI_Isend each, one MPI_Waitall)",
        f"none: any p, any root, any count (also 0), {_ANY}",
    ),
    _task(
        "bcast",
        "chain",
        "lab6",
        "one chain from the root: every rank receives the whole buffer from the previous one "
        "and sends it to the next",
        f"none: any p, any root, any count (also 0), {_ANY}",
    ),
    _task(
        "bcast",
        "pipeline",
        "lab6",
        "the chain in segments: a rank forwards segment i while it receives segment i + 1",
        f"none: any p, any root, any count (also 0), any segment size, {_ANY}",
    ),
    _task(
        "bcast",
        "binomial",
        "lab6",
        "binomial tree: ceil(log2 p) rounds, every rank but the root receives the whole buffer once",
        f"none: any p, any root, any count (also 0), {_ANY}",
        function="lab_bcast_binomial",
    ),
    _task(
        "bcast",
        "scatter_allgather",
        "lab6",
        "van de Geijn: binomial scatter of p blocks, then a ring allgather of them",
        f"none: any p, any root, any count (also 0 and count < p), {_ANY}",
    ),
    _task(
        "reduce_scatter_block",
        "reduce_scatter",
        "lab3",
        "recursive halving: log2 p exchanges of half the remaining blocks, each reduced on arrival",
        _FOLDED,
        skeleton="student_reduce_scatter_block",
    ),
    _task(
        "allreduce",
        "rabenseifner",
        "lab3",
        "Rabenseifner: reduce-scatter by recursive halving, then allgather by recursive doubling",
        _FOLDED,
        skeleton_file="allreduce_rabenseifner.c",
    ),
    _task(
        "allreduce",
        "two_level",
        "lab3",
        "node-aware: reduce inside each node, allreduce among the node leaders, broadcast inside "
        "each node (the library's collectives on two communicators)",
        f"any p, any count, {_LAB3}",
        skeleton_file="allreduce_two_level.c",
        point_to_point=False,
        cost_note=_TWO_LEVELS,
    ),
    Algorithm(
        "reduce",
        "two_level",
        "node-aware: reduce inside each node to its leader, then among the leaders (lab 3's "
        "two-level allreduce with a reduce at the top; its reproduction study times it)",
        "any p, any root, any datatype, MPI_IN_PLACE at the root; a commutative op",
        "key",
        lab="lab3",
        point_to_point=False,
        cost_note=_TWO_LEVELS,
    ),
    # Open MPI 4.1's forced chain and pipeline, cloned in the kit's C (include/labompi.h): what
    # seed 000 ran. SimGrid has no chain broadcast, and its reduce ompi_chain (p/2 chains) and
    # pipelines (their own segment sizes) are other algorithms; mpilab.measure.forcing runs
    # these clones for them under SMPI.
    Algorithm(
        "bcast",
        "ompi_chain",
        "Open MPI 4.1's forced chain: the root feeds 4 chains of consecutive ranks "
        "(coll_tuned_bcast_algorithm_chain_fanout), the whole message at once "
        "(coll_tuned_bcast_algorithm_segmentsize 0), both read from Open MPI's MCA variables",
        f"none: any p, any root, any count (also 0), contiguous datatypes, {_ANY}",
        "kit",
        function="lab_bcast_ompi_chain",
        source="c_reference/bcast/ompi_chain.c",
        schedule=ompi_trees.bcast_chain,
        cost_note=_OMPI_COST,
    ),
    Algorithm(
        "bcast",
        "ompi_pipeline",
        "Open MPI 4.1's forced pipeline: one chain from the root, segments of "
        "coll_tuned_bcast_algorithm_segmentsize bytes (0, the default: one segment)",
        f"none: any p, any root, any count (also 0), contiguous datatypes, {_ANY}",
        "kit",
        function="lab_bcast_ompi_pipeline",
        source="c_reference/bcast/ompi_pipeline.c",
        schedule=ompi_trees.bcast_pipeline,
        cost_note=_OMPI_COST,
    ),
    Algorithm(
        "reduce",
        "ompi_chain",
        "Open MPI 4.1's forced chain reduce: 4 chains end at the root "
        "(coll_tuned_reduce_algorithm_chain_fanout), one segment "
        "(coll_tuned_reduce_algorithm_segmentsize 0), blocking sends up the chains",
        "any p, any root, any count (also 0), contiguous datatypes, a commutative op, "
        "MPI_IN_PLACE at the root",
        "kit",
        function="lab_reduce_ompi_chain",
        source="c_reference/reduce/ompi_chain.c",
        cost_note=_OMPI_COST,
    ),
    Algorithm(
        "reduce",
        "ompi_pipeline",
        "Open MPI 4.1's forced pipeline reduce: one chain ending at the root, segments of "
        "coll_tuned_reduce_algorithm_segmentsize bytes (0, the default: one segment)",
        "any p, any root, any count (also 0), contiguous datatypes, a commutative op, "
        "MPI_IN_PLACE at the root",
        "kit",
        function="lab_reduce_ompi_pipeline",
        source="c_reference/reduce/ompi_pipeline.c",
        cost_note=_OMPI_COST,
    ),
)

_REGISTRY = None


def registry():
    """Every record of this installation, ``{(collective, name): Algorithm}`` in :data:`KIT`'s
    order: the student's side, completed by the answer key's ``COMPLETIONS`` when it is
    installed (each a dict of fields to set on the record of that collective and name)."""
    global _REGISTRY
    if _REGISTRY is None:
        keyed = key.module("algorithms")
        done = getattr(keyed, "COMPLETIONS", {})
        unknown = sorted(set(done) - {(a.collective, a.name) for a in KIT})
        if unknown:
            raise UsageError(f"the answer key completes algorithms the registry does not have: {unknown}")
        _REGISTRY = {
            (a.collective, a.name): dataclasses.replace(a, **done.get((a.collective, a.name), {}))
            for a in KIT
        }
    return _REGISTRY


def of(collective=None):
    """The records of one collective (every record if None), in registry order."""
    return [a for a in registry().values() if collective is None or a.collective == collective]


def collectives():
    """The collectives the registry has algorithms of, in registry order."""
    return list(dict.fromkeys(a.collective for a in KIT))


def entry(collective, name):
    """The record of one algorithm; a :class:`UsageError` names the valid ones."""
    found = registry().get((collective, name))
    if found is None:
        if collective not in collectives():
            raise one_of("collective", collective, collectives())
        raise one_of(f"{collective} algorithm", name, [a.name for a in of(collective)])
    return found


def skeletons(*collectives):
    """``{name: record}`` of the algorithms whose skeleton a lab hands out, for these collectives.

    Skeletons are the student's side's: this reads :data:`KIT` alone, without the answer key."""
    return {a.name: a for a in KIT if a.collective in collectives and a.skeleton}


def compiled(collective):
    """The records whose reference collbench compiles in here, in order: those with a
    ``function`` whose source this installation has (the ``kit``'s, and the ``key``'s with the key)."""
    return [a for a in of(collective) if a.function and a.source]


def in_the_key():
    """Names of the algorithms whose reference C code and schedule only the answer key has (ring,
    Bruck and the binomial broadcast: the labs ask students to write them)."""
    return [a.name for a in KIT if a.side == "key" and a.function]


# --- schedules by name -------------------------------------------------------------------------


def with_schedule():
    """``{name: record}`` of the algorithms this installation has a schedule of (names are unique
    among them: a schedule is asked for by name, as in ``mpilab timeline --algo ring``)."""
    return {a.name: a for a in registry().values() if a.schedule is not None}


def _by_schedule_name(algorithm):
    known = with_schedule()
    if algorithm in known:
        return known[algorithm]
    if algorithm in in_the_key() and not key.installed():
        raise UsageError(
            f"no schedule of {algorithm!r} here: the schedules of {', '.join(in_the_key())} "
            f"(algorithms the labs ask you to write) are in the answer key, in an "
            f"instructor's checkout; here: {', '.join(known)}"
        )
    raise one_of("algorithm with a schedule", algorithm, known)


def collective_of(algorithm):
    """The collective of an algorithm with a schedule (``"allgather"`` or ``"bcast"``).

    Raises
    ------
    UsageError
        An algorithm without a schedule here; for one whose schedule is in the answer key, and no
        key installed, the message says so.
    """
    return _by_schedule_name(algorithm).collective


def schedule(algorithm, nprocs, nbytes, root=0):
    """The programs of every rank for one run of an algorithm.

    Parameters
    ----------
    algorithm : str
        A name of :func:`with_schedule`.
    nprocs : int
    nbytes : int
        Allgather: the bytes each rank contributes (its block). Bcast: the buffer.
    root : int
        Root of a broadcast (the allgathers' gather_bcast always uses rank 0).

    Returns
    -------
    list of mpilab.model.schedules.Program

    Examples
    --------
    >>> [op.call for op in schedule("pairwise", 4, 1024)[1].ops]
    ['Sendrecv', 'Sendrecv']
    """
    record = _by_schedule_name(algorithm)
    if int(nprocs) < 1:
        raise UsageError(f"bad number of processes {nprocs!r}; valid: an integer >= 1")
    if int(nbytes) < 0:
        raise UsageError(f"bad size {nbytes!r}; valid: bytes >= 0")
    if not 0 <= int(root) < int(nprocs):
        raise UsageError(f"bad root {root!r}; valid: 0..{int(nprocs) - 1}")
    return record.schedule(int(nprocs), int(nbytes), int(root))
