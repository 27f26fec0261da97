"""The answer key's half of the algorithm registry (:mod:`mpilab.model.algorithms`).

For each record of the registry, what only the instructor's side may hold: the reference C file
and function of the algorithms the labs ask students to write, their schedules, and every cost.
Where an algorithm is the same schedule as one of the library's, its cost is that entry of the
cost table (``mpilab_key.costs``), not a copy of it.
"""

from mpilab.model.costs import BUFFER, LOG2, POW2, Cost, alpha, beta, n, p
from mpilab_key import schedules
from mpilab_key.costs import TABLE

_KEY_C = "solutions/c_reference"
#: n of a reduce-scatter: the whole input of one rank (p blocks of recvcount elements).
_WHOLE_INPUT = "n = bytes of one rank's whole input (p blocks)"

#: (collective, name) -> fields to set on the registry's record.
COMPLETIONS = {
    ("allgather", "gather_bcast"): dict(cost=TABLE["allgather", "gather_bcast"]),
    ("allgather", "pairwise"): dict(cost=TABLE["allgather", "pairwise"]),
    ("allgather", "ring"): dict(
        source=f"{_KEY_C}/allgather/ring.c", schedule=schedules.ring, cost=TABLE["allgather", "ring"]
    ),
    ("allgather", "bruck"): dict(
        source=f"{_KEY_C}/allgather/bruck.c", schedule=schedules.bruck, cost=TABLE["allgather", "bruck"]
    ),
    ("bcast", "linear"): dict(source="solutions/lab6/linear.c", cost=TABLE["bcast", "basic_linear"]),
    # Open MPI's chain runs four chains from the root (its table entry); the lab's runs one.
    ("bcast", "chain"): dict(
        source="solutions/lab6/chain.c",
        cost=Cost((p - 1) * (alpha + n * beta), BUFFER, "lab 6: one chain of p - 1 hops"),
    ),
    ("bcast", "pipeline"): dict(source="solutions/lab6/pipeline.c", cost=TABLE["bcast", "pipeline"]),
    ("bcast", "binomial"): dict(
        source=f"{_KEY_C}/bcast/binomial.c", schedule=schedules.binomial, cost=TABLE["bcast", "binomial"]
    ),
    ("bcast", "scatter_allgather"): dict(
        source="solutions/lab6/scatter_allgather.c",
        cost=Cost(
            TABLE["bcast", "scatter_allgather_ring"].expr,
            BUFFER,
            "lab 6: binomial scatter, ring allgather",
            POW2,
        ),
    ),
    ("reduce_scatter_block", "reduce_scatter"): dict(
        source="solutions/lab3/reduce_scatter.c",
        cost=Cost(
            LOG2 * alpha + (p - 1) / p * n * beta,
            _WHOLE_INPUT,
            "lab 3: log2 p halving steps, each sending half of the blocks still held (no γ term)",
            POW2,
        ),
    ),
    ("allreduce", "rabenseifner"): dict(
        source="solutions/lab3/allreduce_rabenseifner.c", cost=TABLE["allreduce", "rabenseifner"]
    ),
    ("allreduce", "two_level"): dict(source="solutions/lab3/allreduce_two_level.c"),
    ("reduce", "two_level"): dict(source=f"{_KEY_C}/reduce/two_level.c"),
}
