"""Routes of a SimGrid platform file read back as the α-β model: per pair of hosts the latency
α and the time per byte β of one message, SimGrid's sharing penalty, and the model of ranks
placed on a platform that :func:`mpilab.model.timeline.predict` plays a schedule against.
"""

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.simulate.platform_xml import CLASSES, OVERHEADS_PROP, PER_BYTE_PROP, UNEXPLAINED_PROP
from mpilab.simulate.platforms import ENVELOPE_BYTES, host_location, placement, platform_file

_TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "ps": 1e-6, "m": 60e6, "h": 3600e6}
_RATE_UNITS = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}
_VALUE_RE = re.compile(r"^\s*([0-9.eE+-]+)\s*([A-Za-z]*)\s*$")


def _latency_us(text):
    m = _VALUE_RE.match(text)
    if not m or m.group(2) not in _TIME_UNITS:
        raise UsageError(f"cannot read the latency {text!r}; valid units: {', '.join(_TIME_UNITS)}")
    return float(m.group(1)) * _TIME_UNITS[m.group(2)]


def _bytes_per_us(text):
    m = _VALUE_RE.match(text)
    unit = m.group(2) if m else ""
    for suffix, per_byte in (("Bps", 1.0), ("bps", 0.125)):
        if m and unit.endswith(suffix) and unit[: -len(suffix)] in _RATE_UNITS:
            return float(m.group(1)) * _RATE_UNITS[unit[: -len(suffix)]] * per_byte / 1e6
    raise UsageError(
        f"cannot read the bandwidth {text!r}; valid: a number with Bps or bps "
        "(k, M, G, T, Ki, Mi, Gi prefixes)"
    )


_FLIP = {"UP": "DOWN", "DOWN": "UP", None: None}


def _routes(path):
    """Links ``{id: (latency us, bytes/us, sharing policy)}``, routes ``{(src, dst): [(link id,
    direction)]}`` and the ``<config>`` properties of a file."""
    key = (str(path), os.path.getmtime(path))
    if key not in _ROUTES_CACHE:
        links, routes, props = {}, {}, {}
        for el in ET.parse(path).iter():
            if el.tag == "link":
                links[el.get("id")] = (
                    _latency_us(el.get("latency", "0s")),
                    _bytes_per_us(el.get("bandwidth")),
                    el.get("sharing_policy", "SHARED").upper(),
                )
            elif el.tag == "route":
                ids = [(c.get("id"), c.get("direction")) for c in el if c.tag == "link_ctn"]
                routes[(el.get("src"), el.get("dst"))] = ids
                if el.get("symmetrical", "YES").upper() != "NO":
                    routes.setdefault((el.get("dst"), el.get("src")), [(i, _FLIP[d]) for i, d in ids[::-1]])
            elif el.tag == "prop" and el.get("id", "").startswith(("smpi/", "network/", "mpilab/")):
                props[el.get("id")] = el.get("value", "")
        _ROUTES_CACHE[key] = (links, routes, props)
    return _ROUTES_CACHE[key]


def _factor(text, name):
    """Offset (µs) and slope (µs/B) of an ``smpi/os``-style value's first chunk ``size:offset:slope``."""
    first = (text or "0:0:0").split(";")[0].split(":")
    try:
        offset = float(first[1]) * 1e6 if len(first) > 1 else 0.0
        slope = float(first[2]) * 1e6 if len(first) > 2 else 0.0
    except ValueError:
        raise UsageError(f"cannot read {name} = {text!r}; valid: size:offset:slope in seconds") from None
    return offset, slope


def _class_overheads(text, default):
    """``{class: (o_send, o_recv, o_isend)}`` from a ``mpilab/overheads`` property (µs)."""
    out = {c: default for c in CLASSES}
    if not text:
        return out
    for item in text.split(";"):
        cls, _, rest = item.partition(":")
        try:
            values = tuple(float(x) for x in rest.split(":"))
        except ValueError:
            values = ()
        if cls not in out or len(values) != 3:
            raise UsageError(
                f"cannot read {OVERHEADS_PROP} item {item!r}; valid: CLASS:O_SEND:O_RECV:O_ISEND (µs), "
                f"CLASS one of {', '.join(CLASSES)}"
            )
        out[cls] = values
    return out


def overheads(name_or_path):
    """SMPI's per-message overheads of a platform file, read from its ``<config>`` (and, for
    per-class overheads, its zone's ``mpilab/overheads``: :mod:`mpilab.simulate.overheads`).

    Returns
    -------
    dict
        ``o_send``, ``o_isend``, ``o_recv`` (µs: the file's ``smpi/os``, ``smpi/ois``,
        ``smpi/or``, the core class's), ``o_send_per_byte``, ``o_recv_per_byte`` (µs/B),
        ``eager_bytes`` (``smpi/send-is-detached-thresh``, SimGrid's 65536 when the file does not
        say) and ``classes``: ``{class: (o_send, o_recv, o_isend)}`` of a message of each class
        (each the file's global values when it has no per-class overheads).
    """
    _, _, props = _routes(platform_file(name_or_path))
    os_, os_b = _factor(props.get("smpi/os"), "smpi/os")
    ois, _ = _factor(props.get("smpi/ois"), "smpi/ois")
    or_, or_b = _factor(props.get("smpi/or"), "smpi/or")
    if props.get(PER_BYTE_PROP):
        os_b, or_b = (float(x) for x in props[PER_BYTE_PROP].split(":"))
    return dict(
        o_send=os_,
        o_isend=ois,
        o_recv=or_,
        o_send_per_byte=os_b,
        o_recv_per_byte=or_b,
        eager_bytes=int(props.get("smpi/send-is-detached-thresh", 65536)),
        classes=_class_overheads(props.get(OVERHEADS_PROP), (os_, or_, ois)),
    )


def unexplained_cost(name_or_path):
    """The unexplained per-message cost (µs per side) a platform carries, 0 for a physical one
    (:mod:`mpilab.studies.residual`)."""
    _, _, props = _routes(platform_file(name_or_path))
    return float(props.get(UNEXPLAINED_PROP, 0) or 0)


def refuse_unexplained(name_or_path, what="a ping-pong"):
    """Raise when a platform carries an unexplained per-message cost: it draws a seed's collective
    curves only, and ``what`` on it would not be the cluster's."""
    cost = unexplained_cost(name_or_path)
    if cost:
        raise UsageError(
            f"platform {str(name_or_path)!r} carries an unexplained per-message cost of {cost:g} us "
            f"per side (mpilab.studies.residual): it draws seed 000's collective curves and is never "
            f"used for {what}; use orfeo-thin"
        )


def pair_class(src_host, dst_host):
    """The class of a message between two hosts named as the kit names them (core: one socket,
    socket: one node, node: two nodes; a host named otherwise is a node of its own, a message to
    oneself is of the core class), as the platform loader classes it."""
    if src_host == dst_host:
        return "core"
    a, b = host_location(src_host), host_location(dst_host)
    if a is None or b is None or a[0] != b[0]:
        return "node"
    return "core" if a[1] == b[1] else "socket"


def _route(name_or_path, src_host, dst_host):
    links, routes, _ = _routes(platform_file(name_or_path))
    ids = routes.get((src_host, dst_host))
    if not ids:
        raise UsageError(
            f"platform {str(name_or_path)!r} has no route from {src_host!r} to "
            f"{dst_host!r} listed host to host; give alpha and beta yourself"
        )
    return links, ids


_ROUTES_CACHE = {}
#: SimGrid's default ``network/weight-S`` (bytes): the bandwidth part of a flow's sharing penalty.
WEIGHT_S = 8775.0
#: SimGrid 3.32 (network_cm02.cpp, comm_action_set_variable) gives a flow whose route has no
#: latency the sharing penalty 1 (second), whatever its bandwidth terms.
ZERO_LATENCY_PENALTY_US = 1e6
#: SimGrid's ``network/loopback-bw`` (bytes/s): a message from a host to itself.
LOOPBACK_BYTES_PER_S = 10e9


def route_cost(name_or_path, src_host, dst_host):
    """Latency α (µs) and time per byte β (µs/B) of one eager message between two hosts.

    What SMPI charges a single message below the eager threshold on the kit's platforms (size
    factors are 1 in the files): the sender's overhead, the route's link latencies, SimGrid's
    16-byte envelope at the route's slowest link, and the receiver's overhead make α, the
    one-way time of a zero-byte message (what a ping-pong's intercept measures); the slowest
    link sets β. Works for any platform file whose routes are listed host to host (the kit's
    files are).

    Parameters
    ----------
    name_or_path : str or Path
        Platform name or XML path.
    src_host, dst_host : str
        Host names (see :func:`mpilab.simulate.platforms.placement`).

    Returns
    -------
    (float, float)
        ``(alpha_us, beta_us_per_byte)``; ``(0, 0)`` when both hosts are the same.

    Raises
    ------
    UsageError
        When the file has no route between the two hosts.
    """
    if src_host == dst_host:
        return 0.0, 0.0
    lat, beta = link_cost(name_or_path, src_host, dst_host)
    o_send, o_recv, _ = overheads(name_or_path)["classes"][pair_class(src_host, dst_host)]
    return o_send + lat + ENVELOPE_BYTES * beta + o_recv, beta


def link_cost(name_or_path, src_host, dst_host):
    """The links' part of :func:`route_cost`: the sum of their latencies (µs) and the slowest
    one's time per byte (µs/B), without the overheads and the envelope."""
    if src_host == dst_host:
        return 0.0, 0.0
    links, ids = _route(name_or_path, src_host, dst_host)
    return sum(links[i][0] for i, _ in ids), 1.0 / min(links[i][1] for i, _ in ids)


def route_resources(name_or_path, src_host, dst_host):
    """The shared resources of a route: ``[(key, bytes per µs)]`` for each SHARED link and each
    direction of a SPLITDUPLEX link on it (FATPIPE links only cap each flow)."""
    if src_host == dst_host:
        return []
    links, ids = _route(name_or_path, src_host, dst_host)
    out = []
    for i, d in ids:
        policy = links[i][2]
        if policy == "FATPIPE":
            continue
        out.append(((i, d if policy == "SPLITDUPLEX" else None), links[i][1]))
    return out


def route_weight(name_or_path, src_host, dst_host):
    """SimGrid's sharing penalty of the route between two hosts, in µs.

    Flows that share a link get bandwidth in inverse proportion to their penalty: the route's
    latency plus :data:`WEIGHT_S` bytes (the file's ``network/weight-S``) over the bandwidth of
    each of its links (SimGrid's model of TCP, which favours short round trips); a route without
    latency gets :data:`ZERO_LATENCY_PENALTY_US`, as SimGrid does. :mod:`mpilab.model.schedules` uses it to
    share
    a rank's port the way SMPI does.

    Returns
    -------
    float
    """
    if src_host == dst_host:
        return 1.0
    links, ids = _route(name_or_path, src_host, dst_host)
    _, _, props = _routes(platform_file(name_or_path))
    weight_s = float(props.get("network/weight-S", WEIGHT_S))
    if sum(links[i][0] for i, _ in ids) <= 0:
        return ZERO_LATENCY_PENALTY_US
    return sum(links[i][0] + weight_s / links[i][1] for i, _ in ids) or 1.0


def platform_model(platform, nprocs, mapping="core"):
    """The α-β model of the ranks placed on an SMPI platform, as keyword arguments of
    :func:`mpilab.model.timeline.predict`.

    Returns
    -------
    dict
        ``alpha(src, dst)`` in µs (the links' latencies and the envelope: the overheads are
        separate) and ``beta(src, dst)`` in µs/B of each pair's route; ``port_beta``, the time
        per byte of a rank's port (the fastest route's β), ``weight(src, dst)``, SimGrid's
        sharing penalty (:func:`route_weight`), and ``resources(src, dst)``, the shared links
        on the way (:func:`route_resources`): used with ``ports="shared"``; and the platform's
        overheads ``o_send``, ``o_isend``, ``o_recv``, ``o_send_per_byte``, ``o_recv_per_byte``
        (:func:`overheads`).
    """
    hosts = placement(platform, nprocs, mapping)
    cost, weights, shared = {}, {}, {}

    def pair(a, b):
        if (a, b) not in cost:
            lat, beta = link_cost(platform, hosts[a], hosts[b])
            cost[(a, b)] = (lat + ENVELOPE_BYTES * beta, beta)
        return cost[(a, b)]

    def weight(a, b):
        if (a, b) not in weights:
            weights[(a, b)] = route_weight(platform, hosts[a], hosts[b])
        return weights[(a, b)]

    def resources(a, b):
        if (a, b) not in shared:
            shared[(a, b)] = route_resources(platform, hosts[a], hosts[b])
        return shared[(a, b)]

    betas = [pair(a, b)[1] for a in range(nprocs) for b in range(nprocs) if a != b]
    o = overheads(platform)
    o.pop("eager_bytes")
    classes = o.pop("classes")
    if len(set(classes.values())) > 1:  # per-class overheads: functions of the pair of ranks
        for i, key in enumerate(("o_send", "o_recv", "o_isend")):
            o[key] = lambda a, b, i=i: classes[pair_class(hosts[a], hosts[b])][i]
    _, _, props = _routes(platform_file(platform))
    loopback = float(props.get("network/loopback-bw", LOOPBACK_BYTES_PER_S)) / 1e6
    return dict(
        alpha=lambda a, b: pair(a, b)[0],
        beta=lambda a, b: pair(a, b)[1],
        port_beta=min(betas) if betas else 0.0,
        weight=weight,
        resources=resources,
        self_beta=1.0 / loopback,
        **o,
    )


#: Message patterns of SimGrid's own allgathers that the kit's schedules do not cover.
PATTERNS = ("smpi-ring", "smpi-default")


def pattern_messages(pattern, nprocs, nbytes):
    """``(src, dst, bytes)`` of one SimGrid allgather: ``smpi-ring`` (SimGrid 3.32's
    ``allgather__ring``, which Open MPI's rules pick for large messages under the ``ompi``
    selector: in step i every rank sends its own block to rank + i) or ``smpi-default``
    (``allgather__default``: every rank sends its block to every other rank at once)."""
    if pattern == "smpi-ring":
        return [(r, (r + i) % nprocs, nbytes) for i in range(1, nprocs) for r in range(nprocs)]
    if pattern == "smpi-default":
        return [(r, d, nbytes) for r in range(nprocs) for d in range(nprocs) if d != r]
    raise UsageError(f"unknown pattern {pattern!r}; valid: {', '.join(PATTERNS)}")


def link_traffic(platform, messages, nprocs, mapping="core"):
    """Bytes each shared link of a platform carries for a list of messages.

    Parameters
    ----------
    platform : str or Path
    messages : iterable of (src rank, dst rank, bytes)
        E.g. :func:`pattern_messages`, or a schedule's sends
        (``[(p.rank, op.dst, op.sbytes) for p in schedule(...) for op in p.ops if op.dst is not None]``).
    nprocs : int
    mapping : {'core', 'socket', 'node'}

    Returns
    -------
    pandas.DataFrame
        ``link``, ``direction``, ``bytes``, ``messages`` and ``seconds_at_capacity`` (the
        least time the link needs for its bytes), busiest first.
    """
    hosts = placement(platform, nprocs, mapping)
    load, count, cap = {}, {}, {}
    for src, dst, nbytes in messages:
        if src == dst or not nbytes:
            continue
        for key, bw in route_resources(platform, hosts[src], hosts[dst]):
            load[key] = load.get(key, 0) + nbytes
            count[key] = count.get(key, 0) + 1
            cap[key] = bw
    rows = [
        dict(
            link=k[0], direction=k[1] or "", bytes=v, messages=count[k], seconds_at_capacity=v / cap[k] * 1e-6
        )
        for k, v in load.items()
    ]
    df = pd.DataFrame(rows, columns=["link", "direction", "bytes", "messages", "seconds_at_capacity"])
    return df.sort_values("seconds_at_capacity", ascending=False).reset_index(drop=True)


def alpha_beta(platform, nprocs, mapping="core"):
    """α and β of one message between two ranks of a simulated run: means over every ordered pair.

    Each pair's route on the platform file gives its latency (the sum of the links') and its
    time per byte (its slowest link, :func:`route_cost`); the means over
    the P·(P − 1) ordered pairs of ranks placed by ``mapping`` are one number each, which is what
    an α-β cost expression takes. How far that is from the pairs a given algorithm really uses
    is for you to judge.

    Parameters
    ----------
    platform : str or Path
        A platform name or file.
    nprocs : int or sequence of int
    mapping : {"core", "socket", "node"}

    Returns
    -------
    pandas.DataFrame
        nprocs, alpha_us, beta_us_per_byte, platform, mapping.
    """
    counts = [nprocs] if np.isscalar(nprocs) else list(nprocs)
    rows = []
    name = Path(str(platform)).stem if str(platform).endswith(".xml") else str(platform)
    for p in counts:
        p = int(p)
        if p < 2:
            raise UsageError(f"alpha_beta needs P >= 2 (a pair of ranks), not {p}")
        hosts = placement(platform, p, mapping)
        pairs = [route_cost(platform, hosts[a], hosts[b]) for a in range(p) for b in range(p) if a != b]
        a, b = np.mean(pairs, axis=0)
        rows.append(
            dict(nprocs=p, alpha_us=float(a), beta_us_per_byte=float(b), platform=name, mapping=mapping)
        )
    return pd.DataFrame(rows)
