"""Simulated networks of other shapes, built from a shipped platform's parameters: a two-level
fat tree and a torus (lab 6 races broadcasts on them).

Each generated cluster has one rank per node (a host per node, named like the kit's platforms,
``<prefix><node>-s0-c00``, so every mapping puts rank ``i`` on node ``i``): the broadcast crosses
the network at every hop and the topology is what changes. Everything a message meets comes
from the base platform's :class:`~mpilab.simulate.platforms.Spec`
(:func:`mpilab.simulate.platforms.spec`), so a recalibrated base flows in: the rank's port
(``bw_port``), its socket's memory (``bw_mem``, when the base models it), its node's network
card (``lat_nic``, and ``bw_switch`` for all the node's flows in each direction), the most one
pair of ranks gets between nodes (``bw_nic``) and the time to cross one switch
(``lat_switch``), and the base's SMPI settings: its per-message overheads (``smpi/os``,
``smpi/or``, ``smpi/ois``) and eager limit (``smpi/send-is-detached-thresh``), written by
:func:`mpilab.simulate.platform_xml.smpi_config`. Two nodes under one switch are therefore two
nodes of the base: a message between them costs the base's one-way time between nodes
(overheads, both cards, one switch, the envelope), and every further switch or router adds
``lat_switch``. The file also carries the base's physical parameters with their sources.

What the base cannot say — how many switches, how they are wired, what one router hop costs —
is an assumption, stated with its reason in the file and in :func:`parameters`:

* every switch or router crossed costs the base's one switch latency (in a calibrated base,
  half the link latency between two nodes: :func:`mpilab.simulate.platforms.spec_of` splits it
  into a quarter per card and a half for the switch), and every cable between switches (fat
  tree) or routers (torus) carries what a node's card carries;
* fat tree: ``leaves`` leaf switches of ``nodes_per_leaf`` nodes each and ``spines`` spine
  switches, every leaf wired once to every spine; a message between leaves goes up to spine
  ``destination node mod spines`` (d-mod-k routing, deterministic) and down. With fewer spines
  than nodes per leaf the leaves are oversubscribed (``nodes_per_leaf / spines`` to 1);
* torus: nodes on a grid of ``dims``, wrapped in every dimension, each router linked to its
  neighbours; dimension-ordered routing (the first dimension first), the shorter way round
  each ring (ties go up).

The files are written to the user cache (``~/.cache/mpilab/platforms``) anew on every call and
named by their label, which SMPI rows record as their platform.

Examples
--------
>>> from mpilab.simulate import topologies
>>> path = topologies.fat_tree(leaves=2, nodes_per_leaf=2, spines=1)
>>> topologies.parameters(path).loc["spines", "value"]
'1'
"""

from __future__ import annotations

import itertools
import math
import os
import re
from pathlib import Path

import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.simulate import platform_xml, platforms

#: Most nodes a generated network may have (every pair of hosts gets a route in the file).
MAX_NODES = 256
_ASSUMED = "assumption"
#: Rows of the base's physical parameters that describe its shape, not this network's.
_SHAPE = ("nodes", "sockets", "cores_per_socket")
#: Why a switch or router hop costs the base's lat_switch (the source of the hop's row).
_HOP = (
    "crosses one more switch of the base (lat_switch: half the base's link latency between "
    "two nodes, the split of mpilab.simulate.platforms.spec_of), so two nodes under one "
    "switch are two nodes of the base"
)


def _from_base(base, spec):
    """The rows of the parameters every generated network takes from its base."""
    where = f"the {base} platform's"
    rows = [
        (
            "base",
            base,
            "",
            f"the platform whose parameters follow (mpilab.simulate.platforms.spec({base!r}))",
        ),
        ("bw_port", spec.bw_port, "B/us", f"{where} bw_port: what one rank injects, and absorbs"),
        ("lat_nic", spec.lat_nic, "us", f"{where} lat_nic: a node's network card, each way"),
        (
            "bw_card",
            spec.bw_switch,
            "B/us",
            f"{where} bw_switch: a node's card, all its flows in one direction",
        ),
        ("bw_pair", spec.bw_nic, "B/us", f"{where} bw_nic: the most one pair of ranks gets between nodes"),
        ("lat_switch", spec.lat_switch, "us", f"{where} lat_switch: crossing one switch"),
        ("o_send", spec.o_send, "us", f"{where} o_send: SMPI's smpi/os, below the eager limit"),
        ("o_recv", spec.o_recv, "us", f"{where} o_recv: SMPI's smpi/or, below the eager limit"),
        ("o_isend", spec.o_isend, "us", f"{where} o_isend: SMPI's smpi/ois, below the eager limit"),
        ("eager_bytes", spec.eager_bytes, "B", f"{where} eager_bytes: SMPI's smpi/send-is-detached-thresh"),
    ]
    rows += [
        (name, getattr(spec, name), "us/B", f"{where} {name}: the overhead's time per byte")
        for name in ("o_send_per_byte", "o_recv_per_byte")
        if getattr(spec, name)
    ]
    if spec.bw_mem:
        rows.append(
            (
                "bw_mem",
                spec.bw_mem,
                "B/us",
                f"{where} bw_mem: a node's (one socket's) memory, shared by what its rank sends and receives",
            )
        )
    return rows


def _check_count(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UsageError(f"bad {name} {value!r}; valid: an integer >= {low}")


def _label(label, default):
    label = default if label is None else str(label)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", label) or label in platforms.list_platforms():
        raise UsageError(
            f"bad platform label {label!r}; valid: letters, digits, '-', '_', '.', and not a shipped name"
        )
    return label


def _render(label, prefix, nodes, base, spec, rows, links, route):
    """The XML of a cluster of ``nodes`` one-rank hosts whose routes between nodes ``route``
    gives (a list of ``(link id, direction or None)``), between each host's port, memory and card,
    as on the base platform (:func:`mpilab.simulate.platform_xml.render_xml`)."""
    lat, bw = platform_xml.latency_text, platform_xml.bandwidth_text  # the platform files' units
    physical = [r for r in spec.sources if r[0] not in _SHAPE]  # the base's, with their sources
    out = platform_xml.xml_head(
        f"{label}, one rank per node, on the parameters of {base} ({spec.description})",
        platform_xml.smpi_config(spec),
        physical,
        generator="mpilab.simulate.topologies",
        notes=platform_xml.parameter_notes(rows, "mpilab.simulate.topologies"),
    )
    hosts = [platform_xml.host_name(prefix, i, 0, 0) for i in range(nodes)]
    for i, h in enumerate(hosts):
        out.append(f'  <host id="{h}" speed="{spec.speed}" core="1"/>')
        out.append(
            f'  <link id="port-{h}" bandwidth="{bw(spec.bw_port)}" latency="0us" '
            'sharing_policy="SPLITDUPLEX"/>'
        )
        if spec.bw_mem:
            out.append(
                f'  <link id="mem{i}" bandwidth="{bw(spec.bw_mem)}" latency="0us" sharing_policy="SHARED"/>'
            )
        out.append(
            f'  <link id="nic{i}" bandwidth="{bw(spec.bw_switch)}" latency="{lat(spec.lat_nic)}" '
            f'sharing_policy="SPLITDUPLEX"/>'
        )
    for lid, bandwidth, latency, policy in links:
        out.append(
            f'  <link id="{lid}" bandwidth="{bw(bandwidth)}" latency="{lat(latency)}" '
            f'sharing_policy="{policy}"/>'
        )
    for a, b in itertools.permutations(range(nodes), 2):
        mem_a, mem_b = ([(f"mem{a}", None)], [(f"mem{b}", None)]) if spec.bw_mem else ([], [])
        hops = [
            (f"port-{hosts[a]}", "UP"),
            *mem_a,
            (f"nic{a}", "UP"),
            *route(a, b),
            (f"nic{b}", "DOWN"),
            *mem_b,
            (f"port-{hosts[b]}", "DOWN"),
        ]
        ctn = "".join(
            f'<link_ctn id="{x}"/>' if d is None else f'<link_ctn id="{x}" direction="{d}"/>' for x, d in hops
        )
        out.append(f'  <route src="{hosts[a]}" dst="{hosts[b]}" symmetrical="NO">{ctn}</route>')
    out += ["</zone>", "</platform>", ""]
    return "\n".join(out)


def _write(label, text):
    """Write a platform file to the user cache atomically (readers never see half a file)."""
    path = platforms._cache_dir() / f"{label}.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def fat_tree(base="orfeo-thin", leaves=8, nodes_per_leaf=8, spines=4, label=None):
    """A two-level fat tree of ``leaves × nodes_per_leaf`` one-rank nodes and ``spines`` spines.

    Parameters
    ----------
    base : str
        The shipped platform whose parameters every message meets (see the module's docstring).
    leaves, nodes_per_leaf, spines : int
        The shape; ``nodes_per_leaf / spines`` to 1 is the leaves' oversubscription.
    label : str, optional
        Name of the file and of the platform in results (default
        ``fattree-<leaves>x<nodes_per_leaf>-<spines>spines``).

    Returns
    -------
    Path
        The platform file, for ``launch.get_launcher("smpi", platform=path)`` and
        :func:`mpilab.simulate.routes.route_cost`.
    """
    for name, v in (("leaves", leaves), ("nodes_per_leaf", nodes_per_leaf), ("spines", spines)):
        _check_count(name, v)
    nodes = leaves * nodes_per_leaf
    if not 2 <= nodes <= MAX_NODES:
        raise UsageError(f"a fat tree of {leaves} x {nodes_per_leaf} = {nodes} nodes; valid: 2..{MAX_NODES}")
    label = _label(label, f"fattree-{leaves}x{nodes_per_leaf}-{spines}spines")
    spec = platforms.spec(base)
    g = math.gcd(nodes_per_leaf, spines)
    ratio = f"{nodes_per_leaf // g}:{spines // g}"
    rows = _from_base(base, spec) + [
        ("leaves", str(leaves), "", f"{_ASSUMED}: a small two-level fat tree"),
        (
            "nodes_per_leaf",
            str(nodes_per_leaf),
            "",
            f"{_ASSUMED}: one rank per node, so every hop of a broadcast crosses the network",
        ),
        (
            "spines",
            str(spines),
            "",
            f"{_ASSUMED}: {ratio} oversubscription at the leaves "
            f"({nodes_per_leaf} nodes down, {spines} cables up), common in "
            "commodity clusters",
        ),
        (
            "uplink bandwidth",
            spec.bw_switch,
            "B/us",
            f"{_ASSUMED}: a leaf-spine cable carries what a node's card carries (the same links throughout)",
        ),
        ("uplink latency", spec.lat_switch, "us", f"{_ASSUMED}: a leaf-spine cable {_HOP}"),
        ("routing", "d-mod-k", "", f"{_ASSUMED}: up to spine (destination node mod spines), deterministic"),
    ]
    links = [(f"leaf{l}", spec.bw_nic, spec.lat_switch, "FATPIPE") for l in range(leaves)]
    links += [
        (f"up{l}.{s}", spec.bw_switch, spec.lat_switch, "SPLITDUPLEX")
        for l in range(leaves)
        for s in range(spines)
    ]

    def route(a, b):
        la, lb = a // nodes_per_leaf, b // nodes_per_leaf
        if la == lb:
            return [(f"leaf{la}", None)]
        s = b % spines
        return [(f"leaf{la}", None), (f"up{la}.{s}", "UP"), (f"up{lb}.{s}", "DOWN")]

    return _write(label, _render(label, "ft", nodes, base, spec, rows, links, route))


def torus(base="orfeo-thin", dims=(8, 8), label=None):
    """A torus of one-rank nodes on a grid of ``dims``, wrapped in every dimension.

    Node ``i`` sits at the grid coordinates of ``i`` in row-major order with the first dimension
    varying fastest (so ranks 0, 1, 2, ... follow the first ring). Dimension-ordered routing,
    the shorter way round each ring.

    Parameters
    ----------
    base : str
        The shipped platform whose parameters every message meets.
    dims : tuple of int
        The grid, each dimension at least 3 (so the two neighbours on a ring differ).
    label : str, optional
        Default ``torus-<d1>x<d2>...``.

    Returns
    -------
    Path
    """
    dims = tuple(dims)
    if not dims:
        raise UsageError("a torus needs at least one dimension")
    for d in dims:
        _check_count("torus dimension", d, low=3)
    nodes = 1
    for d in dims:
        nodes *= d
    if nodes > MAX_NODES:
        raise UsageError(f"a torus of {'x'.join(map(str, dims))} = {nodes} nodes; valid: at most {MAX_NODES}")
    label = _label(label, "torus-" + "x".join(map(str, dims)))
    spec = platforms.spec(base)
    rows = _from_base(base, spec) + [
        (
            "dims",
            "x".join(map(str, dims)),
            "",
            f"{_ASSUMED}: {nodes} nodes, one rank each, so every hop of a broadcast crosses the network",
        ),
        (
            "torus link bandwidth",
            spec.bw_switch,
            "B/us",
            f"{_ASSUMED}: a router-router link carries what a node's card carries",
        ),
        ("router hop latency", spec.lat_switch, "us", f"{_ASSUMED}: a router-router link {_HOP}"),
        (
            "routing",
            "dimension-ordered",
            "",
            f"{_ASSUMED}: first dimension first, the shorter way round each ring (ties go up)",
        ),
    ]

    def coords(i):
        out = []
        for d in dims:
            out.append(i % d)
            i //= d
        return out

    def index(c):
        i, scale = 0, 1
        for v, d in zip(c, dims):
            i += v * scale
            scale *= d
        return i

    links = [("router", spec.bw_nic, spec.lat_switch, "FATPIPE")]
    seen = set()
    for i in range(nodes):
        for k, d in enumerate(dims):
            c = coords(i)
            c[k] = (c[k] + 1) % d
            j = index(c)
            seen.add((i, j))
    links += [(f"t{i}-{j}", spec.bw_switch, spec.lat_switch, "SPLITDUPLEX") for i, j in sorted(seen)]

    def hop(i, j):
        """The link between neighbours ``i`` and ``j``, in the direction of the move."""
        return (f"t{i}-{j}", "UP") if (i, j) in seen else (f"t{j}-{i}", "DOWN")

    def route(a, b):
        out = [("router", None)]  # the first router: the per-pair bandwidth, one switch latency
        c, target = coords(a), coords(b)
        for k, d in enumerate(dims):
            up = (target[k] - c[k]) % d
            step = 1 if up <= d - up else -1
            for _ in range(up if step == 1 else d - up):
                nxt = list(c)
                nxt[k] = (c[k] + step) % d
                out.append(hop(index(c), index(nxt)))
                c = nxt
        return out

    return _write(label, _render(label, "tor", nodes, base, spec, rows, links, route))


def parameters(path):
    """The parameters written in a generated platform file, each with its unit and source.

    Returns
    -------
    pandas.DataFrame
        Indexed by parameter: ``value`` (as written), ``unit``, ``source``.
    """
    text = Path(platforms.platform_file(path)).read_text()
    # the file also holds the base's parameters (mpilab.simulate.clusters): read this module's
    block = re.search(
        r"<!-- parameters, each with its source \(mpilab\.simulate\.topologies\):\n(.*?)\n-->",
        text,
        flags=re.S,
    )
    if block is None:
        raise UsageError(f"{path}: no parameter block (not a file of mpilab.simulate.topologies)")
    rows = []
    for line in block.group(1).splitlines():
        name, _, rest = line.strip().partition(" = ")
        value_unit, _, source = rest.partition(": ")
        value, _, unit = value_unit.partition(" ")
        rows.append((name, value, unit, source))
    return pd.DataFrame(rows, columns=["parameter", "value", "unit", "source"]).set_index("parameter")
