"""The algorithm asked for: the messages a student's collective sent, against its schedule.

The case harnesses see every message the student's function sends (``harness.h``); a case
that passed hands them back per rank, in program order, as ``(peer, bytes)`` with peers as
ranks of the case's communicator. :func:`same_shape` compares them with an algorithm's
schedule (:mod:`mpilab.model.schedules`: ``schedule(p, n, root)``, the messages of its C code):
every rank sends as many messages to each peer as the schedule's rank does, each at least as
large (an algorithm that sends more than it must is still that algorithm, and its time says
so; with ``exact=False`` only the peers count). The order of a rank's sends is free (a binomial
tree may serve its nearest child first). The mirror image counts too: a ring that sends to the
left, a Bruck that sends to ``r + 2^k``. Local copies (messages to oneself) and empty messages
are not messages.

:func:`describe` says what a traced pattern looks like when it is none of the known ones ("every
rank sends to rank 0, and rank 0 sends to every rank: a gather and a broadcast").

Nothing here knows an answer: the schedules are the caller's (the answer key's, on the grader's
side).
"""

_SENDS = ("Send", "Isend", "Sendrecv")


def schedule_sends(programs):
    """``{rank: [(dst, bytes)]}`` of a schedule's programs (messages to other ranks, not empty)."""
    out = {}
    for prog in programs:
        out[prog.rank] = [
            (op.dst, int(op.sbytes))
            for op in prog.ops
            if op.call in _SENDS and op.dst not in (None, prog.rank) and op.sbytes
        ]
    return out


def mirrored(sends, p):
    """The same messages, every peer reflected: rank r's message to r + d goes to r - d."""
    return {r: [((2 * r - d) % p, b) for d, b in msgs] for r, msgs in sends.items()}


def _by_peer(msgs):
    out = {}
    for d, b in msgs:
        out.setdefault(d, []).append(b)
    return {d: sorted(v) for d, v in out.items()}


def _fits(traced, expected, exact=True):
    """Whether every rank sent as many messages to each peer as expected, each at least as large."""
    if set(traced) != set(expected):
        return False
    for r, want in expected.items():
        got, need = _by_peer(traced[r]), _by_peer(want)
        if set(got) != set(need) or any(len(got[d]) != len(need[d]) for d in need):
            return False
        if exact and any(g < w for d in need for g, w in zip(got[d], need[d])):
            return False
    return True


def same_shape(traced, expected, p, mirror=True, exact=True):
    """Whether ``traced`` (``{rank: [(dst, bytes)]}``) has the shape of ``expected``."""
    return _fits(traced, expected, exact) or (mirror and _fits(traced, mirrored(expected, p), exact))


def _listed(msgs, limit=6):
    if not msgs:
        return "nothing"
    shown = ", ".join(f"{b:,} B to {d}" for d, b in msgs[:limit])
    return shown + (f" and {len(msgs) - limit} more" if len(msgs) > limit else "")


def first_difference(traced, expected, name):
    """A sentence naming the first rank whose messages differ from ``expected``, or None."""
    for r in sorted(expected):
        got = traced.get(r, [])
        if not _fits({r: got}, {r: expected[r]}):
            return f"rank {r} sent {_listed(got)}; {name} sends {_listed(expected[r])}"
    return None


def describe(traced, p):
    """What a traced pattern looks like, in words (for feedback, when it is no known algorithm)."""
    counts = {r: len(v) for r, v in traced.items()}
    total = sum(counts.values())
    if total == 0:
        return "no rank sent a message to another rank"
    peers = {r: [d for d, _ in v] for r, v in traced.items()}
    others = [r for r in range(p) if r != 0]
    if all(peers.get(r) == [0] for r in others) and sorted(peers.get(0, [])) == others:
        return "every rank sends to rank 0, and rank 0 sends to every rank: a gather and a broadcast"
    if all(sorted(peers.get(r, [])) == [q for q in range(p) if q != r] for r in range(p)):
        return "every rank sends straight to every other rank (one message to each)"
    if all(peers.get(r) and all(d == (r + 1) % p for d in peers[r]) for r in range(p)):
        return f"every rank sends only to its right neighbour, {counts[0]} message(s) each"
    if all(peers.get(r) and all(d == (r - 1) % p for d in peers[r]) for r in range(p)):
        return f"every rank sends only to its left neighbour, {counts[0]} message(s) each"
    busiest = max(counts, key=lambda r: counts[r])
    listed = ", ".join(str(d) for d in peers[busiest][:8]) + (" ..." if len(peers[busiest]) > 8 else "")
    return f"{total} messages in all; rank {busiest} sent the most, {counts[busiest]} (to ranks {listed})"


def expected_sends(schedule, p, nbytes, root=0, **options):
    """``{rank: [(dst, bytes)]}`` of ``schedule(p, nbytes, root, **options)``."""
    return schedule_sends(schedule(p, nbytes, root, **options))
