"""The answer key's schedules: ring and Bruck (lab 2's C tasks) and the binomial broadcast.

Each mirrors its C file call by call, as :mod:`mpilab.model.schedules` describes; the key's
registry records (``mpilab_key.algorithms``) hand them to :mod:`mpilab.model.algorithms` when the
key is installed, so the event model, ``mpilab timeline`` and the tests can draw and time them in
an instructor's checkout.
On the student's side they are answers: lab 2 asks for ring and Bruck, and a schedule gives
away the order of their messages.
"""

from mpilab.model.schedules import TAGS, Program


def ring(p, n, root):
    """solutions/c_reference/allgather/ring.c: p - 1 send-receives with the neighbours, one block each."""
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        for _ in range(p - 1):
            prog.sendrecv((r + 1) % p, n, (r - 1) % p, n, TAGS["allgather"])
    return progs


def bruck(p, n, root):
    """solutions/c_reference/allgather/bruck.c: ceil(log2 p) send-receives to r - d, doubling blocks."""
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        d = 1
        while d < p:
            cnt = min(d, p - d)
            prog.sendrecv((r - d) % p, cnt * n, (r + d) % p, cnt * n, TAGS["allgather"])
            d *= 2
    return progs


def binomial(p, n, root):
    """solutions/c_reference/bcast/binomial.c: receive from the parent, send to children farthest first."""
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        v = (r - root) % p
        mask = 1
        while mask < p:
            if v & mask:
                prog.recv((v - mask + root) % p, n, TAGS["bcast"])
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if v + mask < p:
                prog.send((v + mask + root) % p, n, TAGS["bcast"])
            mask >>= 1
    return progs


# --- lab 6's broadcasts and lab 3's reductions, as the grader compares a student's messages ------
# (mpilab_key.rubrics.lab6 and lab3; mpilab.grade.checks.algorithm). ``esize`` is the size of an
# element in bytes: blocks and segments are whole elements, as in the C solutions.


def linear_bcast(p, n, root, esize=1, segsize=0):
    """solutions/lab6/c_solutions/linear.c: the root sends the whole buffer to every other rank."""
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        if r == root:
            prog.wait(*[prog.isend(d, n, TAGS["bcast"]) for d in range(p) if d != root])
        else:
            prog.recv(root, n, TAGS["bcast"])
    return progs


def chain(p, n, root, esize=1, segsize=0):
    """solutions/lab6/c_solutions/chain.c: each rank receives from its left and sends to its right."""
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        v = (r - root) % p
        if v > 0:
            prog.recv((r - 1) % p, n, TAGS["bcast"])
        if v < p - 1:
            prog.send((r + 1) % p, n, TAGS["bcast"])
    return progs


def pipeline(p, n, root, esize=1, segsize=0):
    """solutions/lab6/c_solutions/pipeline.c: the chain, the buffer cut into segments of
    ``segsize`` bytes (whole elements, at least one; 0 or less: one segment)."""
    count = n // esize
    seg = count if segsize <= 0 else max(1, segsize // esize)
    seg = max(1, min(seg, count))
    sizes = [min(seg, count - i) * esize for i in range(0, count, seg)]
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        v = (r - root) % p
        for b in sizes:
            if v > 0:
                prog.recv((r - 1) % p, b, TAGS["bcast"])
            if v < p - 1:
                prog.send((r + 1) % p, b, TAGS["bcast"])
    return progs


def binomial_bcast(p, n, root, esize=1, segsize=0):
    """:func:`binomial`, called as the other broadcasts are."""
    return binomial(p, n, root)


def scatter_allgather(p, n, root, esize=1, segsize=0):
    """solutions/lab6/c_solutions/scatter_allgather.c: a binomial scatter of p blocks of
    ceil(count / p) elements, then a ring allgather of the blocks."""
    count = n // esize
    b = -(-count // p) if count else 0

    def span(lo, hi):
        return (min(hi * b, count) - min(lo * b, count)) * esize

    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        v = (r - root) % p
        mask = 1
        while mask < p:
            if v & mask:
                prog.recv((v - mask + root) % p, span(v, min(v + mask, p)), TAGS["bcast"])
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if v + mask < p:
                prog.send((v + mask + root) % p, span(v + mask, min(v + 2 * mask, p)), TAGS["bcast"])
            mask >>= 1
        for s in range(p - 1):
            sb, rb = (v - s) % p, (v - s - 1) % p
            prog.sendrecv((v + 1 + root) % p, span(sb, sb + 1), (v - 1 + root) % p, span(rb, rb + 1))
    return progs


def _pow2(p):
    if p < 1 or p & (p - 1):
        raise ValueError(f"this schedule is the power-of-two one; P = {p} is not a power of two")


def reduce_scatter(p, n, root=0):
    """solutions/lab3/c_solutions/reduce_scatter.c at P a power of two: recursive halving, the
    partner at distance p/2, then p/4, ..., 1, sending half of the data still held each time
    (``n``: one rank's whole input)."""
    _pow2(p)
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        mask = p // 2
        while mask >= 1:
            prog.sendrecv(r ^ mask, n * mask // p, r ^ mask, n * mask // p)
            mask //= 2
    return progs


def rabenseifner(p, n, root=0):
    """solutions/lab3/c_solutions/allreduce_rabenseifner.c at P a power of two: the recursive
    halving reduce-scatter, then the recursive doubling allgather of the blocks (``n``: the
    buffer)."""
    _pow2(p)
    progs = reduce_scatter(p, n)
    for r, prog in enumerate(progs):
        mask = 1
        while mask < p:
            prog.sendrecv(r ^ mask, n * mask // p, r ^ mask, n * mask // p)
            mask *= 2
    return progs


#: The schedules the lab-6 and lab-3 rubrics compare a student's messages with, by algorithm.
BCASTS = {
    "linear": linear_bcast,
    "chain": chain,
    "pipeline": pipeline,
    "binomial": binomial_bcast,
    "scatter_allgather": scatter_allgather,
}
REDUCTIONS = {"reduce_scatter": reduce_scatter, "rabenseifner": rabenseifner}
