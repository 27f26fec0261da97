"""Validation: the shipped simulated clusters against the seeds' own measurements.

Each part simulates what a seed measured, the way the seed measured it, and sets the seed's
number, the simulated one and the error side by side:

``thin``
    seed 000's bcast and reduce at 1 KiB over its P = 2..48 (its segmented fits of Open MPI
    4.1.5's basic_linear, chain and pipeline, forced with Open MPI's defaults: 4 chains, segment
    size 0) on ``orfeo-thin``, ranks placed as the seed's ``mpirun -np P`` placed them (by socket
    for P > 2), compared with the statistic OSU reported: its "Avg Latency", each rank's mean
    over the iterations averaged over ranks (``ratio``). The slowest rank (``ratio_maxrank``) is
    a diagnostic column. Which algorithms are SimGrid's and which the kit's clones of Open MPI's:
    the ``runs`` column (:mod:`mpilab.measure.libalgs`). The bcast basic_linear curve is the one
    the CPU share of THIN's overheads was fitted to; the others are held out.
``thin-pingpong``
    seed 000's point-to-point table, as printed, against the simulated ping-pong (the fit's data).
``thin-osu``
    OSU 7.4 itself (``osu_bcast``, ``osu_reduce``, ``osu_latency``, built with smpicc from the
    vendored source: :func:`mpilab.measure.osu.build`) under SMPI on THIN, with the seed's
    placement and iterations, next to collbench and pingpong at the same points.
``jupiter``
    seed 001: the paper's default curves (reduce 128 B, allreduce 8 B) that the seed says its
    own measurements agree with, P = 16..128 (P = 16 of reduce is the fitted point), and the
    seed's measured ranges at 512 processes, run with the algorithms Open MPI 1.10's rules chose
    (binomial reduce, recursive-doubling allreduce: :func:`mpilab.measure.ompi_fixed.reduction_1_10`)
    and compared with the statistic its benchmark reported (per measurement the slowest rank,
    the median over a launch: ReproMPI's mpibenchmark).
``seed002``
    seed 002's gather+broadcast / pairwise ratio (7.2 at P = 16, 1 MiB), on THIN.
``bunyip``
    seed 004: ring and recursive doubling on Bunyip against the talk's cost models, and the
    overlap of an all-at-once allgather.

:func:`run` runs the parts; :func:`summary` gives, per part, the median of
``|simulated / measured - 1|``, the median ratio and the share of points within a factor 2.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from mpilab.core.errors import ToolMissing, one_of
from mpilab.measure import collbench, forcing, launch, libalgs, ompi_fixed, osu, pingpong
from mpilab.model import costs
from mpilab.simulate import platforms
from mpilab.studies import reference
from mpilab.studies.calibration import (
    SEED000_FORCED,
    SEED000_MAPPING,
    SEED000_METRIC,
    SEED001_METRIC,
    THIN_FIT_CURVE,
    pingpong_table,
    placement_of,
    simulate_curve,
)

PARTS = ("thin", "thin-pingpong", "thin-osu", "jupiter", "seed002", "bunyip")
#: What ``mpilab validate`` runs without --parts: ``thin-osu`` builds OSU and runs it with the
#: seed's 1000 iterations (about 7 minutes here on top of the others); ask for it by name.
DEFAULT_PARTS = tuple(p for p in PARTS if p != "thin-osu")
#: Seed 000's curves: every algorithm of its tables, bcast and reduce.
THIN_CURVES = tuple((c, a) for c in ("bcast", "reduce") for a in ("basic_linear", "chain", "pipeline"))
#: Seed 000's process counts (its design: P up to 48 by 2).
THIN_NPROCS = reference.REPORT_NPROCS


def runs_on_smpi(collective, algorithm):
    """What SMPI runs for one of the seed's Open MPI algorithms: SimGrid's copy or the kit's clone."""
    smpi = libalgs.lookup(collective, algorithm).smpi or ""
    if smpi.startswith(libalgs.KIT_PREFIX):
        clone = smpi[len(libalgs.KIT_PREFIX) :]
        return f"the kit's clone (c_reference/{collective}/{clone}.c)"
    return f"SimGrid's {smpi}"


def seed000_points(platform="orfeo-thin", curves=THIN_CURVES, nprocs=THIN_NPROCS, mapping=SEED000_MAPPING):
    """Seed 000's curves simulated on ``platform`` as the seed measured them (Open MPI's forced
    defaults, its placement): one row per point, collective, algorithm, nprocs, seed_us, sim_us
    (OSU's average, the seed's statistic), sim_maxrank_us (the slowest rank)."""
    rows = []
    for coll, alg in curves:
        sim = simulate_curve(
            platform,
            coll,
            alg,
            nprocs,
            reference.REPORT_BYTES,
            mapping=mapping,
            forced=SEED000_FORCED.get(alg),
        )
        for r in sim.itertuples():
            rows.append(
                dict(
                    collective=coll,
                    algorithm=alg,
                    nprocs=int(r.nprocs),
                    seed_us=float(reference.predict(coll, alg, r.nprocs)),
                    sim_us=float(getattr(r, SEED000_METRIC)),
                    sim_maxrank_us=float(r.maxrank_avg_us),
                )
            )
    return pd.DataFrame(rows)


def thin(platform="orfeo-thin", nprocs=THIN_NPROCS, mapping=SEED000_MAPPING, curves=THIN_CURVES):
    """Seed 000's collective curves against the simulation (see the module's docstring).

    Returns
    -------
    pandas.DataFrame
        collective, algorithm, nprocs, seed_us, sim_us (OSU's average, the seed's statistic),
        ratio, missing_us (seed - simulation: the residual), sim_maxrank_us and ratio_maxrank
        (diagnostic: the slowest rank), held_out, runs.
    """
    t = seed000_points(platform, curves, nprocs, mapping)
    t["held_out"] = [(c, a) != THIN_FIT_CURVE for c, a in zip(t["collective"], t["algorithm"])]
    t["runs"] = [runs_on_smpi(c, a) for c, a in zip(t["collective"], t["algorithm"])]
    t["ratio"] = t["sim_us"] / t["seed_us"]
    t["missing_us"] = t["seed_us"] - t["sim_us"]
    t["ratio_maxrank"] = t["sim_maxrank_us"] / t["seed_us"]
    cols = ["collective", "algorithm", "nprocs", "seed_us", "sim_us", "ratio", "missing_us"]
    return t[cols + ["sim_maxrank_us", "ratio_maxrank", "held_out", "runs"]]


#: OSU's own default iterations at 1 KiB (-i 1000 -x 100 up to 8 KiB): the seed gave none.
SEED000_ITERATIONS = (1000, 100)
THIN_OSU_POINTS = (
    ("osu_bcast", "bcast", "basic_linear"),
    ("osu_reduce", "reduce", "basic_linear"),
    ("osu_reduce", "reduce", "binomial"),
)


def thin_osu(platform="orfeo-thin", nprocs=(8, 24, 48), iterations=SEED000_ITERATIONS, builddir=None):
    """OSU 7.4 under SMPI next to collbench (and osu_latency next to pingpong), point by point.

    OSU is built with smpicc from the vendored tarball into ``builddir`` (default: the user's
    cache, :func:`mpilab.measure.osu.cache_dir`, once; :func:`mpilab.measure.osu.build` says what
    had to change). OSU runs the library's
    call, so only algorithms SimGrid has are compared here: the seed's basic_linear, and
    binomial; Open MPI's chain and pipeline run as the kit's clones, in collbench only.

    Raises
    ------
    ToolMissing
        The vendored OSU source is not there (the reason says where it is looked for).
    """
    progs = osu.build("smpi", builddir or osu.cache_dir())
    lau = launch.get_launcher("smpi", platform=str(platform))
    it, wu = iterations
    rows = []
    for p in nprocs:
        mapping = placement_of(SEED000_MAPPING, p)
        for name, coll, alg in THIN_OSU_POINTS:
            mine = osu.run(lau, progs[name], p, "1024:1024", it, wu, mapping=mapping, algorithm=alg)[0]
            kit = forcing.measure(lau, coll, alg, p, sizes="1024:1024", iters=it, warmup=wu, mapping=mapping)[
                0
            ]
            rows.append(
                dict(
                    program=name,
                    algorithm=alg,
                    nprocs=p,
                    bytes=1024,
                    osu_avg_us=mine["avg_us"],
                    kit_avg_us=kit["avg_us"],
                    osu_max_us=mine["max_us"],
                    kit_max_us=kit["max_us"],
                )
            )
    for m in ("core", "socket", "node"):
        mine = osu.run(lau, progs["osu_latency"], 2, "1:1024", it, wu, mapping=m)
        kit = pingpong.run("smpi", m, platform=platform, sizes="1:1024", iters=it, warmup=wu)
        kit = kit.set_index("bytes")["avg_us"]
        for r in mine:
            if int(r["bytes"]) in (1, 1024):
                rows.append(
                    dict(
                        program="osu_latency",
                        algorithm=m,
                        nprocs=2,
                        bytes=int(r["bytes"]),
                        osu_avg_us=r["avg_us"],
                        kit_avg_us=float(kit.loc[int(r["bytes"])]),
                    )
                )
    t = pd.DataFrame(rows)
    t["ratio"] = t["kit_avg_us"] / t["osu_avg_us"]
    return t


#: The seed 001 points: (collective, bytes, the paper's figure).
JUPITER_POINTS = (("reduce", 128, 10), ("allreduce", 8, 6))


def _jupiter_point(platform, coll, p, nbytes, selector="ompi"):
    """The seed's statistic at one point, with the algorithm Open MPI 1.10's rules chose."""
    alg, segsize = ompi_fixed.reduction_1_10(coll, p, nbytes)
    rows = simulate_curve(platform, coll, alg, [p], nbytes, mapping="core", selector=selector)
    return alg, float(rows[SEED001_METRIC].iloc[0])


def jupiter(platform="jupiter-32x16", nprocs=(16, 32, 64, 128), large=(512,), workers=2):
    """Seed 001's figures at small P and its measured ranges at 512 (see the module's docstring).

    The launches run ``workers`` at a time (each is one single-threaded simulator process).
    """
    fig = reference.seed_table("001-figures")
    meas = reference.seed_table("001-measured")
    points = [
        (coll, nbytes, figure, p)
        for coll, nbytes, figure in JUPITER_POINTS
        for p in list(large) + list(nprocs)
    ]  # the long launches first
    platforms.platform_file(platform)  # write the (large) file once, before the threads
    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        sims = list(pool.map(lambda pt: _jupiter_point(platform, pt[0], pt[3], pt[1]), points))
    rows = []
    for (coll, nbytes, figure, p), (alg, sim) in sorted(
        zip(points, sims), key=lambda x: (x[0][2] != 10, x[0][3])
    ):
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
                algorithm=alg,
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
    """Simulated allreduce 8 B / reduce 128 B at each P of :func:`jupiter`'s table, next to the
    seed's "rather a factor 2" at 512 (a comparison, not a fit: nothing was fitted to it)."""
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


def run(parts=DEFAULT_PARTS, echo=None):
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
        elif part == "thin-osu":
            try:
                out[part] = thin_osu()
            except ToolMissing as e:  # no vendored OSU source here: say so, run the rest
                out[part] = f"skipped: {e}"
        elif part == "jupiter":
            out[part] = jupiter()
        elif part == "seed002":
            out[part] = seed002()
        else:
            out[part] = bunyip()
        took[part] = time.monotonic() - t0
    return out, took
