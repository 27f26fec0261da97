"""Schedule-level feedback on a student's allgather: what its messages did, next to the reference's.

The trusted grader (:mod:`mpilab.grade.judge`) calls :func:`diagnose_allgather` once per
submitted C file. It builds ``mpilab/data/grading/trace_student.c`` with the student's file and
the kit's ``labtrace`` PMPI library (compiled from its source in the scratch directory) and runs
it ONCE under SMPI at a small P; the reference's run is the same harness built with the answer
key's C code in a build of its own (once per grading process).
Every rank's block is filled with words that name its owner and the tracer probes each send
(``LABTRACE_PROBE``), so each message says which blocks it carried; the log is kept current
while the program runs (``LABTRACE_LIVE``), so a run that deadlocks still says what every rank
was blocked in. Sends are synchronous in this run (``smpi/send-is-detached-thresh:0``, as the MPI
standard allows): a schedule that works only while MPI buffers its sends shows its deadlock here.

:func:`diagnose_allgather` returns a :class:`Diagnosis` when the student's collective is wrong,
hangs or crashes, or is more than :data:`SLOW` times slower than the reference; it names the first
message that differs from the reference ("step 1: rank 0 sent block 0 to rank 2; the ring sends
block 0 to rank 1"), lists the extra and missing messages and, for a deadlock, the wait-for cycle
("rank 0 waits for 5, 5 waits for 4, ..., all in MPI_Recv"), with both timing diagrams.

This module holds no answer: the reference's schedule is traced from the key's C code, built in
a scratch directory of its own that holds no student code (:func:`build_reference`), never
written here; the student's run holds no file of the key.
"""

import base64
import html
import importlib.resources
import io
import os
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field

import matplotlib.pyplot as plt

from mpilab.core import paths, units
from mpilab.core.errors import ParseError
from mpilab.grade import harness, outcome, runner, sandbox
from mpilab.measure import trace
from mpilab.model import algorithms
from mpilab.model.timeline import plot_side_by_side

#: Processes of the diagnostic run (not a power of two: Bruck's last step is partial).
NPROCS = 6
#: Ints per rank's block (16 KiB): both the latency and the bandwidth terms show.
BLOCK_INTS = 4096
#: The simulated cluster of the diagnostic run (one THIN node, one rank per core).
PLATFORM = "orfeo-thin"
#: How much slower than the reference a right collective may be before it gets feedback.
SLOW = 1.5
#: Wall-time limit of the diagnostic run, seconds.
TIMEOUT = 30.0
#: Messages listed as extra or missing (the rest are counted).
MAX_LISTED = 6
#: The trace harness's word for element i of rank r's block is (r + 1) * OWNER_UNIT + i.
OWNER_UNIT = 1 << 20
#: The names the feedback gives the reference algorithms.
NAMES = {"ring": "the ring", "bruck": "Bruck's algorithm"}
#: The kit's SMPI configuration of the run: every send waits for its receive.
CFG = ("smpi/send-is-detached-thresh:0",)
HARNESS = "trace_student.c"


@dataclass
class Diagnosis:
    """What the diagnostic run found.

    Attributes
    ----------
    status : str
        "wrong", "deadlock", "crash", "slow", or "ok" (right and not slow: no feedback).
    lines : list of str
        The sentences of the feedback, in order.
    student_us, reference_us : float or None
        Simulated time of one call (slowest rank); None when it did not finish.
    png : bytes
        Both timing diagrams, reference above, the student's below (PNG).
    seconds : float
        Wall time the diagnosis took (build, run, comparison, drawing).
    timelines : tuple
        The traced timelines (reference, student), for :func:`figure`.
    """

    algorithm: str
    status: str
    lines: list = field(default_factory=list)
    student_us: float = None
    reference_us: float = None
    png: bytes = b""
    seconds: float = 0.0
    timelines: tuple = ()

    def text(self):
        return "\n".join(["What your code did, message by message:"] + [f"  {line}" for line in self.lines])

    def html(self):
        """The feedback as HTML: the sentences, then the diagrams as an embedded PNG."""
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.lines)
        img = ""
        if self.png:
            alt = (
                f"Timing diagrams: the reference {self.algorithm} above, yours below, P = {NPROCS}, simulated"
            )
            img = (
                f'<img alt="{html.escape(alt)}" style="max-width:100%" '
                f'src="data:image/png;base64,{base64.b64encode(self.png).decode()}"/>'
            )
        return (
            f'<div class="mpilab-diagnosis"><p><b>What your {html.escape(self.algorithm)} did, '
            f"message by message</b> (traced once under SMPI)</p><ul>{items}</ul>{img}</div>"
        )


# --- reading the run ---------------------------------------------------------------------------


def block_words(word):
    """(owner, element) of a word of the harness's data, or None for a word no rank sent."""
    if word < OWNER_UNIT:
        return None
    return word // OWNER_UNIT - 1, word % OWNER_UNIT


def describe(data, nbytes, nprocs, block_bytes=4 * BLOCK_INTS):
    """A message's content in words: "block 3", "blocks 3, 4", "32 KiB: block 2, then bytes no
    rank sent", "4 KiB from element 7 of block 2"."""
    words = [int(w) for w in str(data or "").split()]
    parts = [q if q is not None and q[0] < nprocs else None for q in map(block_words, words)]
    if nbytes == 0:
        return "an empty message"
    size = units.format_bytes(nbytes)
    if not parts:
        return f"{size} (content not traced)"
    if nbytes % block_bytes or len(parts) != nbytes // block_bytes:
        if parts[0] is None:
            return f"{size} that is no rank's data (a part of a buffer nothing was written to)"
        return f"{size} from element {parts[0][1]} of block {parts[0][0]}"
    if all(q is not None and q[1] == 0 for q in parts):
        owners = [q[0] for q in parts]
        return ("block " if len(owners) == 1 else "blocks ") + ", ".join(map(str, owners))
    if len(parts) == 1:
        return (
            f"{size} that is no rank's data (a part of a buffer nothing was written to)"
            if parts[0] is None
            else f"{size} from element {parts[0][1]} of block {parts[0][0]}"
        )
    pieces = [
        "bytes no rank sent"
        if q is None
        else f"block {q[0]}"
        if q[1] == 0
        else f"block {q[0]} from element {q[1]}"
        for q in parts
    ]
    return f"{size}: " + ", then ".join(pieces)


def sends(tl):
    """Each rank's sends to other ranks, in program order: {rank: [(dst, description, row)]}."""
    out = {r: [] for r in range(tl.nprocs)}
    calls = tl.calls
    mine = calls[calls["call"].isin(["Send", "Isend", "Sendrecv"]) & calls["dst"].notna()]
    for row in mine.itertuples():
        if int(row.dst) < 0 or int(row.dst) == row.rank:
            continue
        data = getattr(row, "data", "")
        out[row.rank].append((int(row.dst), describe(data, int(row.sbytes), tl.nprocs), row))
    return out


def first_divergence(student, reference, name, blocked, finished, stuck=True):
    """The sentence naming the first send that differs, or None when the schedules agree."""
    steps = max([len(v) for v in student.values()] + [len(v) for v in reference.values()] + [0])
    for i in range(steps):
        for r in sorted(reference):
            mine = student[r][i] if i < len(student[r]) else None
            ref = reference[r][i] if i < len(reference[r]) else None
            if (mine and mine[:2]) == (ref and ref[:2]):
                continue
            did = (
                f"rank {r} sent {mine[1]} to rank {mine[0]}"
                if mine
                else f"rank {r} sent nothing ({_why_silent(r, blocked, finished, stuck)})"
            )
            should = (
                f"{name} sends {ref[1]} to rank {ref[0]}"
                if ref
                else f"{name} has only {len(reference[r])} steps on rank {r}"
            )
            return f"step {i + 1}: {did}; {should}", (r, i)
    return None, None


def _why_silent(rank, blocked, finished, stuck):
    b = blocked.get(rank)
    if b is not None:
        return f"it was {'blocked ' if stuck else ''}in MPI_{b['call']}"
    return "your function had returned" if finished else "it was not in a blocking MPI call"


def message_differences(student, reference, name):
    """Sentences on the extra and missing messages: first the pairs of ranks one side never
    uses, then, between pairs both use, the contents that differ (as multisets)."""
    mine = Counter((r, d, what) for r, v in student.items() for d, what, _ in v)
    ref = Counter((r, d, what) for r, v in reference.items() for d, what, _ in v)
    mine_pairs, ref_pairs = (
        Counter((r, d) for r, d, _ in mine.elements()),
        Counter((r, d) for r, d, _ in ref.elements()),
    )
    out = []
    for pairs, others, text in (
        (mine_pairs, ref_pairs, f"went between ranks {name} never connects"),
        (ref_pairs, mine_pairs, f"of {name} between ranks yours never connected were not sent"),
    ):
        only = sorted(p for p in pairs if p not in others)
        if only:
            n = sum(pairs[p] for p in only)
            listed = ", ".join(
                f"{s} → {d}" + (f" ({pairs[(s, d)]}×)" if pairs[(s, d)] > 1 else "")
                for s, d in only[:MAX_LISTED]
            )
            more = f" and {len(only) - MAX_LISTED} more pairs" if len(only) > MAX_LISTED else ""
            out.append(f"{n} message{'s' if n > 1 else ''} {text}: {listed}{more}")
    common = set(mine_pairs) & set(ref_pairs)
    for label, diff in (("extra messages", mine - ref), ("missing messages", ref - mine)):
        items = Counter({k: v for k, v in diff.items() if (k[0], k[1]) in common})
        if not items:
            continue
        keys = sorted(items)
        listed = "; ".join(
            f"rank {s} → rank {d}: {what}" + (f" ({items[(s, d, what)]}×)" if items[(s, d, what)] > 1 else "")
            for s, d, what in keys[:MAX_LISTED]
        )
        more = f" and {len(keys) - MAX_LISTED} more" if len(keys) > MAX_LISTED else ""
        out.append(f"{sum(items.values())} {label} compared with {name}: {listed}{more}")
    return out


def _waits_for(b):
    """The ranks a blocked call waits for (-1: any rank)."""
    if b["call"] == "Recv":
        return [b["src"]]
    if b["call"] == "Send":
        return [b["dst"]]
    if b["call"] == "Sendrecv":
        return [b["src"], b["dst"]]
    out = []
    for row in b.get("reqs", []):
        if row["call"] == "Irecv":
            out.append(int(row["src"]))
        elif row["call"] == "Isend":
            out.append(int(row["dst"]))
    return out


def wait_for(blocked, nprocs):
    """Sentences about the blocked ranks: the wait-for cycle when there is one."""
    edges = {r: [p for p in _waits_for(b) if p is not None and p != r] for r, b in blocked.items()}
    cycle = outcome.cycle_of(edges)
    out = []
    if cycle:
        calls = {blocked[r]["call"] for r in cycle}
        hops = ", ".join(
            f"{'rank ' if k == 0 else ''}{r} waits for {cycle[(k + 1) % len(cycle)]}"
            + ("" if len(calls) == 1 else f" (in MPI_{blocked[r]['call']})")
            for k, r in enumerate(cycle)
        )
        only = calls.pop() if len(calls) == 1 else None
        tail = f", all in MPI_{only}" if only else ""
        if only in ("Send", "Ssend"):
            why = (
                "Every rank sends first, and a send of this size waits for its receive, which nobody "
                "has posted: let every other rank receive first, or use MPI_Sendrecv"
            )
        elif only == "Recv":
            why = (
                "Nobody can go first: at least one rank must send before it receives "
                "(MPI_Sendrecv does both at once)"
            )
        else:
            why = "Each waits for the next: post the receives first (MPI_Irecv), or use MPI_Sendrecv"
        out.append(f"deadlock: {hops}{tail}. {why}")
    for r in sorted(set(blocked) - set(cycle or ())):
        b = blocked[r]
        peers = ", ".join("any rank" if p < 0 else f"rank {p}" for p in edges[r]) or "nobody"
        out.append(f"rank {r} was blocked in MPI_{b['call']}, waiting for {peers}")
    free = sorted(set(range(nprocs)) - set(blocked))
    if blocked and free:
        out.append(
            f"rank{'s' if len(free) > 1 else ''} {', '.join(map(str, free))} "
            f"{'were' if len(free) > 1 else 'was'} not blocked in a point-to-point call "
            "(returned from your function, or computing)"
        )
    return out


# --- running -----------------------------------------------------------------------------------


#: The kit's tracer, compiled from its source into each diagnostic build.
TRACER = ("trace/labtrace.c",)


def _build(sources, function, student, program, c_file, keep):
    """Build the trace harness with ``sources`` for SMPI in a fresh scratch directory."""
    missing = [f for f in TRACER if not harness.kit_file(f).exists()]
    if missing:
        raise harness.BuildError(f"the kit's tracer is missing ({', '.join(missing)} in c_reference)")
    with importlib.resources.as_file(harness.data_file("grading", HARNESS)) as source:
        # a confined build sees its scratch directory only: what it compiles is copied there
        work = sandbox.scratch_dir([harness.kit_file(f) for f in TRACER] + list(sources))
        extra = [os.path.basename(f) for f in TRACER] + [os.path.basename(f) for f in sources]
        return harness.build(
            [source, c_file],
            "smpi",
            program,
            [f"STUDENT_FN={function}"],
            work=work,
            student=student,
            extra=extra,
            keep=[function] if keep else None,
            task=harness.task("allgather", keep) if keep else None,
        )


def build(c_file, algorithm):
    """Build the trace harness with the student's file for SMPI; return the scratch directory."""
    return _build([], harness.STUDENT_FUNCTIONS[algorithm], c_file, "trace_student_smpi", c_file, algorithm)


def build_reference(algorithm):
    """Build the trace harness with the answer key's reference of ``algorithm`` (and the kit's
    helpers it uses), in a scratch directory of its own, without any student code; None where the
    key is not installed."""
    record = algorithms.entry("allgather", algorithm)
    if record.source is None or not (paths.repo_root() / record.source).exists():
        return None
    kit = [harness.kit_file(f) for f in (*harness.REFERENCE_HEADERS, "allgather/common.c")]
    source = paths.repo_root() / record.source
    return _build(kit[:2] + [kit[2]], record.function, source, "trace_reference_smpi", source, None)


def _traced(work, program, nprocs, block_ints, platform, timeout):
    """Run one traced call; (result of the run, its timeline or None, the run)."""
    run = runner.Run("smpi", nprocs, platform, "core")
    cmd = runner.argv(work, program, ["--count", str(block_ints)], run, cfg=CFG)
    res = runner.sandbox.run(
        cmd,
        cwd=work,
        timeout=timeout,
        memory_mb=runner.SMPI_MEMORY_MB,
        env={"LABTRACE_DIR": work, "LABTRACE_LIVE": "1", "LABTRACE_PROBE": str(4 * block_ints)},
        copy_back="always",
    )  # a crash's trace is what explains it
    try:
        tl = trace.read_trace(work, region=1)
    except ParseError:
        tl = None
    return res, tl, run


_REFERENCES = {}


def reference_trace(algorithm, nprocs, block_ints, platform, timeout):
    """The reference's traced run ``(time us, timeline)``, once per process (None: no key here)."""
    key = (algorithm, nprocs, block_ints, platform)
    if key not in _REFERENCES:
        work = build_reference(algorithm)
        if work is None:
            _REFERENCES[key] = None
        else:
            try:
                res, tl, _ = _traced(work, "trace_reference_smpi", nprocs, block_ints, platform, timeout)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            _REFERENCES[key] = (_times(res.stdout), tl) if tl is not None else None
    return _REFERENCES[key]


def _times(stdout):
    m = re.search(r"^TIME ([0-9.]+)$", stdout, re.M)
    return float(m.group(1)) if m else None


def diagnose_allgather(
    c_file,
    algorithm,
    failed=True,
    nprocs=NPROCS,
    block_ints=BLOCK_INTS,
    platform=PLATFORM,
    timeout=TIMEOUT,
    draw=True,
):
    """Trace a student's allgather once under SMPI and compare it with the reference.

    Parameters
    ----------
    c_file : path
        The student's ``ring.c`` or ``bruck.c``.
    algorithm : {"ring", "bruck"}
        Which skeleton it implements; the reference is the registry's algorithm of that name.
    failed : bool
        The grading cases found it wrong: explain even when this run happens to be right.
    nprocs, block_ints, platform, timeout
        The run: processes, ints per block, SMPI platform, wall-time limit (s).
    draw : bool
        Draw the timing diagrams (:attr:`Diagnosis.png`).

    Returns
    -------
    Diagnosis
        ``status`` "ok" (nothing to say) when the run is right and not :data:`SLOW`\\ er than
        the reference, and ``failed`` is False.

    Raises
    ------
    mpilab.grade.harness.BuildError
        The file does not compile (the grading cases already say so).
    """
    started = time.monotonic()
    name = NAMES.get(algorithm, algorithm)
    reference = reference_trace(algorithm, nprocs, block_ints, platform, timeout)
    if reference is None:
        raise harness.BuildError(f"no reference trace of {algorithm} here (the answer key is not installed)")
    reference_us, ref = reference
    work = build(os.fspath(c_file), algorithm)
    try:
        res, mine, run = _traced(work, "trace_student_smpi", nprocs, block_ints, platform, timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if mine is None:
        return Diagnosis(
            algorithm,
            "crash",
            [f"the diagnostic run left no usable trace; {runner.failure(res, run) or ''}".rstrip("; ")],
            seconds=time.monotonic() - started,
        )
    finished = "DONE" in res.stdout.split()
    blocked = mine.meta.get("blocked", {})
    wrong = [line.split() for line in res.stdout.splitlines() if line.startswith(("WRONG ", "RETURNED "))]
    student_us = _times(res.stdout)
    stopped = None if finished else runner.failure(res, run)
    status = (
        "deadlock"
        if not finished and (res.timed_out or "Deadlock detected" in res.stderr)
        else "crash"
        if not finished
        else "wrong"
        if wrong
        else "slow"
        if reference_us and student_us > SLOW * reference_us
        else "ok"
    )
    if status == "ok" and not failed:
        return Diagnosis(algorithm, "ok", [], student_us, reference_us, seconds=time.monotonic() - started)
    where = (
        f"P = {nprocs}, {units.format_bytes(4 * block_ints)} per rank (MPI_INT), simulated "
        f"{platform}, every send synchronous"
    )
    lines = [f"The grader ran your {algorithm} once with the tracer: {where}."]
    mine_sends, ref_sends = sends(mine), sends(ref)
    first, at = first_divergence(mine_sends, ref_sends, name, blocked, finished, status == "deadlock")
    if first:
        lines.append(f"First difference from {name}: {first}.")
    if status == "deadlock":
        if res.timed_out:
            lines.append(f"the run was still going at its {timeout:g} s limit")
        lines += wait_for(blocked, nprocs)
    if status == "crash":
        lines.append(f"the run stopped before your function returned: {stopped or 'no reason given'}")
        where = "; ".join(f"rank {r} was in MPI_{b['call']}" for r, b in sorted(blocked.items()))
        running = sorted(set(range(nprocs)) - set(blocked))
        if running:
            where += ("; " if where else "") + (
                f"rank{'s' if len(running) > 1 else ''} "
                f"{', '.join(map(str, running))} "
                f"{'were' if len(running) > 1 else 'was'} running your code "
                "(the crash is in one of them)"
            )
        lines.append(f"at that moment: {where}")
    lines += message_differences(mine_sends, ref_sends, name)
    bad = []
    for w in wrong:
        if w[0] == "WRONG":
            r, blk, el, val = map(int, w[1:5])
            got = block_words(val)
            has = (
                "nothing (never written)"
                if val == -1
                else "no rank's data"
                if got is None or got[0] >= nprocs
                else f"block {got[1] and f'{got[0]} (element {got[1]})' or got[0]}"
            )
            bad.append(f"rank {r}'s block {blk} holds {has}")
        else:
            lines.append(f"rank {w[1]}: your function returned {w[2]} instead of MPI_SUCCESS")
    if bad:
        more = f" and {len(bad) - MAX_LISTED} more" if len(bad) > MAX_LISTED else ""
        lines.append(
            f"wrong result on {len(bad)} rank{'s' if len(bad) > 1 else ''}: "
            f"{'; '.join(bad[:MAX_LISTED])}{more}"
        )
    if student_us is not None and reference_us:
        ratio = student_us / reference_us
        lines.append(
            f"time of one call: yours {student_us:.1f} µs, {name} {reference_us:.1f} µs "
            f"({ratio:.2f}×{', more than ' + format(SLOW, 'g') + '× slower' if ratio > SLOW else ''})"
        )
    elif reference_us:
        lines.append(f"time of one call: {name} {reference_us:.1f} µs; yours never finished")
    if not first and status in ("ok", "slow"):
        lines.append(f"your messages are those of {name}, in the same order")
    if status == "ok":
        lines.append(
            "this run was right: the cases that failed differ from it (their names above say "
            "how: MPI_IN_PLACE, a datatype, a sub-communicator, another P)"
        )
    diag = Diagnosis(algorithm, status, lines, student_us, reference_us, timelines=(ref, mine))
    if draw:
        fig, _ = figure(ref, mine, algorithm, blocked, mine_sends, at)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80)
        plt.close(fig)
        diag.png = buf.getvalue()
    diag.seconds = time.monotonic() - started
    return diag


# --- drawing -----------------------------------------------------------------------------------


def figure(ref, mine, algorithm, blocked=None, mine_sends=None, at=None):
    """Both timelines on one time axis, the first differing send and the blocked calls in red.

    Returns
    -------
    (matplotlib.figure.Figure, numpy.ndarray of two Axes)
        The reference's timeline above, the student's below.
    """
    blocked = blocked or {}
    name = NAMES.get(algorithm, algorithm)
    ref.label = f"{name[0].upper()}{name[1:]} (the reference)"
    mine.label = f"your {algorithm}" + (" (never finished: blocked)" if blocked else "")
    fig, axes = plot_side_by_side(
        ref, mine, title=f"{algorithm}, P = {mine.nprocs}: the reference above, yours below (simulated)"
    )
    ax = axes[1]
    right = max(ref.total_us, mine.total_us, max([b["start_us"] for b in blocked.values()] + [0])) * 1.15 + 1
    ax.set_xlim(0, right)
    for r, b in blocked.items():
        ax.broken_barh(
            [(b["start_us"], right - b["start_us"])],
            (r - 0.3, 0.6),
            facecolors="none",
            edgecolors="tab:red",
            hatch="//",
            linewidth=1.0,
        )
        peers = ", ".join(str(p) for p in _waits_for(b) if p is not None)
        ax.text(
            b["start_us"] + 0.02 * right,
            r,
            f"blocked in MPI_{b['call']}, waits for {peers}",
            va="center",
            fontsize="small",
            color="tab:red",
            bbox=dict(facecolor="white", edgecolor="none", pad=1),
        )
    if at is not None and mine_sends:
        r, i = at
        if i < len(mine_sends[r]):
            row = mine_sends[r][i][2]
            ax.broken_barh(
                [(row.start_us, max(row.end_us - row.start_us, 0.01 * right))],
                (r - 0.42, 0.84),
                facecolors="none",
                edgecolors="tab:red",
                linewidth=2.0,
            )
            ax.annotate(
                "first difference",
                xy=(row.start_us, r - 0.42),
                xytext=(row.start_us, r - 0.9),
                color="tab:red",
                fontsize="small",
                arrowprops=dict(arrowstyle="->", color="tab:red"),
            )
    if mine.total_us == 0 and not blocked:
        ax.text(0.5, 0.5, "no point-to-point call", transform=ax.transAxes, ha="center")
    return fig, axes
