"""Validation: the shipped simulated clusters against the seeds' own measurements.

Each part simulates what a seed measured and sets the seed's number, the simulated one and the
error side by side:

``thin``
    seed 000's bcast and reduce at 1 KiB over P (its segmented fits, Open MPI's basic_linear,
    chain and pipeline) on ``orfeo-thin``, ranks placed as the seed's ``mpirun -np P`` placed
    them (by socket); the slowest rank's time and the average over ranks. The bcast
    basic_linear curve is the one the overheads were fitted to; the others are held out.
``thin-pingpong``
    seed 000's point-to-point table against the simulated ping-pong (the fit's own data).
``jupiter``
    seed 001: the paper's default curves (reduce 128 B, allreduce 8 B) that the seed says its
    own measurements agree with, P = 16..128 (P = 16 of reduce is the fitted point), and the
    seed's measured ranges at 512 processes with the allreduce / reduce ratio.
``seed002``
    seed 002's gather+broadcast / pairwise ratio (7.2 at P = 16, 1 MiB), on THIN.
``bunyip``
    seed 004: ring and recursive doubling on Bunyip against the talk's cost models, and the
    overlap of an all-at-once allgather.

:func:`run` runs the parts; :func:`summary` gives, per part, the median of
``|simulated / measured - 1|`` and the share of points within a factor 2.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from mpilab.core.errors import ToolMissing, one_of
from mpilab.measure import collbench, launch
from mpilab.model import costs
from mpilab.simulate import platforms
from mpilab.studies import reference
from mpilab.studies.calibration import SEED000_MAPPING, THIN_FIT_CURVE, pingpong_table, simulate_curve

PARTS = ("thin", "thin-pingpong", "jupiter", "seed002", "bunyip")
#: Seed 000's curves that SimGrid runs as Open MPI does (SimGrid has no bcast chain).
THIN_CURVES = (
    ("bcast", "basic_linear"),
    ("bcast", "pipeline"),
    ("reduce", "basic_linear"),
    ("reduce", "chain"),
    ("reduce", "pipeline"),
)
THIN_NPROCS = tuple(range(8, 49, 4))
#: What differs between a seed's algorithm and SimGrid's copy of it.
NOTES = {
    ("reduce", "chain"): "SimGrid's ompi_chain has P/2 chains of 64 KiB segments; Open MPI "
    "4.1 forced chain: 4 chains, no segments"
}


def thin(platform="orfeo-thin", nprocs=THIN_NPROCS, mapping=SEED000_MAPPING):
    """Seed 000's collective curves against the simulation (see the module's docstring)."""
    rows = []
    for coll, alg in THIN_CURVES:
        sim = simulate_curve(platform, coll, alg, nprocs, reference.REPORT_BYTES, mapping=mapping)
        for r in sim.itertuples():
            seed = float(reference.predict(coll, alg, r.nprocs))
            rows.append(
                dict(
                    collective=coll,
                    algorithm=alg,
                    nprocs=int(r.nprocs),
                    seed_us=seed,
                    sim_maxrank_us=float(r.maxrank_avg_us),
                    sim_avg_us=float(r.avg_us),
                    held_out=(coll, alg) != THIN_FIT_CURVE,
                    note=NOTES.get((coll, alg), ""),
                )
            )
    t = pd.DataFrame(rows)
    t["ratio"] = t["sim_maxrank_us"] / t["seed_us"]
    t["ratio_avg"] = t["sim_avg_us"] / t["seed_us"]
    return t


def _native(platform, coll, p, nbytes, selector="ompi", mapping="core"):
    rows = simulate_curve(platform, coll, "default", [p], nbytes, mapping=mapping, selector=selector)
    return float(rows["maxrank_avg_us"].iloc[0]), float(rows["avg_us"].iloc[0])


def jupiter(platform="jupiter-32x16", nprocs=(16, 32, 64, 128), large=(512,), workers=2):
    """Seed 001's figures at small P and its measured ranges at 512 (see the module's docstring).

    The launches run ``workers`` at a time (each is one single-threaded simulator process).
    """
    fig = reference.seed_table("001-figures")
    meas = reference.seed_table("001-measured")
    points = [
        (coll, nbytes, figure, p)
        for coll, nbytes, figure in (("reduce", 128, 10), ("allreduce", 8, 6))
        for p in list(large) + list(nprocs)
    ]  # the long launches first
    platforms.platform_file(platform)  # write the (large) file once, before the threads
    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        sims = list(pool.map(lambda pt: _native(platform, pt[0], pt[3], pt[1])[0], points))
    rows = []
    for (coll, nbytes, figure, p), sim in sorted(zip(points, sims), key=lambda x: (x[0][2] != 10, x[0][3])):
        paper = fig[(fig["figure"] == figure) & (fig["algorithm"] == "default") & (fig["nprocs"] == p)]
        m = meas[
            (meas["quantity"] == "time_us")
            & (meas["collective"] == coll)
            & (meas["algorithm"] == "default")
            & (meas["nprocs"] == p)
        ]
        rows.append(
            dict(
                collective=coll,
                bytes=nbytes,
                nprocs=p,
                sim_us=sim,
                paper_us=float(paper["seconds"].iloc[0]) * 1e6 if len(paper) else np.nan,
                measured_low_us=float(m["low"].iloc[0]) if len(m) else np.nan,
                measured_high_us=float(m["high"].iloc[0]) if len(m) else np.nan,
                held_out=not (coll == "reduce" and p == 16),
            )
        )
    t = pd.DataFrame(rows)
    t["ratio_paper"] = t["sim_us"] / t["paper_us"]
    mid = np.sqrt(t["measured_low_us"] * t["measured_high_us"])
    t["ratio_measured"] = t["sim_us"] / mid
    t["in_measured_range"] = np.where(
        t["measured_low_us"].notna(),
        (t["sim_us"] >= t["measured_low_us"]) & (t["sim_us"] <= t["measured_high_us"]),
        np.nan,
    )
    return t


def jupiter_ratio(table):
    """Simulated allreduce 8 B / reduce 128 B at each P of :func:`jupiter`'s table, next to seed 001's 2."""
    meas = reference.seed_table("001-measured")
    want = float(meas.loc[meas["quantity"] == "ratio", "low"].iloc[0])
    piv = table.pivot_table(index="nprocs", columns="collective", values="sim_us")
    out = pd.DataFrame({"nprocs": piv.index, "sim_ratio": (piv["allreduce"] / piv["reduce"]).to_numpy()})
    out["seed_ratio"] = np.where(out["nprocs"] == 512, want, np.nan)
    return out


def _kit_allgather(platform, algo, p, nbytes, mapping="core"):
    lau = launch.get_launcher("smpi", platform=str(platform))
    rows = collbench.measure(
        lau, "allgather", algo, p, mapping=mapping, timeout=900, sizes=f"{nbytes}:{nbytes}", iters=1, warmup=1
    )
    return float(rows[0]["maxrank_avg_us"])


def seed002(platform="orfeo-thin", nprocs=(4, 8, 16), sizes=(65536, 262144, 1 << 20)):
    """Seed 002's gather+broadcast / pairwise ratio against the simulation."""
    rows = []
    for p in nprocs:
        for b in sizes:
            gb, pw = (
                _kit_allgather(platform, "gather_bcast", p, b),
                _kit_allgather(platform, "pairwise", p, b),
            )
            seed = reference.allgather_002("gather_bcast", p, b) / reference.allgather_002("pairwise", p, b)
            rows.append(
                dict(
                    nprocs=p,
                    bytes=b,
                    sim_gather_bcast_us=gb,
                    sim_pairwise_us=pw,
                    sim_ratio=gb / pw,
                    seed_ratio=seed,
                )
            )
    t = pd.DataFrame(rows)
    t["ratio"] = t["sim_ratio"] / t["seed_ratio"]
    return t


def bunyip(platform="bunyip-8", doubles=(1000, 4000, 10000)):
    """Seed 004's cost models on the simulated Bunyip (8 nodes).

    The ring's and recursive doubling's models are lab 2's graded costs, so they come from the
    answer key (:func:`mpilab.model.costs.evaluate`): this part runs in an instructor's checkout.
    """
    if not costs.table():
        raise ToolMissing(
            "the Bunyip validation compares seed 004's cost models, which are lab 2's "
            "graded costs: it needs the answer key (an instructor's checkout, "
            "pip install -e solutions)"
        )
    b = reference.seed_table("004").set_index("parameter")["value"]
    alpha = b["alpha_s"] + b["alpha_r"]
    beta = b["beta_s"] + b["beta_r"]
    p = int(platforms.platform_info(platform)["cores"])
    rows = []
    for n in doubles:
        ring = _kit_allgather(platform, "ring", p, 8 * n)
        rd = _kit_allgather(platform, "pairwise", p, 8 * n)
        fan = _kit_allgather(platform, "native", p, 8 * n)
        # seed 004 counts n in doubles and beta per double: the key's costs take n and beta alike
        m_ring = float(costs.evaluate("allgather", "ring", p, n, alpha, beta))
        m_rd = float(costs.evaluate("allgather", "pairwise", p, n, alpha, beta))
        rows += [
            dict(doubles=n, algorithm="ring", model="the key's ring cost", model_us=m_ring, sim_us=ring),
            dict(
                doubles=n,
                algorithm="recursive doubling",
                model="the key's pairwise cost",
                model_us=m_rd,
                sim_us=rd,
            ),
            dict(
                doubles=n,
                algorithm="all at once (full fan-in)",
                model="the ring's cost / o, o ~ 1 (seed 004's overlap)",
                model_us=m_ring / b["overlap_allgather_full_fan_in"],
                sim_us=fan,
            ),
        ]
    t = pd.DataFrame(rows)
    t["ratio"] = t["sim_us"] / t["model_us"]
    return t


def summary(table, ratio="ratio", held_out_only=True):
    """Median |ratio - 1|, share within a factor 2, and the number of points."""
    t = table
    if held_out_only and "held_out" in t.columns:
        t = t[t["held_out"].astype(bool)]
    r = t[ratio].dropna().to_numpy(float)
    if not len(r):
        return dict(points=0, median_abs_error=np.nan, within_2x=np.nan, median_ratio=np.nan)
    return dict(
        points=int(len(r)),
        median_abs_error=float(np.median(np.abs(r - 1))),
        within_2x=float(np.mean((r >= 0.5) & (r <= 2))),
        median_ratio=float(np.median(r)),
    )


def run(parts=PARTS, echo=None):
    """Run the validation parts; return ``{part: table}`` and ``{part: seconds}``."""
    out, took = {}, {}
    for part in parts:
        if part not in PARTS:
            raise one_of("validation part", part, PARTS)
    for part in parts:
        t0 = time.monotonic()
        if echo:
            echo(f"validating {part} ...")
        if part == "thin":
            out[part] = thin()
        elif part == "thin-pingpong":
            out[part] = pingpong_table("orfeo-thin")
        elif part == "jupiter":
            out[part] = jupiter()
        elif part == "seed002":
            out[part] = seed002()
        else:
            out[part] = bunyip()
        took[part] = time.monotonic() - t0
    return out, took
