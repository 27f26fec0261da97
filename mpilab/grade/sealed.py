"""The grader's side of ``mpilab/data/grading/sealed.h``: private data and sealed result lines.

A case harness calls the student's function in the student's process, so whatever the harness
prints there the function could print too. Before each launch :func:`prepare` writes one random
seed per rank (``seed.<rank>``, which only that rank reads, then deletes) and a random key
(``key``, rank 0's). The harness ends every ``CASE`` line with the line's SipHash-2-4 under the
key; :func:`unseal` accepts a line only with the right hash. A function that prints passing lines
of its own, or computes the other ranks' data instead of receiving it, gains nothing.
"""

import os
import re
import secrets

_MASK = (1 << 64) - 1
_SEALED = re.compile(r"^(.*)\t([0-9a-f]{16})$")


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & _MASK


def siphash24(key, data):
    """SipHash-2-4 (Aumasson and Bernstein, 2012) of ``data`` under a 16-byte ``key``, as an int."""
    if len(key) != 16:
        raise ValueError(f"a SipHash key has 16 bytes, not {len(key)}")
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [0x736F6D6570736575 ^ k0, 0x646F72616E646F6D ^ k1, 0x6C7967656E657261 ^ k0, 0x7465646279746573 ^ k1]

    def rounds(n):
        v0, v1, v2, v3 = v
        for _ in range(n):
            v0 = (v0 + v1) & _MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)  # noqa: E702
            v2 = (v2 + v3) & _MASK
            v3 = _rotl(v3, 16) ^ v2  # noqa: E702
            v0 = (v0 + v3) & _MASK
            v3 = _rotl(v3, 21) ^ v0  # noqa: E702
            v2 = (v2 + v1) & _MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)  # noqa: E702
        v[:] = [v0, v1, v2, v3]

    whole = len(data) - len(data) % 8
    for i in range(0, whole, 8):
        w = int.from_bytes(data[i : i + 8], "little")
        v[3] ^= w
        rounds(2)
        v[0] ^= w
    last = (len(data) & 0xFF) << 56 | int.from_bytes(data[whole:], "little")
    v[3] ^= last
    rounds(2)
    v[0] ^= last
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def prepare(work, nprocs):
    """Write a launch's private files into ``work``: a seed per rank and rank 0's key (returned)."""
    clear(work)
    for r in range(nprocs):
        with open(os.path.join(work, f"seed.{r}"), "wb") as f:
            f.write(secrets.token_bytes(8))
    key = secrets.token_bytes(16)
    with open(os.path.join(work, "key"), "wb") as f:
        f.write(key)
    return key


def clear(work):
    """Remove what :func:`prepare` wrote and the harness did not delete (a run that failed early,
    or a confined run whose copy held them)."""
    for name in os.listdir(work):
        if name == "key" or (name.startswith("seed.") and name[5:].isdigit()):
            os.remove(os.path.join(work, name))


def unseal(stdout, key):
    """The lines of ``stdout`` that carry their right seal, without it, and how many did not.

    Returns
    -------
    (list of str, int)
        The sealed lines (their text before the seal), and the number of other ``CASE`` lines:
        lines the harness did not write.
    """
    good, forged = [], 0
    for line in stdout.splitlines():
        m = _SEALED.match(line)
        if m and int(m.group(2), 16) == siphash24(key, m.group(1).encode()):
            good.append(m.group(1))
        elif "CASE " in line:
            forged += 1
    return good, forged
