"""Open MPI 4.1's chain topology and the schedules of the kit's clones of its chain and pipeline.

Open MPI's coll/base builds its chain and pipeline broadcasts and reduces from one tree, the
chain of ``ompi_coll_base_topo_build_chain`` (coll_base_topo.c): the root feeds ``fanout``
chains of consecutive ranks counted from the root, the first ``(p - 1) mod fanout`` of them one
rank longer; the pipeline is the chain of fanout 1. Forced through coll/tuned, the chain has
4 chains (``coll_tuned_init_chain_fanout``) and neither is segmented
(``coll_tuned_<coll>_algorithm_segmentsize`` 0). The kit's C clones
(``c_reference/bcast/ompi_*.c``, ``c_reference/reduce/ompi_*.c``, :mod:`mpilab.model.algorithms`)
build the same tree; :func:`chain` is it in Python, and :func:`bcast_chain` and
:func:`bcast_pipeline` are the clones' broadcast schedules with Open MPI's forced defaults (one
segment), which ``tests/test_timeline.py`` plays against traced runs.

Examples
--------
>>> chain(4, 9, 0)[0]                      # the root feeds four chains of two
(None, [1, 3, 5, 7])
>>> chain(4, 9, 0)[1], chain(4, 9, 0)[2]
((0, [2]), (1, []))
"""

from __future__ import annotations

from mpilab.model.schedules import TAGS, Program

#: Open MPI 4.1's defaults for a forced chain: 4 chains, and the largest fan-out it accepts.
CHAIN_FANOUT = 4
MAX_FANOUT = 32


def chain(fanout, p, root=0):
    """Open MPI's chain tree: ``{rank: (parent or None, [children in order])}``."""
    fanout = max(1, min(int(fanout), MAX_FANOUT, p - 1)) if p > 1 else 1
    tree = {r: (None, []) for r in range(p)}
    if p < 2:
        return tree
    length = -(-(p - 1) // fanout)
    longer = (p - 1) % fanout or fanout
    head = 1
    for c in range(fanout):
        n = length if c < longer else length - 1
        members = [(root + head + i) % p for i in range(n)]
        tree[root][1].append(members[0])
        for i, r in enumerate(members):
            parent = root if i == 0 else members[i - 1]
            tree[r] = (parent, [members[i + 1]] if i + 1 < n else [])
        head += n
    return tree


def _bcast(tree, p, n):
    """The broadcast of c_reference/bcast/ompi_generic.c over ``tree`` with one segment."""
    progs = [Program(r) for r in range(p)]
    tag = TAGS["bcast"]
    for r, prog in enumerate(progs):
        parent, children = tree[r]
        if parent is not None:
            prog.wait(prog.irecv(parent, n, tag))
        if children:
            prog.wait(*[prog.isend(c, n, tag) for c in children])
    return progs


def bcast_chain(p, n, root):
    """c_reference/bcast/ompi_chain.c with Open MPI's forced defaults: four chains, one segment."""
    return _bcast(chain(CHAIN_FANOUT, p, root), p, n)


def bcast_pipeline(p, n, root):
    """c_reference/bcast/ompi_pipeline.c with Open MPI's forced default: one chain, one segment."""
    return _bcast(chain(1, p, root), p, n)
