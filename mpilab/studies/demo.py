"""``mpilab demo``: the allgather experiment of seed 002 (gather+broadcast vs pairwise exchange),
run for real on Open MPI and MPICH at P = 1, 2 and simulated on the ORFEO THIN platform
(2 nodes x 2 sockets x 12 cores) at P = 2..48, with plots and the seed's speed-up for comparison.

A real point is a sample of a machine that may be busy: it is launched several times (in a
shuffled order, so that a burst of load does not fall on one algorithm), and the printed table
gives the median with an interval and flags a point whose repetitions disagree. A simulated
point is deterministic: one launch.

On SMPI, ``native`` is SimGrid's copy of Open MPI's decision rules (the ``ompi`` selector, as
in lab 1). For large messages at 32 <= P < 64 those rules pick "ring", and SimGrid's ring sends
each rank's block straight to every other rank: half of those messages cross the node's network
card, where the kit's ring (and Open MPI's own ring) passes blocks between neighbours and crosses
it once per step. :func:`native_note` says so with the card's bytes.
"""

import shutil
import time
from pathlib import Path

import pandas as pd

from mpilab.core import results
from mpilab.core.errors import ToolMissing
from mpilab.measure import collbench, launch, sweep
from mpilab.model import algorithms, stats
from mpilab.simulate import routes
from mpilab.studies import plots, reference

ALGOS = ["gather_bcast", "pairwise", "ring", "bruck", "native"]
PLATFORM = "orfeo-thin"
#: SMPI's collective selector for ``native``: Open MPI's rules, as lab 1 uses them.
SELECTOR = "ompi"

#: (launcher, nprocs, sizes, iterations: iters, warmup, iters_large, warmup_large, repetitions)
#: SMPI is deterministic (simulated time): two timed iterations and one launch suffice. Real
#: runs are noisy: five launches give the median and [min, max], a 94 % interval for it.
FULL = [
    ("openmpi", [1, 2], "32:1M", (200, 20, 20, 3), 5),
    ("mpich", [1, 2], "32:1M", (200, 20, 20, 3), 5),
    ("smpi", [2, 4, 8, 16, 32, 48], "32:1M", (2, 1, 2, 1), 1),
]
QUICK = [
    ("openmpi", [1, 2], "32:4K", (20, 2, 5, 1), 2),
    ("mpich", [2], "32:4K", (20, 2, 5, 1), 2),
    ("smpi", [2, 4], "32:4K", (2, 1, 2, 1), 1),
]
#: A real point whose interval is wider than this fraction of its median is flagged: its
#: launches disagree (a busy machine), so its median is not a measurement to compare.
SPREAD_FLAG = 0.5


def plan(quick=False):
    """The demo's sweeps: a list of (flavour, nprocs, sizes, iteration settings, repetitions)."""
    return QUICK if quick else FULL


def point_statistics(df, nbytes=1 << 20):
    """Per (flavour, platform, P, algorithm) at ``nbytes``: the number of launches ``n``,
    ``median_us`` and the order-statistic interval ``ci_low_us``..``ci_high_us`` of
    ``maxrank_avg_us`` over the repetitions, and ``flagged`` when the interval is wider than
    :data:`SPREAD_FLAG` times the median."""
    sel = df[df["bytes"] == nbytes]
    if sel.empty:
        return pd.DataFrame(
            columns=[
                "flavour",
                "platform",
                "nprocs",
                "algorithm",
                "n",
                "median_us",
                "ci_low_us",
                "ci_high_us",
                "flagged",
            ]
        )
    t = stats.summarize(sel, by=["flavour", "platform", "nprocs", "algorithm"], method="order")
    t["flagged"] = (t["ci_high_us"] - t["ci_low_us"]) > SPREAD_FLAG * t["median_us"]
    return t


def speedup_table(df, nbytes=1 << 20):
    """Rows (flavour, platform, P, algorithm -> median latency in µs at ``nbytes`` over the
    repetitions) as a DataFrame with one column per algorithm and a ``gb/pw`` column
    (gather_bcast / pairwise)."""
    t = point_statistics(df, nbytes)
    if t.empty:
        return t
    t = t.pivot_table(
        index=["flavour", "platform", "nprocs"], columns="algorithm", values="median_us", aggfunc="first"
    )
    if {"gather_bcast", "pairwise"} <= set(t.columns):
        t["gb/pw"] = t["gather_bcast"] / t["pairwise"]
    return t


def native_note(nprocs, nbytes, platform=PLATFORM):
    """Why SMPI's ``native`` allgather is slower than the kit's ring at ``nprocs`` (None when
    the ompi rules do not pick SimGrid's ring there): the bytes each crosses the busiest card with."""
    # SimGrid 3.32 smpi_openmpi_selector.cpp allgather__ompi: for 32 <= P < 64, total bytes per
    # rank >= 65536 -> ring (alg 4); SimGrid's allgather__ring is the shifted direct exchange
    if not (32 <= nprocs < 64 and nbytes >= 65536):
        return None
    ring = [
        (pr.rank, op.dst, op.sbytes)
        for pr in algorithms.schedule("ring", nprocs, nbytes)
        for op in pr.ops
        if op.dst is not None
    ]
    native = routes.pattern_messages("smpi-ring", nprocs, nbytes)
    cards = {}
    for name, msgs in (("ring", ring), ("native", native)):
        t = routes.link_traffic(platform, msgs, nprocs)
        t = t[t["link"].str.startswith("nic")]
        cards[name] = float(t["bytes"].max()) if len(t) else 0.0
    if not cards["native"]:
        return None
    return (
        f"why native is slow at P={nprocs}: SMPI's native is SimGrid's copy of Open MPI's rules, "
        f"which pick 'ring' here, and SimGrid's ring sends each block straight to its destination: "
        f"{cards['native'] / 2**20:.0f} MiB cross the busiest network card, against "
        f"{cards['ring'] / 2**20:.0f} MiB for the kit's ring (Open MPI's own ring passes blocks "
        f"between neighbours, as the kit's does: 'mpilab sweep --algos lib:ring' runs it)"
    )


def run_demo(outdir="results/demo", quick=False, progress=True, timeout=900, echo=print):
    """Run the demo; return a dict with the results path, the PNGs, the table and the wall time.

    Parameters
    ----------
    outdir : str or Path
        Gets ``results.csv`` (resumable: a rerun measures only what is missing) and PNGs.
    quick : bool
        Fewer sizes and process counts (for tests).
    """
    t0 = time.monotonic()
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    csv = outdir / "results.csv"
    skipped = []
    for flavour, nprocs, sizes, (it, wu, itl, wul), reps in plan(quick):
        opts = {"platform": PLATFORM, "cfg": [f"smpi/coll-selector:{SELECTOR}"]} if flavour == "smpi" else {}
        lau = launch.get_launcher(flavour, **opts)
        prog_ok = (
            shutil.which(lau.command("x", [], 1).argv[0]) if flavour != "smpi" else shutil.which("smpirun")
        )
        if not prog_ok:
            skipped.append(f"{flavour}: launcher not installed")
            continue
        try:
            collbench.collbench_program(flavour)
            built = set(collbench.algorithm_names(flavour))
        except ToolMissing as e:
            skipped.append(str(e))
            continue
        algos = [a for a in ALGOS if a == "native" or a in built]
        missing = [a for a in ALGOS if a not in algos]
        if missing and f"not built: {', '.join(missing)}" not in " ".join(skipped):
            skipped.append(
                f"not built: {', '.join(missing)} (lab 2's tasks: the student tree has "
                "their skeletons only; an instructor's checkout builds the answer key's)"
            )
        echo(
            f"{flavour:8} P={','.join(map(str, nprocs))} sizes {sizes}: iterations {it} "
            f"(warm-up {wu}) up to 8 KiB, {itl} (warm-up {wul}) above, {reps} launch(es) each"
        )
        sweep.run_sweep(
            lau,
            csv,
            algos,
            nprocs,
            sizes,
            iters=it,
            warmup=wu,
            iters_large=itl,
            warmup_large=wul,
            repetitions=reps,
            shuffle=reps > 1,
            seed=0,
            timeout=timeout,
            progress=progress,
        )
    df = results.read_results(csv)
    pngs = plots.plot_all(df, outdir) if not df.empty else []
    nbytes = 4096 if quick else 1 << 20
    table = speedup_table(df, nbytes)
    points = point_statistics(df, nbytes)
    wall = time.monotonic() - t0
    return {
        "results": csv,
        "pngs": pngs,
        "table": table,
        "points": points,
        "bytes": nbytes,
        "wall_s": wall,
        "skipped": skipped,
    }


def _cell(row):
    """``167`` for one launch, ``167 [160, 190]`` for several, ``!`` when flagged."""
    if row.n < 2:
        return f"{row.median_us:.2f}"
    return f"{row.median_us:.2f} [{row.ci_low_us:.4g}, {row.ci_high_us:.4g}]" + (" !" if row.flagged else "")


def format_summary(out):
    """The printed summary: latency table (µs; real points with their interval and flag), the
    P=16 speed-up next to the seed's, wall time."""
    lines = [f"allgather, slowest-rank latency in µs at {out['bytes']} bytes per process:"]
    t, points = out["table"], out.get("points")
    if len(t):
        shown = t.round(2)
        if points is not None and len(points):
            cells = {(r.flavour, r.platform, r.nprocs, r.algorithm): _cell(r) for r in points.itertuples()}
            shown = shown.astype(object)
            for idx in shown.index:
                for algo in shown.columns:
                    if (*idx, algo) in cells:
                        shown.loc[idx, algo] = cells[(*idx, algo)]
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            lines.append(shown.to_string())
        if points is not None and (points["n"] > 1).any():
            n = int(points["n"].max())
            flagged = points[points["flagged"]]
            # [lowest, highest] of n independent launches holds the median with 1 - 2^(1-n)
            coverage = 1 - 2.0 ** (1 - n)  # (stats.order_interval: 94 % for 5)
            lines.append(
                f"real points: median of {n} launches [lowest, highest] (a "
                f"{stats.describe_coverage(coverage)} for the median); "
                f"! = interval wider than {SPREAD_FLAG:.0%} of the "
                f"median: the launches disagree (a busy machine), rerun before comparing"
                + (f" ({len(flagged)} flagged)" if len(flagged) else "")
            )
        key = [i for i in t.index if i[0] == "smpi" and i[2] == 16]
        if key and "gb/pw" in t.columns and out["bytes"] == 1 << 20:
            ours = t.loc[key[0], "gb/pw"]
            gb = reference.allgather_002("gather_bcast", 16, 1 << 20)
            pw = reference.allgather_002("pairwise", 16, 1 << 20)
            lines.append(
                f"gather_bcast / pairwise at P=16, 1 MiB: {ours:.1f}x simulated on {PLATFORM} "
                f"vs {gb / pw:.1f}x in seed 002 ({gb:.0f} us / {pw:.0f} us; its nodes "
                f"were AMD Milan, not THIN)"
            )
        smpi = [i for i in t.index if i[0] == "smpi"]
        if smpi and {"native", "ring"} <= set(t.columns):
            p = max(i[2] for i in smpi)
            note = native_note(p, out["bytes"])
            if note:
                lines.append(note)
    for s in out["skipped"]:
        lines.append(f"skipped: {s}")
    lines.append(f"results: {out['results']}  ({len(out['pngs'])} plots next to it)")
    lines.append(f"wall time: {out['wall_s']:.1f} s")
    return "\n".join(lines)
