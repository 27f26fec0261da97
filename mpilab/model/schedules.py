"""Communication schedules of the kit's algorithms, and the α-β event model that times them.

A schedule is, for every rank, the list of point-to-point calls that the C code in
``c_reference/`` makes (same peers, sizes, tags and order; the C code's local copies, `copy`
rows in a trace, are not messages and are left out). :func:`simulate` plays the schedules against
the α-β (Hockney) model:

* a message moves once its send and its receive are both posted (the receiver is ready) and,
  with ``ports``, once the sender has a free send slot and the receiver a free receive slot;
  a message of ``m`` bytes that starts moving at ``t`` arrives at ``t + α + m·β``;
* the receive request completes when its message arrives; the send request too — or at once,
  when the message is smaller than ``eager_bytes`` (the library copies it out and lets the
  sender go); posting ``MPI_Isend``/``MPI_Irecv`` takes no time;
* a blocking ``MPI_Send``, ``MPI_Recv`` or ``MPI_Sendrecv`` is a post followed by a wait: a
  ``Sendrecv`` ends when both its send and its receive are done;
* ``ports``: a rank can send at most ``ports`` messages at a time and receive at most ``ports``
  at a time (seed 004's degree of overlap o, not LogP's or SMPI's per-message overhead o),
  first come, first served. ``ports=1`` (one message in and one out at a time) is the model
  behind :mod:`mpilab.model.costs`; ``ports=None`` lets any number of messages overlap;
  ``ports="shared"`` lets them overlap but share the bandwidth of the rank's outgoing and
  incoming port fairly (max-min, the way SimGrid shares a link): every message pays its α in
  parallel with the others, then moves at its share of ``1/port_beta`` bytes/µs (and never
  faster than ``1/β`` of its own route).

Which schedules are here. This module has the schedules of the two reference algorithms of the
student's side (:func:`gather_bcast` and :func:`pairwise`, whose C code students read). The
schedules of the algorithms the labs ask students to write (ring and Bruck in lab 2, the binomial
broadcast) are in the answer key (``mpilab_key.schedules``). Each is the ``schedule`` of its
record in :mod:`mpilab.model.algorithms`, which finds a schedule by name
(:func:`mpilab.model.algorithms.schedule`).

SimGrid's SMPI follows the same rules on the kit's platforms (a transfer starts when both
sides are posted; sends below the platform's eager limit release the sender at once and pay its
per-message overheads; each core has one full-duplex port, the cores of a socket share its
memory), so the right ``ports`` and ``eager_bytes`` with the platform's α, β, shared links and
overheads (:func:`mpilab.simulate.routes.platform_model`) reproduce an SMPI run; which options
are right is a question of lab 4.

Examples
--------
>>> calls, messages = simulate(pairwise(4, 1024, 0), alpha=2.0, beta=0.001)
>>> round(float(calls["end_us"].max()), 6)   # 2 steps: 2 + 1024 * 0.001, then 2 + 2048 * 0.001 us
7.072
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict, deque
from dataclasses import dataclass, field

import pandas as pd

from mpilab.core.errors import UsageError

#: Tags of c_reference/include/labcoll_impl.h, so predicted and traced messages look alike.
TAGS = {"allgather": 0x1AB0, "gather": 0x1AB1, "bcast": 0x1AB2, "fold": 0x1AB3}

#: Columns of the calls table (one row per MPI call of one rank) and of the messages table.
CALL_COLUMNS = ["rank", "call", "start_us", "end_us", "dst", "sbytes", "src", "rbytes", "tag"]
MESSAGE_COLUMNS = ["src", "dst", "tag", "bytes", "send_us", "recv_us"]


@dataclass
class Op:
    """One MPI call of a rank's program. ``reqs``: the requests a wait completes."""

    call: str
    dst: int | None = None
    sbytes: int = 0
    src: int | None = None
    rbytes: int = 0
    tag: int = 0
    reqs: tuple = ()
    req: int | None = None


@dataclass
class Program:
    """The point-to-point calls of one rank, in program order (built with the methods below)."""

    rank: int
    ops: list = field(default_factory=list)
    _next: int = 0

    def _new(self):
        self._next += 1
        return self._next - 1

    def isend(self, dst, nbytes, tag=0):
        """Post ``MPI_Isend``; returns the request number for :meth:`wait`."""
        r = self._new()
        self.ops.append(Op("Isend", dst=dst, sbytes=nbytes, tag=tag, req=r))
        return r

    def irecv(self, src, nbytes, tag=0):
        """Post ``MPI_Irecv``; returns the request number for :meth:`wait`."""
        r = self._new()
        self.ops.append(Op("Irecv", src=src, rbytes=nbytes, tag=tag, req=r))
        return r

    def wait(self, *reqs):
        """``MPI_Wait`` (one request) or ``MPI_Waitall``."""
        self.ops.append(Op("Wait" if len(reqs) == 1 else "Waitall", reqs=tuple(reqs)))

    def send(self, dst, nbytes, tag=0):
        self.ops.append(Op("Send", dst=dst, sbytes=nbytes, tag=tag))

    def recv(self, src, nbytes, tag=0):
        self.ops.append(Op("Recv", src=src, rbytes=nbytes, tag=tag))

    def sendrecv(self, dst, sbytes, src, rbytes, tag=0):
        self.ops.append(Op("Sendrecv", dst=dst, sbytes=sbytes, src=src, rbytes=rbytes, tag=tag))


# --- the schedules (each mirrors one C file) ---------------------------------------------------


def pairwise(p, n, root):
    """c_reference/allgather/pairwise.c: recursive doubling, extra ranks folded in and out."""
    q = 1
    while q * 2 <= p:
        q *= 2
    e = p - q
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        if r >= q:
            prog.send(r - q, n, TAGS["fold"])
        else:
            if r < e:
                prog.recv(q + r, n, TAGS["fold"])
            dist = 1
            while dist < q:
                partner = r ^ dist
                mybase, pbase = r & ~(dist - 1), partner & ~(dist - 1)
                prog.sendrecv(partner, dist * n, partner, dist * n, TAGS["allgather"])
                if e > 0:  # the folded blocks of each group, possibly none
                    mycnt = max(0, min(mybase + dist, e) - mybase)
                    pcnt = max(0, min(pbase + dist, e) - pbase)
                    prog.sendrecv(partner, mycnt * n, partner, pcnt * n, TAGS["allgather"])
                dist *= 2
        if r >= q:
            prog.recv(r - q, p * n, TAGS["fold"])
        elif r < e:
            prog.send(q + r, p * n, TAGS["fold"])
    return progs


def gather_bcast(p, n, root):
    """c_reference/allgather/gather_bcast.c: non-blocking gather to rank 0, then broadcast."""
    root = 0
    progs = [Program(r) for r in range(p)]
    for r, prog in enumerate(progs):
        if r == root:  # the root's own block is a local copy, no message
            prog.wait(*[prog.irecv(i, n, TAGS["gather"]) for i in range(p) if i != root])
            prog.wait(*[prog.isend(i, p * n, TAGS["bcast"]) for i in range(p) if i != root])
        else:
            prog.wait(prog.isend(root, n, TAGS["gather"]))
            prog.wait(prog.irecv(root, p * n, TAGS["bcast"]))
    return progs


# --- the event model -----------------------------------------------------------------------------


def _as_pair_fn(x, name):
    if callable(x):
        return x
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise UsageError(f"bad {name} {x!r}; valid: a number (us) or a function (src, dst) -> us") from None
    if v < 0:
        raise UsageError(f"bad {name} {x!r}; valid: a number >= 0")
    return lambda src, dst: v


class _Ports:
    """Free-at times of ``k`` send slots or receive slots of each rank (None: unlimited)."""

    def __init__(self, nprocs, k):
        self.k = k
        self.free = [[0.0] * k for _ in range(nprocs)] if k else None

    def earliest(self, rank):
        return self.free[rank][0] if self.k else 0.0

    def take(self, rank, until):
        if self.k:
            heapq.heapreplace(self.free[rank], until)


class _Fluid:
    """Messages sharing resources: each pays its latency, then moves at a weighted max-min fair
    share of every shared resource on its way (by default its sender's outgoing and its
    receiver's incoming port), capped by its own route (SimGrid's bandwidth sharing, as SMPI
    simulates it)."""

    def __init__(self, port_beta, resources=None):
        self.capacity = math.inf if port_beta <= 0 else 1.0 / port_beta
        self.resources = resources or (
            lambda src, dst: [(("out", src), self.capacity), (("in", dst), self.capacity)]
        )
        self.now = 0.0
        self.waiting = []  # (latency end, seq, message, cap, weight): not moving bytes yet
        self.active = {}  # seq -> [message, remaining bytes, cap, rate, weight, resources]
        self.seq = itertools.count()

    def busy(self):
        return bool(self.waiting or self.active)

    def add(self, msg, latency_end, beta, weight=1.0):
        heapq.heappush(
            self.waiting, (latency_end, next(self.seq), msg, math.inf if beta <= 0 else 1.0 / beta, weight)
        )

    def next_event(self):
        t = self.waiting[0][0] if self.waiting else math.inf
        for flow in self.active.values():
            left, rate = flow[1], flow[3]
            t = min(t, self.now + (left / rate if rate < math.inf else 0.0))
        return t

    def advance(self, t):
        """Move to time t; return the (message, arrival time) pairs that arrived."""
        arrived = []
        for key, flow in list(self.active.items()):
            flow[1] -= flow[3] * (t - self.now) if flow[3] < math.inf else flow[1]
            if flow[1] <= 1e-9 * max(1.0, flow[0]["bytes"]):
                arrived.append((flow[0], t))
                del self.active[key]
        self.now = t
        while self.waiting and self.waiting[0][0] <= t:
            _, key, msg, cap, weight = heapq.heappop(self.waiting)
            if msg["bytes"] <= 0:
                arrived.append((msg, t))
            else:
                res = list(self.resources(msg["src"], msg["dst"]))
                self.active[key] = [msg, float(msg["bytes"]), cap, 0.0, weight, res]
        self._share()
        return arrived

    def _share(self):
        """Weighted max-min rates (progressive filling): on a shared resource a flow of weight
        w gets level / w; each flow is also capped by its own route."""
        left = {}
        users = defaultdict(set)
        for key, flow in self.active.items():
            for res, cap in flow[5]:
                left[res] = cap
                users[res].add(key)
        todo = set(self.active)
        while todo:
            inv = {k: 1.0 / self.active[k][4] for k in todo}
            cands = [left[q] / sum(inv[k] for k in users[q] & todo) for q in users if users[q] & todo]
            cands += [self.active[k][2] * self.active[k][4] for k in todo]
            level = min(cands)
            fixed = {k for k in todo if self.active[k][2] * self.active[k][4] <= level * (1 + 1e-12)}
            for q in users:
                live = users[q] & todo
                if live and left[q] / sum(inv[k] for k in live) <= level * (1 + 1e-12):
                    fixed |= live
            for k in fixed:
                rate = level * inv[k]
                self.active[k][3] = rate
                for res, _ in self.active[k][5]:
                    left[res] -= rate
            todo -= fixed


def simulate(
    programs,
    alpha,
    beta,
    ports=1,
    eager_bytes=0,
    start_us=None,
    port_beta=None,
    weight=None,
    resources=None,
    o_send=0.0,
    o_recv=0.0,
    o_isend=None,
    o_send_per_byte=0.0,
    o_recv_per_byte=0.0,
    self_beta=0.0,
):
    """Time every call of every rank's program with the α-β model (see the module docstring).

    Parameters
    ----------
    programs : list of Program
        One per rank, e.g. from :func:`schedule`.
    alpha : float or callable
        Latency in µs, or ``alpha(src, dst)`` for pairs that differ.
    beta : float or callable
        µs per byte, or ``beta(src, dst)``.
    ports : int, None or "shared"
        Messages a rank sends (and receives) at the same time; None for no limit; "shared"
        for any number sharing the port's bandwidth.
    port_beta : float, optional
        With ``ports="shared"``: µs per byte of a rank's port (default: β if it is a number,
        else the smallest β between two ranks).
    weight : callable, optional
        With ``ports="shared"``: ``weight(src, dst)``, the sharing penalty of a message; on a
        shared port a message of weight w moves at ``level / w`` (default: all equal). SimGrid
        gives a route the penalty latency + 8775 B · Σ 1/bandwidth of its links
        (:func:`mpilab.simulate.routes.route_weight`): long round trips get less, as under TCP.
    resources : callable, optional
        With ``ports="shared"``: ``resources(src, dst)``, the shared resources a message
        crosses as ``(key, bytes per µs)`` pairs (default: the sender's outgoing port and the
        receiver's incoming port, of ``1 / port_beta`` each). An SMPI platform's shared links
        (ports, memory, network cards) come from
        :func:`mpilab.simulate.routes.platform_model`.
    o_send, o_isend, o_recv : float or callable
        Per-message overheads in µs (LogP's o; SMPI's ``smpi/os``, ``smpi/ois``, ``smpi/or``), or
        ``o(src, dst)`` where they depend on the pair (per-class overheads, SMPI's cost callbacks):
        a rank is busy ``o_isend`` before an ``MPI_Isend`` (or the send half of an
        ``MPI_Sendrecv``) leaves, ``o_send`` before a blocking eager ``MPI_Send`` leaves, and
        ``o_recv`` after each eager message it receives, when its wait sees it complete (one
        after the other, in the order they arrived). Messages of ``eager_bytes`` or more pay
        no ``o_send`` and no ``o_recv``, as in SMPI. ``o_isend`` defaults to ``o_send``.
    o_send_per_byte, o_recv_per_byte : float
        µs per byte added to ``o_send``/``o_isend`` and ``o_recv``.
    self_beta : float
        µs per byte of a message a rank sends to itself (0: instantaneous; SMPI moves it over
        its loopback link, 10 GB/s and no latency by default).
    eager_bytes : int
        Sends of fewer bytes complete as soon as they are posted (0: every send waits for
        its message to arrive, the model of :mod:`mpilab.model.costs`).
    start_us : sequence of float, optional
        When each rank starts (default: all at 0), e.g. a measured run's start times.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        The calls (:data:`CALL_COLUMNS`) and the messages between two ranks
        (:data:`MESSAGE_COLUMNS` plus ``start_us`` and ``arrive_us``: when the transfer started
        and when it arrived).

    Raises
    ------
    UsageError
        When the programs deadlock (a rank waits for a message nobody sends); the message
        names the ranks and what they wait for.
    """
    costs = _Costs.of(
        programs,
        alpha,
        beta,
        ports,
        eager_bytes,
        port_beta,
        weight,
        resources,
        self_beta,
        dict(
            o_send=o_send,
            o_isend=o_send if o_isend is None else o_isend,
            o_recv=o_recv,
            o_send_per_byte=o_send_per_byte,
            o_recv_per_byte=o_recv_per_byte,
        ),
    )
    if start_us is None:
        start_us = [0.0] * len(programs)
    if len(start_us) != len(programs):
        raise UsageError(f"start_us has {len(start_us)} times for {len(programs)} ranks; give one per rank")
    run = _Run(programs, costs, start_us)
    run.play()
    run.check_finished()
    return run.tables()


def _check_ports(ports):
    """``ports`` as :func:`simulate` takes it, or a UsageError naming it."""
    whole = (
        isinstance(ports, (int, float)) and not isinstance(ports, bool) and int(ports) == ports and ports >= 1
    )
    if not (ports == "shared" or ports is None or whole):
        raise UsageError(f"bad ports {ports!r}; valid: an integer >= 1, None (no limit) or 'shared'")


@dataclass
class _Costs:
    """What :func:`simulate` charges: α and β per pair, the ports, eager sends, overheads."""

    alpha: object  # (src, dst) -> µs
    beta: object  # (src, dst) -> µs per byte
    ports: object  # int, None or "shared"
    eager_bytes: int
    port_beta: object  # ports="shared": µs per byte of a rank's port
    weight: object  # (src, dst) -> sharing penalty
    resources: object  # (src, dst) -> shared resources, or None for the two ports
    self_beta: float
    o: dict  # o_send, o_isend, o_recv ((src, dst) -> µs), o_send_per_byte, o_recv_per_byte

    @classmethod
    def of(cls, programs, alpha, beta, ports, eager_bytes, port_beta, weight, resources, self_beta, o):
        """Check :func:`simulate`'s arguments once and hold them as functions and numbers."""
        alpha_fn, beta_fn = _as_pair_fn(alpha, "alpha"), _as_pair_fn(beta, "beta")
        _check_ports(ports)
        p = len(programs)
        if ports == "shared" and port_beta is None:
            port_beta = (
                beta_fn(0, 0)
                if not callable(beta)
                else min([beta_fn(a, b) for a in range(p) for b in range(p) if a != b] or [0.0])
            )
        for name, v in o.items():
            if not callable(v) and not float(v) >= 0:
                raise UsageError(f"bad {name} {v!r}; valid: a number >= 0 or a function (src, dst) -> us")
        o = dict(o, **{n: _as_pair_fn(o[n], n) for n in ("o_send", "o_isend", "o_recv")})
        weight_fn = weight if weight is not None else (lambda src, dst: 1.0)
        return cls(alpha_fn, beta_fn, ports, eager_bytes, port_beta, weight_fn, resources, self_beta, o)

    def send_overhead(self, src, dst, nbytes, isend):
        """µs ``src`` is busy before its message to ``dst`` leaves (an ``MPI_Isend`` or a blocking
        send)."""
        if isend:
            return self.o["o_isend"](src, dst) + self.o["o_send_per_byte"] * nbytes
        if nbytes < self.eager_bytes:
            return self.o["o_send"](src, dst) + self.o["o_send_per_byte"] * nbytes
        return 0.0

    def recv_overhead(self, src, dst, nbytes):
        """µs ``dst`` spends on an eager message from ``src`` its wait sees complete."""
        return self.o["o_recv"](src, dst) + self.o["o_recv_per_byte"] * nbytes


class _Run:
    """One play of the programs: an event loop over the ranks' calls (in a heap by time) and, with
    shared ports, the messages moving through :class:`_Fluid`."""

    def __init__(self, programs, costs, start_us):
        p = len(programs)
        self.programs, self.costs = programs, costs
        shared = costs.ports == "shared"
        self.out_ports = _Ports(p, None if shared else costs.ports)
        self.in_ports = _Ports(p, None if shared else costs.ports)
        self.fluid = _Fluid(costs.port_beta, costs.resources) if shared else None
        self.recv_bytes = [dict() for _ in range(p)]  # rank -> receive request -> (bytes, source)
        self.done = [dict() for _ in range(p)]  # rank -> request -> completion time (None: not yet)
        self.waiting = defaultdict(deque)  # (src, dst, tag) -> posted sends or receives
        self.calls, self.messages = [], []
        self.pc = [0] * p
        self.blocked = {}  # rank -> (wait start, requests, call row)
        self.sleeping = {}  # rank -> (call row, when its overhead began)
        self.internal = itertools.count(10**9)  # request numbers of blocking calls
        self.heap = [(float(start_us[r]), r) for r in range(p)]
        heapq.heapify(self.heap)

    # -- messages --------------------------------------------------------------------------------

    def complete(self, rank, req, t):
        self.done[rank][req] = t
        if rank in self.blocked:
            self.wake(rank)

    def arrived(self, msg, arrive):
        msg.update(arrive_us=arrive, recv_us=arrive)
        req = msg.pop("recv_req")
        self.recv_bytes[msg["dst"]][req] = (msg["bytes"], msg["src"])
        self.complete(msg["dst"], req, arrive)
        if self.done[msg["src"]][msg["send_req"]] is None:
            self.complete(msg["src"], msg["send_req"], arrive)

    def move(self, msg, t):
        """Both sides are posted at time t: the transfer starts when the ports allow."""
        c, src, dst = self.costs, msg["src"], msg["dst"]
        if self.fluid is not None and src != dst:
            msg["start_us"] = t
            self.fluid.add(msg, t + c.alpha(src, dst), c.beta(src, dst), c.weight(src, dst))
            return
        if src == dst:
            start, arrive = t, t + msg["bytes"] * c.self_beta
        else:
            start = max(t, self.out_ports.earliest(src), self.in_ports.earliest(dst))
            arrive = start + c.alpha(src, dst) + msg["bytes"] * c.beta(src, dst)
            self.out_ports.take(src, arrive)
            self.in_ports.take(dst, arrive)
        msg["start_us"] = start
        self.arrived(msg, arrive)

    def post_send(self, r, t, req, peer, nbytes, tag):
        self.done[r][req] = None
        queue = self.waiting[(r, peer, tag)]
        msg = dict(
            src=r,
            dst=peer,
            tag=tag,
            bytes=nbytes,
            send_us=t,
            recv_us=None,
            start_us=None,
            arrive_us=None,
            send_req=req,
        )
        self.messages.append(msg)
        if nbytes < self.costs.eager_bytes:
            self.done[r][req] = t
        if queue and queue[0][0] == "recv":
            msg["recv_req"] = queue.popleft()[1]
            self.move(msg, t)
        else:
            queue.append(("send", msg))

    def post_recv(self, r, t, req, peer, tag):
        self.done[r][req] = None
        queue = self.waiting[(peer, r, tag)]
        if queue and queue[0][0] == "send":
            msg = queue.popleft()[1]
            msg["recv_req"] = req
            self.move(msg, t)
        else:
            queue.append(("recv", req))

    # -- ranks -----------------------------------------------------------------------------------

    def wake(self, r):
        """A blocked rank goes on once all its requests are done (plus its receive overheads)."""
        t0, reqs, row = self.blocked[r]
        times = [self.done[r][q] for q in reqs]
        if any(x is None for x in times):
            return
        del self.blocked[r]
        end = t0
        for when, q in sorted(zip(times, reqs)):
            end = max(end, when)
            nb, src = self.recv_bytes[r].pop(q, (None, None))
            if nb is not None and nb < self.costs.eager_bytes:
                end += self.costs.recv_overhead(src, r, nb)
        row["end_us"] = end
        heapq.heappush(self.heap, (end, r))

    def step(self, r, t):
        """Run rank r's calls from time t until it blocks, sleeps through an overhead or ends."""
        ops = self.programs[r].ops
        while self.pc[r] < len(ops):
            op = ops[self.pc[r]]
            o = 0.0
            if op.dst is not None and op.call in ("Isend", "Send", "Sendrecv"):
                o = self.costs.send_overhead(r, op.dst, op.sbytes, op.call != "Send")
            if r in self.sleeping:  # back from the overhead: post now
                row, _ = self.sleeping.pop(r)
            else:
                row = dict(
                    rank=r,
                    call=op.call,
                    start_us=t,
                    end_us=t,
                    dst=op.dst,
                    sbytes=op.sbytes if op.dst is not None else None,
                    src=op.src,
                    rbytes=op.rbytes if op.src is not None else None,
                    tag=op.tag,
                )
                self.calls.append(row)
                if o > 0:  # the rank is busy o, then its message leaves
                    self.sleeping[r] = (row, t)
                    heapq.heappush(self.heap, (t + o, r))
                    return
            self.pc[r] += 1
            if op.call == "Isend":
                row["end_us"] = t
                self.post_send(r, t, op.req, op.dst, op.sbytes, op.tag)
                continue
            if op.call == "Irecv":
                self.post_recv(r, t, op.req, op.src, op.tag)
                continue
            self.blocked[r] = (t, self.wait_for(op, r, t), row)
            self.wake(r)
            return  # resumed from the heap at the wait's end

    def wait_for(self, op, r, t):
        """The requests a wait (or a blocking call, posted here first) waits for."""
        if op.call in ("Wait", "Waitall"):
            return op.reqs
        reqs = []
        if op.dst is not None:
            reqs.append(next(self.internal))
            self.post_send(r, t, reqs[-1], op.dst, op.sbytes, op.tag)
        if op.src is not None:
            reqs.append(next(self.internal))
            self.post_recv(r, t, reqs[-1], op.src, op.tag)
        return reqs

    # -- the loop and its result -----------------------------------------------------------------

    def play(self):
        """Take the earliest event, a rank's or a message's, until there is none."""
        fluid = self.fluid
        while self.heap or (fluid is not None and fluid.busy()):
            t_flow = fluid.next_event() if fluid is not None else math.inf
            if self.heap and self.heap[0][0] < t_flow:
                t, r = heapq.heappop(self.heap)
                self.step(r, t)
            else:
                for msg, t in fluid.advance(t_flow):
                    self.arrived(msg, t)

    def check_finished(self):
        """UsageError naming every blocked rank when the programs deadlocked."""
        if self.blocked or any(self.pc[r] < len(prog.ops) for r, prog in enumerate(self.programs)):
            waits = [
                f"rank {r} in {row['call']} (src {row['src']}, dst {row['dst']})"
                for r, (_, _reqs, row) in sorted(self.blocked.items())
            ]
            raise UsageError("the schedule deadlocks: " + "; ".join(waits))

    def tables(self):
        """The calls and messages tables of :func:`simulate`."""
        # a rank's messages to itself cost time (its overheads, the loopback) but are no arrows:
        # the tracer of real runs has none either
        messages = [m for m in self.messages if m["src"] != m["dst"]]
        for msg in messages:
            msg.pop("send_req", None)
            msg.pop("recv_req", None)
        calls = pd.DataFrame(self.calls, columns=CALL_COLUMNS)
        messages = pd.DataFrame(messages, columns=MESSAGE_COLUMNS + ["start_us", "arrive_us"])
        return calls, messages
