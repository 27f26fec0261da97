"""Routes of a SimGrid platform file read back as the α-β model: per pair of hosts the latency
α and the time per byte β of one message, SimGrid's sharing penalty, and the model of ranks
placed on a platform that :func:`mpilab.model.timeline.predict` plays a schedule against.
"""
import os
import re
import xml.etree.ElementTree as ET

from mpilab.core.errors import UsageError
from mpilab.simulate.platforms import placement, platform_file

_TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "ps": 1e-6, "m": 60e6, "h": 3600e6}
_RATE_UNITS = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
               "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40}
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
        if m and unit.endswith(suffix) and unit[:-len(suffix)] in _RATE_UNITS:
            return float(m.group(1)) * _RATE_UNITS[unit[:-len(suffix)]] * per_byte / 1e6
    raise UsageError(f"cannot read the bandwidth {text!r}; valid: a number with Bps or bps "
                     "(k, M, G, T, Ki, Mi, Gi prefixes)")


def _routes(path):
    """Links ``{id: (latency us, bytes/us)}`` and routes ``{(src, dst): [link ids]}`` of a file."""
    key = (str(path), os.path.getmtime(path))
    if key not in _ROUTES_CACHE:
        links, routes = {}, {}
        for el in ET.parse(path).iter():
            if el.tag == "link":
                links[el.get("id")] = (_latency_us(el.get("latency", "0s")),
                                       _bytes_per_us(el.get("bandwidth")))
            elif el.tag == "route":
                ids = [c.get("id") for c in el if c.tag == "link_ctn"]
                routes[(el.get("src"), el.get("dst"))] = ids
                if el.get("symmetrical", "YES").upper() != "NO":
                    routes.setdefault((el.get("dst"), el.get("src")), ids[::-1])
        _ROUTES_CACHE[key] = (links, routes)
    return _ROUTES_CACHE[key]


_ROUTES_CACHE = {}
#: SimGrid's default ``network/weight-S`` (bytes): the bandwidth part of a flow's sharing penalty.
WEIGHT_S = 8775.0


def route_cost(name_or_path, src_host, dst_host):
    """Latency α (µs) and time per byte β (µs/B) of one message between two hosts.

    The route's link latencies add up and its slowest link sets the bandwidth, which is what
    SMPI charges a single message on the kit's platforms (size factors are 1 in the files).
    Works for any platform file whose routes are listed host to host (the kit's files are).

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
    links, routes = _routes(platform_file(name_or_path))
    ids = routes.get((src_host, dst_host))
    if not ids:
        raise UsageError(f"platform {str(name_or_path)!r} has no route from {src_host!r} to "
                         f"{dst_host!r} listed host to host; give alpha and beta yourself")
    return sum(links[i][0] for i in ids), 1.0 / min(links[i][1] for i in ids)


def route_weight(name_or_path, src_host, dst_host):
    """SimGrid's sharing penalty of the route between two hosts, in µs.

    Flows that share a link get bandwidth in inverse proportion to their penalty: the route's
    latency plus :data:`WEIGHT_S` bytes over the bandwidth of each of its links (SimGrid's
    model of TCP, which favours short round trips). :mod:`mpilab.model.schedules` uses it to share
    a rank's port the way SMPI does.

    Returns
    -------
    float
    """
    if src_host == dst_host:
        return 1.0
    links, routes = _routes(platform_file(name_or_path))
    ids = routes.get((src_host, dst_host))
    if not ids:
        raise UsageError(f"platform {str(name_or_path)!r} has no route from {src_host!r} to "
                         f"{dst_host!r} listed host to host")
    return sum(links[i][0] + WEIGHT_S / links[i][1] for i in ids)


def platform_model(platform, nprocs, mapping="core"):
    """The α-β model of the ranks placed on an SMPI platform, as keyword arguments of :func:`mpilab.model.timeline.predict`.

    Returns
    -------
    dict
        ``alpha(src, dst)`` in µs and ``beta(src, dst)`` in µs/B of each pair's route
        (:func:`route_cost`); ``port_beta``, the time per byte of a rank's
        port (the fastest route's β), and ``weight(src, dst)``, SimGrid's sharing penalty
        (:func:`route_weight`) — both used only with ``ports="shared"``.
    """
    hosts = placement(platform, nprocs, mapping)
    cost, weights = {}, {}

    def pair(a, b):
        if (a, b) not in cost:
            cost[(a, b)] = route_cost(platform, hosts[a], hosts[b])
        return cost[(a, b)]

    def weight(a, b):
        if (a, b) not in weights:
            weights[(a, b)] = route_weight(platform, hosts[a], hosts[b])
        return weights[(a, b)]

    betas = [pair(a, b)[1] for a in range(nprocs) for b in range(nprocs) if a != b]
    return dict(alpha=lambda a, b: pair(a, b)[0], beta=lambda a, b: pair(a, b)[1],
                port_beta=min(betas) if betas else 0.0, weight=weight)
