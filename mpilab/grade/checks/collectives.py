"""What each collective's result must be, computed by the grader from the data it chose.

A :class:`CaseSet` is the grader's side of one harness (``mpilab/data/grading/check_*.c``): the
cases of each kind (:meth:`CaseSet.specs`), each rank's random input (:meth:`CaseSet.inputs`),
and the verdict on what the ranks handed back (:meth:`CaseSet.judge`), which also says whose
data landed where ("rank 1: block 0 holds rank 2's block"), what was written past a buffer and
what a function returned. :mod:`mpilab.grade.runner` runs the cases; nothing here trusts the
student's process.
"""

import numpy as np

from mpilab.grade import casedata
from mpilab.grade.casedata import Spec

#: numpy view used to compare elements bit for bit, per element size.
_BITS = {1: "u1", 4: "<u4", 8: "<u8"}


def _values(data, type_):
    """Bytes as elements of ``type_`` (numbers to show) and as unsigned words (to compare)."""
    size, dtype = casedata.TYPES[type_]
    n = len(data) // size
    raw = np.frombuffer(data[: n * size], dtype=_BITS[size])
    return np.frombuffer(data[: n * size], dtype=dtype), raw


def _show(value, type_):
    if type_ == "double":
        return f"{float(value):.6g}"
    return str(int(value))


def _fill_word(size):
    return int.from_bytes(bytes([casedata.FILL]) * size, "little")


def who(world_rank, comm_rank, group, nprocs):
    """How the feedback names a rank: "rank 3", or "rank 1 of its half (world rank 3)"."""
    if len(group) == nprocs:
        return f"rank {world_rank}"
    return f"rank {comm_rank} of its half (world rank {world_rank})"


def guard_problems(region, hint=""):
    """Sentences about writes past either end of a buffer (the guard bytes the harness watches)."""
    out = []
    if region.after_changed:
        out.append(
            f"wrote {region.after_reach:,} byte{'s' if region.after_reach != 1 else ''} past the end of "
            f"{region.name} ({len(region.data):,} bytes long){hint}"
        )
    if region.before_changed:
        out.append(f"wrote {region.before_reach:,} bytes before the start of {region.name}")
    return out


def _elements(n, word="element"):
    return f"{n} {word}{'s' if n != 1 else ''}"


class CaseSet:
    """The grader's side of one harness; subclasses define the collective."""

    #: The harness's kinds of case, in the order it runs them.
    kinds = ()

    def specs(self, nprocs, kinds=None):
        """The cases of ``kinds`` (default: all) for ``nprocs`` ranks, numbered from 1."""
        out = []
        for kind in kinds or self.kinds:
            for fields in self.kind_cases(kind, nprocs):
                out.append(Spec(len(out) + 1, kind, **fields))
        return out

    def kind_cases(self, kind, nprocs):
        raise NotImplementedError

    def inputs(self, spec, nprocs, gen):
        """``{world rank: bytes}``: each rank's input of the case."""
        raise NotImplementedError

    def judge(self, spec, nprocs, inputs, records):
        """What is wrong with a finished case ("" when it is right): ``records`` maps every
        world rank to its :class:`mpilab.grade.casedata.Record` of the case."""
        raise NotImplementedError

    def message_bytes(self, spec):
        """The bytes of one rank's data in the case (what decides whether MPI buffers a send)."""
        return spec.count * spec.size


def _first_rank_problem(problems):
    """ "rank 1: ...; and 2 more ranks" from [(name, [sentences])]."""
    bad = [(name, s) for name, s in problems if s]
    if not bad:
        return ""
    name, sentences = bad[0]
    more = f" (and {len(bad) - 1} more rank{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
    return f"{name}: {'; '.join(sentences)}{more}"


class AllgatherCases(CaseSet):
    """MPI_Allgather's cases (lab 2's ``check_student.c``): int, char and double data, MPI_IN_PLACE,
    and a sub-communicator (the odd and the even ranks apart, in reversed order)."""

    kinds = ("int", "char", "double", "in-place", "sub-communicator")
    COUNTS = {
        "int": (1, 4, 16, 64, 256, 1024),
        "char": (1, 8, 64, 512),
        "double": (1, 8, 64, 512),
        "in-place": (1, 8, 64, 512),
        "sub-communicator": (1, 8, 64, 512),
    }

    def kind_cases(self, kind, nprocs):
        type_ = kind if kind in ("char", "double") else "int"
        for count in self.COUNTS[kind]:
            yield dict(
                type=type_,
                count=count,
                comm="halves" if kind == "sub-communicator" else "world",
                in_place=kind == "in-place",
                detail=f"count={count}",
            )

    def inputs(self, spec, nprocs, gen):
        return {r: casedata.random_elements(gen, spec.type, spec.count) for r in range(nprocs)}

    def judge(self, spec, nprocs, inputs, records):
        problems = []
        for group in casedata.groups(spec.comm, nprocs):
            blocks = [inputs[w] for w in group]
            for i, w in enumerate(group):
                problems.append(
                    (who(w, i, group, nprocs), self._rank(spec, records[w], i, blocks, inputs[w]))
                )
        return _first_rank_problem(problems)

    def _rank(self, spec, rec, me, blocks, mine):
        out = []
        if rec.rc != 0:
            out.append(f"the function returned error {rec.rc}" + (f" ({rec.error})" if rec.error else ""))
        hint = " (element size hard-coded?)" if spec.type == "char" else ""
        recv = rec.regions.get("recvbuf")
        if recv is None or len(recv.data) != len(blocks) * len(mine):
            return out + ["the harness's record of recvbuf is missing"]
        out += guard_problems(recv, hint)
        send = rec.regions.get("sendbuf")
        if send is not None:
            out += guard_problems(send, hint)
            if send.data != mine:
                out.append("changed sendbuf (a send buffer is read-only)")
        wrong = self._blocks(spec, recv.data, blocks)
        if wrong:
            out.append(wrong)
        return out

    def _blocks(self, spec, data, blocks):
        """The first wrong block of a receive buffer, in words: whose data it holds."""
        nbytes = len(blocks[0])
        bad = [j for j, b in enumerate(blocks) if data[j * nbytes : (j + 1) * nbytes] != b]
        if not bad:
            return ""
        j = bad[0]
        got = data[j * nbytes : (j + 1) * nbytes]
        more = f" ({len(bad) - 1} more block{'s' if len(bad) > 2 else ''} wrong)" if len(bad) > 1 else ""
        owner = f"rank {j}'s data"
        if got == bytes([casedata.FILL]) * nbytes:
            return f"block {j} ({owner}) was never written{more}"
        same = [k for k, b in enumerate(blocks) if b == got]
        if same:
            return f"block {j} holds rank {same[0]}'s block instead of rank {j}'s{more}"
        return f"block {j} ({owner}): {describe_elements(got, blocks[j], blocks, spec.type)}{more}"


def describe_elements(got, want, sources, type_, source_name="rank {k}'s"):
    """What is wrong inside a block, in words: how many elements are right before the first wrong
    one, and where that one's value comes from (another rank's element, the fill, or nowhere)."""
    gv, graw = _values(got, type_)
    wv, wraw = _values(want, type_)
    diff = np.nonzero(graw != wraw)[0]
    e = int(diff[0])
    size = casedata.TYPES[type_][0]
    right = f"its first {_elements(e)} are right, " if e else ""
    fill = _fill_word(size)
    if bool(np.all(graw[e:] == fill)):
        return f"{right}the other {_elements(len(graw) - e)} were never written"
    found = []
    for k, src in enumerate(sources):
        _, sraw = _values(src, type_)
        found += [(k, int(m)) for m in np.nonzero(sraw == graw[e])[0][:2]]
    where = ""
    if len(found) == 1:
        k, m = found[0]
        where = f" ({source_name.format(k=k)} element {m})"
    elif graw[e] == fill:
        where = " (never written)"
    elif graw[e] == int.from_bytes(bytes([casedata.GUARD]) * size, "little"):
        where = " (the grader's guard bytes: read from past the end of a buffer)"
    return (
        f"{right}element {e} is {_show(gv[e], type_)}{where}, expected {_show(wv[e], type_)}"
        f" ({_elements(len(diff))} wrong)"
    )


class BcastCases(CaseSet):
    """MPI_Bcast's cases (lab 6's ``check_bcast.c``) for one algorithm: int, char and double data
    from root 0, other roots, a sub-communicator rooted at the last rank of each half, and for
    the pipeline its segment sizes (the pipeline runs the other kinds with 64-byte segments)."""

    kinds = ("int", "char", "double", "root", "sub-communicator", "segments")
    #: The pipeline's segment size in the cases of the other kinds, bytes.
    CASE_SEGSIZE = 64

    def __init__(self, algorithm):
        self.algorithm = algorithm
        if algorithm != "pipeline":
            self.kinds = self.kinds[:-1]

    def kind_cases(self, kind, nprocs):
        p = nprocs
        seg = self.CASE_SEGSIZE if self.algorithm == "pipeline" else 0
        if kind in ("int", "char", "double"):
            counts = {
                "int": (0, 1, p - 1, p + 1, 7, 1000, 4099),
                "char": (1, 3, 255, 4096),
                "double": (1, 5, 1023),
            }
            for count in dict.fromkeys(c for c in counts[kind] if c >= 0):
                yield dict(type=kind, count=count, segsize=seg, detail=f"count={count} root=0")
        elif kind == "root":
            for root in dict.fromkeys(r for r in (p - 1, p // 2, 1) if 0 < r < p):
                for count in dict.fromkeys((1, p - 1, 1000)):
                    yield dict(
                        type="int", count=count, root=root, segsize=seg, detail=f"count={count} root={root}"
                    )
        elif kind == "sub-communicator":
            for count in (1, 100, 1000):
                yield dict(
                    type="int",
                    count=count,
                    comm="halves",
                    root=-1,
                    segsize=seg,
                    detail=f"count={count} root=last rank of each half",
                )
        elif kind == "segments":
            for s in (4, 12, 1000, 3, 0, 1 << 20):
                yield dict(type="int", count=1000, segsize=s, detail=f"int count=1000 segsize={s}")
            yield dict(type="double", count=999, segsize=56, detail="double count=999 segsize=56")
            yield dict(type="char", count=1001, segsize=7, detail="char count=1001 segsize=7")

    @staticmethod
    def root_of(spec, group):
        return len(group) - 1 if spec.root < 0 else spec.root

    def inputs(self, spec, nprocs, gen):
        return {
            group[self.root_of(spec, group)]: casedata.random_elements(gen, spec.type, spec.count)
            for group in casedata.groups(spec.comm, nprocs)
        }

    def judge(self, spec, nprocs, inputs, records):
        problems = []
        for group in casedata.groups(spec.comm, nprocs):
            root = self.root_of(spec, group)
            data = inputs[group[root]]
            for i, w in enumerate(group):
                problems.append((who(w, i, group, nprocs), self._rank(spec, records[w], i == root, data)))
        return _first_rank_problem(problems)

    def _rank(self, spec, rec, is_root, data):
        out = []
        if rec.rc != 0:
            out.append(f"the function returned error {rec.rc}" + (f" ({rec.error})" if rec.error else ""))
        buf = rec.regions.get("buffer")
        if buf is None or len(buf.data) != len(data):
            return out + ["the harness's record of the buffer is missing"]
        out += guard_problems(buf, " (element size hard-coded?)" if spec.type == "char" else "")
        if buf.data == data:
            return out
        if is_root:
            out.append(
                "the root's own buffer changed (a broadcast must not change the root's data): "
                + describe_elements(buf.data, data, [data], spec.type, "the root's")
            )
        elif buf.data == bytes([casedata.FILL]) * len(data):
            out.append(
                f"nothing arrived (the buffer still holds what it held before the call, "
                f"{spec.count} elements)"
            )
        else:
            out.append(describe_elements(buf.data, data, [data], spec.type, "the root's"))
        return out

    def message_bytes(self, spec):
        return spec.count * spec.size


class ReductionCases(CaseSet):
    """Lab 3's cases (``check_reduce.c``): MPI_SUM of int and double data (quarters, so every
    sum is exact in any order), a prime count, MPI_IN_PLACE, a sub-communicator and, for a reduce,
    other roots. ``harness_kind`` is the signature: 1 reduce-scatter, 2 allreduce, 3 reduce."""

    def __init__(self, harness_kind):
        self.harness_kind = harness_kind
        self.kinds = ("int", "double", "prime-count", "in-place", "sub-communicator") + (
            ("root",) if harness_kind == 3 else ()
        )

    def kind_cases(self, kind, nprocs):
        r3 = self.harness_kind == 3
        root = ", root 0" if r3 else ""
        simple = {
            "int": ("int", (1, 5, 64, 1000)),
            "double": ("double", (1, 8, 1000)),
            "prime-count": ("int", (13, 4099)),
            "in-place": ("int", (1, 5, 1000)),
            "sub-communicator": ("int", (1, 7, 1000)),
        }
        if kind in simple:
            type_, counts = simple[kind]
            for count in counts:
                yield dict(
                    type=type_,
                    count=count,
                    comm="halves" if kind == "sub-communicator" else "world",
                    in_place=kind == "in-place",
                    detail=f"count={count}{root}",
                )
        elif kind == "root":
            for r in dict.fromkeys((nprocs // 2, nprocs - 1)):
                for count in (1, 1000):
                    yield dict(type="int", count=count, root=r, detail=f"count={count}, root {r}")
            yield dict(
                type="int",
                count=1000,
                root=nprocs - 1,
                in_place=True,
                detail=f"count=1000, root {nprocs - 1}, in place",
            )

    def input_elements(self, spec, q):
        return spec.count * q if self.harness_kind == 1 else spec.count

    def inputs(self, spec, nprocs, gen):
        out = {}
        for group in casedata.groups(spec.comm, nprocs):
            n = self.input_elements(spec, len(group))
            for w in group:
                v = gen.integers(-1000, 1001, size=n)
                arr = (v / 4.0).astype("<f8") if spec.type == "double" else v.astype("<i4")
                out[w] = arr.tobytes()
        return out

    def judge(self, spec, nprocs, inputs, records):
        problems = []
        for group in casedata.groups(spec.comm, nprocs):
            q = len(group)
            dtype = casedata.TYPES[spec.type][1]
            ins = [np.frombuffer(inputs[w], dtype=dtype) for w in group]
            total = np.sum(ins, axis=0)
            for i, w in enumerate(group):
                problems.append((who(w, i, group, nprocs), self._rank(spec, records[w], i, ins, total, q)))
        return _first_rank_problem(problems)

    def _rank(self, spec, rec, me, ins, total, q):
        out = []
        if rec.rc != 0:
            return [
                f"the function returned error {rec.rc}"
                + (f" ({rec.error})" if rec.error else "")
                + " instead of MPI_SUCCESS"
            ]
        recv, send = rec.regions.get("recvbuf"), rec.regions.get("sendbuf")
        if recv is None:
            return ["the harness's record of recvbuf is missing"]
        out += guard_problems(recv)
        if send is not None:
            out += guard_problems(send)
            if send.data != ins[me].tobytes():
                out.append("changed sendbuf (the send buffer is read-only)")
        k = self.harness_kind
        if k == 3 and me != spec.root:
            return out
        n = spec.count
        first = me * n if k == 1 else 0
        dtype = casedata.TYPES[spec.type][1]
        got = np.frombuffer(recv.data, dtype=dtype)[:n]
        want = total[first : first + n]
        bad = np.nonzero(got != want)[0]
        if len(bad):
            i = int(bad[0])
            g, w = got[i], want[i]
            raw = np.frombuffer(recv.data, dtype=_BITS[spec.size])[i]
            why = ""
            if raw == _fill_word(spec.size):
                why = " (never written)"
            elif g == ins[me][first + i]:
                why = " (this rank's own input: nothing was added to it)"
            else:
                for r in range(q):
                    if g == w - ins[r][first + i]:
                        why = f" (the sum without rank {r}'s input)"
                        break
                    if g == w + ins[r][first + i]:
                        why = f" (rank {r}'s input counted twice)"
                        break
            what = f"element {i} of block {me}, " if k == 1 else ""
            out.append(
                f"recvbuf[{i}] is {_show(g, spec.type)}{why}, expected {_show(w, spec.type)} "
                f"({what}the sum over all ranks; {_elements(len(bad))} wrong)"
            )
        return out

    def message_bytes(self, spec):
        return spec.count * spec.size
