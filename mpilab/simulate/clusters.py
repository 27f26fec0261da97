"""The kit's simulated clusters as physical parameters, each with its value, unit and source.

A parameter's source is a seed's table (the seed file and the table are named), a vendor's
specification, a fit (:mod:`mpilab.simulate.calibration`, with what it was fitted to), or an
assumption with the reason. :mod:`mpilab.simulate.platforms` turns a cluster into SimGrid links
(:func:`mpilab.simulate.platforms.spec_of`) and writes every parameter and its source into the
platform file; ``docs/CALIBRATION.md`` prints the same table (:func:`source_table`).

The model of one message of ``n`` bytes between two ranks of a *class* (``core``: two cores of
one socket, ``socket``: two sockets of a node, ``node``: two nodes), as SimGrid 3.32's SMPI
charges it on these platforms (its per-message overheads below the eager threshold, SimGrid's
16-byte envelope):

    one way = o_send(class) + latency(class) + (n + 16) * beta(class) + o_recv(class)

``one_way_<class>`` is that time for the smallest message (what a ping-pong measures); the
link latency is what remains once the overheads are taken out. ``o_send``, ``o_recv`` and
``o_isend`` are the overheads of the ``core`` class, and of every class unless
``overhead_socket`` and ``overhead_node`` (one value per side: the sender before its message
leaves, the receiver after it arrives) say otherwise: SMPI then charges each message its class's
overheads through its cost callbacks (:mod:`mpilab.simulate.overheads`). Concurrent messages share
each core's port, each socket's memory (when its bandwidth is known) and each node's network
card.

Not modelled: a per-call software cost of a collective (SMPI suspends its clock inside every MPI
call and charges nothing for the reduction arithmetic; seed 000's segmented fits, whose
intercepts scatter around zero, give no sign of one), and anything that changes from run to run
(:mod:`mpilab.simulate.traffic` adds background load on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kinds of source a parameter may have.
KINDS = ("seed", "vendor", "fit", "assumption")


@dataclass(frozen=True)
class Param:
    """One parameter: its value, unit and where the value comes from."""

    value: object
    unit: str
    kind: str
    source: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"source kind {self.kind!r}; valid: {', '.join(KINDS)}")


SEED000 = "seeds/000_38563ac10c2a463a.txt (ORFEO report)"
SEED001 = "seeds/001_a968b7c01287fc38.txt (jupiter reproduction study)"
SEED004 = "seeds/004_e670facd351fed69.txt (Bunyip talk)"

#: The fit of the THIN ping-pong table (:func:`mpilab.simulate.calibration.fit_pingpong` on
#: seed 000's table, as printed: ``monotone=False``): one-way time of the smallest message and
#: time per byte per class. The test suite refits the table and checks these numbers.
THIN_PINGPONG_FIT = {
    "core": (1.1736, 9.264925e-05),
    "socket": (4.3637, 9.125775e-05),
    "node": (1.6064, 1.357338e-04),
}
#: The share of each intra-node class's one-way time that SMPI charges as CPU overhead (the
#: rest, at least 0.1 µs, is link latency): fitted to seed 000's bcast basic_linear curve (OSU's
#: average, socket placement), it stops at its bound 1. The slow tests refit it.
THIN_CPU_SHARE = 1.0
#: The least link latency a class keeps (µs): see :data:`mpilab.simulate.calibration.MIN_LINK_LATENCY_US`.
MIN_LINK_LATENCY_US = 0.1

OMPI_EAGER = (
    "Open MPI 4.1 (the seed's 4.1.5; ompi_info of this machine's 4.1.4): "
    "btl_vader_eager_limit = 4096 B; larger messages wait for their receiver "
    "(SMPI: smpi/send-is-detached-thresh; it charges the overheads to eager messages only)"
)
_PP = f"{SEED000}, point-to-point table (latency = intercept + slope x size per mapping)"


def cpu_overhead(one_way, beta, share, min_latency=MIN_LINK_LATENCY_US):
    """One side's CPU overhead (µs) of a class whose one-way time is ``one_way``: ``share`` of
    what the link does not need (its least latency and SimGrid's 16-byte envelope), halved
    between the sender and the receiver."""
    return share * max(0.0, one_way - min_latency - 16 * beta) / 2.0


def _thin_like(nodes, sockets, cores, shape_source, mem_bw, mem_source, label):
    core, socket, node = (THIN_PINGPONG_FIT[m] for m in ("core", "socket", "node"))
    row = (
        "row 1, intercept, as printed (the report's table is not monotone: socket 4.3637 us > "
        "node 1.6064 us; its socket row was measured with --map-by socket, bound to a socket, "
        "not a core, and the kit keeps it: docs/CALIBRATION.md, section 3)"
    )
    beta = "log least squares of the table's row over 1 B..4 MiB, one-way time fixed"
    share = (
        f"{SEED000}, bcast basic_linear at 1 KiB, P = 8..48 (OSU's average over ranks, socket "
        "placement); it stops at its bound 1, the whole intra-node one-way time as CPU time (an "
        "upper bound for any split: the report's collectives want more, docs/CALIBRATION.md)"
    )
    o_core = cpu_overhead(core[0], core[1], THIN_CPU_SHARE)
    o_src = (
        f"cpu_share x (one_way_core - {MIN_LINK_LATENCY_US} us of link latency - the 16-byte "
        "envelope) / 2: an intra-node message of Open MPI's shared-memory transport (vader) is "
        "moved by the two CPUs, the sender's copy in and the receiver's copy out; no card works "
        "while they compute"
    )
    p = {
        "label": Param(label, "", "assumption", "name"),
        "nodes": Param(nodes, "", *shape_source[0]),
        "sockets": Param(sockets, "per node", *shape_source[1]),
        "cores_per_socket": Param(cores, "", *shape_source[1]),
        "one_way_core": Param(core[0], "us", "seed", f"{_PP}, core row 1, intercept"),
        "one_way_socket": Param(socket[0], "us", "seed", f"{_PP}, socket {row}"),
        "one_way_node": Param(node[0], "us", "seed", f"{_PP}, node row 1, intercept"),
        "beta_core": Param(core[1], "us/B", "fit", f"{beta} (core rows)"),
        "beta_socket": Param(socket[1], "us/B", "fit", f"{beta} (socket rows)"),
        "beta_node": Param(
            node[1],
            "us/B",
            "fit",
            f"{beta} (node rows: 5 GB/s below 84 KB, "
            "10 GB/s above; SMPI's size factors are "
            "global, so one beta per class)",
        ),
        "cpu_share": Param(THIN_CPU_SHARE, "", "fit", share),
        "o_send": Param(o_core, "us", "fit", f"core class: {o_src}"),
        "o_recv": Param(
            o_core,
            "us",
            "assumption",
            "equal to o_send (the copy out costs the copy in): seed 000's curves do not tell the two apart",
        ),
        "o_isend": Param(
            o_core,
            "us",
            "assumption",
            "equal to o_send: Open MPI's MPI_Isend and MPI_Send take the same eager path",
        ),
        "overhead_socket": Param(
            cpu_overhead(socket[0], socket[1], THIN_CPU_SHARE),
            "us",
            "fit",
            "socket class, each side (send, isend, receive): "
            + o_src.replace("one_way_core", "one_way_socket"),
        ),
        "overhead_node": Param(
            o_core,
            "us",
            "assumption",
            "node class, each side: the core class's (the same software path on the CPU; between "
            "nodes the network card moves the data, so the rest of the one-way time is the link's)",
        ),
        "card_bw": Param(
            12.5e3,
            "B/us",
            "seed",
            f"{SEED000}, THIN table: network 1 x 100 Gb/s "
            "per node (shared by the node's flows, each direction)",
        ),
        "mem_bw": Param(mem_bw, "B/us", "vendor", mem_source),
        "port_bw": Param(
            1.0 / min(core[1], socket[1], node[1]),
            "B/us",
            "assumption",
            "a core injects (and absorbs) at most what its fastest pair reaches",
        ),
        "eager_bytes": Param(4096, "B", "vendor", OMPI_EAGER),
    }
    return p


_XEON_6126 = (
    "Intel ARK, Xeon Gold 6126: 6 channels of DDR4-2666, 128 GB/s per socket; halved "
    "because a copy reads and writes every byte (assumption)"
)
_EPYC_7H12 = (
    "AMD, EPYC 7H12: 8 channels of DDR4-3200, 204.8 GB/s per socket; halved because a "
    "copy reads and writes every byte (assumption)"
)
_XEON_6154 = (
    "Intel ARK, Xeon Gold 6154: 6 channels of DDR4-2666, 128 GB/s per socket; halved "
    "because a copy reads and writes every byte (assumption)"
)


def thin(nodes=2):
    """ORFEO THIN: ``nodes`` nodes of 2 x Xeon Gold 6126 (12 cores each)."""
    shape = (
        (
            "seed",
            f"{SEED000}, SLURM script (2 nodes, 24 tasks per node)"
            if nodes == 2
            else f"assumption: {nodes} of THIN's 10 nodes ({SEED000}, THIN table)",
        ),
        ("seed", f"{SEED000}, THIN table: 2 x Intel Xeon Gold 6126, 24 (2x12) cores"),
    )
    return _thin_like(
        nodes,
        2,
        12,
        shape,
        64e3,
        _XEON_6126,
        f"ORFEO THIN, {nodes} nodes of 2 x Xeon Gold 6126 (2 sockets x 12 cores), 100 Gb/s",
    )


def _other_orfeo(nodes, sockets, cores, cpu, mem_bw, mem_source, label):
    p = _thin_like(
        nodes,
        sockets,
        cores,
        (("assumption", "one node"), ("seed", f"FACTS.md, the ORFEO-like target: {cpu}")),
        mem_bw,
        mem_source,
        label,
    )
    for k in (
        "one_way_core",
        "one_way_socket",
        "one_way_node",
        "beta_core",
        "beta_socket",
        "beta_node",
        "cpu_share",
        "o_send",
        "o_recv",
        "o_isend",
        "overhead_socket",
        "overhead_node",
    ):
        v = p[k]
        p[k] = Param(
            v.value, v.unit, "assumption", f"THIN's value (no measurement of this partition): {v.source}"
        )
    return p


#: The jupiter cluster of seed 001: its intra-node one-way time, fitted to the two points the
#: seed's figures give inside one node (P = 16: the paper's default reduce of 128 B and allreduce
#: of 8 B, run as Open MPI 1.10's rules ran them, binomial and recursive doubling, with the seed's
#: statistic; mpilab.studies.calibration.calibrate_jupiter, refitted by the slow tests), and the
#: overheads.
JUPITER_CORE_FIT = 2.2492
JUPITER_OVERHEAD = cpu_overhead(*THIN_PINGPONG_FIT["core"], THIN_CPU_SHARE)


def jupiter():
    """jupiter: 32 nodes x 16 cores on InfiniBand (seed 001)."""
    qdr = (
        "InfiniBand QDR 4x (32 Gb/s of data, 4 GB/s): the seed names no generation; a 1.3 us "
        "latency is what QDR cards of its time gave"
    )
    return {
        "label": Param("jupiter, 32 nodes x 16 cores, InfiniBand ~1.3 us", "", "assumption", "name"),
        "nodes": Param(32, "", "seed", f"{SEED001}: '16-cores 32-nodes environment with Infiniband'"),
        "sockets": Param(
            1,
            "per node",
            "assumption",
            "the seed does not say how the 16 cores "
            "sit on sockets: one socket, so core and socket mappings coincide",
        ),
        "cores_per_socket": Param(16, "", "seed", f"{SEED001}: 16 cores per node (--npernode 16)"),
        "one_way_core": Param(
            JUPITER_CORE_FIT,
            "us",
            "fit",
            f"{SEED001}, figures 10 and 6 at P = 16 (the paper's default reduce of 128 B and "
            "allreduce of 8 B inside one node), run as Open MPI 1.10's rules ran them (binomial "
            "tree, recursive doubling) and compared with the seed's statistic (per measurement the "
            "slowest rank, the median): 9.05 us against 5.9 and 9.01 against 13.8, a compromise "
            "between the two; above the interconnect's 1.3 us, as seed 000's THIN table is across "
            "sockets",
        ),
        "one_way_socket": Param(JUPITER_CORE_FIT, "us", "assumption", "one socket per node"),
        "one_way_node": Param(1.3, "us", "seed", f"{SEED001}: 'a latency of 1.3 us on the interconnect'"),
        "beta_core": Param(
            THIN_PINGPONG_FIT["core"][1],
            "us/B",
            "assumption",
            "THIN's core value (seed 000): the seed gives no intra-node bandwidth",
        ),
        "beta_socket": Param(THIN_PINGPONG_FIT["core"][1], "us/B", "assumption", "one socket"),
        "beta_node": Param(1.0 / 4e3, "us/B", "assumption", qdr),
        "o_send": Param(
            JUPITER_OVERHEAD,
            "us",
            "assumption",
            "THIN's fitted value (Open MPI on x86 cores): the seed has no ping-pong "
            "to split latency from overhead",
        ),
        "o_recv": Param(JUPITER_OVERHEAD, "us", "assumption", "equal to o_send"),
        "o_isend": Param(JUPITER_OVERHEAD, "us", "assumption", "equal to o_send"),
        "card_bw": Param(4e3, "B/us", "assumption", qdr),
        "mem_bw": Param(None, "B/us", "assumption", "not modelled: the seed does not name the CPU"),
        "port_bw": Param(
            1.0 / THIN_PINGPONG_FIT["core"][1],
            "B/us",
            "assumption",
            "a core injects at most what its fastest pair reaches",
        ),
        "eager_bytes": Param(4096, "B", "vendor", OMPI_EAGER),
    }


def bunyip():
    """Bunyip (seed 004): 8 nodes of one Beowulf group, alpha and beta split into send and receive."""
    wire = 12.5  # B/us, one 100 Mb/s card
    return {
        "label": Param("Bunyip, 8 nodes of a Beowulf group, 3 x 100 Mb/s per node", "", "assumption", "name"),
        "nodes": Param(8, "", "seed", f"{SEED004}: results for p = 8 (a single Bunyip group)"),
        "sockets": Param(1, "per node", "assumption", "one rank per node, as the talk's p = 8"),
        "cores_per_socket": Param(1, "", "assumption", "one rank per node"),
        "one_way_core": Param(
            204.0 + 16 / wire,
            "us",
            "seed",
            f"{SEED004}: alpha = alpha_s + "
            "alpha_r = 24 us + 180 us (plus SimGrid's 16-byte envelope on the "
            "wire; the link itself has no latency)",
        ),
        "one_way_socket": Param(204.0 + 16 / wire, "us", "seed", "same"),
        "one_way_node": Param(204.0 + 16 / wire, "us", "seed", "same"),
        "beta_core": Param(1.0 / wire, "us/B", "seed", f"{SEED004}: 3 x 100 Mb NICs per node, one per pair"),
        "beta_socket": Param(1.0 / wire, "us/B", "seed", "same"),
        "beta_node": Param(1.0 / wire, "us/B", "seed", "same"),
        "o_send": Param(24.0, "us", "seed", f"{SEED004}: alpha_s = 24 us"),
        "o_send_per_byte": Param(0.082 / 8, "us/B", "seed", f"{SEED004}: beta_s = 0.082 us per double"),
        "o_recv": Param(180.0, "us", "seed", f"{SEED004}: alpha_r = 180 us"),
        "o_recv_per_byte": Param(
            1.063 / 8 - 1.0 / wire,
            "us/B",
            "seed",
            f"{SEED004}: beta_r = 1.063 us per double, less the wire's 0.08 us/B "
            "(the measured beta includes it)",
        ),
        "o_isend": Param(24.0, "us", "assumption", "equal to o_send"),
        "card_bw": Param(3 * wire, "B/us", "seed", f"{SEED004}: 3 x 100 Mb NICs per node"),
        "mem_bw": Param(None, "B/us", "assumption", "not modelled"),
        "port_bw": Param(3 * wire, "B/us", "seed", "the three cards"),
        "eager_bytes": Param(
            1 << 20,
            "B",
            "assumption",
            "every message the talk measured (up to 10 000 doubles) pays alpha_s and alpha_r",
        ),
    }


def cluster(name, nodes=None):
    """The physical parameters of a cluster: ``thin``, ``epyc``, ``fat``, ``jupiter``, ``bunyip``."""
    if name == "thin":
        return thin(nodes or 2)
    if name == "epyc":
        return _other_orfeo(
            1,
            2,
            64,
            "EPYC: 2 x AMD EPYC 7H12 (2 x 64 cores)",
            102.4e3,
            _EPYC_7H12,
            "ORFEO EPYC, 1 node of 2 x AMD EPYC 7H12 (2 sockets x 64 cores)",
        )
    if name == "fat":
        return _other_orfeo(
            1,
            4,
            18,
            "FAT: 4 x Intel Xeon Gold 6154 (4 x 18 cores)",
            64e3,
            _XEON_6154,
            "ORFEO FAT, 1 node of 4 x Xeon Gold 6154 (4 sockets x 18 cores)",
        )
    if name == "jupiter":
        return jupiter()
    if name == "bunyip":
        return bunyip()
    raise KeyError(name)


def source_table(params):
    """Markdown table of a cluster's parameters: name, value, unit, kind of source, source."""
    lines = ["| parameter | value | unit | source |", "|---|---|---|---|"]
    for k, p in params.items():
        if k == "label":
            continue
        v = (
            "not modelled"
            if p.value is None
            else (f"{p.value:.6g}" if isinstance(p.value, float) else str(p.value))
        )
        lines.append(f"| `{k}` | {v} | {p.unit} | {p.kind}: {p.source} |")
    return "\n".join(lines)


#: The shipped platforms and the cluster each is made of.
SHIPPED = (
    ("orfeo-thin", "thin"),
    ("jupiter-32x16", "jupiter"),
    ("bunyip-8", "bunyip"),
    ("orfeo-epyc", "epyc"),
    ("orfeo-fat", "fat"),
)


def source_tables():
    """Markdown: one :func:`source_table` per shipped platform, under its name."""
    parts = []
    for name, c in SHIPPED:
        p = cluster(c)
        parts.append(f"### `{name}`: {p['label'].value}\n\n{source_table(p)}")
    return "\n\n".join(parts)


if __name__ == "__main__":  # python -m mpilab.simulate.clusters: the tables of docs/CALIBRATION.md
    print(source_tables())
