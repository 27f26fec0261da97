"""Timing diagrams of the MPI library's own collectives, from SimGrid's traces of their messages.

The kit's PMPI tracer (:mod:`mpilab.measure.trace`) sees the point-to-point calls of the kit's C
algorithms, never the messages inside a library's ``MPI_Bcast``. SimGrid can trace those: with
``tracing/smpi/internals`` its Paje trace has a link (an arrow) for every message a collective
sends internally, from when it was posted to when it arrived, and a state per rank for each MPI
call. :func:`run_library_traced` runs collbench's native collective once on SMPI, with one
library algorithm forced (:mod:`mpilab.measure.libalgs`), and reads the trace
(:func:`read_paje`) into a measured :class:`mpilab.model.timeline.Timeline`: one bar per rank
for the collective call, one arrow per internal message, so that
:func:`mpilab.model.timeline.plot_timeline` draws it like any other run.

Times are SimGrid's simulated time (µs from the first rank's entry into the collective). The
trace does not say how many bytes a message carried: ``bytes`` is left empty.
"""

import shlex
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from mpilab.core.errors import LaunchError, ParseError, UsageError
from mpilab.measure import collbench, launch, libalgs
from mpilab.measure.driver import BenchOptions
from mpilab.model.schedules import CALL_COLUMNS, MESSAGE_COLUMNS
from mpilab.model.timeline import Timeline

#: SimGrid's tracing options for the internal messages of collectives.
TRACING = ("tracing:yes", "tracing/smpi:yes", "tracing/smpi/internals:yes", "tracing/precision:9")


def _definitions(lines):
    """``{event id: (event name, [field names])}`` from a Paje header."""
    defs, current = {}, None
    for line in lines:
        if line.startswith("%EventDef"):
            _, name, eid = line.split()[:3]
            current = defs.setdefault(eid, (name, []))
        elif line.startswith("%EndEventDef"):
            current = None
        elif line.startswith("%") and current is not None and len(line.split()) >= 2:
            current[1].append(line[1:].split()[0])
    return defs


def read_paje(path, call):
    """Read a SimGrid Paje trace into the calls and messages of one MPI call on every rank.

    Parameters
    ----------
    path : str or Path
        The trace (SimGrid's ``tracing/filename``), written with ``tracing/smpi/internals``.
    call : str
        The MPI call whose messages to keep, e.g. ``"Bcast"``: the messages a rank posted while
        it was inside that call.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame, int)
        Calls (:data:`mpilab.model.schedules.CALL_COLUMNS`, one row per rank), messages
        (:data:`mpilab.model.schedules.MESSAGE_COLUMNS`, ``bytes`` empty) and the number of ranks.

    Raises
    ------
    ParseError
        A file that is not such a trace, or in which no rank entered ``call``.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ParseError(f"{path}: cannot read the trace: {exc.strerror}") from None
    defs = _definitions(lines)
    names = {name: eid for eid, (name, _) in defs.items()}
    needed = (
        "PajeCreateContainer",
        "PajeDefineEntityValue",
        "PajePushState",
        "PajePopState",
        "PajeStartLink",
        "PajeEndLink",
    )
    if any(n not in names for n in needed):
        raise ParseError(
            f"{path}: not a SimGrid Paje trace with states and links (missing "
            f"{', '.join(n for n in needed if n not in names)})"
        )
    ranks, values, stack = {}, {}, {}
    spans, starts, ends = [], {}, {}
    for line in lines:
        if not line or line[0] in "%#":
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            raise ParseError(f"{path}: cannot read the line {line[:80]!r}") from None
        if not words or words[0] not in defs:
            continue
        name, fields = defs[words[0]]
        ev = dict(zip(fields, words[1:]))
        if name == "PajeCreateContainer" and ev.get("Name", "").startswith("rank-"):
            ranks[ev["Alias"]] = int(ev["Name"][len("rank-") :])
        elif name == "PajeDefineEntityValue":
            values[ev["Alias"]] = ev["Name"]
        elif name == "PajePushState":
            stack.setdefault(ev["Container"], []).append(
                (values.get(ev["Value"], ev["Value"]), float(ev["Time"]))
            )
        elif name == "PajePopState" and stack.get(ev["Container"]):
            what, t0 = stack[ev["Container"]].pop()
            if ev["Container"] in ranks:
                spans.append((ranks[ev["Container"]], what, t0, float(ev["Time"])))
        elif name == "PajeStartLink":
            inside = stack.get(ev["StartContainer"]) or [("", 0.0)]
            starts[ev["Key"]] = (ev["StartContainer"], float(ev["Time"]), inside[-1][0])
        elif name == "PajeEndLink":
            ends[ev["Key"]] = (ev["EndContainer"], float(ev["Time"]))
    mine = [s for s in spans if s[1] in (f"PMPI_{call}", call)]
    if not mine:
        raise ParseError(
            f"{path}: no rank entered MPI_{call} (calls traced: "
            f"{', '.join(sorted({s[1] for s in spans})) or 'none'})"
        )
    t0 = min(s[2] for s in mine)
    calls = pd.DataFrame(
        [
            dict(rank=r, call=call, start_us=(a - t0) * 1e6, end_us=(b - t0) * 1e6)
            for r, _, a, b in sorted(mine)
        ]
    ).reindex(columns=CALL_COLUMNS)
    rows = []
    for k, (src, ts, state) in starts.items():
        if (
            k not in ends
            or src not in ranks
            or ends[k][0] not in ranks
            or state not in (f"PMPI_{call}", call)
        ):
            continue
        te = ends[k][1]
        tag = k.split("_")[2] if k.count("_") >= 3 else ""
        rows.append(
            dict(
                src=ranks[src],
                dst=ranks[ends[k][0]],
                tag=int(tag) if tag.lstrip("-").isdigit() else 0,
                bytes=np.nan,
                send_us=(ts - t0) * 1e6,
                recv_us=(te - t0) * 1e6,
            )
        )
    messages = (
        pd.DataFrame(rows, columns=MESSAGE_COLUMNS)
        .sort_values(["send_us", "src", "dst"], kind="stable")
        .reset_index(drop=True)
    )
    return calls, messages, len(ranks)


def run_library_traced(
    collective, algorithm, nprocs, nbytes, platform="orfeo-thin", mapping="core", cfg=(), timeout=300
):
    """Run the library's ``collective`` with ``algorithm`` forced, once, on SMPI, traced.

    Parameters
    ----------
    collective : str
        ``bcast``, ``reduce``, ``allreduce`` or ``allgather``.
    algorithm : str
        A library algorithm SMPI has (:func:`mpilab.measure.libalgs.names` with ``"smpi"``), or
        ``default`` (SMPI's own choice, or the selector given in ``cfg``).
    nprocs, nbytes : int
        Processes, and bytes as collbench counts them (the buffer; an allgather's block).
    platform : str
        SMPI platform name or XML file.
    mapping : {"core", "socket", "node"}
    cfg : sequence of str
        More SimGrid options, e.g. ``["smpi/coll-selector:ompi"]``.
    timeout : float
        Seconds before the launch is killed.

    Returns
    -------
    Timeline
        ``calls``: one bar per rank (the collective call); ``messages``: every internal message
        (``bytes`` empty). ``meta`` has ``kind="measured"``, ``flavour="smpi"``, ``platform``,
        ``mapping``, ``collective``, ``algorithm``, ``bytes`` and ``command``.

    Raises
    ------
    UsageError
        An algorithm SMPI does not have (the message lists those it has).
    LaunchError
        The simulation failed.
    """
    settings = libalgs.settings("smpi", collective, algorithm)
    if settings.kit:
        # Sweeps run the kit's clone of Open MPI's algorithm (libalgs ``kit:``); a trace shows
        # what is inside the library's own call, so it runs SimGrid's copy, with its own segments
        # (libalgs.smpi_segment), where SimGrid has one.
        if (collective, libalgs.canonical(collective, algorithm)) not in libalgs.SMPI_SEGMENT_SOURCES:
            raise UsageError(
                f"SimGrid has no {collective} {algorithm!r} of its own to trace (sweeps run the kit's clone)"
            )
        settings = libalgs.Settings(args=[f"--cfg=smpi/{collective}:{settings.kit}"])
    if int(nprocs) < 1 or int(nbytes) < 1:
        raise UsageError(f"bad nprocs {nprocs!r} or bytes {nbytes!r}; valid: integers >= 1")
    with tempfile.TemporaryDirectory(prefix="mpilab-libtrace-") as tmp:
        trace_file = Path(tmp) / "smpi.trace"
        launcher = launch.get_launcher(
            "smpi",
            platform=platform,
            workdir=tmp,
            cfg=[*TRACING, f"tracing/filename:{trace_file}", *cfg, *settings.args],
        )
        prog = collbench.collbench_program("smpi")
        args = collbench.collbench_args(
            "native",
            collective,
            BenchOptions(sizes=(int(nbytes), int(nbytes)), iters=1, warmup=0, iters_large=1, warmup_large=0),
        )
        cmd = launcher.command(prog, args, int(nprocs), mapping)
        launcher.run(prog, args, int(nprocs), mapping, timeout=timeout)
        if not trace_file.is_file():
            raise LaunchError(f"SimGrid wrote no trace for {cmd}")
        calls, messages, found = read_paje(trace_file, collective.capitalize())
    tl = Timeline(
        calls,
        messages,
        int(nprocs),
        f"measured, smpi on {launcher.platform}: the library's {collective} {algorithm}",
        dict(
            kind="measured",
            flavour="smpi",
            platform=launcher.platform,
            mapping=mapping,
            collective=collective,
            algorithm=libalgs.canonical(collective, algorithm),
            bytes=int(nbytes),
            command=str(cmd),
            ranks_traced=found,
        ),
    )
    return tl
