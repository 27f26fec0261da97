"""SimGrid platforms of the kit: ORFEO-like partitions, the 'jupiter' cluster and Bunyip.

Every core is its own SimGrid host, so a platform models three distances:

* two cores on one socket talk over the socket's link (``core`` mapping neighbours),
* two cores on different sockets of a node talk over the inter-socket link,
* two cores on different nodes go through both nodes' network cards and the switch.

The numbers are physical parameters, each with its source (:mod:`mpilab.simulate.clusters`;
``docs/CALIBRATION.md``): per distance the one-way time of a small message and the time per
byte, SMPI's per-message overheads (``smpi/os``, ``smpi/or``, ``smpi/ois``) and eager limit
(``smpi/send-is-detached-thresh``), a node's network card and a socket's memory bandwidth.
:func:`spec_of` turns them into links (a distance's link latency is its one-way time less the
overheads and SimGrid's 16-byte envelope) and :func:`~mpilab.simulate.platform_xml.render_xml`
writes every parameter and its source into the file. SMPI's size-dependent correction factors
are switched off in the file (``smpi/bw-factor`` and ``smpi/lat-factor`` are 1). This module is
the catalogue (names, specs, cached files, placement); :mod:`mpilab.simulate.platform_xml`
writes the XML text.

Every core has its own full-duplex port (a SPLITDUPLEX link of ``bw_port``, zero latency) on
every route: what a rank sends at the same time shares its outgoing side, what it receives
shares its incoming side. Without it a root could feed fifteen 16 MiB messages at full speed
each, and a linear broadcast would cost no more than one message. The socket and node links
are FATPIPE (they carry the latency); each socket's memory, when its bandwidth is known, is a
SHARED link that every message from or to that socket's cores crosses (concurrent copies share
it). Between nodes a message crosses its node's network card, the switch and the other node's
card: each card is a full-duplex link of ``bw_switch`` (100 Gb/s on THIN) shared by all the
flows of that node in that direction, and the switch hop is a FATPIPE of ``bw_nic``, the most
one pair of ranks gets.

Shipped names: ``orfeo-thin`` (2 nodes), ``orfeo-thin-N`` (N = 2..10 nodes), ``orfeo-epyc``,
``orfeo-fat``, ``jupiter-32x16``, ``bunyip-8``. Files are generated from Python and cached under
``mpilab/data/platforms`` (shipped) or the user cache directory (the others). To calibrate a
platform of these shapes to your own cluster see :mod:`mpilab.simulate.calibration` and
``mpilab calibrate``.

For more ranks than these machines have cores (one rank per core): ``thin-like-N`` is THIN's
node and network with N nodes (ORFEO's THIN itself has 10), ``jupiter-Nx16`` jupiter with N
nodes of 16 cores (the seed's has 32), e.g. ``thin-like-43`` or ``jupiter-64x16`` for 1,024
ranks. A platform has at most :data:`MAX_HOSTS` hosts: the file lists a route for every pair
of hosts (1,024 hosts: 141 MB, parsed in 6 s).

Calibrating to your own cluster
-------------------------------
:func:`calibrate` writes a platform of a shipped shape whose simulated ping-pong has *your*
first-segment intercept and slope per mapping:

1. Measure the ping-pong on your cluster for each distance, e.g. inside a 2-node allocation
   ``mpilab pingpong --flavour openmpi --mapping core,socket,node -o mine.csv`` (rows say
   ``NOT a node mapping`` when the allocation cannot give one), or run OSU's ``osu_latency``
   per mapping and ``mpilab import-osu lat_core.txt lat_socket.txt lat_node.txt -o mine.csv``.
2. ``mpilab calibrate mine.csv --base orfeo-thin -o mine.xml --check`` (or
   ``calibrate("mine.csv", base="orfeo-thin", path="mine.xml")``): fits each mapping with the
   kit's segmented fit, sets the links, and ``--check`` simulates the ping-pong on the new file
   and prints target vs simulated intercept and slope. Instead of raw rows you may give the
   table itself: ``--table core=1.17,0.0001 socket=4.36,0.0001 node=1.61,0.0002``.
3. Simulate on it: ``mpilab sweep --flavour smpi --platform mine.xml ...``.

Only the first segment is reproduced (the simulated curve is one line per mapping), and SMPI
adds about 0.01 µs to every simulated one-way time. :func:`check_calibration` measures both.

Contention-free α-β platforms (:func:`mpilab.simulate.platform_xml.alpha_beta_xml`, on which each
message costs exactly α + β·bytes) are written by :mod:`mpilab.simulate.platform_xml`.

Examples
--------
>>> from mpilab.simulate import platforms
>>> platforms.platform_info("orfeo-thin")["nodes"]
2
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mpilab.core import paths
from mpilab.core.errors import UsageError, one_of
from mpilab.core.vocabulary import MAPPINGS
from mpilab.simulate import clusters, platform_xml
from mpilab.simulate.platform_xml import host_name, render_xml

DATA_DIR = paths.DATA_DIR / "platforms"


@dataclass(frozen=True)
class Spec:
    """Shape and link parameters of one platform (latencies in µs, bandwidths in bytes/µs).

    ``lat_socket``/``bw_socket``: the link between two cores of one socket; ``lat_node``/
    ``bw_node``: between two sockets of a node; ``lat_nic`` and ``bw_switch``: each node's network
    card (its latency, and the bandwidth all the node's flows share in each direction);
    ``lat_switch`` and ``bw_nic``: the switch hop (the most one pair of ranks gets between nodes);
    ``bw_port``: what one core injects, and separately absorbs; ``bw_mem``: what one socket's
    memory copies for all its cores together (None: not modelled); ``o_send``, ``o_recv``,
    ``o_isend`` (µs) and their ``*_per_byte`` slopes (µs/B): SMPI's per-message overheads
    (``smpi/os``, ``smpi/or``, ``smpi/ois``) below ``eager_bytes``
    (``smpi/send-is-detached-thresh``), those of the ``core`` class; ``o_socket`` and ``o_node``
    (µs, one side of a message of that class: send, isend and receive alike), None where the
    class has the core's (:mod:`mpilab.simulate.overheads` charges them). ``sources``:
    ``(parameter, value, unit, source)`` rows written into the file.
    """

    prefix: str
    nodes: int
    sockets: int
    cores_per_socket: int
    lat_socket: float = 1.1736
    bw_socket: float = 1.0e4
    lat_node: float = 4.3637
    bw_node: float = 1.0e4
    lat_nic: float = 0.5
    bw_nic: float = 5.0e3  # one pair of ranks on two nodes
    lat_switch: float = 0.6064
    bw_switch: float = 12.5e3  # a node's full-duplex network link, 100 Gb/s
    bw_port: float = 1.0e4  # what one core can inject (and, separately, absorb)
    bw_mem: float | None = None  # what one socket's memory copies, all its cores together
    o_send: float = 0.0
    o_recv: float = 0.0
    o_isend: float = 0.0
    o_send_per_byte: float = 0.0
    o_recv_per_byte: float = 0.0
    o_socket: float | None = None
    o_node: float | None = None
    eager_bytes: int = 65536
    speed: str = "1Gf"
    description: str = ""
    sources: tuple = ()

    def overheads(self, cls):
        """``(o_send, o_recv, o_isend)`` of a message of class ``cls`` (µs)."""
        own = {"socket": self.o_socket, "node": self.o_node}.get(cls)
        return (self.o_send, self.o_recv, self.o_isend) if own is None else (own, own, own)

    def per_class(self):
        """True when some class's overheads are not the core class's (SimGrid's global
        ``smpi/os`` cannot say it: :mod:`mpilab.simulate.overheads`)."""
        core = self.overheads("core")
        return any(self.overheads(c) != core for c in ("socket", "node"))

    @property
    def hosts(self):
        return [
            host_name(self.prefix, n, s, c)
            for n in range(self.nodes)
            for s in range(self.sockets)
            for c in range(self.cores_per_socket)
        ]


#: SimGrid's envelope: SMPI sends ``size + 16`` bytes for a message of ``size``.
ENVELOPE_BYTES = 16


def spec_of(params, prefix):
    """The SimGrid links of a cluster given as physical parameters (:mod:`mpilab.simulate.clusters`).

    A class's link latency is its one-way time less the two overheads of that class (``o_send``
    and ``o_recv``, or the class's ``overhead_<class>`` on each side) and the envelope's bytes;
    the node class's latency is split between the two cards (a quarter each) and the switch
    (half): one message only sees the sum.

    Raises
    ------
    UsageError
        When the overheads leave a negative link latency.
    """
    v = {k: p.value for k, p in params.items()}
    lat = {}
    for cls in ("core", "socket", "node"):
        own = v.get(f"overhead_{cls}")
        o = v["o_send"] + v["o_recv"] if own is None else 2 * own
        lat[cls] = v[f"one_way_{cls}"] - o - ENVELOPE_BYTES * v[f"beta_{cls}"]
        if lat[cls] < -1e-6:
            raise UsageError(
                f"{cls}: one-way time {v[f'one_way_{cls}']:g} us is smaller than the "
                f"overheads o_send + o_recv = {o:g} us plus the envelope; valid: "
                f"overheads at most the smallest one-way time"
            )
        lat[cls] = max(lat[cls], 0.0)
    rows = tuple((k, p.value, p.unit, f"{p.kind}: {p.source}") for k, p in params.items() if k != "label")
    return Spec(
        prefix,
        v["nodes"],
        v["sockets"],
        v["cores_per_socket"],
        lat_socket=lat["core"],
        bw_socket=1.0 / v["beta_core"],
        lat_node=lat["socket"],
        bw_node=1.0 / v["beta_socket"],
        lat_nic=lat["node"] / 4,
        bw_nic=1.0 / v["beta_node"],
        lat_switch=lat["node"] / 2,
        bw_switch=v["card_bw"],
        bw_port=v["port_bw"],
        bw_mem=v["mem_bw"],
        o_send=v["o_send"],
        o_recv=v["o_recv"],
        o_isend=v["o_isend"],
        o_send_per_byte=v.get("o_send_per_byte", 0.0),
        o_recv_per_byte=v.get("o_recv_per_byte", 0.0),
        o_socket=v.get("overhead_socket"),
        o_node=v.get("overhead_node"),
        eager_bytes=int(v["eager_bytes"]),
        description=v["label"],
        sources=rows,
    )


_CLUSTERS = {
    "orfeo-thin": ("thin", "thin"),
    "orfeo-epyc": ("epyc", "epyc"),
    "orfeo-fat": ("fat", "fat"),
    "jupiter-32x16": ("jupiter", "jupiter"),
    "bunyip-8": ("bunyip", "bunyip"),
}
_SHIPPED = ("orfeo-thin", "orfeo-epyc", "orfeo-fat", "bunyip-8")


def cluster_params(name):
    """``(parameters, host prefix)`` of a shipped platform (:mod:`mpilab.simulate.clusters`)."""
    name = str(name)
    if name in _CLUSTERS:
        cluster, prefix = _CLUSTERS[name]
        return clusters.cluster(cluster), prefix
    m = _THIN_RE.match(name)
    if m:
        n = int(m.group(1))
        if not 2 <= n <= 10:
            raise UsageError(
                f"platform {name!r}: THIN has 2..10 nodes, not {n}; for more "
                f"nodes of THIN's kind use thin-like-{n}"
            )
        return clusters.thin(n), "thin"
    for regex, family in ((_THIN_LIKE_RE, FAMILIES[0]), (_JUPITER_RE, FAMILIES[1])):
        m = regex.match(name)
        if not m:
            continue
        n = int(m.group(1))
        if n < 1:
            raise UsageError(f"platform {name!r}: {n} nodes; valid: {family}")
        if regex is _THIN_LIKE_RE:
            params, prefix = clusters.thin(n), "thin"
            label = f"THIN-like, {n} nodes of 2 x 12 cores with THIN's links (ORFEO's THIN has 10 nodes)"
        else:
            params, prefix = clusters.jupiter(), "jupiter"
            label = f"jupiter-like, {n} nodes x 16 cores, InfiniBand ~1.3 us (the seed's has 32)"
        params = dict(params, label=clusters.Param(label, "", "assumption", "name"))
        if n > (10 if prefix == "thin" else 32):  # more nodes than the machine has
            params["nodes"] = clusters.Param(
                n, "", "assumption", f"{name}: a scale-out of the cluster's node, not a machine that exists"
            )
        elif prefix == "jupiter":
            params["nodes"] = clusters.Param(n, "", "assumption", f"{n} of jupiter's 32 nodes")
        return params, prefix
    raise one_of("platform", name, list_platforms() + list(FAMILIES) + ["<path to a SimGrid .xml file>"])


_THIN_RE = re.compile(r"^orfeo-thin-(\d+)$")
_THIN_LIKE_RE = re.compile(r"^thin-like-(\d+)$")
_JUPITER_RE = re.compile(r"^jupiter-(\d+)x16$")
#: The most hosts (cores) a generated platform has: its file lists a route for every pair.
MAX_HOSTS = 1100
#: The families of names with a node count, for messages.
FAMILIES = ("thin-like-<N> (THIN's nodes, N = 1..45)", "jupiter-<N>x16 (N = 1..68)")


def list_platforms():
    """Names accepted by :func:`platform_file`.

    Returns
    -------
    list of str
    """
    return sorted(_CLUSTERS) + [f"orfeo-thin-{n}" for n in range(2, 11)]


def variant(base, label, **changes):
    """A shipped platform with some link parameters changed, e.g. a busy network.

    Parameters
    ----------
    base : str
        A name from :func:`list_platforms`.
    label : str
        Name of the variant (letters, digits, ``-``, ``_``, ``.``): the XML file is
        ``<label>.xml`` in the user cache and SMPI rows record ``label`` as their platform.
    **changes
        Fields of :class:`Spec` to replace: ``lat_socket``, ``bw_socket``, ``lat_node``,
        ``bw_node`` (inside a node), ``bw_port`` (what one core injects, and absorbs),
        ``lat_nic`` and ``bw_switch`` (each node's network card: its latency, and the bandwidth
        all the node's flows share in each direction), ``bw_nic`` (the most one pair of ranks
        gets between nodes), ``lat_switch``. Latencies in µs, bandwidths in bytes/µs (= MB/s).

    Returns
    -------
    Path
        The platform file, for ``launch.get_launcher("smpi", platform=path)``.

    Examples
    --------
    Other jobs' traffic on the network: an eighth of the card's 100 Gb/s left, and ten times
    its latency::

        busy = platforms.variant("orfeo-thin", "orfeo-thin-busy", bw_switch=12.5e3 / 8, lat_nic=5.0)
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(label)) or label in list_platforms():
        raise UsageError(
            f"bad platform label {label!r}; valid: letters, digits, '-', '_', '.', "
            f"and not a shipped name ({', '.join(list_platforms())})"
        )
    spec = _spec(base)
    links = [f.name for f in dataclasses.fields(Spec) if f.name.startswith(("lat_", "bw_"))]
    for key, value in changes.items():
        if key not in links:
            raise one_of("platform parameter", key, links)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise UsageError(
                f"bad {key} {value!r}; valid: a positive number "
                f"({'µs' if key.startswith('lat_') else 'bytes/µs'})"
            )
    spec = dataclasses.replace(
        spec,
        description=f"{spec.description}; variant {label}: "
        + ", ".join(f"{k}={v:g}" for k, v in sorted(changes.items())),
        **changes,
    )
    return _write(spec, _cache_dir() / f"{label}.xml")


def _write(spec, path):
    """Write ``spec``'s XML to ``path`` atomically (readers never see half a file)."""
    return _write_text(render_xml(spec), path)


def _write_text(text, path):
    """Write ``text`` to ``path`` atomically; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def _spec(name):
    params, prefix = cluster_params(name)
    spec = spec_of(params, prefix)
    if len(spec.hosts) > MAX_HOSTS:
        raise UsageError(
            f"platform {name!r}: {spec.nodes} nodes, {len(spec.hosts)} cores; valid: "
            f"{', '.join(FAMILIES)}, at most {MAX_HOSTS} cores (the file has a route "
            "for every pair of hosts)"
        )
    return spec


def spec(name):
    """The :class:`Spec` of a shipped platform name (its shape and link parameters).

    Code that builds other platforms from a shipped one reads its parameters here, so that a
    recalibrated platform flows into everything made from it (:mod:`mpilab.simulate.topologies`).

    Raises
    ------
    UsageError
        For a name that is not shipped (the message lists the valid ones).
    """
    return _spec(name)


def _cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mpilab" / "platforms"


def _generator_key():
    """A short hash of the generator's source (this module, the XML writer and the clusters): a
    cached platform written by other code is not reused."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(Path(platform_xml.__file__).read_bytes())
    h.update(Path(clusters.__file__).read_bytes())
    return h.hexdigest()[:12]


def platform_file(name_or_path):
    """Path of the SimGrid platform XML for a shipped name or a user's file.

    Parameters
    ----------
    name_or_path : str or Path
        A name from :func:`list_platforms` or a path to an existing ``.xml`` file.

    Returns
    -------
    Path

    Raises
    ------
    UsageError
        Unknown name or missing file; the message lists the valid names.
    """
    s = str(name_or_path)
    if s.endswith(".xml") or os.sep in s:
        p = Path(s).expanduser()
        if not p.is_file():
            raise UsageError(
                f"platform file {s!r} does not exist; give an existing SimGrid .xml "
                f"file or one of: {', '.join(list_platforms())}"
            )
        return p.resolve()
    spec = _spec(s)
    shipped = DATA_DIR / f"{s}.xml"
    if shipped.is_file():
        return shipped
    # the file name carries the generator's hash: after an upgrade of the kit (new link model)
    # the platform is written again instead of an old copy being served
    target = _cache_dir() / f"{s}-{_generator_key()}.xml"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(render_xml(spec))
        tmp.replace(target)
    return target


_HOST_RE = re.compile(r'<host\s+id="([^"]+)"')
_NAME_RE = re.compile(r"^(.*?)(\d+)-s(\d+)-c(\d+)$")


def host_location(host):
    """``(node, socket)`` of a host named ``<prefix><node>-s<socket>-c<core>`` (the kit's
    naming, :func:`host_name`), with the node as ``(prefix, number)``; None for other names."""
    m = _NAME_RE.match(str(host))
    return ((m.group(1), int(m.group(2))), int(m.group(3))) if m else None


def platform_info(name_or_path):
    """Shape of a platform: nodes, sockets per node, cores per socket and host names.

    For a user's XML file whose hosts are not named ``<prefix><node>-s<socket>-c<core>``, every
    host counts as a node of one core.

    Returns
    -------
    dict
        ``nodes``, ``sockets``, ``cores_per_socket``, ``cores``, ``hosts`` (list, in node,
        socket, core order) and ``layout`` (list of ``(host, node, socket)``).
    """
    s = str(name_or_path)
    if not (s.endswith(".xml") or os.sep in s):
        spec = _spec(s)
        hosts = spec.hosts
        layout = [
            (host_name(spec.prefix, n, so, c), n, so)
            for n in range(spec.nodes)
            for so in range(spec.sockets)
            for c in range(spec.cores_per_socket)
        ]
        return dict(
            name=s,
            nodes=spec.nodes,
            sockets=spec.sockets,
            cores_per_socket=spec.cores_per_socket,
            cores=len(hosts),
            hosts=hosts,
            layout=layout,
            description=spec.description,
        )
    text = platform_file(s).read_text()
    hosts = _HOST_RE.findall(text)
    parsed = [_NAME_RE.match(h) for h in hosts]
    if hosts and all(parsed):
        nodes = sorted({(m.group(1), int(m.group(2))) for m in parsed})
        node_idx = {k: i for i, k in enumerate(nodes)}
        layout = [
            (h, node_idx[(m.group(1), int(m.group(2)))], int(m.group(3))) for h, m in zip(hosts, parsed)
        ]
        sockets = len({so for _, _, so in layout})
        cps = max(1, len(hosts) // max(1, len(nodes) * sockets))
    else:
        layout = [(h, i, 0) for i, h in enumerate(hosts)]
        nodes, sockets, cps = hosts, 1, 1
    return dict(
        name=Path(s).stem,
        nodes=len(nodes),
        sockets=sockets,
        cores_per_socket=cps,
        cores=len(hosts),
        hosts=[h for h, _, _ in layout],
        layout=layout,
        description=f"user platform {s}",
    )


def placement(name_or_path, nprocs, mapping="core"):
    """Host of each rank for a mapping.

    ``core`` fills a socket, then the next socket, then the next node; ``socket`` deals
    ranks round-robin over the sockets of a node, then moves to the next node; ``node``
    deals ranks round-robin over the nodes.

    Returns
    -------
    list of str
        ``nprocs`` host names, rank order.
    """
    if mapping not in MAPPINGS:
        raise one_of("mapping", mapping, MAPPINGS)
    try:
        nprocs = int(nprocs)
    except (TypeError, ValueError):
        raise UsageError(f"nprocs must be a positive integer, not {nprocs!r}") from None
    if nprocs < 1:
        raise UsageError(f"nprocs must be a positive integer, not {nprocs}")
    info = platform_info(name_or_path)
    if nprocs > info["cores"]:
        raise UsageError(
            f"{nprocs} ranks do not fit on platform {info['name']!r}, which has "
            f"{info['cores']} cores (one rank per core); use at most {info['cores']} "
            f"or a larger platform, e.g. thin-like-{-(-nprocs // 24)} or "
            f"jupiter-{-(-nprocs // 16)}x16 (SimGrid would stack the extra ranks on "
            "cores that share one port: another machine, not this one loaded)"
        )
    # group hosts: node -> socket -> [hosts]
    tree = {}
    for h, n, so in info["layout"]:
        tree.setdefault(n, {}).setdefault(so, []).append(h)
    if mapping == "core":
        order = [h for n in sorted(tree) for so in sorted(tree[n]) for h in tree[n][so]]
    elif mapping == "socket":
        order = []
        for n in sorted(tree):
            socks = [tree[n][so] for so in sorted(tree[n])]
            for i in range(max(map(len, socks))):
                order += [s[i] for s in socks if i < len(s)]
    else:
        per_node = [[h for so in sorted(tree[n]) for h in tree[n][so]] for n in sorted(tree)]
        order = []
        for i in range(max(map(len, per_node))):
            order += [s[i] for s in per_node if i < len(s)]
    return order[:nprocs]


def write_hostfile(name_or_path, nprocs, mapping, path):
    """Write an SMPI hostfile (one host per line, rank order) for ``nprocs`` ranks.

    Parameters
    ----------
    name_or_path : str or Path
        Platform name or XML path.
    nprocs : int
    mapping : {'core', 'socket', 'node'}
    path : str or Path
        Where to write; parent directories are created.

    Returns
    -------
    Path
    """
    hosts = placement(name_or_path, nprocs, mapping)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(hosts) + "\n")
    return path


def generate_shipped(directory=DATA_DIR):
    """(Re)generate the shipped platform files; used by the kit's developers.

    Returns
    -------
    list of Path
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in _SHIPPED:
        p = directory / f"{name}.xml"
        p.write_text(render_xml(_spec(name)))
        paths.append(p)
    return paths


if __name__ == "__main__":  # python -m mpilab.simulate.platforms
    for p in generate_shipped():
        print(p)
