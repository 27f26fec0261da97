"""Timing diagrams: predicted (α-β event model) and measured (PMPI traces) per-rank timelines.

* :func:`predict` plays an algorithm's schedule (:mod:`mpilab.schedules`) against the α-β
  model.
* :func:`run_traced` runs ``c_reference/build/<flavour>/timeline`` — the algorithm's C code
  linked with the ``labtrace`` PMPI library — on Open MPI, MPICH or SMPI, and :func:`read_trace`
  merges the per-rank logs (clocks aligned to rank 0's) into the same kind of timeline.
* :func:`plot_timeline` draws one timeline (a Gantt chart: one row per rank, a bar per call,
  an arrow per message) and :func:`plot_side_by_side` draws a prediction above a measurement
  on one time axis.

Both kinds are a :class:`Timeline`: a calls table (one row per MPI call: rank, call, start and
end in µs from the start of the run, peers, bytes, tag) and a messages table (source,
destination, tag, bytes, when the send was posted, when the receive completed).

Examples
--------
>>> tl = predict("ring", 4, 1024, alpha=2.0, beta=0.001)
>>> round(tl.total_us, 3)
9.072
"""
from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths, schedules
from .errors import ParseError, ToolMissing, UsageError, one_of
from .plots import _fmt_bytes

#: Colours of the calls in the drawings.
CALL_COLOURS = {"Send": "tab:blue", "Recv": "tab:orange", "Sendrecv": "tab:purple",
                "Wait": "tab:gray", "Waitall": "tab:gray", "Waitany": "tab:gray",
                "Waitsome": "tab:gray", "Isend": "tab:blue", "Irecv": "tab:orange"}
POINT_TO_POINT = ("Send", "Recv", "Sendrecv", "Isend", "Irecv")


@dataclass
class Timeline:
    """Calls and messages of one run of an algorithm, times in µs from the start of the run.

    Attributes
    ----------
    calls : pandas.DataFrame
        :data:`mpilab.schedules.CALL_COLUMNS`, sorted by rank and start.
    messages : pandas.DataFrame
        :data:`mpilab.schedules.MESSAGE_COLUMNS` (``recv_us`` is NaN for a message nobody
        received).
    nprocs : int
    label : str
        What the timeline shows, e.g. ``"predicted (alpha = 1.17 us, beta = 1e-4 us/B)"``.
    meta : dict
        Anything else: algorithm, bytes, command, per-repetition times, unmatched calls, ...
    """

    calls: pd.DataFrame
    messages: pd.DataFrame
    nprocs: int
    label: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def total_us(self):
        """Time from the start of the run until the last rank's last call ends."""
        return float(self.calls["end_us"].max()) if len(self.calls) else 0.0

    def rank_start_us(self):
        """When each rank started the run (measured: its region mark; predicted: its start)."""
        starts = self.meta.get("rank_start_us")
        if starts is None:
            return [0.0] * self.nprocs
        return [float(starts.get(r, 0.0)) for r in range(self.nprocs)]

    def rank_end_us(self):
        """When each rank's last call ends (a Series indexed by rank)."""
        return self.calls.groupby("rank")["end_us"].max().reindex(range(self.nprocs), fill_value=0.0)


# --- predicted --------------------------------------------------------------------------------

def predict(algorithm, nprocs, nbytes, alpha, beta, ports=1, eager_bytes=0, root=0,
            start_us=None, port_beta=None, weight=None):
    """The α-β model's timeline of one run of ``algorithm``.

    Parameters
    ----------
    algorithm : str
        One of :data:`mpilab.schedules.ALGORITHMS` (ring, pairwise, bruck, gather_bcast,
        binomial).
    nprocs : int
    nbytes : int
        Allgather: bytes per rank; bcast: the buffer.
    alpha, beta : float or callable
        Latency (µs) and time per byte (µs/B), or functions ``(src, dst) -> value``.
    ports : int, None or "shared"
        Messages a rank may send (and receive) at once; 1 is the model of :mod:`mpilab.costs`;
        None: no limit; "shared": no limit, but they share the port's bandwidth.
    eager_bytes : int
        Sends smaller than this complete when posted (0: when their message arrives).
    root : int
        Broadcast root.
    start_us : sequence of float, optional
        When each rank starts (default all at 0); a measured timeline's ``rank_start_us()``
        predicts the same run from the same start.
    port_beta, weight
        How a shared port is shared (see :func:`mpilab.schedules.simulate`);
        :func:`platform_model` gives them for an SMPI platform.

    Returns
    -------
    Timeline
    """
    tl = simulate_programs(schedules.schedule(algorithm, nprocs, nbytes, root), alpha, beta,
                           ports=ports, eager_bytes=eager_bytes, start_us=start_us,
                           port_beta=port_beta, weight=weight)
    tl.meta.update(algorithm=algorithm, bytes=int(nbytes))
    return tl


def simulate_programs(programs, alpha, beta, ports=1, eager_bytes=0, start_us=None,
                      port_beta=None, weight=None, label="predicted"):
    """The α-β model's timeline of any schedule (a list of :class:`mpilab.schedules.Program`).

    Parameters are those of :func:`predict`; ``label`` starts the timeline's title.

    Returns
    -------
    Timeline
    """
    calls, messages = schedules.simulate(programs, alpha, beta, ports=ports,
                                         eager_bytes=eager_bytes, start_us=start_us,
                                         port_beta=port_beta, weight=weight)
    if callable(alpha) or callable(beta):
        what = "alpha, beta per pair of ranks"
    else:
        what = f"alpha = {float(alpha):.4g} us, beta = {float(beta):.4g} us/B"
    if ports == "shared":
        what += ", ports shared"
    elif ports != 1:
        what += f", {'any number of' if ports is None else ports} messages at once"
    if eager_bytes:
        what += f", sends < {eager_bytes} B eager"
    return Timeline(calls.sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True),
                    messages, len(programs), f"{label} ({what})",
                    dict(ports=ports, eager_bytes=eager_bytes, kind="predicted",
                         rank_start_us=dict(enumerate(start_us)) if start_us is not None else None))


def platform_model(platform, nprocs, mapping="core"):
    """The α-β model of the ranks placed on an SMPI platform, as keyword arguments of :func:`predict`.

    Returns
    -------
    dict
        ``alpha(src, dst)`` in µs and ``beta(src, dst)`` in µs/B of each pair's route
        (:func:`mpilab.platforms.route_cost`); ``port_beta``, the time per byte of a rank's
        port (the fastest route's β), and ``weight(src, dst)``, SimGrid's sharing penalty
        (:func:`mpilab.platforms.route_weight`) — both used only with ``ports="shared"``.
    """
    from . import platforms

    hosts = platforms.placement(platform, nprocs, mapping)
    cost, weights = {}, {}

    def pair(a, b):
        if (a, b) not in cost:
            cost[(a, b)] = platforms.route_cost(platform, hosts[a], hosts[b])
        return cost[(a, b)]

    def weight(a, b):
        if (a, b) not in weights:
            weights[(a, b)] = platforms.route_weight(platform, hosts[a], hosts[b])
        return weights[(a, b)]

    betas = [pair(a, b)[1] for a in range(nprocs) for b in range(nprocs) if a != b]
    return dict(alpha=lambda a, b: pair(a, b)[0], beta=lambda a, b: pair(a, b)[1],
                port_beta=min(betas) if betas else 0.0, weight=weight)


# --- measured ---------------------------------------------------------------------------------

_TRACE_RE = re.compile(r"^trace\.(\d+)\.csv$")
_TRACE_DTYPES = {"region": "int64", "call": "string", "req": "string"}


def _read_rank_log(path):
    head, body = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                head[key.strip()] = value.strip()
            else:
                body.append(line)
    if "rank" not in head or not body:
        raise ParseError(f"{path}: not a labtrace log (no '# rank:' line or no table)")
    try:
        df = pd.read_csv(io.StringIO("".join(body)), dtype=_TRACE_DTYPES)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ParseError(f"{path}: {exc}") from None
    syncs = []
    for key in ("clock_init", "clock_final"):
        parts = head.get(key, "").split()
        if len(parts) == 3:
            syncs.append(tuple(float(x) for x in parts))
    return int(head["rank"]), int(head.get("nprocs", 0)), syncs, int(head.get("dropped", 0)), df


def _best_offset(syncs):
    """The offset (s) of the synchronisation with the shortest round trip, and its error bound."""
    if not syncs:
        return 0.0, 0.0
    local, offset, rtt = min(syncs, key=lambda s: s[2])
    return offset, rtt / 2


def read_trace(directory, region=None, drop_self=True):
    """Merge the per-rank labtrace logs of a directory into one measured :class:`Timeline`.

    Parameters
    ----------
    directory : str or Path
        Holds ``trace.<rank>.csv`` for ranks 0..p-1.
    region : int, optional
        Which region (``MPI_Pcontrol`` level; the timeline program's repetition) to keep.
        Default: the region of median duration (region 0 if the program marked none).
    drop_self : bool
        Leave out the calls whose only peer is the rank itself (the C code's local copies).

    Returns
    -------
    Timeline
        ``meta`` has ``regions`` (duration in µs of each region), ``region``,
        ``clock_error_us`` (per rank), ``unmatched_sends`` and ``unmatched_recvs``.

    Raises
    ------
    ParseError
        Missing or malformed logs (naming the file).
    UsageError
        A region that is not in the logs.
    """
    directory = Path(directory)
    files = {int(m.group(1)): directory / f for f in os.listdir(directory)
             if (m := _TRACE_RE.match(f))} if directory.is_dir() else {}
    if not files:
        raise ParseError(f"no trace.<rank>.csv files in {str(directory)!r}; run a program linked "
                         "with liblabtrace (e.g. build/<flavour>/timeline) there first")
    frames, errors, dropped = [], {}, 0
    nprocs = None
    for r, path in sorted(files.items()):
        rank, p, syncs, drops, df = _read_rank_log(path)
        nprocs = nprocs or p
        offset, errors[rank] = _best_offset(syncs)
        dropped += drops
        for col in ("start", "end", "done"):
            df[col] = (df[col] - offset) * 1e6
        frames.append(df.assign(rank=rank))
    missing = sorted(set(range(nprocs)) - set(files))
    if missing:
        raise ParseError(f"{directory}: no log for rank(s) {missing} of {nprocs}")
    log = pd.concat(frames, ignore_index=True)
    marks = log[log["call"] == "Pcontrol"]
    durations = {}
    for k, g in log.groupby("region"):
        t0 = marks.loc[marks["region"] == k, "start"].min() if (marks["region"] == k).any() \
            else g["start"].min()
        durations[int(k)] = float(g["end"].max() - t0)
    regions = sorted(k for k in durations if k > 0) or sorted(durations)
    if region is None:
        region = sorted(regions, key=lambda k: (durations[k], k))[(len(regions) - 1) // 2]
    elif region not in durations:
        raise one_of("trace region", region, sorted(durations))
    sel = log[log["region"] == region]
    start = marks.loc[marks["region"] == region, "start"]
    t0 = start.min() if len(start) else sel["start"].min()
    rank_start = {int(r): float(t - t0) for r, t in
                  marks[marks["region"] == region].groupby("rank")["start"].min().items()}
    sel = sel[sel["call"] != "Pcontrol"].copy()
    for col in ("start", "end", "done"):
        sel[col] = sel[col] - t0
    if drop_self:
        peers_self = ((sel["dst"].isna() | (sel["dst"] == sel["rank"]))
                      & (sel["src"].isna() | (sel["src"] == sel["rank"])))
        sel = sel[~(sel["call"].isin(POINT_TO_POINT) & peers_self)]
    calls = pd.DataFrame({
        "rank": sel["rank"].astype(int), "call": sel["call"].astype(str),
        "start_us": sel["start"], "end_us": sel["end"],
        "dst": sel["dst"].astype("Int64"), "sbytes": sel["sbytes"].astype("Int64"),
        "src": sel["src"].astype("Int64"), "rbytes": sel["rbytes"].astype("Int64"),
        "tag": sel["stag"].fillna(sel["rtag"]).astype("Int64"),
    }).sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True)
    messages, unmatched_s, unmatched_r = _match(sel)
    meta = dict(kind="measured", regions=durations, region=int(region), dropped_events=dropped,
                rank_start_us=rank_start,
                clock_error_us={r: e * 1e6 for r, e in errors.items()},
                unmatched_sends=unmatched_s, unmatched_recvs=unmatched_r, directory=str(directory))
    return Timeline(calls, messages, int(nprocs), f"measured (region {region})", meta)


def _match(sel):
    """Pair sends and receives by (source, destination, tag) in posting order (MPI's rule)."""
    sends = sel[sel["call"].isin(["Send", "Isend", "Sendrecv"]) & (sel["dst"] >= 0)]
    recvs = sel[sel["call"].isin(["Recv", "Irecv", "Sendrecv"]) & (sel["src"] >= 0)]
    sends = pd.DataFrame({"src": sends["rank"], "dst": sends["dst"], "tag": sends["stag"],
                          "bytes": sends["sbytes"], "send_us": sends["start"]})
    recvs = pd.DataFrame({"src": recvs["src"], "dst": recvs["rank"], "tag": recvs["rtag"],
                          "rbytes": recvs["rbytes"], "posted": recvs["start"],
                          "recv_us": np.where(recvs["call"] == "Irecv", recvs["done"], recvs["end"])})
    for df in (sends, recvs):
        for col in ("src", "dst", "tag", "bytes" if "bytes" in df else "rbytes"):
            df[col] = df[col].astype(int)
    sends = sends.sort_values(["send_us"], kind="stable")
    recvs = recvs.sort_values(["posted"], kind="stable")
    sends["seq"] = sends.groupby(["src", "dst", "tag"]).cumcount()
    recvs["seq"] = recvs.groupby(["src", "dst", "tag"]).cumcount()
    both = sends.merge(recvs, on=["src", "dst", "tag", "seq"], how="outer", indicator=True)
    unmatched_s = both[both["_merge"] == "left_only"][["src", "dst", "tag", "bytes"]].to_dict("records")
    unmatched_r = both[both["_merge"] == "right_only"][["src", "dst", "tag", "rbytes"]].to_dict("records")
    msgs = both[both["_merge"] == "both"].copy()
    msgs["bytes"] = msgs["bytes"].astype(int)
    msgs["rbytes"] = msgs["rbytes"].astype(int)
    messages = msgs[schedules.MESSAGE_COLUMNS + ["rbytes"]].sort_values("send_us").reset_index(drop=True)
    return messages, unmatched_s, unmatched_r


def check_consistency(tl, slack_us=0.05):
    """What is wrong with a timeline, as a list of sentences (empty when it is consistent).

    Checks that every send has its receive with the same size, that every rank's calls are in
    order (each starts after the previous one ended and ends after it starts), and that no
    message is received before it was sent (allowing each rank's clock error plus ``slack_us``).

    Returns
    -------
    list of str
    """
    problems = []
    for s in tl.meta.get("unmatched_sends", []):
        problems.append(f"a send of {s['bytes']} B from rank {s['src']} to rank {s['dst']} "
                        f"(tag {s['tag']}) has no matching receive")
    for s in tl.meta.get("unmatched_recvs", []):
        problems.append(f"a receive on rank {s['dst']} from rank {s['src']} (tag {s['tag']}) "
                        "has no matching send")
    if "rbytes" in tl.messages:
        bad = tl.messages[tl.messages["bytes"] != tl.messages["rbytes"]]
        for m in bad.itertuples():
            problems.append(f"rank {m.src} sent {m.bytes} B to rank {m.dst} but {m.rbytes} B arrived")
    if tl.messages["recv_us"].isna().any():
        problems.append(f"{int(tl.messages['recv_us'].isna().sum())} message(s) never completed")
    for r, g in tl.calls.groupby("rank"):
        if (g["end_us"] < g["start_us"]).any():
            problems.append(f"rank {r}: a call ends before it starts")
        overlap = g["start_us"].to_numpy()[1:] < g["end_us"].to_numpy()[:-1] - 1e-9
        if overlap.any():
            i = int(np.argmax(overlap))
            problems.append(f"rank {r}: call {i + 1} ({g['call'].iloc[i + 1]}) starts before "
                            f"call {i} ({g['call'].iloc[i]}) ends")
    err = tl.meta.get("clock_error_us", {})
    for m in tl.messages.itertuples():
        tol = err.get(m.src, 0.0) + err.get(m.dst, 0.0) + slack_us
        if m.recv_us < m.send_us - tol:
            problems.append(f"the message rank {m.src} -> {m.dst} ({m.bytes} B) is received "
                            f"{m.send_us - m.recv_us:.3f} us before it was sent")
    return problems


# --- running ------------------------------------------------------------------------------------

def timeline_program(flavour):
    """``c_reference/build/<flavour>/timeline`` (the traced driver), checked to exist."""
    prog = paths.build_dir(flavour) / "timeline"
    if not prog.is_file():
        raise ToolMissing(f"{prog} is missing; build it with `make -C c_reference FLAVOUR={flavour}`")
    return prog


def run_traced(algorithm, nprocs, nbytes, flavour="smpi", platform=None, mapping="core", reps=3,
               warmup=1, root=0, region=None, directory=None, timeout=300):
    """Run the C algorithm under the PMPI tracer and return its measured :class:`Timeline`.

    Parameters
    ----------
    algorithm : str
        One of :data:`mpilab.schedules.ALGORITHMS`.
    nprocs, nbytes : int
        Processes; bytes per rank (allgather) or of the buffer (bcast).
    flavour : {"openmpi", "mpich", "smpi"}
    platform : str, optional
        SMPI platform name or XML file (default ``orfeo-thin``); only for ``smpi``.
    mapping : {"core", "socket", "node"}
    reps, warmup : int
        Traced repetitions (each checked element by element) and untraced warm-up runs.
    region : int, optional
        Which repetition to return (default: the one of median duration).
    directory : str or Path, optional
        Where the per-rank logs go (kept); default a temporary directory, removed afterwards.
    timeout : float
        Seconds before the launch is killed.

    Returns
    -------
    Timeline
        ``meta`` adds ``command``, ``rep_us`` (each repetition's slowest rank, from the
        program's output), ``flavour``, ``platform``, ``mapping``, ``algorithm``, ``bytes``.
    """
    from . import launch

    schedules.collective_of(algorithm)
    if flavour not in paths.FLAVOURS:
        raise one_of("flavour", flavour, paths.FLAVOURS)
    if platform is not None and flavour != "smpi":
        raise UsageError(f"platform {platform!r} only applies to flavour smpi")
    for name, v, low in (("reps", reps, 1), ("warmup", warmup, 0)):
        if not isinstance(v, int) or v < low:
            raise UsageError(f"bad {name} {v!r}; valid: an integer >= {low}")
    prog = timeline_program(flavour)
    if flavour == "smpi":
        platform = platform or "orfeo-thin"
        launcher = launch.get_launcher("smpi", platform=platform, cfg=["smpi/wtime:0"])
    else:
        launcher = launch.get_launcher(flavour)
    args = ["--coll", schedules.collective_of(algorithm), "--algo", algorithm, "-b", str(int(nbytes)),
            "--reps", str(reps), "--warmup", str(warmup), "--root", str(root)]
    tmp = None
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="mpilab-trace-")
        directory = tmp.name
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("trace.*.csv"):
        old.unlink()
    try:
        cmd = launcher.command(prog, args, nprocs, mapping)
        proc = launcher.run(prog, args, nprocs, mapping, timeout=timeout, cwd=directory)
        tl = read_trace(directory, region=region)
    finally:
        if tmp is not None:
            tmp.cleanup()
    rep_us = [float(x) for x in re.findall(r"^\d+,([0-9.]+)$", proc.stdout, flags=re.M)]
    tl.meta.update(command=str(cmd), rep_us=rep_us, flavour=flavour, platform=launcher.platform,
                   mapping=mapping, algorithm=algorithm, bytes=int(nbytes))
    if tmp is not None:
        tl.meta["directory"] = None
    where = f"{flavour}" + (f" on {launcher.platform}" if flavour == "smpi" else "")
    tl.label = f"measured, {where} (repetition {tl.meta['region']} of {reps})"
    return tl


def pingpong_alpha_beta(flavour, max_bytes, mapping="core", timeout=300):
    """α (µs) and β (µs/B) of this machine: a Hockney fit to a ping-pong up to ``max_bytes``.

    Runs ``c_reference/build/<flavour>/pingpong`` (:func:`mpilab.pingpong.run`, short
    iteration counts) and fits :func:`mpilab.models.hockney_fit` to sizes 0..``max_bytes``.

    Returns
    -------
    (float, float)
    """
    from . import models, pingpong

    hi = max(int(max_bytes), 1024)
    rows = pingpong.run(flavour, mapping, sizes=(0, hi), iters=200, warmup=20, iters_large=50,
                        warmup_large=5, timeout=timeout)
    fit = models.hockney_fit(rows["bytes"].astype(float), rows["avg_us"].astype(float))
    return max(float(fit["alpha"]), 0.0), max(float(fit["beta"]), 0.0)


def largest_message(algorithm, nprocs, nbytes, root=0):
    """Bytes of the largest message one run of the algorithm sends."""
    progs = schedules.schedule(algorithm, nprocs, nbytes, root)
    return max([op.sbytes for prog in progs for op in prog.ops if op.dst is not None] + [0])


def predicted_and_measured(algorithm, nprocs, nbytes, flavour="smpi", platform=None,
                           mapping="core", alpha=None, beta=None, ports=1, eager_bytes=0,
                           same_start=True, **run_opts):
    """Run the algorithm traced and predict it with the α-β model, for :func:`plot_side_by_side`.

    ``alpha`` and ``beta`` default, on SMPI, to each pair's route on the platform
    (:func:`platform_model`, which also says how a shared port is shared) and, on a real MPI, to a ping-pong fit on this machine up to
    the run's largest message (:func:`pingpong_alpha_beta`).
    ``same_start``: start each rank of the prediction when it started in the measured run
    (ranks leave the barrier before the run at slightly different times); False starts all
    at 0. ``ports``, ``eager_bytes``: see :func:`predict`; ``run_opts``: see :func:`run_traced`.

    Returns
    -------
    (Timeline, Timeline)
        Predicted, measured.
    """
    if (alpha is None) != (beta is None):
        raise UsageError("give both alpha and beta, or neither")
    source, sharing = "given", {}
    if alpha is None and flavour == "smpi":
        sharing = platform_model(platform or "orfeo-thin", nprocs, mapping)
        alpha, beta = sharing.pop("alpha"), sharing.pop("beta")
        source = f"routes of {platform or 'orfeo-thin'}"
    elif alpha is None:
        alpha, beta = pingpong_alpha_beta(flavour, largest_message(
            algorithm, nprocs, nbytes, run_opts.get("root", 0)))
        source = f"{flavour} ping-pong fit"
    measured = run_traced(algorithm, nprocs, nbytes, flavour=flavour, platform=platform,
                          mapping=mapping, **run_opts)
    predicted = predict(algorithm, nprocs, nbytes, alpha, beta, ports=ports,
                        eager_bytes=eager_bytes, root=run_opts.get("root", 0),
                        start_us=measured.rank_start_us() if same_start else None, **sharing)
    predicted.meta["alpha_beta_from"] = source
    return predicted, measured


# --- drawing ------------------------------------------------------------------------------------

def plot_timeline(tl, ax=None, arrows=True, max_arrows=2000, legend=True):
    """Draw a timeline: one row per rank (rank 0 on top), a bar per call, an arrow per message.

    Blocking calls and waits are bars from start to end (``Sendrecv`` purple, ``Send`` blue,
    ``Recv`` orange, waits grey); posting ``MPI_Isend``/``MPI_Irecv`` is a tick; each message is
    an arrow from where its send was posted to where its receive completed.

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 0.45 * tl.nprocs + 1.5), layout="constrained")
    else:
        fig = ax.figure
    seen = {}
    for call, g in tl.calls.groupby("call"):
        colour = CALL_COLOURS.get(call, "tab:green")
        if call in ("Isend", "Irecv"):
            ax.plot(g["start_us"], g["rank"], "|", color=colour, markersize=12, mew=1.5)
        else:
            for r, gr in g.groupby("rank"):
                spans = list(zip(gr["start_us"], gr["end_us"] - gr["start_us"]))
                ax.broken_barh(spans, (r - 0.3, 0.6), facecolors=colour,
                               edgecolors="black", linewidth=0.3, alpha=0.85)
        label = "Wait*" if call.startswith("Wait") else call
        seen.setdefault(label, colour)
    if arrows and len(tl.messages) <= max_arrows:
        for m in tl.messages.dropna(subset=["recv_us"]).itertuples():
            ax.annotate("", xy=(m.recv_us, m.dst), xytext=(m.send_us, m.src),
                        arrowprops=dict(arrowstyle="->", lw=0.7, color="black", alpha=0.45,
                                        shrinkA=0, shrinkB=0))
    ax.set_yticks(range(tl.nprocs))
    ax.set_yticklabels([f"rank {r}" for r in range(tl.nprocs)])
    ax.set_ylim(tl.nprocs - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("time (µs)")
    ax.set_title(f"{tl.label}: {tl.total_us:.4g} µs", fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    if legend and seen:
        ax.legend(handles=[Patch(color=c, label=k) for k, c in seen.items()],
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return fig, ax


def plot_side_by_side(predicted, measured, title=None):
    """A predicted timeline above a measured one, same ranks, same time axis.

    Returns
    -------
    (matplotlib.figure.Figure, numpy.ndarray of two Axes)
    """
    import matplotlib.pyplot as plt

    if predicted.nprocs != measured.nprocs:
        raise UsageError(f"the timelines have {predicted.nprocs} and {measured.nprocs} ranks; "
                         "compare runs of the same process count")
    p = predicted.nprocs
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(10, 2 * (0.4 * p + 1.2)), squeeze=False,
                             layout="constrained")
    axes = axes[:, 0]
    plot_timeline(predicted, ax=axes[0])
    plot_timeline(measured, ax=axes[1])
    axes[0].set_xlabel("")
    axes[1].set_xlim(0, 1.03 * max(predicted.total_us, measured.total_us, 1e-9))
    if title is None:
        meta = {**predicted.meta, **measured.meta}
        title = (f"{meta.get('algorithm', '')}, P = {p}, "
                 f"{_fmt_bytes(meta.get('bytes', 0))}" +
                 (" per rank" if schedules.ALGORITHMS.get(meta.get("algorithm"), ("",))[0] == "allgather"
                  else ""))
    fig.suptitle(title)
    return fig, axes
