"""Timing diagrams: predicted (α-β event model) and measured (PMPI traces) per-rank timelines.

* :func:`predict` plays an algorithm's schedule (:mod:`mpilab.model.schedules`) against the α-β
  model.
* :func:`mpilab.measure.trace.run_traced` runs ``c_reference/build/<flavour>/timeline`` — the
  algorithm's C code linked with the ``labtrace`` PMPI library — on Open MPI, MPICH or SMPI, and
  :func:`mpilab.measure.trace.read_trace` merges the per-rank logs (clocks aligned to rank 0's)
  into the same kind of timeline.
* :func:`plot_timeline` draws one timeline (a Gantt chart: one row per rank, a bar per call,
  an arrow per message) and :func:`plot_side_by_side` draws a prediction above a measurement
  on one time axis.

Both kinds are a :class:`Timeline`: a calls table (one row per MPI call: rank, call, start and
end in µs from the start of the run, peers, bytes, tag) and a messages table (source,
destination, tag, bytes, when the send was posted, when the receive completed).

Examples
--------
>>> tl = predict("pairwise", 4, 1024, alpha=2.0, beta=0.001)
>>> round(tl.total_us, 3)
7.072
"""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from mpilab.core import units
from mpilab.core.errors import UsageError
from mpilab.model import algorithms, schedules

#: Colours of the calls in the drawings.
CALL_COLOURS = {
    "Send": "tab:blue",
    "Recv": "tab:orange",
    "Sendrecv": "tab:purple",
    "copy": "tab:green",
    "Wait": "tab:gray",
    "Waitall": "tab:gray",
    "Waitany": "tab:gray",
    "Waitsome": "tab:gray",
    "Isend": "tab:blue",
    "Irecv": "tab:orange",
}
POINT_TO_POINT = ("Send", "Recv", "Sendrecv", "Isend", "Irecv")


@dataclass
class Timeline:
    """Calls and messages of one run of an algorithm, times in µs from the start of the run.

    Attributes
    ----------
    calls : pandas.DataFrame
        :data:`mpilab.model.schedules.CALL_COLUMNS`, sorted by rank and start.
    messages : pandas.DataFrame
        :data:`mpilab.model.schedules.MESSAGE_COLUMNS` (``recv_us`` is NaN for a message nobody
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


def predict(
    algorithm,
    nprocs,
    nbytes,
    alpha,
    beta,
    ports=1,
    eager_bytes=0,
    root=0,
    start_us=None,
    port_beta=None,
    weight=None,
    **platform,
):
    """The α-β model's timeline of one run of ``algorithm``.

    Parameters
    ----------
    algorithm : str
        One of :func:`mpilab.model.algorithms.with_schedule`: pairwise and gather_bcast; ring, bruck
        and binomial only where the answer key is installed (an instructor's checkout).
    nprocs : int
    nbytes : int
        Allgather: bytes per rank; bcast: the buffer.
    alpha, beta : float or callable
        Latency (µs) and time per byte (µs/B), or functions ``(src, dst) -> value``.
    ports : int, None or "shared"
        Messages a rank may send (and receive) at once; 1 is the model of :mod:`mpilab.model.costs`;
        None: no limit; "shared": no limit, but they share the port's bandwidth.
    eager_bytes : int
        Sends smaller than this complete when posted (0: when their message arrives).
    root : int
        Broadcast root.
    start_us : sequence of float, optional
        When each rank starts (default all at 0); a measured timeline's ``rank_start_us()``
        predicts the same run from the same start.
    port_beta, weight
        How a shared port is shared (see :func:`mpilab.model.schedules.simulate`);
        :func:`platform_model` gives them for an SMPI platform.
    **platform
        ``resources`` and the per-message overheads ``o_send``, ``o_isend``, ``o_recv``,
        ``o_send_per_byte``, ``o_recv_per_byte`` (see :func:`mpilab.model.schedules.simulate`);
        :func:`mpilab.simulate.routes.platform_model` gives them for an SMPI platform.

    Returns
    -------
    Timeline
    """
    tl = simulate_programs(
        algorithms.schedule(algorithm, nprocs, nbytes, root),
        alpha,
        beta,
        ports=ports,
        eager_bytes=eager_bytes,
        start_us=start_us,
        port_beta=port_beta,
        weight=weight,
        **platform,
    )
    tl.meta.update(algorithm=algorithm, bytes=int(nbytes))
    return tl


def simulate_programs(
    programs,
    alpha,
    beta,
    ports=1,
    eager_bytes=0,
    start_us=None,
    port_beta=None,
    weight=None,
    label="predicted",
    **platform,
):
    """The α-β model's timeline of any schedule (a list of :class:`mpilab.model.schedules.Program`).

    Parameters are those of :func:`predict`; ``label`` starts the timeline's title.

    Returns
    -------
    Timeline
    """
    calls, messages = schedules.simulate(
        programs,
        alpha,
        beta,
        ports=ports,
        eager_bytes=eager_bytes,
        start_us=start_us,
        port_beta=port_beta,
        weight=weight,
        **platform,
    )
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
    return Timeline(
        calls.sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True),
        messages,
        len(programs),
        f"{label} ({what})",
        dict(
            ports=ports,
            eager_bytes=eager_bytes,
            kind="predicted",
            rank_start_us=dict(enumerate(start_us)) if start_us is not None else None,
        ),
    )


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
        problems.append(
            f"a send of {s['bytes']} B from rank {s['src']} to rank {s['dst']} "
            f"(tag {s['tag']}) has no matching receive"
        )
    for s in tl.meta.get("unmatched_recvs", []):
        problems.append(
            f"a receive on rank {s['dst']} from rank {s['src']} (tag {s['tag']}) has no matching send"
        )
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
            problems.append(
                f"rank {r}: call {i + 1} ({g['call'].iloc[i + 1]}) starts before "
                f"call {i} ({g['call'].iloc[i]}) ends"
            )
    err = tl.meta.get("clock_error_us", {})
    for m in tl.messages.itertuples():
        tol = err.get(m.src, 0.0) + err.get(m.dst, 0.0) + slack_us
        if m.recv_us < m.send_us - tol:
            problems.append(
                f"the message rank {m.src} -> {m.dst} ({m.bytes} B) is received "
                f"{m.send_us - m.recv_us:.3f} us before it was sent"
            )
    return problems


# --- running ------------------------------------------------------------------------------------


def largest_message(algorithm, nprocs, nbytes, root=0):
    """Bytes of the largest message one run of the algorithm sends."""
    progs = algorithms.schedule(algorithm, nprocs, nbytes, root)
    return max([op.sbytes for prog in progs for op in prog.ops if op.dst is not None] + [0])


def plot_timeline(tl, ax=None, arrows=True, max_arrows=2000, legend=True):
    """Draw a timeline: one row per rank (rank 0 on top), a bar per call, an arrow per message.

    Blocking calls and waits are bars from start to end (``Sendrecv`` purple, ``Send`` blue,
    ``Recv`` orange, waits grey, local copies green); posting ``MPI_Isend``/``MPI_Irecv`` is a tick; each
    message is
    an arrow from where its send was posted to where its receive completed.

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
    """
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
                ax.broken_barh(
                    spans, (r - 0.3, 0.6), facecolors=colour, edgecolors="black", linewidth=0.3, alpha=0.85
                )
        label = "Wait*" if call.startswith("Wait") else call
        seen.setdefault(label, colour)
    if arrows and len(tl.messages) <= max_arrows:
        for m in tl.messages.dropna(subset=["recv_us"]).itertuples():
            ax.annotate(
                "",
                xy=(m.recv_us, m.dst),
                xytext=(m.send_us, m.src),
                arrowprops=dict(arrowstyle="->", lw=0.7, color="black", alpha=0.45, shrinkA=0, shrinkB=0),
            )
    ax.set_yticks(range(tl.nprocs))
    ax.set_yticklabels([f"rank {r}" for r in range(tl.nprocs)])
    ax.set_ylim(tl.nprocs - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("time (µs)")
    ax.set_title(f"{tl.label}: {tl.total_us:.4g} µs", fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    if legend and seen:
        ax.legend(
            handles=[Patch(color=c, label=k) for k, c in seen.items()],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize="small",
            frameon=False,
        )
    return fig, ax


def plot_side_by_side(predicted, measured, title=None):
    """A predicted timeline above a measured one, same ranks, same time axis.

    Returns
    -------
    (matplotlib.figure.Figure, numpy.ndarray of two Axes)
    """
    if predicted.nprocs != measured.nprocs:
        raise UsageError(
            f"the timelines have {predicted.nprocs} and {measured.nprocs} ranks; "
            "compare runs of the same process count"
        )
    p = predicted.nprocs
    fig, axes = plt.subplots(
        2, 1, sharex=True, figsize=(10, 2 * (0.4 * p + 1.2)), squeeze=False, layout="constrained"
    )
    axes = axes[:, 0]
    plot_timeline(predicted, ax=axes[0])
    plot_timeline(measured, ax=axes[1])
    axes[0].set_xlabel("")
    axes[1].set_xlim(0, 1.03 * max(predicted.total_us, measured.total_us, 1e-9))
    if title is None:
        meta = {**predicted.meta, **measured.meta}
        title = f"{meta.get('algorithm', '')}, P = {p}, {units.format_bytes(meta.get('bytes', 0))}" + (
            " per rank"
            if getattr(algorithms.with_schedule().get(meta.get("algorithm")), "collective", None)
            == "allgather"
            else ""
        )
    fig.suptitle(title)
    return fig, axes
