"""Lab 0's rubric: the hidden runs of the hello and %%px checks, and the ping-pong fit recomputed."""

import math
import numbers

import numpy as np
import pandas as pd

from mpilab.grade.cases import Case
from mpilab.grade.checks import Function, hello, pxcell
from mpilab.grade.checks.tables import credited_only_if
from mpilab.grade.labs.lab0 import HELLO_RUNS, PX_RUNS
from mpilab.grade.runner import Run
from mpilab_key import InNotebook
from mpilab_key.resimulate import pingpong_gates

#: hello.c on a process count the notebook does not run, and 30 ranks dealt over THIN's nodes.
HELLO_HIDDEN = (Run("openmpi", 6, hidden=True), Run("smpi", 30, "orfeo-thin", "node", hidden=True))
#: The %%px cell on other numbers of ranks than the notebook's 4 engines.
PX_HIDDEN = (Run("openmpi", 5, hidden=True), Run("openmpi", 6, hidden=True))

#: How close alpha_us and beta_us_per_byte must be to a defensible fit of the rows, relative
#: (alpha also within ALPHA_FLOOR of the smallest time: an intercept near 0 has no relative scale).
RTOL, ALPHA_FLOOR = 0.02, 0.01
#: Defensible conventions of a Hockney fit: which time of each size (the mean the notebook
#: names, or the median), and which sizes.
TIMES = {
    "avg_us": "the mean time (avg_us)",
    "maxrank_median_us": "the median time",
    "median_us": "the median time",
}
#: Fewest sizes a partial fit (small sizes for α, large ones for β) must use, and where the two
#: regimes meet: α may come from the sizes up to SMALL_MAX, β from those from LARGE_MIN (4 KiB:
#: Open MPI's shared-memory eager limit, where the curve bends).
MIN_SIZES, SMALL_MAX, LARGE_MIN = 3, 4096, 4096


def _lstsq(n, t):
    (alpha, beta), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(n), n]), t, rcond=None)
    return float(alpha), float(beta)


def reference_fits(pp):
    """The defensible fits of t = alpha + beta * n to the rows, one per convention.

    Least squares (numpy's lstsq, not the kit's :func:`mpilab.model.fits.hockney_fit`) over every
    size, over the sizes above 0 B, over the smallest sizes only (α from where the latency
    dominates: the fix the rubric of the written answer points to) or over the largest only (β
    from where the bandwidth does), each on the mean or the median time; and α as the time of the
    smallest message.

    Returns
    -------
    dict
        ``{description: (alpha_us or None, beta_us_per_byte or None, smallest time)}``: a
        convention for the small sizes gives no β, one for the large sizes no α.
    """
    out = {}
    n_all = pd.to_numeric(pp["bytes"], errors="coerce").to_numpy(float)
    for column, what in TIMES.items():
        if column not in pp.columns:
            continue
        t_all = pd.to_numeric(pp[column], errors="coerce").to_numpy(float)
        keep = np.isfinite(t_all) & np.isfinite(n_all)
        n, t = n_all[keep], t_all[keep]
        order = np.argsort(n, kind="stable")
        n, t = n[order], t[order]
        if len(np.unique(n)) < 2:
            continue
        tmin = float(t.min())
        for sizes, m in (("every size", np.ones_like(n, bool)), ("sizes above 0 B", n > 0)):
            if len(np.unique(n[m])) >= 2:
                a, b = _lstsq(n[m], t[m])
                out[f"{what}, {sizes}"] = (a, b, tmin)
        sizes = np.unique(n)
        for k in range(MIN_SIZES, len(sizes)):
            top, bottom = sizes[k - 1], sizes[len(sizes) - k]
            if top <= SMALL_MAX:
                a, _ = _lstsq(n[n <= top], t[n <= top])
                out[f"{what}, sizes up to {top:g} B (α)"] = (a, None, tmin)
            if bottom >= LARGE_MIN:
                _, b = _lstsq(n[n >= bottom], t[n >= bottom])
                out[f"{what}, sizes from {bottom:g} B (β)"] = (None, b, tmin)
        first = float(t[n == sizes[0]].mean())
        out[f"{what} of the smallest message, {sizes[0]:g} B (α)"] = (first, None, tmin)
    return out


def _plausible(pp):
    """Why ``pp`` is not a ping-pong table (None when it is one)."""
    if not isinstance(pp, pd.DataFrame) or not {"bytes", "avg_us"} <= set(pp.columns):
        return "pp should be the table pingpong.run returned (columns bytes and avg_us)"
    n = pd.to_numeric(pp["bytes"], errors="coerce")
    t = pd.to_numeric(pp["avg_us"], errors="coerce")
    if n.isna().any() or t.isna().any() or (t <= 0).any() or (n < 0).any():
        return "pp has sizes or times that are not numbers, or times that are not positive"
    if n.nunique() < 4 or n.max() < 1024:
        return (
            f"pp has {n.nunique()} sizes up to {n.max():g} B; the ping-pong of the notebook "
            "measures 0 B to 64 KiB"
        )
    return None


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


#: The notebook's ping-pong (cell code18): the grader runs the same one to check pp.
PINGPONG = dict(sizes="0:64K", iters=200, warmup=20, iters_large=50, warmup_large=5)


def fit_cases(answers, ctx):
    """α and β against the nearest defensible fit of the handed-in rows, and the bandwidth in
    GB/s against the student's own β (so one slip is not counted twice); credited only when pp
    is the notebook's ping-pong, measured again by the grader (:func:`pingpong_gates`)."""
    pp = answers["pp"]
    why = _plausible(pp)
    if why:
        return [Case("pp is your ping-pong's table", False, why)]
    return credited_only_if(pingpong_gates(pp, "pp", **PINGPONG), _fit_cases(answers, pp))


def _fit_cases(answers, pp):
    alpha, beta, bw = answers["alpha_us"], answers["beta_us_per_byte"], answers["bandwidth_GBps"]
    fits = reference_fits(pp)

    def alpha_ok(a, ref):
        if not (_is_number(a) and ref[0] is not None):
            return False
        return bool(abs(a - ref[0]) <= max(RTOL * abs(ref[0]), ALPHA_FLOOR * ref[2]))

    def beta_ok(b, ref):
        return bool(_is_number(b) and ref[1] is not None and abs(b - ref[1]) <= RTOL * abs(ref[1]))

    def nearest(value, i, ok):
        """The convention whose α (i = 0) or β (i = 1) the answer matches, else the nearest one."""
        ref = [(name, f) for name, f in fits.items() if f[i] is not None]
        v = value if _is_number(value) else 0
        return min(ref, key=lambda kv: (not ok(value, kv[1]), abs(v - kv[1][i])))

    a_name, a_ref = nearest(alpha, 0, alpha_ok)
    b_name, b_ref = nearest(beta, 1, beta_ok)
    out = [
        Case(
            "alpha_us is the fit's intercept (µs)",
            alpha_ok(alpha, a_ref),
            f"alpha_us = {alpha!r}, but a least-squares line through your ping-pong ({a_name}) has "
            f"intercept {a_ref[0]:.4g} µs"
            if _is_number(alpha)
            else f"alpha_us = {alpha!r} is not a number",
        ),
        Case(
            "beta_us_per_byte is the fit's slope (µs per byte)",
            beta_ok(beta, b_ref),
            f"beta_us_per_byte = {beta!r}, but a least-squares line ({b_name}) has slope "
            f"{b_ref[1]:.4g} µs per byte"
            if _is_number(beta)
            else f"beta_us_per_byte = {beta!r} is not a number",
        ),
    ]
    if not (_is_number(bw) and _is_number(beta) and beta > 0):
        out.append(
            Case(
                "bandwidth_GBps is 1/β in GB/s",
                False,
                f"bandwidth_GBps = {bw!r}: give 1/β in GB/s, from your beta_us_per_byte",
            )
        )
        return out
    want = 1e-3 / beta
    ok = bool(abs(bw - want) <= RTOL * want)
    hint = ""
    if math.isclose(bw, 1 / beta, rel_tol=RTOL):
        hint = ": 1/β is in bytes per µs (= MB/s); divide by 1000 for GB/s"
    elif math.isclose(bw, 1e-3 / beta * 8, rel_tol=RTOL):
        hint = ": that is Gbit/s; GB/s counts bytes"
    out.append(
        Case(
            "bandwidth_GBps is 1/β in GB/s",
            ok,
            f"bandwidth_GBps = {bw:.4g}, but 1/β with your β is {want:.4g} GB/s{hint}",
        )
    )
    return out


RUBRIC = {
    "hello_correct": hello.HelloVerdict("hello.c", HELLO_RUNS + HELLO_HIDDEN),
    "px_allgather": pxcell.PxCellVerdict("lab0.ipynb", "px_answer", PX_RUNS + PX_HIDDEN),
    "pingpong_fit": Function(fit_cases, needs=("alpha_us", "beta_us_per_byte", "bandwidth_GBps", "pp")),
}

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": "45 minutes to 1 hour for a typical MSc student; longer when MPI or Jupyter is new",
    "sections": [
        ("1. What is on this machine (mpilab doctor)", "5 min"),
        ("2. Hello from every rank, real and simulated", "15 to 20 min"),
        ("3. MPI ranks in the notebook (ipyparallel, mpi4py's Allgather)", "10 to 15 min"),
        ("4. One message: α and β from a ping-pong", "15 to 20 min"),
    ],
    "hidden": {
        "pingpong_fit": (
            "the grader fits the handed-in pp itself: every size, the sizes above 0 B, the sizes up "
            f"to {SMALL_MAX} B for α or from {LARGE_MIN} B for β, the 0-byte time for α; mean or "
            "median times; within 2 %; credited only when pp holds every size of the notebook's "
            "ping-pong and the grader's own ping-pong agrees with it"
        ),
    },
    "quotes": {
        "α on this machine, two cores (µs)": "round(alpha_us, 3)",
        "bandwidth on this machine (GB/s)": "round(bandwidth_GBps, 2)",
        "α on simulated THIN, two nodes (µs)": "round(sim_fit['alpha'], 3)",
        "bandwidth on simulated THIN (GB/s)": "round(1e-3 / sim_fit['beta'], 2)",
    },
    "wrong": {
        "hello_correct": [
            (
                "MPI_Get_processor_name never called: every host is '?'",
                {"hello.c": "tests/data/grading/hello_no_host.c"},
            )
        ],
        "pingpong_fit": [
            (
                "the bandwidth in MB/s (1/β) where GB/s is asked",
                {
                    "alpha_us": InNotebook("alpha_us"),
                    "beta_us_per_byte": InNotebook("beta_us_per_byte"),
                    "bandwidth_GBps": InNotebook("1 / beta_us_per_byte"),
                    "pp": InNotebook("pp"),
                },
            )
        ],
    },
}
