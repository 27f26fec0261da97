"""Calibration that needs the simulator: fit one parameter to a collective curve, check a ping-pong.

A ping-pong gives each class's one-way time and time per byte
(:func:`mpilab.simulate.calibration.fit_pingpong`); it cannot split the one-way time between the
link's latency and the per-message overheads, nor say what a rank it never measured costs.
:func:`fit_to_curve` fits one such parameter to *one* collective curve by simulating the curve
on trial platforms, comparing the statistic the curve reports (``avg_us``, OSU's "Avg Latency",
by default); :func:`calibrate_thin` and :func:`calibrate_jupiter` rebuild the shipped platforms
from the seeds that way (the numbers frozen in :mod:`mpilab.simulate.clusters`).
"""

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from mpilab.core.errors import UsageError, one_of
from mpilab.core.vocabulary import MAPPINGS
from mpilab.measure import forcing, launch, ompi_fixed, pingpong
from mpilab.simulate import calibration, clusters, routes
from mpilab.simulate.clusters import Param
from mpilab.simulate.platforms import cluster_params
from mpilab.studies import reference

#: The statistics a curve can be compared with: OSU's average over ranks of each rank's mean
#: (``avg_us``, seed 000's), the per-iteration slowest rank averaged (``maxrank_avg_us``) or its
#: median (``maxrank_median_us``, seed 001's: ReproMPI's runtime is the maximum over ranks).
METRICS = ("avg_us", "maxrank_avg_us", "maxrank_median_us")


def simulate_curve(
    platform,
    collective,
    algorithm,
    nprocs,
    nbytes=1024,
    mapping="core",
    selector="ompi",
    timeout=600,
    forced=None,
):
    """Simulate one library algorithm at one size over process counts.

    ``mapping`` may be :data:`SEED000_MAPPING` (the seed's placement, per P); ``forced`` holds
    the segment size and fan-out the algorithm is given (``segsize``, ``chain_fanout``:
    :func:`mpilab.measure.forcing.measure`).

    Returns
    -------
    pandas.DataFrame
        The results rows (one per P), with ``avg_us`` and ``maxrank_avg_us``.
    """
    cfg = [f"smpi/coll-selector:{selector}"] if selector else []
    lau = launch.get_launcher("smpi", platform=str(platform), cfg=cfg)
    rows = []
    for p in nprocs:
        rows += forcing.measure(
            lau,
            collective,
            algorithm,
            int(p),
            sizes=f"{nbytes}:{nbytes}",
            mapping=placement_of(mapping, int(p)),
            iters=1,
            warmup=1,
            timeout=timeout,
            **(forced or {}),
        )
    return pd.DataFrame(rows)


#: How seed 000's ranks were placed: ``mpirun -np P`` without options (and 24 tasks per node)
#: maps by socket for P > 2, by core for P <= 2 (Open MPI's orte rmaps_base_map_job.c, 1.8 ..
#: 4.1): consecutive ranks alternate between the sockets of node 0, then node 1.
SEED000_MAPPING = "seed000"


def placement_of(mapping, nprocs):
    """The kit's mapping for ``nprocs`` ranks: ``mapping`` itself, or for :data:`SEED000_MAPPING`
    what seed 000's ``mpirun -np P`` did (core for P <= 2, socket above)."""
    if mapping == SEED000_MAPPING:
        return "core" if int(nprocs) <= 2 else "socket"
    if mapping not in MAPPINGS:
        raise one_of("mapping", mapping, (*MAPPINGS, SEED000_MAPPING))
    return mapping


def curve_error(simulated, reference_us, metric="maxrank_avg_us"):
    """Mean squared log ratio of a simulated curve to reference values (one per row)."""
    r = np.log(simulated[metric].to_numpy(float) / np.asarray(reference_us, float))
    return float(np.mean(r**2)), float(np.mean(r))


def fit_to_curve(
    params,
    apply,
    bounds,
    curve,
    *,
    prefix,
    mapping="core",
    metric="avg_us",
    selector="ompi",
    workdir=None,
    xatol=1e-3,
    echo=None,
):
    """Fit one parameter so that a simulated collective curve matches a measured one.

    Parameters
    ----------
    params : dict
        A cluster's parameters (:mod:`mpilab.simulate.clusters`).
    apply : callable
        ``apply(params, x) -> params`` with the parameter set to ``x``.
    bounds : (float, float)
        Where ``x`` may go (what the ping-pong allows).
    curve : dict or list of dict
        ``collective``, ``algorithm``, ``bytes``, ``nprocs`` (list), ``reference_us`` (list) and
        optionally ``forced`` (the segment size and fan-out it is given); several curves are
        fitted together (the error is over all their points).
    prefix : str
        Host prefix of the platform.
    metric : {'avg_us', 'maxrank_avg_us', 'maxrank_median_us'}
        Which simulated statistic to compare (:data:`METRICS`): the one the curve reports.

    Returns
    -------
    dict
        ``value``, ``at_bound`` (the best value is a bound: the curve wants more than the
        ping-pong allows), ``error`` (mean squared log ratio), ``mean_log_ratio``, ``evaluations``
        and ``table`` (the curves at the best value: collective, algorithm, nprocs, reference,
        simulated, ratio).
    """
    if metric not in METRICS:
        raise one_of("metric", metric, METRICS)
    curves = [curve] if isinstance(curve, dict) else list(curve)
    reference_us = [r for c in curves for r in c["reference_us"]]
    work = Path(workdir or tempfile.mkdtemp(prefix="mpilab-fit-"))
    seen = {}

    def evaluate(x):
        key = round(float(x), 9)
        if key not in seen:
            xml = calibration.write_platform(
                apply(params, float(x)), work / f"trial-{len(seen)}.xml", prefix=prefix
            )
            sim = pd.concat(
                [
                    simulate_curve(
                        xml,
                        c["collective"],
                        c["algorithm"],
                        c["nprocs"],
                        c["bytes"],
                        mapping=mapping,
                        selector=selector,
                        forced=c.get("forced"),
                    )
                    for c in curves
                ],
                ignore_index=True,
            )
            seen[key] = (sim, *curve_error(sim, reference_us, metric))
            if echo:
                echo(f"  x = {x:.6g}: mean log ratio {seen[key][2]:+.3f}")
        return seen[key]

    lo, hi = bounds
    res = minimize_scalar(
        lambda x: evaluate(x)[1], bounds=(lo, hi), method="bounded", options=dict(xatol=xatol)
    )
    best = min(seen, key=lambda k: seen[k][1])
    # the cost is monotone in these parameters: if the best is next to a bound, try the bound
    for edge in (lo, hi):
        if abs(best - edge) <= 2 * xatol:
            if evaluate(edge)[1] <= seen[best][1]:
                best = round(float(edge), 9)
    sim, err, mlr = seen[best]
    table = pd.DataFrame(
        {
            "collective": [c["collective"] for c in curves for _ in c["nprocs"]],
            "algorithm": [c["algorithm"] for c in curves for _ in c["nprocs"]],
            "nprocs": [p for c in curves for p in c["nprocs"]],
            "reference_us": reference_us,
            "simulated_us": sim[metric].to_numpy(float),
        }
    )
    table["ratio"] = table["simulated_us"] / table["reference_us"]
    return dict(
        value=best,
        at_bound=bool(min(abs(best - lo), abs(best - hi)) <= 2 * xatol),
        error=err,
        mean_log_ratio=mlr,
        evaluations=len(seen) + res.nfev * 0,
        table=table,
    )


#: Seed 000's curve that identifies the overheads: a linear broadcast's root pays o_isend once
#: per message while the latencies of its messages overlap.
THIN_FIT_CURVE = ("bcast", "basic_linear")
#: Process counts of the fit (the seed's range, every fourth).
THIN_FIT_NPROCS = (8, 16, 24, 32, 40, 48)
#: What Open MPI 4.1 gives an algorithm forced as seed 000 forced it (coll_tuned_use_dynamic_rules
#: and coll_tuned_<coll>_algorithm only): segment size 0, 4 chains.
SEED000_FORCED = {"chain": dict(segsize=0, chain_fanout=4), "pipeline": dict(segsize=0)}


def seed000_curve(collective, algorithm, nprocs=THIN_FIT_NPROCS):
    """A curve of seed 000's tables at 1 KiB: dict for :func:`fit_to_curve` (OSU's average)."""
    ref = reference.predict(collective, algorithm, list(nprocs))
    return dict(
        collective=collective,
        algorithm=algorithm,
        bytes=reference.REPORT_BYTES,
        nprocs=list(nprocs),
        reference_us=list(np.atleast_1d(ref)),
        forced=SEED000_FORCED.get(algorithm),
    )


def curve_from_results(results_df, collective, algorithm, nbytes, metric="avg_us"):
    """A curve for :func:`fit_to_curve` from measured results rows (one collective, algorithm
    and size, several process counts; the median over repetitions)."""
    d = results_df[
        (results_df["collective"] == collective)
        & (results_df["algorithm"] == algorithm)
        & (results_df["bytes"].astype(int) == int(nbytes))
    ]
    if metric not in d.columns or d[metric].isna().all():
        metric = "avg_us"
    d = d.assign(v=pd.to_numeric(d[metric], errors="coerce")).dropna(subset=["v"])
    if d["nprocs"].nunique() < 2:
        raise UsageError(
            f"the curve needs {collective} {algorithm} at {nbytes} B for two or more "
            f"process counts; found {sorted(d['nprocs'].unique())}"
        )
    g = d.groupby("nprocs")["v"].median()
    return dict(
        collective=collective,
        algorithm=algorithm,
        bytes=int(nbytes),
        nprocs=[int(p) for p in g.index],
        reference_us=list(g.to_numpy(float)),
    )


def calibrate(
    pingpong_measured,
    curve=None,
    base="orfeo-thin",
    path=None,
    mapping="core",
    metric="avg_us",
    beta="first",
    segments=2,
    name=None,
    source=None,
    echo=None,
    workdir=None,
    monotone=True,
):
    """A platform from a ping-pong and at most one collective curve.

    The ping-pong gives each class's one-way time and β (:func:`mpilab.simulate.calibration.
    fit_pingpong`, ``monotone`` as there); the curve, when given, the overheads
    (:func:`fit_to_curve`, within what the ping-pong allows, comparing ``metric``): on a base with
    per-class overheads (THIN's) the share of each intra-node one-way time charged as CPU overhead
    (:func:`mpilab.simulate.calibration.with_cpu_share`), else one overhead o = o_send = o_recv =
    o_isend for every class. Without a curve the overheads keep the base's (its share, or its
    value bounded by the new one-way times).

    Returns
    -------
    (Path, dict)
        The platform file and a report: ``pingpong`` (the fit table), ``fitted`` (``cpu_share``
        or ``overhead``: what the curve fitted), ``overhead`` (the core class's o, µs),
        ``curve_fit`` (:func:`fit_to_curve`'s result or None), ``params``.
    """
    if metric not in METRICS:
        raise one_of("metric", metric, METRICS)
    params, prefix, pp, _ = calibration.prepare(
        pingpong_measured, base, segments, beta, name, source, monotone=monotone
    )
    per_class = "cpu_share" in params
    fit = None
    if curve is not None:
        how = (
            f"fit to {curve['collective']} {curve['algorithm']} at {curve['bytes']} B, "
            f"P = {min(curve['nprocs'])}..{max(curve['nprocs'])} ({metric}, {mapping} placement)"
        )

        def apply(p, x):
            if per_class:
                return calibration.with_cpu_share(p, x, how)
            return calibration.with_overhead(p, x, how)

        bounds = (0.0, 1.0) if per_class else (0.0, calibration.overhead_bound(params))
        fit = fit_to_curve(
            params,
            apply,
            bounds,
            curve,
            prefix=prefix,
            mapping=mapping,
            metric=metric,
            workdir=workdir,
            echo=echo,
        )
        params = apply(params, fit["value"])
    out = calibration.write_platform(
        params, path or (calibration._cache_dir() / f"calibrated-{base}.xml"), prefix=prefix
    )
    return out, dict(
        pingpong=pp,
        fitted="cpu_share" if per_class else "overhead",
        overhead=params["o_send"].value,
        curve_fit=fit,
        params=params,
    )


def calibrate_thin(echo=None, workdir=None, path=None):
    """Rebuild ORFEO THIN's parameters from seed 000: its ping-pong table as printed (the socket
    row kept), then the share of each intra-node one-way time charged as CPU overhead, fitted to
    its bcast basic_linear curve (OSU's average over ranks, the seed's placement).

    Returns
    -------
    (Path, dict)
        As :func:`calibrate`.
    """
    return calibrate(
        reference.orfeo_report("pingpong"),
        seed000_curve(*THIN_FIT_CURVE),
        base="orfeo-thin",
        path=path,
        mapping=SEED000_MAPPING,
        metric=SEED000_METRIC,
        beta="fit",
        source=f"{clusters.SEED000}, point-to-point table",
        echo=echo,
        workdir=workdir,
        monotone=False,
    )


#: The statistic each seed reported: seed 000 ran OSU (its "Avg Latency": each rank's mean over
#: the iterations, averaged over ranks); seed 001 ran ReproMPI's mpibenchmark 0.9.4, whose
#: runtime_sec is the maximum over ranks of each measurement (results_output.c,
#: compute_runtimes_local_clocks: MPI_Reduce with MPI_MAX of end - start), and kept the median
#: of each launch's measurements.
SEED000_METRIC = "avg_us"
SEED001_METRIC = "maxrank_median_us"


#: The largest intra-node one-way time jupiter's fit may try (µs): the seed gives only the
#: interconnect's 1.3 µs, and a node's inside need not be faster (seed 000's THIN table has a
#: socket row above its node row).
JUPITER_FIT_MAX_US = 10.0
JUPITER_FIT_SOURCE = (
    "fit to seed 001's figures 10 and 6 at P = 16 (one node: the paper's default reduce of 128 B and "
    "allreduce of 8 B, run as Open MPI 1.10's rules ran them, binomial and recursive doubling), the "
    "seed's statistic"
)


def calibrate_jupiter(echo=None, workdir=None):
    """Rebuild jupiter's intra-node one-way time from seed 001's two points inside one node, P = 16:
    the paper's default reduce of 128 B and allreduce of 8 B (figures 10 and 6), which under Open
    MPI 1.10's rules (the versions the seed ran) are a binomial tree and recursive doubling
    (:func:`mpilab.measure.ompi_fixed.reduction_1_10`), compared with the seed's statistic
    (:data:`SEED001_METRIC`).

    Returns
    -------
    (dict, dict)
        The parameters and :func:`fit_to_curve`'s result.
    """
    base, prefix = cluster_params("jupiter-32x16")
    fig = reference.seed_table("001-figures")
    curves = []
    for figure, coll, nbytes in ((10, "reduce", 128), (6, "allreduce", 8)):
        row = fig[(fig["figure"] == figure) & (fig["algorithm"] == "default") & (fig["nprocs"] == 16)]
        algorithm, _ = ompi_fixed.reduction_1_10(coll, 16, nbytes)
        curves.append(
            dict(
                collective=coll,
                algorithm=algorithm,
                bytes=nbytes,
                nprocs=[16],
                reference_us=[float(row["seconds"].iloc[0]) * 1e6],
            )
        )
    lo = (
        2 * base["o_send"].value
        + calibration.MIN_LINK_LATENCY_US
        + calibration.ENVELOPE_BYTES * base["beta_core"].value
    )

    def apply(p, x):
        new = dict(p)
        for c in ("core", "socket"):
            new[f"one_way_{c}"] = Param(float(x), "us", "fit", JUPITER_FIT_SOURCE)
        return new

    # P = 16 fits in one node: the trials simulate one node of jupiter (same links)
    one_node = dict(base, nodes=Param(1, "", "assumption", "one node for the fit"))
    fit = fit_to_curve(
        one_node,
        apply,
        (lo, JUPITER_FIT_MAX_US),
        curves,
        prefix=prefix,
        mapping="core",
        workdir=workdir,
        xatol=1e-3,
        echo=echo,
        metric=SEED001_METRIC,
    )
    return apply(base, fit["value"]), fit


def check_calibration(platform, target, sizes="0:4M", segments=2, **run_opts):
    """Simulate the ping-pong on ``platform`` per mapping and compare with ``target``.

    Parameters
    ----------
    platform : str or Path
        Platform name or XML file (e.g. what :func:`mpilab.simulate.calibration.calibrate` wrote).
    target : dict or pandas.DataFrame or path
        What the platform should reproduce (any input of
        :func:`mpilab.simulate.calibration.fit_pingpong`).
    sizes : str
        Ping-pong sizes (default 0 B..4 MiB).
    segments : int
        Segments of the fit of the simulated curve.
    **run_opts
        Passed to :func:`mpilab.measure.pingpong.run` (iterations, timeout).

    Returns
    -------
    pandas.DataFrame
        One row per mapping: ``mapping``, ``target_intercept``, ``simulated_intercept``,
        ``intercept_error_pct``, ``target_slope``, ``simulated_slope``, ``slope_error_pct``.
    """
    routes.refuse_unexplained(platform)
    want = calibration.fit_pingpong(target, segments).set_index("mapping")
    opts = dict(iters=5, warmup=1, iters_large=2, warmup_large=1)
    opts.update(run_opts)
    rows = []
    for m in MAPPINGS:
        if m not in want.index:
            continue
        df = pingpong.run("smpi", m, platform=platform, sizes=sizes, **opts)
        got = calibration.fit_pingpong(df, segments).set_index("mapping").loc[m]
        t_ic, t_sl = want.loc[m, "one_way_us"], want.loc[m, "beta_us_per_byte"]
        ic, sl = got["intercept_us"], got["beta_us_per_byte"]
        rows.append(
            dict(
                mapping=m,
                target_intercept=t_ic,
                simulated_intercept=ic,
                intercept_error_pct=100 * (ic - t_ic) / t_ic if t_ic else float("nan"),
                target_slope=t_sl,
                simulated_slope=sl,
                slope_error_pct=100 * (sl - t_sl) / t_sl,
            )
        )
    return pd.DataFrame(rows)


def pingpong_table(platform, table="pingpong", sizes=(1, 1024, 65536, 1 << 20), mappings=MAPPINGS):
    """Seed 000's ping-pong table against the simulated ping-pong at a few sizes.

    Returns
    -------
    pandas.DataFrame
        mapping, bytes, seed_us, simulated_us, ratio.
    """
    routes.refuse_unexplained(platform)
    rows = []
    for m in mappings:
        df = pingpong.run(
            "smpi",
            m,
            platform=platform,
            sizes=f"{min(sizes)}:{max(sizes)}",
            iters=2,
            warmup=1,
            iters_large=2,
            warmup_large=1,
        )
        got = df.set_index("bytes")["avg_us"].astype(float)
        for b in sizes:
            seed = float(reference.predict("pingpong", m, b))
            sim = float(got.loc[b])
            rows.append(dict(mapping=m, bytes=b, seed_us=seed, simulated_us=sim, ratio=sim / seed))
    return pd.DataFrame(rows)


if __name__ == "__main__":  # python -m mpilab.studies.calibration: refit the shipped numbers
    xml, rep = calibrate_thin(echo=print)
    print(rep["pingpong"].to_string(index=False))
    fit = rep["curve_fit"]
    print("THIN cpu_share:", fit["value"], "at bound" if fit["at_bound"] else "")
    print(fit["table"].to_string(index=False))
    jp, jfit = calibrate_jupiter(echo=print)
    print("jupiter one-way core:", jfit["value"], "at bound" if jfit["at_bound"] else "")
    print(jfit["table"].to_string(index=False))
