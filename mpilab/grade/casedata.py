"""The grader's side of ``mpilab/data/grading/harness.h``: the cases, each rank's data, and what
the ranks hand back.

A case harness runs the student's function in the student's own processes, so nothing it
computes there can decide a verdict. The grader (this trusted process) chooses everything and
keeps the verdict to itself:

* :func:`prepare` writes the ``plan`` (the cases, as :class:`Spec`\\ s) and, per rank, its input
  ``in.<rank>``: random bytes chosen here for every case. Each rank reads its file and deletes
  it before any student code runs (then the ranks meet in a barrier), so another rank's data
  reaches a rank only in a message; nothing is derived from a seed, so sending a seed instead
  of the data gains nothing.
* :func:`read_records` reads back ``out.<rank>``: for every case a rank finished, its buffers as
  the student's function left them (with what changed in the guard bytes around them), the
  return code, the library collectives it called and the messages it sent
  (:class:`Record`). The caller compares the buffers with what it computes from the data it
  chose (:mod:`mpilab.grade.checks.collectives`). A forged record would need the other ranks'
  data, which only messages carry.
* :func:`read_states` reads ``state.<rank>``: where each rank was (the case, the blocking call
  and the peers it waited for) when the run ended: what a hang or a crash is explained with.
* :func:`read_errors` reads ``error.<rank>``: the MPI error the library raised on a rank (its
  case, its call and the library's words), written by the harness's own error handler so that
  the launcher cannot lose it.

Every file read here is checked: a regular file (no link), of bounded size, whose records parse;
anything else is "not what the harness wrote" and its rank's cases fail.
"""

import os
import re
import secrets
import stat
import struct
from dataclasses import dataclass, field

import numpy as np

#: The byte the harness puts around every buffer, and in a receive buffer before the call.
GUARD, FILL = 0xAB, 0xEE
#: Element size and numpy type of each datatype a plan names.
TYPES = {"char": (1, "i1"), "int": (4, "<i4"), "double": (8, "<f8")}
#: Largest result file read back (a bigger one is not what the harness wrote).
MAX_RESULT_BYTES = 256 << 20
#: The names of the point-to-point calls in a record (harness.h's hx_call_names).
CALLS = (
    "Send",
    "Ssend",
    "Rsend",
    "Isend",
    "Issend",
    "Irsend",
    "Recv",
    "Irecv",
    "Sendrecv",
    "Sendrecv_replace",
    "Wait",
    "Waitall",
    "Waitany",
    "Waitsome",
    "Probe",
)
_MAGIC = b"MPLBCAS1"
_HEAD = struct.Struct("<9i")
_REGION = struct.Struct("<8s5q")
_MSG = np.dtype([("dir", "<i4"), ("peer", "<i4"), ("tag", "<i4"), ("call", "<i4"), ("bytes", "<i8")])


@dataclass(frozen=True)
class Spec:
    """One case of a plan.

    Attributes
    ----------
    seq : int
        Its number in the plan (from 1).
    kind : str
        The kind it belongs to ("int", "in-place", ...): the unit of the verdict.
    type : {"char", "int", "double"}
    count : int
        Elements (per rank's block, or of the message: as the collective defines it).
    comm : {"world", "halves"}
        MPI_COMM_WORLD, or the odd and the even ranks apart, each in reversed order.
    root, in_place, segsize
        The root rank (in the case's communicator), MPI_IN_PLACE, the pipeline's segment size.
    detail : str
        What the feedback calls it: "count=64", "count=1000 root=3".
    """

    seq: int
    kind: str
    type: str
    count: int
    comm: str = "world"
    root: int = 0
    in_place: bool = False
    segsize: int = 0
    detail: str = ""

    @property
    def size(self):
        """Bytes of one element."""
        return TYPES[self.type][0]

    @property
    def name(self):
        return f"{self.kind} {self.detail}".strip()

    def line(self):
        return (
            f"{self.seq}\t{self.kind}\t{self.type}\t{self.count}\t{self.comm}\t{self.root}\t"
            f"{int(self.in_place)}\t{self.segsize}\t{self.detail}\n"
        )


def groups(comm, nprocs):
    """The communicators of a case as lists of world ranks, each in its rank order."""
    if comm == "world":
        return [list(range(nprocs))]
    return [sorted((r for r in range(nprocs) if r % 2 == c), reverse=True) for c in (0, 1) if c < nprocs]


def group_of(comm, nprocs, world_rank):
    """The world ranks of ``world_rank``'s communicator in a case."""
    return next(g for g in groups(comm, nprocs) if world_rank in g)


def rng():
    """A generator seeded from the operating system: the data of a launch, unguessable."""
    return np.random.default_rng(secrets.randbits(128))


def random_elements(gen, type_, count):
    """``count`` random elements of ``type_`` as bytes: any byte for char and int; for double
    finite normal numbers (random sign and mantissa, exponent within 2^±20), so that every
    value names its element and no NaN's bits can change on the way."""
    if type_ == "double":
        bits = gen.integers(0, 1 << 52, size=count, dtype=np.uint64)
        bits |= gen.integers(1023 - 20, 1023 + 21, size=count, dtype=np.uint64) << np.uint64(52)
        bits |= gen.integers(0, 2, size=count, dtype=np.uint64) << np.uint64(63)
        return bits.astype("<u8").tobytes()
    return gen.integers(0, 256, size=count * TYPES[type_][0], dtype=np.uint8).tobytes()


def prepare(work, specs, nprocs, inputs):
    """Write the plan of ``specs`` and each rank's input file into ``work``.

    Parameters
    ----------
    work : str
        The scratch directory of the run.
    specs : sequence of Spec
    nprocs : int
    inputs : dict
        ``{seq: {world rank: bytes}}``: each rank's input of each case (a rank without one gets
        none).
    """
    clear(work)
    with open(os.path.join(work, "plan"), "w") as f:
        f.write(f"# mpilab-plan 1 guard={GUARD} fill={FILL}\n")
        for s in specs:
            f.write(s.line())
    for r in range(nprocs):
        with open(os.path.join(work, f"in.{r}"), "wb") as f:
            for s in specs:
                data = inputs.get(s.seq, {}).get(r)
                if data is not None:
                    f.write(struct.pack("<iq", s.seq, len(data)))
                    f.write(data)


_OURS = re.compile(r"^(plan|(in|out|state|error)\.\d+)$")


def clear(work):
    """Remove the files of a run (what :func:`prepare` wrote and the harness left)."""
    for name in os.listdir(work):
        if _OURS.match(name):
            os.remove(os.path.join(work, name))


@dataclass
class Region:
    """A buffer as the student's function left it."""

    name: str
    data: bytes
    #: guard bytes changed before the buffer, and how far before its start the farthest is
    before_changed: int = 0
    before_reach: int = 0
    #: guard bytes changed after it, and how far past its end the farthest change reaches
    after_changed: int = 0
    after_reach: int = 0


@dataclass
class Record:
    """What one rank handed back for one case."""

    seq: int
    rank: int
    size: int
    rc: int
    collectives: list = field(default_factory=list)
    error: str = ""
    regions: dict = field(default_factory=dict)
    messages: object = None
    dropped: int = 0

    def sends(self):
        """The messages it sent to other ranks, in order: [(peer, bytes, tag, call)]."""
        m = self.messages
        if m is None:
            return []
        keep = (m["dir"] == 0) & (m["peer"] >= 0) & (m["peer"] != self.rank) & (m["bytes"] > 0)
        return [(int(x["peer"]), int(x["bytes"]), int(x["tag"]), CALLS[x["call"]]) for x in m[keep]]


class BadResults(Exception):
    """A result file that is not what the harness writes."""


def _read_file(path, cap):
    """The bytes of a regular file (not a link), at most ``cap`` of them; None when absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadResults(f"{os.path.basename(path)} cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadResults(f"{os.path.basename(path)} is not a regular file")
        if st.st_size > cap:
            raise BadResults(f"{os.path.basename(path)} is larger than {cap} bytes")
        chunks, left = [], cap + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_records(data):
    """The records of one ``out.<rank>`` file, in order; BadResults when it does not parse."""
    out, at, n = [], 0, len(data)
    while at < n:
        if data[at : at + 8] != _MAGIC or at + 8 + _HEAD.size > n:
            raise BadResults("a record does not start where one should")
        seq, rank, size, rc, nregions, nmsgs, dropped, clen, elen = _HEAD.unpack_from(data, at + 8)
        at += 8 + _HEAD.size
        if min(nregions, nmsgs, clen, elen, size) < 0 or nregions > 8 or at + clen + elen > n:
            raise BadResults(f"the record of case {seq} is malformed")
        colls = data[at : at + clen].decode("ascii", "replace").split()
        at += clen
        error = data[at : at + elen].decode("ascii", "replace")
        at += elen
        rec = Record(seq, rank, size, rc, [], error, {}, None, dropped)
        for c in colls:
            name, _, csize = c.partition("/")
            rec.collectives.append((name, int(csize) if csize.isdigit() else 0))
        for _ in range(nregions):
            if at + _REGION.size > n:
                raise BadResults(f"the record of case {seq} is cut short")
            name, length, bch, breach, ach, areach = _REGION.unpack_from(data, at)
            at += _REGION.size
            if length < 0 or at + length > n:
                raise BadResults(f"the record of case {seq} is cut short")
            key = name.rstrip(b"\0").decode("ascii", "replace")
            rec.regions[key] = Region(key, data[at : at + length], bch, breach, ach, areach)
            at += length
        end = at + nmsgs * _MSG.itemsize
        if end > n:
            raise BadResults(f"the record of case {seq} is cut short")
        rec.messages = np.frombuffer(data[at:end], dtype=_MSG)
        at = end
        out.append(rec)
    return out


def read_records(work, nprocs):
    """Every rank's records: ``({world rank: {seq: Record}}, {world rank: why unreadable})``."""
    records, bad = {}, {}
    for r in range(nprocs):
        try:
            data = _read_file(os.path.join(work, f"out.{r}"), MAX_RESULT_BYTES)
            records[r] = {rec.seq: rec for rec in parse_records(data or b"")}
        except BadResults as exc:
            records[r], bad[r] = {}, str(exc)
    return records, bad


_STATE = re.compile(r"^seq=(\d+) call=(\S+)((?: (?:send|recv)=-?\d+)*)\s*$")


def _rank_lines(work, nprocs, name, pattern):
    """``(world rank, match)`` of each rank's one-line file ``<name>.<rank>`` that ``pattern``
    matches; a missing, unreadable or unmatched file is left out."""
    for r in range(nprocs):
        try:
            data = _read_file(os.path.join(work, f"{name}.{r}"), 4096)
        except BadResults:
            continue
        m = pattern.match((data or b"").decode("ascii", "replace").strip())
        if m:
            yield r, m


def read_states(work, nprocs):
    """Where each rank was when the run ended: ``{world rank: (seq, call, [(dir, peer)])}``
    (peers as ranks of MPI_COMM_WORLD; -1 any source); ranks without a readable state are left
    out."""
    out = {}
    for r, m in _rank_lines(work, nprocs, "state", _STATE):
        peers = [(d, int(p)) for d, p in re.findall(r"(send|recv)=(-?\d+)", m.group(3))]
        out[r] = (int(m.group(1)), m.group(2), peers)
    return out


_ERROR = re.compile(r"^seq=(\d+) call=(\S+) error=(.*)$")


def read_errors(work, nprocs):
    """The MPI errors the ranks reported: ``{world rank: (seq, call, text)}`` (call "-" when the
    harness did not know it); ranks without a readable report are left out. The text is printable
    ASCII of at most 300 characters (the file is the student's process's, like every file here)."""
    out = {}
    for r, m in _rank_lines(work, nprocs, "error", _ERROR):
        text = "".join(ch if ch.isprintable() else "?" for ch in m.group(3).strip())[:300]
        out[r] = (int(m.group(1)), m.group(2), text.removesuffix(", error stack:"))
    return out
