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
