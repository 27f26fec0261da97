"""Phase-diagram explorer: which algorithm the cost models pick over (P, n), as the machine changes.

:func:`phase_diagram` draws, for every process count P and size n of a grid, the algorithm of
smallest cost; :func:`explorer` wraps it in a JupyterLab panel (ipywidgets) with sliders for the
machine and presets for three clusters of the seeds. The costs are the caller's: on the
student's side the kit has no cost of a graded algorithm (:func:`mpilab.model.costs.table` is
empty there), so a student passes their own expressions (``{"ring": cost_ring, ...}``); on the
instructor's side the default is the table's.

The machine model, stated once (it is the α-β model of :mod:`mpilab.model.costs` with three
simple corrections, not a simulation):

* ``alpha`` (µs) and ``beta`` (µs/B) are one message's latency and time per byte between nodes
  (α is the whole one-way time of a small message, the sender's and receiver's overheads
  included: what a ping-pong between two nodes measures);
* ``cores`` per node: when P > cores, the ranks of a node send at the same time through the
  node's ``ports`` network ports, so β becomes ``beta · ceil(min(cores, P) / ports)``; on one
  node (P <= cores) β stays ``beta``;
* ``eager`` (bytes): a message larger than this pays one more latency (the rendezvous
  handshake); the size compared is the cost's n (a block for an allgather, the buffer otherwise);
* ``segment`` (bytes) is the cost's ``s`` (pipelined algorithms).

Measurements (a results table with ``algorithm``, ``nprocs``, ``bytes`` and a time column) are
drawn over the diagram as the measured winner at each point they cover.
"""

import math

import matplotlib.pyplot as plt
import numpy as np
import sympy
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from mpilab.core.errors import UsageError
from mpilab.model import costs as cost_table
from mpilab.simulate import platforms
from mpilab.simulate.routes import alpha_beta, overheads

#: The grid of the diagram: process counts and sizes (bytes), powers of two and between.
NPROCS = np.unique(np.round(np.logspace(1, 9, 33, base=2)).astype(int))
SIZES = np.logspace(0, 22, 45, base=2)
#: Slider ranges: (min, max) of α (µs), β (µs/B), ports, eager and segment (bytes), cores.
RANGES = {
    "alpha": (0.1, 1000.0),
    "beta": (1e-5, 1.0),
    "ports": (1, 8),
    "eager": (256, 1 << 22),
    "segment": (256, 1 << 22),
    "cores": (1, 128),
}
#: What a preset leaves as it is: SimGrid's default eager limit (where a platform gives none)
#: and Open MPI's default segment.
DEFAULT_EAGER, DEFAULT_SEGMENT = 65536, 8192


def _from_platform(name):
    """α, β of one message between two nodes of an SMPI platform of the kit, its eager limit and
    its cores per node.

    α is what the route costs a message of no bytes, the sender's and receiver's overheads and
    SimGrid's envelope included (:func:`mpilab.simulate.routes.route_cost`: the platform's
    one-way time between nodes), β the time per byte of the route's slowest link.
    """
    ab = alpha_beta(name, 2, "node").iloc[0]
    spec = platforms.spec(name)
    return dict(
        alpha=float(ab["alpha_us"]),
        beta=float(ab["beta_us_per_byte"]),
        ports=1,
        eager=overheads(name)["eager_bytes"],
        segment=DEFAULT_SEGMENT,
        cores=spec.sockets * spec.cores_per_socket,
    )


def presets():
    """The three clusters of the panel, each ``{alpha, beta, ports, eager, segment, cores}``.

    THIN and jupiter come from the kit's SMPI platforms (a message between two nodes, and the
    platform's eager limit);
    the Bunyip-like commodity cluster from seed 004: α = 204 µs and 8 MB/s (β = 0.125 µs/B),
    one rank per node (the seed gives no core count).
    """
    return {
        "THIN": _from_platform("orfeo-thin"),
        "jupiter": _from_platform("jupiter-32x16"),
        "Bunyip-like (seed 004)": dict(
            alpha=204.0, beta=1 / 8.0, ports=1, eager=DEFAULT_EAGER, segment=DEFAULT_SEGMENT, cores=1
        ),
    }


def _functions(costs, collective):
    """Cost callables ``f(p, n, alpha, beta, s)`` (numpy arrays) by algorithm name."""
    if costs is None:
        names = cost_table.names(collective)
        if not names:
            raise UsageError(
                f"no {collective} costs are known here (the kit's are the labs' answers); "
                "pass your own: explorer({'ring': cost_ring, 'bruck': cost_bruck})"
            )
        costs = {}
        for nm in names:
            e = cost_table.entry(collective, nm)
            costs[nm] = (e.exact if e.exact is not None else e.expr, e.domain if e.exact is None else "any p")
    if not costs:
        raise UsageError("give at least one cost: {'name': expression or function (p, n, alpha, beta, s)}")
    out = {}
    for nm, c in costs.items():
        domain = "any p"
        if isinstance(c, tuple):
            c, domain = c
        if callable(c) and not isinstance(c, sympy.Basic):
            out[nm] = (c, domain)
            continue
        if c is None or c is Ellipsis:
            raise UsageError(f"no expression for {nm!r} yet: give its cost first")
        expr = cost_table.expression(c)
        f = sympy.lambdify(
            (cost_table.p, cost_table.n, cost_table.alpha, cost_table.beta, cost_table.s),
            expr,
            modules=cost_table._NUMERIC,
        )
        out[nm] = (f, domain)
    return out


def _check(params):
    out = {}
    for k, (lo, hi) in RANGES.items():
        if k not in params:
            raise UsageError(f"missing machine parameter {k!r}; valid: {', '.join(RANGES)}")
        v = float(params[k])
        if not (lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)) or math.isnan(v):  # a log slider's ends
            raise UsageError(f"bad {k} {params[k]!r}; valid: {lo:g} to {hi:g}")
        out[k] = v
    return out


def fastest(costs, params, collective="allgather", nprocs=NPROCS, sizes=SIZES):
    """The algorithm of smallest modelled cost at every (P, n).

    Parameters
    ----------
    costs : dict or None
        Name -> sympy expression, text, or function ``f(p, n, alpha, beta, s)`` (numpy arrays
        in, µs out); None: the cost table's algorithms of ``collective``.
    params : dict
        ``alpha``, ``beta``, ``ports``, ``eager``, ``segment``, ``cores`` (see the module).

    Returns
    -------
    (list of str, numpy.ndarray, numpy.ndarray)
        The names, the index of the fastest per point (shape sizes x nprocs; -1 where no
        algorithm applies) and the times (names x sizes x nprocs, µs).
    """
    fns = _functions(costs, collective)
    m = _check(params)
    P, N = np.meshgrid(np.asarray(nprocs, dtype=float), np.asarray(sizes, dtype=float))
    share = np.where(P > m["cores"], np.ceil(np.minimum(m["cores"], P) / m["ports"]), 1.0)
    a = np.where(N > m["eager"], 2 * m["alpha"], m["alpha"])
    b = m["beta"] * share
    times = []
    for _nm, (f, domain) in fns.items():
        with np.errstate(all="ignore"):
            t = np.broadcast_to(np.asarray(f(P, N, a, b, m["segment"]), dtype=float), P.shape).copy()
        t[~cost_table.in_domain(domain, P.astype(int))] = np.nan
        times.append(t)
    times = np.array(times)
    safe = np.where(np.isnan(times), np.inf, times)
    best = np.argmin(safe, axis=0)
    best[np.isinf(safe.min(axis=0))] = -1
    return list(fns), best, times


def phase_diagram(
    costs=None, params=None, collective="allgather", results=None, value="maxrank_avg_us", ax=None, title=None
):
    """Draw the fastest algorithm over (P, n); measured winners from ``results`` on top.

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
    """
    params = params or presets()["THIN"]
    names, best, _ = fastest(costs, params, collective)
    colours = [plt.get_cmap("tab10")(i % 10) for i in range(len(names))]
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    else:
        fig = ax.figure
    grid = np.ma.masked_less(best, 0)
    ax.pcolormesh(
        NPROCS, SIZES, grid, cmap=ListedColormap(colours), vmin=-0.5, vmax=len(names) - 0.5, shading="nearest"
    )
    handles = [Patch(color=c, label=nm) for nm, c in zip(names, colours) if (best == names.index(nm)).any()]
    if results is not None and len(results):
        sub = results.dropna(subset=[value])
        win = sub.loc[sub.groupby(["nprocs", "bytes"])[value].idxmin()]
        for nm, g in win.groupby("algorithm"):
            c = colours[names.index(nm)] if nm in names else "white"
            ax.scatter(g["nprocs"], g["bytes"], s=60, color=c, edgecolors="black", linewidths=1.2, zorder=3)
        handles.append(
            plt.Line2D(
                [], [], marker="o", ls="", mfc="white", mec="black", label="measured winner (colour: which)"
            )
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("processes P")
    ax.set_ylabel("bytes n" + (" per rank" if collective == "allgather" else ""))
    ax.set_title(
        title
        or (
            f"fastest {collective} by the cost models: α = {params['alpha']:.3g} µs, "
            f"β = {params['beta']:.3g} µs/B, {int(params['cores'])} cores/node, "
            f"{int(params['ports'])} port(s)"
        ),
        fontsize="medium",
    )
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig, ax


def explorer(costs=None, collective="allgather", results=None, preset="THIN"):
    """A JupyterLab panel: sliders for the machine, presets, and the phase diagram below them.

    Parameters
    ----------
    costs : dict, optional
        As :func:`fastest` (your own expressions on the student's side).
    results : pandas.DataFrame, optional
        Measurements to overlay (e.g. a sweep's rows).
    preset : str
        A key of :func:`presets` to start from.

    Returns
    -------
    ipywidgets.VBox
        Display it (the last expression of a cell); ``panel.sliders`` maps each parameter to
        its slider, ``panel.preset`` is the preset menu, ``panel.output`` holds the figure.
    """
    import ipywidgets as w  # here only: the rest of the module draws without a notebook
    from IPython.display import display

    known = presets()
    if preset not in known:
        raise UsageError(f"unknown preset {preset!r}; valid: {', '.join(known)}")
    _functions(costs, collective)  # a bad cost fails now, not at the first slider move
    start = known[preset]
    style = {"description_width": "140px"}
    layout = w.Layout(width="520px")
    sliders = {
        "alpha": w.FloatLogSlider(
            value=start["alpha"],
            base=10,
            min=-1,
            max=3,
            step=0.05,
            description="α (µs)",
            style=style,
            layout=layout,
            readout_format=".3g",
        ),
        "beta": w.FloatLogSlider(
            value=start["beta"],
            base=10,
            min=-5,
            max=0,
            step=0.05,
            description="β (µs/B)",
            style=style,
            layout=layout,
            readout_format=".3g",
        ),
        "ports": w.IntSlider(
            value=start["ports"], min=1, max=8, description="ports per node", style=style, layout=layout
        ),
        "eager": w.FloatLogSlider(
            value=start["eager"],
            base=2,
            min=8,
            max=22,
            step=1,
            description="eager limit (B)",
            style=style,
            layout=layout,
            readout_format=".0f",
        ),
        "segment": w.FloatLogSlider(
            value=start["segment"],
            base=2,
            min=8,
            max=22,
            step=1,
            description="segment (B)",
            style=style,
            layout=layout,
            readout_format=".0f",
        ),
        "cores": w.IntSlider(
            value=start["cores"], min=1, max=128, description="cores per node", style=style, layout=layout
        ),
    }
    menu = w.Dropdown(options=list(known), value=preset, description="preset", style=style, layout=layout)
    output = w.Output()

    def draw(*_):
        params = {k: s.value for k, s in sliders.items()}
        output.clear_output(wait=True)
        with output:
            try:
                fig, _ = phase_diagram(costs, params, collective, results)
            except UsageError as exc:  # say it where the picture was, not in a log
                print(f"cannot draw: {exc}")
                return
            display(fig)
            plt.close(fig)

    def load(change):
        for k, s in sliders.items():
            s.unobserve(draw, "value")
            s.value = known[change["new"]][k]
            s.observe(draw, "value")
        draw()

    for s in sliders.values():
        s.observe(draw, "value")
    menu.observe(load, "value")
    panel = w.VBox([menu, *sliders.values(), output])
    panel.sliders, panel.preset, panel.output = sliders, menu, output
    draw()
    return panel
