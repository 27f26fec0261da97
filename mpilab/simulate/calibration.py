"""Calibration: a SimGrid platform whose simulated ping-pong reproduces a user's own measurements.

:func:`calibrate` keeps the shape of a shipped platform (:mod:`mpilab.simulate.platforms`) and
sets the links that each mapping's ping-pong crosses from the first segment of a segmented fit
(:mod:`mpilab.model.p2p`). :func:`mpilab.studies.calibration.check_calibration` simulates the
ping-pong on the result to show how close it comes.
"""
import dataclasses
import os
import warnings
from pathlib import Path

import pandas as pd

from mpilab.core.errors import UsageError, one_of
from mpilab.core.vocabulary import MAPPINGS
from mpilab.model import p2p
from mpilab.simulate.platforms import _cache_dir, _spec, _write, list_platforms

#: Which link of a base platform each mapping's ping-pong crosses (see :func:`render_xml`).
_MAPPING_LINKS = {"core": "one socket's link", "socket": "the node's inter-socket link",
                  "node": "two network cards and the switch"}


def _first_segments(measured, segments=2):
    """``{mapping: (intercept_us, slope_us_per_byte)}`` from any of :func:`calibrate`'s inputs."""
    if isinstance(measured, dict):
        out = {}
        for m, v in measured.items():
            try:
                ic, sl = (float(x) for x in v)
            except (TypeError, ValueError):
                raise UsageError(f"mapping {m!r}: expected (intercept_us, slope_us_per_byte), "
                                 f"got {v!r}") from None
            out[m] = (ic, sl)
        return out
    if isinstance(measured, (str, os.PathLike)):
        if not Path(measured).is_file():
            raise UsageError(f"results file {str(measured)!r} does not exist; give a results CSV "
                             f"with ping-pong rows, a fit table or a dict mapping -> (intercept, slope)")
        measured = p2p.fit(measured, segments=segments)
    elif not isinstance(measured, pd.DataFrame):
        measured = pd.DataFrame(list(measured))
    if {"intercept", "slope", "mapping"} <= set(measured.columns):
        table = measured if "segment" in measured.columns else measured.assign(segment=1)
    else:
        table = p2p.fit(measured, segments=segments)
    return p2p.first_segment(table)


def calibrate(measured, base="orfeo-thin", path=None, segments=2, name=None):
    """Write a SimGrid platform whose simulated ping-pong reproduces a user's measurements.

    The platform keeps the shape of ``base`` (nodes, sockets, cores, host names) and sets the
    links that each mapping's ping-pong crosses (:data:`_MAPPING_LINKS`) so that the one-way
    time of ``n`` bytes is ``intercept + slope * n`` for that mapping:

    * ``core``: the socket links get latency = intercept, bandwidth = 1 / slope;
    * ``socket``: the inter-socket links, likewise;
    * ``node``: the per-pair cap (the switch hop) gets bandwidth 1 / slope, each node's card is
      made at least as fast, and the intercept is split between the two cards and the switch
      in the base's proportions;
    * every core's port (what one core injects or absorbs, shared by its concurrent messages)
      is made as fast as the fastest calibrated pair, so one ping-pong is never slowed by it.

    A mapping not given keeps the base's value (a warning says which). Only the first segment
    (small and medium messages) is reproduced: SMPI's own size factors are off in the file, so
    the simulated time stays one straight line per mapping.

    Parameters
    ----------
    measured : dict, pandas.DataFrame, path or list of rows
        ``{mapping: (intercept_us, slope_us_per_byte)}``; a fit table with ``mapping``,
        ``intercept``, ``slope`` (and ``segment``: the first is used), as
        :func:`mpilab.model.p2p.fit` returns; or ping-pong results (rows of collective
        ``pingpong``, or ``pt2pt`` from an OSU osu_latency import, or a results CSV path), which
        are fitted here with the kit's segmented fit.
    base : str
        A shipped platform name (:func:`list_platforms`) whose shape is kept.
    path : str or Path, optional
        Where to write the XML (default: ``calibrated-<base>.xml`` in the user cache directory).
    segments : int
        Segments of the fit when ``measured`` holds raw ping-pong rows.
    name : str, optional
        Words for the description comment in the file.

    Returns
    -------
    Path
        The platform file; pass it as ``platform=`` to the SMPI launcher, ``mpilab sweep
        --platform`` or :func:`mpilab.measure.pingpong.run`.

    Raises
    ------
    UsageError
        An unknown mapping, a negative intercept or a slope that is not positive, or a mapping
        the base has no distance for (``socket`` on a one-socket node, ``node`` on one node).

    Examples
    --------
    >>> xml = calibrate({"core": (0.6, 5e-5), "socket": (2.5, 8e-5), "node": (3.2, 4e-4)},
    ...                 path="mine.xml")                                    # doctest: +SKIP
    """
    if str(base).endswith(".xml") or os.sep in str(base):
        raise UsageError(f"base must be a shipped platform name, not a file: {base!r} (a "
                         f"calibration rewrites the links of a shape the kit knows); valid: "
                         f"{', '.join(list_platforms())}")
    spec = _spec(base)
    first = _first_segments(measured, segments)
    for m, (ic, sl) in first.items():
        if m not in MAPPINGS:
            raise one_of("mapping", m, MAPPINGS)
        if not ic >= 0:
            raise UsageError(f"mapping {m!r}: intercept {ic:g} us is negative; a SimGrid link "
                             f"cannot have a negative latency (refit with more small sizes, or "
                             f"give the table by hand)")
        if not sl > 0:
            raise UsageError(f"mapping {m!r}: slope {sl:g} us/byte must be positive")
    if "socket" in first and spec.sockets < 2:
        raise UsageError(f"base {base!r} has one socket per node: it has no socket distance; "
                         f"give core and node only, or a base with 2+ sockets")
    if "node" in first and spec.nodes < 2:
        raise UsageError(f"base {base!r} has one node: it has no node distance; give core and "
                         f"socket only, or a base with 2+ nodes (e.g. orfeo-thin)")
    kept = [m for m in MAPPINGS if m not in first
            and not (m == "socket" and spec.sockets < 2) and not (m == "node" and spec.nodes < 2)]
    if kept:
        warnings.warn(f"calibrate: no measurement for mapping(s) {', '.join(kept)}; they keep "
                      f"{base!r}'s values", UserWarning, stacklevel=2)
    new = {}
    if "core" in first:
        new.update(lat_socket=first["core"][0], bw_socket=1.0 / first["core"][1])
    if "socket" in first:
        new.update(lat_node=first["socket"][0], bw_node=1.0 / first["socket"][1])
    if "node" in first:
        ic, sl = first["node"]
        old = 2 * spec.lat_nic + spec.lat_switch
        k = ic / old if old > 0 else 0.0
        bw = 1.0 / sl
        new.update(lat_nic=spec.lat_nic * k, lat_switch=spec.lat_switch * k, bw_nic=bw,
                   bw_switch=max(spec.bw_switch, bw))
    pair_bw = [new.get("bw_socket", spec.bw_socket), new.get("bw_node", spec.bw_node),
               new.get("bw_nic", spec.bw_nic)]
    new["bw_port"] = max(pair_bw)
    table = "; ".join(f"{m} {ic:.6g} us + {sl:.6g} us/B" for m, (ic, sl) in sorted(first.items()))
    desc = (f"{name + ': ' if name else ''}{spec.description}, calibrated by mpilab.simulate.platforms."
            f"calibrate to a ping-pong of {table}")
    spec = dataclasses.replace(spec, description=desc.replace("--", "-"), **new)
    return _write(spec, path if path is not None else _cache_dir() / f"calibrated-{base}.xml")
