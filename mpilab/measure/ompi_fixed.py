"""Open MPI 4.1's fixed decision rules for MPI_Bcast, written again here from its source.

Without ``coll_tuned_use_dynamic_rules``, coll/tuned picks a broadcast algorithm for each call by
``ompi_coll_tuned_bcast_intra_dec_fixed`` (``ompi/mca/coll/tuned/coll_tuned_decision_fixed.c``,
identical in 4.1.4, this machine's, and 4.1.5, seed 000's): a table of communicator sizes and
message sizes (count × datatype size, in bytes) measured by the Open MPI developers. It then calls
``ompi_coll_tuned_bcast_intra_do_this(..., algorithm, 0, 0)``: **fan-out 0 and segment size 0**.
So, in 4.1's fixed rules,

* ``chain`` is one chain (``ompi_coll_base_topo_build_chain`` turns fan-out 0 into 1), not the
  four chains of the forced algorithm's default fan-out, and it is not segmented;
* ``pipeline`` is the same single chain, not segmented either: the whole message makes P - 1 hops;
* the trees (``binary_tree``, ``split_binary_tree``, ``binomial``) send the whole message at each
  hop; ``knomial`` uses ``coll_tuned_bcast_algorithm_knomial_radix`` (4 unless set);
* ``scatter_allgather`` (binomial scatter, recursive-doubling allgather) and
  ``scatter_allgather_ring`` run ``basic_linear`` when count < P
  (:data:`mpilab.measure.forcing.FALLBACKS`).

:func:`bcast` answers for one call, :func:`bcast_map` for a grid of process counts and sizes
(the crossover map of lab 6, drawn from the library's rules instead of measurements).
"""

from dataclasses import dataclass

import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.measure import forcing, libalgs

#: Where the rules come from.
SOURCE = (
    "Open MPI v4.1.4 (= v4.1.5) ompi/mca/coll/tuned/coll_tuned_decision_fixed.c, "
    "ompi_coll_tuned_bcast_intra_dec_fixed"
)

#: The rules, in the source's order: (communicator size below which the block applies, or None
#: for the last block; [(message bytes below which, algorithm id), ..., (None, algorithm id)]).
BCAST_RULES = (
    (
        4,
        (
            (32, 3),
            (256, 5),
            (512, 3),
            (1024, 7),
            (32768, 1),
            (131072, 5),
            (262144, 2),
            (524288, 1),
            (1048576, 6),
            (None, 5),
        ),
    ),
    (8, ((64, 5), (128, 6), (2048, 5), (8192, 6), (1048576, 1), (None, 2))),
    (16, ((8, 7), (64, 5), (4096, 7), (16384, 5), (32768, 6), (None, 1))),
    (32, ((4096, 7), (1048576, 6), (None, 8))),
    (64, ((2048, 6), (None, 7))),
    (128, ((None, 7),)),
    (256, ((2, 6), (16384, 5), (32768, 1), (65536, 5), (None, 7))),
    (1024, ((16384, 7), (32768, 4), (None, 7))),
    (2048, ((524288, 7), (None, 8))),
    (4096, ((262144, 7), (None, 8))),
    (None, ((8192, 7), (16384, 5), (262144, 7), (None, 8))),
)

#: What each algorithm runs as under the fixed rules (fan-out 0, segment size 0).
RUNS_AS = {
    "basic_linear": "the root sends the whole message to every rank",
    "chain": "one chain (fan-out 0 becomes 1), the whole message per hop: P - 1 hops",
    "pipeline": "one chain, not segmented (segment size 0): the whole message per hop, P - 1 hops",
    "split_binary_tree": "two halves down a binary tree, then exchanged; not segmented",
    "binary_tree": "a binary tree, the whole message per hop",
    "binomial": "a binomial tree, the whole message per hop",
    "knomial": "a radix-4 k-nomial tree (coll_tuned_bcast_algorithm_knomial_radix), "
    "the whole message per hop",
    "scatter_allgather": "binomial scatter, then recursive-doubling allgather",
    "scatter_allgather_ring": "binomial scatter, then ring allgather",
}


@dataclass(frozen=True)
class Decision:
    """What Open MPI 4.1's fixed rules do for one call.

    Attributes
    ----------
    algorithm : str
        The algorithm the rules choose (the kit's names, :mod:`mpilab.measure.libalgs`).
    ompi_id : int
        Its coll/tuned id.
    segsize, fanout : int
        What the rules pass on (always 0 in 4.1).
    runs : str
        What actually runs, with what the algorithm itself falls back to.
    """

    algorithm: str
    ompi_id: int
    segsize: int
    fanout: int
    runs: str


def _ids():
    return {a.ompi_id: a.name for a in libalgs.TABLE["bcast"].values() if a.ompi_id}


def bcast(nprocs, nbytes, type_size=1):
    """The algorithm Open MPI 4.1's fixed rules run for one MPI_Bcast.

    Parameters
    ----------
    nprocs : int
        Communicator size, >= 2 (a communicator of one is served by coll/self).
    nbytes : int
        count × datatype size.
    type_size : int
        The datatype's size (for the algorithms' own count < P switches).

    Returns
    -------
    Decision
    """
    try:
        nprocs, nbytes, type_size = int(nprocs), int(nbytes), int(type_size)
    except (TypeError, ValueError):
        raise UsageError(
            f"nprocs, nbytes and type_size must be integers, not {nprocs!r}, {nbytes!r}, {type_size!r}"
        ) from None
    if nprocs < 2 or nbytes < 0 or type_size < 1 or nbytes % type_size:
        raise UsageError(
            f"bad call P = {nprocs}, {nbytes} bytes of {type_size}-byte elements; "
            "valid: P >= 2, bytes >= 0 and a whole number of elements"
        )
    for size_below, sizes in BCAST_RULES:
        if size_below is None or nprocs < size_below:
            alg = next(a for below, a in sizes if below is None or nbytes < below)
            break
    name = _ids()[alg]
    runs = RUNS_AS[name]
    rule, instead = forcing.fallback("openmpi", "bcast", name, nbytes // type_size, nprocs, type_size, 0)
    if rule is not None:
        runs = f"{instead}, because {rule.when} ({rule.source})"
    return Decision(name, alg, 0, 0, runs)


def bcast_map(nprocs, sizes, type_size=1):
    """:func:`bcast` over a grid: one row per (nprocs, bytes).

    Returns
    -------
    pandas.DataFrame
        nprocs, bytes, algorithm, ompi_id, segsize, fanout, runs.
    """
    rows = []
    for p in nprocs:
        for b in sizes:
            d = bcast(p, b, type_size)
            rows.append(
                dict(
                    nprocs=int(p),
                    bytes=int(b),
                    algorithm=d.algorithm,
                    ompi_id=d.ompi_id,
                    segsize=d.segsize,
                    fanout=d.fanout,
                    runs=d.runs,
                )
            )
    return pd.DataFrame(rows)


# --- Open MPI 1.10's rules for the reductions seed 001 measured -----------------------------

#: Where seed 001's algorithms come from: the study ran Open MPI 1.7 .. 1.10.2 with coll/tuned's
#: fixed rules ("algorithm 0"); SimGrid 3.32's ``ompi`` selector follows 4.1's rules instead.
SOURCE_1_10 = (
    "Open MPI v1.10.2 ompi/mca/coll/tuned/coll_tuned_decision_fixed.c: "
    "ompi_coll_tuned_reduce_intra_dec_fixed (commutative op, P >= 8, message < 2048 B: binomial, "
    "segment size 0) and ompi_coll_tuned_allreduce_intra_dec_fixed (message < 10000 B: recursive "
    "doubling)"
)


def reduction_1_10(collective, nprocs, nbytes):
    """The algorithm (the kit's name, :mod:`mpilab.measure.libalgs`) and segment size Open MPI
    1.10's fixed rules give a commutative reduction of ``nbytes`` bytes at P = ``nprocs``, for the
    cases seed 001 measured at small sizes (:data:`SOURCE_1_10`).

    Raises
    ------
    UsageError
        A case outside those rules' small-message branches (the kit does not carry the rest).
    """
    nprocs, nbytes = int(nprocs), int(nbytes)
    if collective == "allreduce" and nbytes < 10000:
        return "recursive_doubling", 0
    if collective == "reduce" and nprocs < 8 and nbytes < 512:
        return "basic_linear", 0
    if collective == "reduce" and (nbytes < 2048 or (nprocs < 8 and nbytes < 20480)):
        return "binomial", 0
    raise UsageError(
        f"Open MPI 1.10's rules for {collective} at P = {nprocs}, {nbytes} B are not in the kit; "
        "valid: allreduce below 10000 B, reduce below 2048 B (below 20480 B at P < 8)"
    )
