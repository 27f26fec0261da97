"""Calibration: the physical parameters of a simulated cluster from a ping-pong, and the platform.

The model (:mod:`mpilab.simulate.clusters`): one message of ``n`` bytes between two ranks of a
class (``core``, ``socket``, ``node``) costs ``o_send + latency + (n + 16)·β + o_recv``. A
ping-pong measures, per class, the one-way time of the smallest message (``one_way``) and the
time per byte β; it cannot tell the link latency from the two overheads. A collective curve can
(a root that sends to every rank pays ``o_send`` once per message, while the latencies of its
messages overlap): :func:`mpilab.studies.calibration.fit_overhead` fits the overheads to one
curve by simulating it, within what the ping-pong allows (``o_send + o_recv <= one_way``).

:func:`fit_pingpong` turns a ping-pong into ``one_way`` and β per class:

* the first segment of a segmented fit gives a class's intercept (its ``one_way``) and slope
  (its β; ``beta="fit"`` instead fits β by least squares of log time over every size measured,
  which keeps the later segments in);
* ``monotone=True`` (the default for a user's ping-pong): the one-way times must grow with the
  distance, core <= socket <= node (a message that leaves the node also leaves the socket). When
  they do not, the violators are pooled to their weighted mean (pool-adjacent-violators),
  weighted by 1 / the length of the size range over which each intercept was fitted: an
  intercept fitted up to 1 MB says less about a 1-byte message than one fitted up to 84 KB.
  ``monotone=False`` keeps the table as measured: seed 000's socket row (4.36 µs) was measured
  with ranks bound to sockets, and the shipped THIN keeps it (docs/CALIBRATION.md, section 3).

The overheads are either one value for every class (:func:`with_overhead`, fitted to a curve by
:func:`mpilab.studies.calibration.fit_to_curve`), or per class (:func:`with_cpu_share`): a share
of each intra-node class's one-way time charged to the two CPUs as overhead, what Open MPI's
shared-memory transport does (the sender copies in, the receiver copies out).

:func:`calibrate` writes a platform of a shipped shape with a user's numbers; the shipped THIN
and jupiter platforms were made the same way from the seeds (:mod:`mpilab.simulate.clusters`).
"""

import math
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from mpilab.core.errors import UsageError, one_of
from mpilab.core.vocabulary import MAPPINGS
from mpilab.model import p2p
from mpilab.simulate.clusters import Param, cpu_overhead
from mpilab.simulate.platforms import (
    ENVELOPE_BYTES,
    _cache_dir,
    _write,
    cluster_params,
    list_platforms,
    spec_of,
)

BETA_METHODS = ("first", "fit")
#: The least link latency a fit of the overheads leaves (µs). A message between two cores
#: crosses at least one cache-to-cache transfer (of the order of 0.1 µs); and SimGrid gives a
#: route of zero latency the sharing penalty 1 s instead of its latency plus its bandwidth
#: terms, so such flows would get almost nothing of a link they share with others.
MIN_LINK_LATENCY_US = 0.1


def _segments(measured, segments=2):
    """A segment table (mapping, segment, lower, upper, intercept, slope) from any input."""
    if isinstance(measured, dict):
        rows = []
        for m, v in measured.items():
            try:
                ic, sl = (float(x) for x in v)
            except (TypeError, ValueError):
                raise UsageError(
                    f"mapping {m!r}: expected (intercept_us, slope_us_per_byte), got {v!r}"
                ) from None
            rows.append(dict(mapping=m, segment=1, lower=0, upper=math.inf, intercept=ic, slope=sl))
        return pd.DataFrame(rows), None
    if isinstance(measured, (str, os.PathLike)):
        if not Path(measured).is_file():
            raise UsageError(
                f"results file {str(measured)!r} does not exist; give a results CSV "
                f"with ping-pong rows, a fit table or a dict mapping -> (intercept, slope)"
            )
        raw = p2p._frame(measured)
    elif isinstance(measured, pd.DataFrame):
        raw = measured
    else:
        raw = pd.DataFrame(list(measured))
    if {"intercept", "slope", "mapping"} <= set(raw.columns):
        table = raw.copy()
        if "segment" not in table.columns:
            table["segment"] = table.groupby("mapping").cumcount() + 1
        if "lower" not in table.columns:
            table["lower"] = 0
        if "upper" not in table.columns:
            table["upper"] = math.inf
        return table, None
    table = p2p.fit(raw, segments=segments)
    if table["mapping"].duplicated().any() and (table["segment"] == 1).sum() > table["mapping"].nunique():
        raise UsageError(
            "the ping-pong rows hold several curves for one mapping (flavours or "
            "platforms); select one flavour and platform first"
        )
    return table, raw


def _points(table, raw):
    """(mapping, bytes, us) to fit β to: the raw medians, or the table at powers of two."""
    if raw is not None:
        g = raw.assign(avg_us=pd.to_numeric(raw["avg_us"], errors="coerce")).dropna(subset=["avg_us"])
        return (
            g.groupby(["mapping", "bytes"], as_index=False)["avg_us"]
            .median()
            .rename(columns={"avg_us": "us"})
        )
    rows = []
    for m, g in table.groupby("mapping", sort=False):
        g = g.sort_values("segment")
        top = g["upper"].max()
        top = 4 << 20 if not np.isfinite(top) else int(top)
        n = 1
        while n <= top:
            inside = g[(g["lower"] <= n) & ((n < g["upper"]) | (g["segment"] == g["segment"].max()))]
            if len(inside):
                seg = inside.iloc[0]
                rows.append(dict(mapping=m, bytes=n, us=seg["intercept"] + seg["slope"] * n))
            n *= 2
    return pd.DataFrame(rows)


def pool_monotone(values, weights):
    """Pool-adjacent-violators: the weighted least-squares non-decreasing sequence.

    Parameters
    ----------
    values, weights : sequence of float

    Returns
    -------
    list of float

    Examples
    --------
    >>> pool_monotone([1.0, 4.0, 2.0], [1.0, 1.0, 3.0])
    [1.0, 2.5, 2.5]
    """
    blocks = [[float(v), float(w), 1] for v, w in zip(values, weights)]
    i = 0
    while i < len(blocks) - 1:
        if blocks[i][0] > blocks[i + 1][0]:
            (v1, w1, n1), (v2, w2, n2) = blocks[i], blocks[i + 1]
            blocks[i : i + 2] = [[(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2]]
            i = max(i - 1, 0)
        else:
            i += 1
    return [v for v, _, n in blocks for _ in range(n)]


def _fit_slope(a, n, t, start):
    """The slope β that minimises the squared log error of ``a + β·(n + ENVELOPE_BYTES)`` against
    the times ``t``, searched within 20x of ``start``."""

    def cost(x):
        return float(np.sum(np.log((a + x * (n + ENVELOPE_BYTES)) / t) ** 2))

    bounds = (start / 20, start * 20)
    return float(minimize_scalar(cost, bounds=bounds, method="bounded", options=dict(xatol=start * 1e-7)).x)


def fit_pingpong(measured, segments=2, beta="first", monotone=True):
    """One-way time of the smallest message and time per byte per class, monotone in distance.

    Parameters
    ----------
    measured : dict, pandas.DataFrame, path or list of rows
        ``{mapping: (intercept_us, slope_us_per_byte)}``; a segment table (``mapping``,
        ``segment``, ``lower``, ``upper``, ``intercept``, ``slope``: a report's table such as
        :func:`mpilab.studies.reference.orfeo_report` ``("pingpong")``, or
        :func:`mpilab.model.p2p.fit`'s); or ping-pong rows (a results CSV path or frame), fitted
        here with ``segments`` segments.
    beta : {'first', 'fit'}
        ``first``: β is the first segment's slope. ``fit``: least squares of log time over every
        size measured (or over the table at powers of two), with the one-way time fixed.
    monotone : bool
        Pool one-way times that fall with the distance (see the module's docstring); False keeps
        each class's intercept as measured.

    Returns
    -------
    pandas.DataFrame
        One row per mapping in distance order: ``intercept_us`` (measured), ``span_bytes`` (the
        size range the intercept was fitted over), ``one_way_us`` (after pooling), ``pooled``,
        ``beta_us_per_byte``, ``max_abs_error`` and ``rms_log_error`` of the model
        ``one_way + β (n + 16)`` against the points.
    """
    if beta not in BETA_METHODS:
        raise one_of("beta method", beta, BETA_METHODS)
    table, raw = _segments(measured, segments)
    unknown = sorted(set(table["mapping"]) - set(MAPPINGS))
    if unknown:
        raise one_of("mapping", unknown[0], MAPPINGS)
    first = table.sort_values("segment").groupby("mapping").first()
    order = [m for m in MAPPINGS if m in first.index]
    for m in order:
        if not first.loc[m, "intercept"] >= 0:
            raise UsageError(
                f"mapping {m!r}: intercept {first.loc[m, 'intercept']:g} us is negative; "
                f"a one-way time cannot be (refit with more small sizes, or give the "
                f"table by hand)"
            )
        if not first.loc[m, "slope"] > 0:
            raise UsageError(f"mapping {m!r}: slope {first.loc[m, 'slope']:g} us/byte must be positive")
    spans = []
    for m in order:
        up = first.loc[m, "upper"]
        if raw is not None and not np.isfinite(up):
            up = raw.loc[raw["mapping"] == m, "bytes"].max()
        spans.append(float(up) if np.isfinite(up) and up > 0 else 1.0)
    measured_ic = [float(first.loc[m, "intercept"]) for m in order]
    pooled = pool_monotone(measured_ic, [1.0 / s for s in spans]) if monotone else list(measured_ic)
    points = _points(table, raw)
    rows = []
    for m, ic, a, span in zip(order, measured_ic, pooled, spans):
        pts = points[(points["mapping"] == m) & (points["us"] > 0)]
        n, t = pts["bytes"].to_numpy(float), pts["us"].to_numpy(float)
        b = float(first.loc[m, "slope"])
        if beta == "fit" and len(n) >= 2:
            b = _fit_slope(a, n, t, b)
        model = a + b * (n + ENVELOPE_BYTES) if beta == "fit" else a + b * n
        err = model / t - 1 if len(n) else np.array([0.0])
        rows.append(
            dict(
                mapping=m,
                intercept_us=ic,
                span_bytes=span,
                one_way_us=a,
                pooled=not math.isclose(a, ic, rel_tol=1e-12),
                beta_us_per_byte=b,
                max_abs_error=float(np.max(np.abs(err))),
                rms_log_error=float(np.sqrt(np.mean(np.log1p(err) ** 2))),
            )
        )
    return pd.DataFrame(rows)


def overhead_bound(params, min_latency=MIN_LINK_LATENCY_US):
    """The largest per-message overhead o (= o_send = o_recv) the one-way times allow, µs: each
    class keeps a link latency of at least ``min_latency``."""
    v = {k: p.value for k, p in params.items()}
    return max(
        0.0, min(v[f"one_way_{c}"] - min_latency - ENVELOPE_BYTES * v[f"beta_{c}"] for c in MAPPINGS) / 2.0
    )


def with_cpu_share(params, share, source, kind="fit"):
    """A copy of ``params`` whose overheads are per class: ``share`` (0..1) of what each class's
    one-way time leaves above the least link latency (:data:`MIN_LINK_LATENCY_US`) and the
    envelope, half on each side, for the two intra-node classes; the node class gets the core
    class's (the same software path on the CPU; the network card moves the data between nodes).
    ``share = 1`` puts the whole intra-node one-way time on the CPUs, the upper bound of any split.
    """
    if not 0 <= share <= 1:
        raise UsageError(f"bad CPU share {share!r}; valid: 0..1 (of each intra-node one-way time)")
    new = dict(params)
    v = {k: p.value for k, p in params.items()}
    new["cpu_share"] = Param(float(share), "", kind, source)
    how = (
        "cpu_share x (one_way_{c} - {m} us of link latency - the 16-byte envelope) / 2: an "
        "intra-node message of Open MPI's shared-memory transport is moved by the two CPUs"
    )
    o = cpu_overhead(v["one_way_core"], v["beta_core"], share, MIN_LINK_LATENCY_US)
    new["o_send"] = Param(o, "us", kind, "core class: " + how.format(c="core", m=MIN_LINK_LATENCY_US))
    new["o_recv"] = Param(o, "us", "assumption", "equal to o_send (the copy out costs the copy in)")
    new["o_isend"] = Param(o, "us", "assumption", "equal to o_send (one eager path)")
    if v["sockets"] > 1:
        o_s = cpu_overhead(v["one_way_socket"], v["beta_socket"], share, MIN_LINK_LATENCY_US)
        new["overhead_socket"] = Param(
            o_s, "us", kind, "socket class, each side: " + how.format(c="socket", m=MIN_LINK_LATENCY_US)
        )
    new["overhead_node"] = Param(o, "us", "assumption", "node class, each side: the core class's")
    return new


def with_pingpong(params, fit, source):
    """A copy of ``params`` with the one-way times and βs of a :func:`fit_pingpong` table.

    Classes the table does not have keep their values. Per-class overheads
    (:func:`with_cpu_share`) follow the new one-way times with the base's share; a single
    overhead is scaled down when the new one-way times leave it no room (it keeps the base's
    share of the core one-way time).
    """
    new = dict(params)
    for r in fit.itertuples():
        how = f"{source}, {r.mapping}: intercept {r.intercept_us:.6g} us" + (
            f", pooled to {r.one_way_us:.6g} us (core <= socket <= node)" if r.pooled else ""
        )
        new[f"one_way_{r.mapping}"] = Param(float(r.one_way_us), "us", "fit", how)
        new[f"beta_{r.mapping}"] = Param(
            float(r.beta_us_per_byte), "us/B", "fit", f"{source}, {r.mapping}: time per byte"
        )
    if params["sockets"].value < 2 and "core" in set(fit["mapping"]):
        new["one_way_socket"], new["beta_socket"] = new["one_way_core"], new["beta_core"]
    bound = overhead_bound(new)
    o = params["o_send"].value
    if "cpu_share" in params:
        pass  # per class: set below, once the one-way times are final
    elif o > bound:
        share = o / params["one_way_core"].value
        o = min(bound, share * new["one_way_core"].value)
        for k in ("o_send", "o_recv", "o_isend"):
            new[k] = Param(
                o,
                "us",
                "assumption",
                f"the base's share of the core one-way time ({share:.2f}), bounded by the new one-way times",
            )
    betas = [new[f"beta_{c}"].value for c in MAPPINGS]
    new["port_bw"] = Param(
        1.0 / min(betas),
        "B/us",
        "assumption",
        "a core injects (and absorbs) at most what its fastest pair reaches",
    )
    new["card_bw"] = Param(
        max(params["card_bw"].value, 1.0 / new["beta_node"].value),
        "B/us",
        params["card_bw"].kind,
        params["card_bw"].source,
    )
    if "cpu_share" in params:
        p = params["cpu_share"]
        new = with_cpu_share(new, p.value, p.source, p.kind)
    return new


def with_overhead(params, o, source, kind="fit"):
    """A copy of ``params`` with o_send = o_recv = o_isend = ``o`` (µs), checked against the bound."""
    bound = overhead_bound(params)
    if not 0 <= o <= bound + 1e-9:
        raise UsageError(
            f"overhead {o:g} us; valid: 0..{bound:.6g} us (o_send + o_recv may not "
            f"exceed the smallest one-way time less {MIN_LINK_LATENCY_US} us of link "
            f"latency)"
        )
    new = {k: p for k, p in params.items() if k not in ("cpu_share", "overhead_socket", "overhead_node")}
    new["o_send"] = Param(float(o), "us", kind, source)
    new["o_recv"] = Param(float(o), "us", "assumption", "equal to o_send (LogP's single o)")
    new["o_isend"] = Param(float(o), "us", "assumption", "equal to o_send (one eager path)")
    return new


def write_platform(params, path, prefix=None, base=None):
    """Write the platform of ``params`` (a :mod:`mpilab.simulate.clusters` dict) to ``path``."""
    prefix = prefix or (base and cluster_params(base)[1]) or "host"
    return _write(spec_of(params, prefix), path)


def calibrate(
    measured, base="orfeo-thin", path=None, segments=2, name=None, beta="first", overhead=None, monotone=True
):
    """Write a SimGrid platform whose simulated ping-pong reproduces a user's measurements.

    The platform keeps the shape of ``base`` (nodes, sockets, cores, host names, network card,
    memory) and takes from ``measured`` (:func:`fit_pingpong`) each class's one-way time and
    time per byte; a zero-byte message between two ranks of a class then costs ``one_way``
    (what :func:`mpilab.simulate.routes.route_cost` reads back) and each byte β. The per-message
    overheads keep the base's values unless ``overhead`` is given (or the new one-way times
    leave them no room: then they keep the base's share of the core one-way time).
    :func:`mpilab.studies.calibration.fit_overhead` fits them to a collective curve.

    A mapping not given keeps the base's value (a warning says which). SMPI's own size factors
    are off in the file: each class's simulated ping-pong is one straight line. A base with
    per-class overheads (THIN's, :func:`with_cpu_share`) keeps its share of each intra-node
    one-way time as CPU overhead, so the overheads follow your one-way times.

    Parameters
    ----------
    measured : dict, pandas.DataFrame, path or list of rows
        See :func:`fit_pingpong`.
    base : str
        A shipped platform name (:func:`mpilab.simulate.platforms.list_platforms`).
    path : str or Path, optional
        Where to write the XML (default: ``calibrated-<base>.xml`` in the user cache directory).
    segments : int
        Segments of the fit when ``measured`` holds raw ping-pong rows.
    name : str, optional
        Words for the description comment in the file.
    beta : {'first', 'fit'}
        See :func:`fit_pingpong`.
    overhead : float, optional
        o_send = o_recv = o_isend in µs, for every class.
    monotone : bool
        See :func:`fit_pingpong`.

    Returns
    -------
    Path

    Raises
    ------
    UsageError
        An unknown mapping, a negative intercept or a slope that is not positive, a mapping the
        base has no distance for (``socket`` on a one-socket node, ``node`` on one node), or an
        overhead larger than the one-way times allow.

    Examples
    --------
    >>> xml = calibrate({"core": (0.6, 5e-5), "socket": (2.5, 8e-5), "node": (3.2, 4e-4)},
    ...                 path="mine.xml")                                    # doctest: +SKIP
    """
    params, prefix, fit, table = prepare(measured, base, segments, beta, name, monotone=monotone)
    if overhead is not None:
        params = with_overhead(params, float(overhead), "given to calibrate", kind="assumption")
    return write_platform(
        params, path if path is not None else _cache_dir() / f"calibrated-{base}.xml", prefix=prefix
    )


def prepare(measured, base="orfeo-thin", segments=2, beta="first", name=None, source=None, monotone=True):
    """The parameters of ``base`` with a ping-pong's one-way times and βs (:func:`calibrate`).

    Returns
    -------
    (dict, str, pandas.DataFrame, str)
        The parameters, the base's host prefix, the :func:`fit_pingpong` table, and that table
        in one line.
    """
    if str(base).endswith(".xml") or os.sep in str(base):
        raise UsageError(
            f"base must be a shipped platform name, not a file: {base!r} (a "
            f"calibration rewrites the links of a shape the kit knows); valid: "
            f"{', '.join(list_platforms())}"
        )
    params, prefix = cluster_params(base)
    fit = fit_pingpong(measured, segments, beta, monotone)
    given = set(fit["mapping"])
    if "socket" in given and params["sockets"].value < 2:
        raise UsageError(
            f"base {base!r} has one socket per node: it has no socket distance; "
            f"give core and node only, or a base with 2+ sockets"
        )
    if "node" in given and params["nodes"].value < 2:
        raise UsageError(
            f"base {base!r} has one node: it has no node distance; give core and "
            f"socket only, or a base with 2+ nodes (e.g. orfeo-thin)"
        )
    kept = [
        m
        for m in MAPPINGS
        if m not in given
        and not (m == "socket" and params["sockets"].value < 2)
        and not (m == "node" and params["nodes"].value < 2)
    ]
    if kept:
        warnings.warn(
            f"calibrate: no measurement for mapping(s) {', '.join(kept)}; they keep {base!r}'s values",
            UserWarning,
            stacklevel=3,
        )
    table = "; ".join(
        f"{r.mapping} {r.one_way_us:.6g} us + {r.beta_us_per_byte:.6g} us/B" for r in fit.itertuples()
    )
    new = with_pingpong(params, fit, source or f"your ping-pong ({name or 'calibrate'})")
    # pooling may have moved a class the user gave below one the base kept: keep monotone
    order = [c for c in MAPPINGS if not (c == "socket" and params["sockets"].value < 2)]
    vals = pool_monotone([new[f"one_way_{c}"].value for c in order], [1.0] * len(order))
    for c, v in zip(order, vals if monotone else []):
        if not math.isclose(v, new[f"one_way_{c}"].value):
            new[f"one_way_{c}"] = Param(v, "us", "fit", "pooled with the base's values (monotone)")
    if monotone and "cpu_share" in new:  # the per-class overheads follow the pooled times
        p = new["cpu_share"]
        new = with_cpu_share(new, p.value, p.source, p.kind)
    desc = (
        f"{name + ': ' if name else ''}{params['label'].value}, calibrated by "
        f"mpilab.simulate.calibration to a ping-pong of {table}"
    )
    new["label"] = Param(desc, "", "assumption", "name")
    return new, prefix, fit, table
