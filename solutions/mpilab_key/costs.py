"""The answer key's cost table: the α-β cost of every algorithm the kit knows.

These are answers: labs 2, 3 and 6 ask students to derive the costs of the kit's allgathers,
reductions and broadcasts, and most library algorithms share their forms. So the table lives on
the instructor's side; :func:`mpilab.model.costs.table` reads it when the key is installed.
Symbols and conventions: :mod:`mpilab.model.costs`.
"""

import numpy as np
import pandas as pd
import sympy

from mpilab.model.costs import (
    BUFFER,
    FLOOR_LOG2,
    LOG2,
    PER_RANK,
    POW2,
    ROUNDS,
    SEGMENT_BYTES,
    SEGMENTS,
    Cost,
    alpha,
    beta,
    evaluate,
    n,
    p,
    s,
    table,
)

# Open MPI's chain: 4 chains (coll_tuned_<coll>_algorithm_chain_fanout = 4); the root serves
# the 4 chain heads one after another, the last chain then takes ceil((p-1)/4) - 1 more hops.
_CHAIN = sympy.Max(0, sympy.Min(4, p - 1) + sympy.ceiling((p - 1) / 4) - 1)


def _pairwise_any_p():
    """The kit's pairwise exchange for every p (c_reference/allgather/pairwise.c).

    With q = 2^L the largest power of two <= p and e = p - q extra ranks: fold (α + nβ: rank
    q + i sends its block to rank i), L steps among the q ranks, each a Sendrecv of 2^k blocks
    (α + 2^k·nβ) and a second Sendrecv of the group's folded blocks (α + min(e, 2^k)·nβ on
    rank 0's pair, the busiest), then unfold (α + p·nβ: rank i sends the whole result to
    q + i). Σ_{k<L} min(e, 2^k) = 2^(f+1) - 1 + (L-1-f)·e with f = ⌊log2 e⌋.
    """
    L = FLOOR_LOG2
    q = 2**L
    e = p - q
    f = sympy.floor(sympy.log(sympy.Max(e, 1), 2))
    folded = 2 ** (f + 1) - 1 + (L - 1 - f) * e
    other = (2 * L + 2) * alpha + (q + p + folded) * n * beta
    return sympy.Piecewise((L * alpha + (p - 1) * n * beta, sympy.Eq(e, 0)), (other, True))


#: (collective, name) -> Cost. Library names are those of :mod:`mpilab.measure.libalgs`.
TABLE = {
    # the kit's allgather algorithms (c_reference/allgather)
    ("allgather", "gather_bcast"): Cost(
        2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta,
        PER_RANK,
        "kit: linear gather of p-1 blocks, then linear bcast of p*n bytes; the root's single "
        "port serialises the p-1 messages of each phase",
    ),
    ("allgather", "pairwise"): Cost(
        LOG2 * alpha + (p - 1) * n * beta,
        PER_RANK,
        "kit: recursive doubling, log2 p Sendrecv steps with doubling blocks; other p fold the "
        "extra ranks in and out (exact)",
        POW2,
        _pairwise_any_p(),
    ),
    ("allgather", "ring"): Cost((p - 1) * (alpha + n * beta), PER_RANK, "kit: p-1 ring steps"),
    ("allgather", "bruck"): Cost(
        ROUNDS * alpha + (p - 1) * n * beta, PER_RANK, "kit: ceil(log2 p) rounds of doubling blocks"
    ),
    # library allgather (Open MPI ids)
    ("allgather", "linear"): Cost(
        2 * (p - 1) * alpha + (p - 1) * (p + 1) * n * beta, PER_RANK, "ompi 1: gather then bcast"
    ),
    ("allgather", "recursive_doubling"): Cost(
        LOG2 * alpha + (p - 1) * n * beta, PER_RANK, "ompi 3: log2 p exchanges", POW2
    ),
    ("allgather", "neighbor"): Cost(
        (p / 2) * alpha + (p - 1) * n * beta, PER_RANK, "ompi 5: p/2 neighbour exchanges", "p even"
    ),
    ("allgather", "two_proc"): Cost(alpha + n * beta, PER_RANK, "ompi 6: one exchange", "p = 2"),
    ("allgather", "lib:bruck"): Cost(
        ROUNDS * alpha + (p - 1) * n * beta, PER_RANK, "ompi 2: Bruck's ceil(log2 p) rounds, as the kit's"
    ),
    ("allgather", "lib:ring"): Cost(
        (p - 1) * (alpha + n * beta), PER_RANK, "ompi 4: p-1 ring steps, as the kit's"
    ),
    # bcast
    ("bcast", "basic_linear"): Cost((p - 1) * (alpha + n * beta), BUFFER, "ompi 1: root sends to each rank"),
    ("bcast", "chain"): Cost(
        _CHAIN * (alpha + n * beta),
        BUFFER,
        "ompi 2: 4 unsegmented chains (fanout 4), fed by the root in turn",
    ),
    ("bcast", "pipeline"): Cost(
        (p - 2 + SEGMENTS) * (alpha + SEGMENT_BYTES * beta),
        BUFFER,
        "ompi 3: chain pipelined in segments of s bytes",
    ),
    ("bcast", "binary_tree"): Cost(
        2 * FLOOR_LOG2 * (alpha + n * beta), BUFFER, "ompi 5: binary tree, two sends per level"
    ),
    ("bcast", "split_binary_tree"): Cost(
        2 * FLOOR_LOG2 * (alpha + n / 2 * beta) + alpha + n / 2 * beta,
        BUFFER,
        "ompi 4: two halves down two subtrees, then exchanged",
    ),
    ("bcast", "binomial"): Cost(ROUNDS * (alpha + n * beta), BUFFER, "ompi 6: binomial tree"),
    ("bcast", "knomial"): Cost(
        (4 - 1) * sympy.ceiling(sympy.log(p, 4)) * (alpha + n * beta),
        BUFFER,
        "ompi 7: radix-4 tree, 3 sends per level",
    ),
    ("bcast", "scatter_allgather"): Cost(
        (ROUNDS + p - 1) * alpha + 2 * (p - 1) / p * n * beta,
        BUFFER,
        "ompi 8: binomial scatter then allgather",
    ),
    ("bcast", "scatter_allgather_ring"): Cost(
        (ROUNDS + p - 1) * alpha + 2 * (p - 1) / p * n * beta,
        BUFFER,
        "ompi 9: binomial scatter then ring allgather",
    ),
    # reduce
    ("reduce", "basic_linear"): Cost(
        (p - 1) * (alpha + n * beta), BUFFER, "ompi 1: root receives from each rank"
    ),
    ("reduce", "chain"): Cost(
        _CHAIN * (alpha + n * beta), BUFFER, "ompi 2: 4 unsegmented chains (fanout 4) into the root"
    ),
    ("reduce", "pipeline"): Cost(
        (p - 2 + SEGMENTS) * (alpha + SEGMENT_BYTES * beta), BUFFER, "ompi 3: pipelined chain"
    ),
    ("reduce", "binary"): Cost(2 * FLOOR_LOG2 * (alpha + n * beta), BUFFER, "ompi 4: binary tree"),
    ("reduce", "binomial"): Cost(ROUNDS * (alpha + n * beta), BUFFER, "ompi 5: binomial tree"),
    ("reduce", "in_order_binary"): Cost(
        2 * FLOOR_LOG2 * (alpha + n * beta), BUFFER, "ompi 6: in-order binary tree"
    ),
    ("reduce", "rabenseifner"): Cost(
        2 * ROUNDS * alpha + 2 * (p - 1) / p * n * beta, BUFFER, "ompi 7: reduce-scatter then gather"
    ),
    # allreduce
    ("allreduce", "basic_linear"): Cost(
        2 * (p - 1) * (alpha + n * beta), BUFFER, "ompi 1: reduce then bcast, linear"
    ),
    ("allreduce", "nonoverlapping"): Cost(
        2 * ROUNDS * (alpha + n * beta), BUFFER, "ompi 2: binomial reduce + bcast"
    ),
    ("allreduce", "recursive_doubling"): Cost(
        LOG2 * (alpha + n * beta),
        BUFFER,
        "ompi 3: log2 p exchanges; other p fold the extra ranks in and out (2 more steps)",
        POW2,
        (FLOOR_LOG2 + 2 * sympy.ceiling(p / 2**FLOOR_LOG2 - 1)) * (alpha + n * beta),
    ),
    ("allreduce", "ring"): Cost(
        2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta,
        BUFFER,
        "ompi 4: ring reduce-scatter + ring allgather",
    ),
    ("allreduce", "rabenseifner"): Cost(
        2 * LOG2 * alpha + 2 * (p - 1) / p * n * beta, BUFFER, "ompi 6: recursive halving + doubling", POW2
    ),
    ("allreduce", "segmented_ring"): Cost(
        (p - 1) * (sympy.Max(1, sympy.ceiling(n / (p * s))) + 1) * alpha + 2 * (p - 1) / p * n * beta,
        BUFFER,
        "ompi 5: the ring's reduce-scatter repeated in ceil(n/(p*s)) phases of s-byte "
        "pieces of each block, then one ring allgather; Open MPI runs the plain ring "
        "when n < p*s (always with s = 0, its default segment size)",
    ),
}

#: Library algorithms of :mod:`mpilab.measure.libalgs` that have no entry in :data:`TABLE`, and why.
NO_COST = {
    ("allreduce", "smp"): "hierarchical (SMPI smp_binomial: binomial inside each node, then "
    "between nodes, then inside again): its cost depends on the ranks per "
    "node, which the table's p, n, alpha, beta do not describe",
}


def compare_model(df, alpha_us, beta_us_per_byte, value="avg_us", segment=8192):
    """Model vs measurement per algorithm: the mean absolute percentage error (MAPE).

    Lab 4 asks students for this table (with their own cost expressions), so it is the answer
    key's; ``mpilab model`` (an instructor's command) prints it per process count.

    Parameters
    ----------
    df : pandas.DataFrame
        Results with ``collective``, ``algorithm``, ``nprocs``, ``bytes`` and ``value``.
        For allgather, ``bytes`` is taken as the per-rank block, as in the results table.
    alpha_us, beta_us_per_byte : float

    Returns
    -------
    pandas.DataFrame
        ``collective``, ``algorithm``, ``points``, ``mape`` (%) — rows whose algorithm is not in
        the table, or whose p is outside an entry's domain with no exact cost, are left out.
    """
    rows, detail = [], []
    for (coll, algo), g in df.groupby(["collective", "algorithm"]):
        if (coll, algo) not in table():
            continue
        pred = evaluate(coll, algo, g["nprocs"], g["bytes"], alpha_us, beta_us_per_byte, segment)
        pred = np.atleast_1d(pred)
        ok = ~np.isnan(pred)
        if not ok.any():
            continue
        meas = g[value].to_numpy(dtype=float)
        err = np.abs(pred[ok] - meas[ok]) / meas[ok] * 100
        rows.append(dict(collective=coll, algorithm=algo, points=int(ok.sum()), mape=float(np.mean(err))))
        detail.append(g[ok].assign(model_us=pred[ok]))
    out = pd.DataFrame(rows, columns=["collective", "algorithm", "points", "mape"])
    out.attrs["detail"] = pd.concat(detail) if detail else pd.DataFrame()
    return out
