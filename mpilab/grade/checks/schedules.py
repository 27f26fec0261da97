"""Checks of a broadcast schedule a student writes with :class:`mpilab.model.schedules.Program`.

The student's function runs in the notebook's kernel only: the grader never runs notebook code.
So the function is turned into data there (:func:`schedules_data`: what it returns for every
process count up to :data:`MAX_P` and the roots :func:`roots` names, each rank's calls as
plain lists, in one JSON text), and the checks read that data back (:func:`read_data`,
:func:`programs`) and play it against the α-β event model
(:func:`mpilab.model.schedules.simulate`). A case (one p and root) passes when every rank gets
the buffer, no rank sends it before it has it, nothing deadlocks or stays unreceived, and the
schedule takes the time it should (the expected time is the caller's: the student's own formula
in the notebook, the answer key's in the grader).
"""

import json
import math

from mpilab.core.errors import UsageError
from mpilab.grade.cases import Case
from mpilab.model import schedules

#: The largest process count handed in.
MAX_P = 16
#: Bytes of the broadcast buffer in the cases.
NBYTES = 1000
#: α (µs) and β (µs/B) of the event model in the checks.
ALPHA, BETA = 1.5, 0.001
#: Calls of a Program and the fields they keep.
_FIELDS = ("call", "dst", "sbytes", "src", "rbytes", "tag", "reqs", "req")
#: Most calls one rank's program may have in the data (a larger one is cut, and fails).
MAX_CALLS = 4 * MAX_P


def roots(p):
    """The roots handed in for ``p`` ranks: 0, 1, the middle one and the last."""
    return sorted({0, min(1, p - 1), p // 2, p - 1})


def schedules_data(build, max_p=MAX_P, nbytes=NBYTES):
    """What ``build(p, nbytes, root)`` returns for every p in 1..max_p and its :func:`roots`, as
    one JSON text.

    Returns
    -------
    str
        JSON of ``{"p,root": [[rank, [[call, dst, sbytes, src, rbytes, tag, [reqs], req], ...]], ...]
        or "error: ..."}``: one entry per case, the error text where the function raised or
        returned something else than a list of Programs.
    """
    return json.dumps(_cases(build, max_p, nbytes), separators=(",", ":"))


def read_data(text):
    """The cases of :func:`schedules_data`'s text: ``{"p,root": entry}`` (an error entry when the
    text cannot be read)."""
    if not isinstance(text, str) or len(text) > 4_000_000:
        return {"error": "error: the schedule was not handed in as data"}
    try:
        data = json.loads(text)
    except ValueError:
        return {"error": "error: the schedule could not be read back"}
    return data if isinstance(data, dict) else {"error": "error: the schedule could not be read back"}


def _cases(build, max_p, nbytes):
    out = {}
    if not callable(build):
        return {"error": f"error: linear_bcast is not a function: {type(build).__name__}"}
    for p in range(1, max_p + 1):
        for root in roots(p):
            key = f"{p},{root}"
            try:
                progs = build(p, nbytes, root)
            except Exception as exc:  # the student's code: any error is this case's answer
                out[key] = f"error: your function raised {type(exc).__name__}: {exc}"[:300]
                continue
            if not isinstance(progs, (list, tuple)) or not all(
                isinstance(x, schedules.Program) for x in progs
            ):
                out[key] = (
                    f"error: return a list of {p} schedules.Program, one per rank (got "
                    f"{type(progs).__name__})"
                )
                continue
            out[key] = [
                [int(getattr(x, "rank", -1)), [_op(op) for op in list(x.ops)[: MAX_CALLS + 1]]] for x in progs
            ]
    return out


def _op(op):
    return [
        op.call,
        op.dst,
        int(op.sbytes or 0),
        op.src,
        int(op.rbytes or 0),
        int(op.tag or 0),
        [int(r) for r in op.reqs],
        op.req,
    ]


def programs(entry):
    """The Programs of one case's data (:func:`schedules_data`).

    Raises
    ------
    ValueError
        Data that is not what :func:`schedules_data` writes (the message says what).
    """
    if isinstance(entry, str):
        raise ValueError(entry[len("error: ") :] if entry.startswith("error: ") else entry)
    if not isinstance(entry, list):
        raise ValueError("the schedule could not be read back")
    progs = []
    for item in entry:
        try:
            rank, ops = item
        except (TypeError, ValueError):
            raise ValueError("the schedule could not be read back") from None
        prog = schedules.Program(int(rank))
        if len(ops) > MAX_CALLS:
            raise ValueError(f"rank {rank} makes more than {MAX_CALLS} calls")
        for op in ops:
            try:
                call, dst, sbytes, src, rbytes, tag, reqs, req = op
            except (TypeError, ValueError):
                raise ValueError(f"rank {rank}: a call could not be read back") from None
            if call not in ("Send", "Recv", "Sendrecv", "Isend", "Irecv", "Wait", "Waitall"):
                raise ValueError(f"rank {rank}: unknown call {call!r}")
            prog.ops.append(
                schedules.Op(
                    str(call),
                    None if dst is None else int(dst),
                    int(sbytes),
                    None if src is None else int(src),
                    int(rbytes),
                    int(tag),
                    tuple(int(r) for r in reqs),
                    None if req is None else int(req),
                )
            )
        progs.append(prog)
    return progs


def bcast_case(entry, p, root, want_us=None, nbytes=NBYTES, what="the expected", hidden=False):
    """One case of a broadcast schedule: ``p`` ranks, ``root``; ``want_us`` its time, if known.

    Returns
    -------
    Case
    """
    title = f"p = {p}, root = {root}"
    try:
        progs = programs(entry)
    except ValueError as exc:
        return Case(title, False, str(exc), hidden=hidden)
    if len(progs) != p:
        return Case(title, False, f"{len(progs)} programs for {p} ranks: return one per rank", hidden=hidden)
    wrong = [r for r, prog in enumerate(progs) if prog.rank != r]
    if wrong:
        return Case(
            title,
            False,
            f"list item {wrong[0]} is the program of rank {progs[wrong[0]].rank}; "
            f"put rank r's program at index r",
            hidden=hidden,
        )
    bad = [
        f"rank {r} talks to rank {x}"
        for r, prog in enumerate(progs)
        for op in prog.ops
        for x in (op.dst, op.src)
        if x is not None and not 0 <= x < p
    ]
    if bad:
        return Case(title, False, f"{bad[0]}, which does not exist", hidden=hidden)
    try:
        calls, msgs = schedules.simulate(progs, ALPHA, BETA)
    except UsageError as exc:
        return Case(title, False, str(exc), hidden=hidden)
    has = {root: 0.0}
    for m in msgs.sort_values("send_us", kind="stable").itertuples():
        if m.recv_us is None or m.recv_us != m.recv_us:
            return Case(
                title, False, f"the message of rank {m.src} to rank {m.dst} is never received", hidden=hidden
            )
        if m.src not in has or has[m.src] > m.send_us + 1e-9:
            return Case(
                title,
                False,
                f"rank {m.src} sends to rank {m.dst} at {m.send_us:g} us, before it has the buffer",
                hidden=hidden,
            )
        if m.bytes >= nbytes:
            has[m.dst] = min(has.get(m.dst, math.inf), m.recv_us)
    missing = [r for r in range(p) if r not in has]
    if missing:
        return Case(title, False, f"rank(s) {missing} never receive the {nbytes}-byte buffer", hidden=hidden)
    total = float(calls["end_us"].max()) if len(calls) else 0.0
    if want_us is not None and not math.isclose(total, want_us, rel_tol=1e-9, abs_tol=1e-9):
        return Case(
            title,
            False,
            f"your schedule takes {total:g} us under the α-β model (α = {ALPHA} us, "
            f"β = {BETA} us/B, n = {nbytes} B); {what} time is {want_us:g} us",
            hidden=hidden,
        )
    return Case(title, True, hidden=hidden)
