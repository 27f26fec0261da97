"""Lab 4's rubric: the linear broadcast's schedule and cost, rank 0's messages in the library's
broadcasts, the event model's options, the model errors and the calibrated platform.

* linear broadcast: the schedule, handed in as data for every p up to 16 and every root, is
  played at the notebook's (p, root) and at hidden ones (other p, roots other than 0), each a
  case that passes when every rank gets the buffer in the linear broadcast's time
  ((p - 1) messages of n bytes, one after the other); the cost's α and β terms are two more cases.
* rank 0: the grader traces the library's broadcasts on SMPI itself and counts rank 0's messages.
* model options: the grader traces the notebook's SMPI runs again and hidden ones (other process
  counts and sizes of gather_bcast and pairwise, across THIN's sockets and on both sides of
  its 4 KiB eager limit); one case per run; the eager threshold may be given either way ("sends
  below 4096 B", or "up to 4095 B": :func:`readings`).
* errors: each algorithm's MAPE recomputed from the student's own cost expressions, results_df
  (one point simulated again), α and β of the platform's core link (avg_us or maxrank_avg_us:
  both are defensible), and whether ``worst`` is the largest.
* calibration: the platform's core link against fits of the student's ping-pong made here (one
  to three segments, median, mean or slowest-rank times): the latency and the bandwidth are one
  case each.
"""

import math

import numpy as np

from mpilab.core.errors import UsageError
from mpilab.grade.cases import Case
from mpilab.grade.checks import Function
from mpilab.grade.checks import costs as cost_checks
from mpilab.grade.checks import schedules as schedule_checks
from mpilab.grade.checks.tables import credited_only_if, frame
from mpilab.grade.labs import lab4
from mpilab.measure import libtrace, trace
from mpilab.model import costs, p2p, schedules
from mpilab.simulate import platforms, routes
from mpilab_key import InNotebook
from mpilab_key.resimulate import pingpong_gates, spot_case

#: Hidden (p, root) of the linear broadcast: other p, the roots next to 0 and last.
HIDDEN_BCAST = tuple((p, r) for p in (4, 7, 13) for r in (1, p - 1))
#: Hidden SMPI runs of the model options: the same two algorithms at other P (folds, THIN's
#: second socket from P = 13) and sizes on both sides of the platform's 4 KiB eager limit (eager
#: below 4096 B): gather_bcast's 4095-byte blocks are eager, its 4096-byte ones are not, and the
#: pairwise exchange at P = 13 sends 3000-byte blocks across the sockets. The visible runs alone
#: leave any eager_bytes from 2049 to 4096 (pairwise at P = 8 with 1 KiB sends 2048 and 4096 B);
#: P = 6 with 4095 B leaves 4096 only.
HIDDEN_TRACES = (
    ("pairwise", 5, 32768),
    ("gather_bcast", 6, 4095),
    ("pairwise", 13, 3000),
    ("gather_bcast", 13, 4096),
    ("gather_bcast", 16, 65535),
)
#: MAPE agreement (relative), and the calibrated link's (relative; absolute for α in µs).
MAPE_RTOL, LINK_RTOL, LINK_ATOL = 1e-3, 0.02, 0.005


def linear_cases(answers, ctx):
    data, cost = schedule_checks.read_data(answers["linear_bcast"]), answers["cost_linear_bcast"]
    out = []
    for hidden, cases in ((False, lab4.VISIBLE_BCAST), (True, HIDDEN_BCAST)):
        for p, root in cases:
            want = float(
                costs.evaluate(
                    "bcast",
                    "basic_linear",
                    p,
                    schedule_checks.NBYTES,
                    schedule_checks.ALPHA,
                    schedule_checks.BETA,
                )
            )
            entry = data.get(f"{p},{root}", data.get("error", "error: no schedule for this case"))
            out.append(
                schedule_checks.bcast_case(entry, p, root, want, what="the linear broadcast's", hidden=hidden)
            )
    e = costs.entry("bcast", "basic_linear")
    return out + cost_checks.value_cases(cost, e.expr, e.domain, name="cost_linear_bcast")


def rank0_cases(answers, ctx):
    counts = answers["messages_from_rank0"]
    form = lab4.rank0_cases(counts)
    if not form[0].passed:
        return form
    out = []
    for alg in lab4.LIBRARY_BCASTS:
        tl = libtrace.run_library_traced(
            "bcast", alg, lab4.LIBRARY_P, lab4.LIBRARY_BYTES, platform=lab4.PLATFORM
        )
        want = int((tl.messages["src"] == 0).sum())
        out.append(
            Case(
                f"{alg}: rank 0's messages",
                int(counts[alg]) == want,
                f"you counted {counts[alg]}; count the arrows that leave rank 0's row in "
                f"the diagram of {alg} (P = {lab4.LIBRARY_P}, {lab4.LIBRARY_BYTES} B)",
            )
        )
    return out


def readings(model):
    """The model as given and, for a threshold, read the other way: ``eager_bytes`` is "sends
    smaller than this are eager" (SMPI's ``size < smpi/send-is-detached-thresh``); a student who
    gives the largest eager size instead (Open MPI's ``btl_vader_eager_limit`` is "the maximum
    size of eager messages") reasons the same, one byte apart."""
    out = [model]
    eager = model.get("eager_bytes")
    if isinstance(eager, (int, float)) and not isinstance(eager, bool) and eager > 0:
        out.append(dict(model, eager_bytes=eager + 1))
    return out


def model_cases(answers, ctx):
    model = answers["model"]
    bad = lab4.model_form_case(model)
    if bad:
        return [bad]
    traces = [
        (hidden, trace.run_traced(alg, p, nbytes, flavour="smpi", platform=lab4.PLATFORM, reps=1, warmup=0))
        for hidden, runs in ((False, lab4.VISIBLE_TRACES), (True, HIDDEN_TRACES))
        for alg, p, nbytes in runs
    ]
    tries = [[lab4.model_match_case(m, tl, hidden=hidden) for hidden, tl in traces] for m in readings(model)]
    return max(tries, key=lambda cases: sum(c.passed for c in cases))


def platform_alpha_beta():
    """α and β of the notebook's first cell: the core link of THIN between ranks 0 and 1."""
    return routes.route_cost(lab4.PLATFORM, *platforms.placement(lab4.PLATFORM, 2))


def mape(rows, expr, alpha, beta, value):
    """Mean absolute percentage error of a cost expression on results rows."""
    model = np.atleast_1d(
        costs.evaluate_expression(
            expr, rows["nprocs"].to_numpy(float), rows["bytes"].to_numpy(float), alpha, beta
        )
    )
    meas = rows[value].to_numpy(dtype=float)
    return float(np.mean(np.abs(model - meas) / meas * 100))


def errors_cases(answers, ctx):
    errors, worst, results_df, my_costs = (answers[k] for k in ("errors", "worst", "results_df", "my_costs"))
    form = lab4.errors_form_cases(errors, worst, results_df, my_costs)
    if len(form) == 1 and not form[0].passed:
        return form
    results_df, errors = frame(results_df), frame(errors)
    spot = spot_case(
        results_df.assign(collective="allgather"),
        "results_df",
        lab4.PLATFORM,
        (),
        (("allgather", "lib:bruck", 8), ("allgather", "lib:bruck", 4)),
    )
    if not spot.passed:
        return [spot]
    alpha, beta = platform_alpha_beta()
    got = dict(zip(errors["algorithm"].astype(str), errors["mape"]))
    out, want = [], {}
    for alg, rows in results_df.groupby("algorithm"):
        alg = str(alg)
        title = f"{alg}: its mape"
        expr = my_costs.get(alg) if isinstance(my_costs, dict) else None
        try:
            cost_checks.to_expression(expr)
        except ValueError as exc:
            out.append(Case(title, False, f"my_costs[{alg!r}]: {exc}"))
            continue
        options = {v: mape(rows, expr, alpha, beta, v) for v in ("avg_us", "maxrank_avg_us") if v in rows}
        want[alg] = options.get("avg_us")
        mine = got.get(alg)
        ok = mine is not None and any(
            math.isclose(float(mine), w, rel_tol=MAPE_RTOL, abs_tol=1e-6) for w in options.values()
        )
        out.append(
            Case(
                title,
                ok,
                f"yours is {mine if mine is None else round(float(mine), 4)} %; your "
                f"cost on results_df with alpha = {alpha:.4g} us and beta = {beta:.4g} us/B "
                f"gives {options.get('avg_us', float('nan')):.4g} % (avg_us)",
            )
        )
    if want and all(v is not None for v in want.values()):
        largest = max(want, key=want.get)
        out.append(
            Case("worst", str(worst) == largest, f"worst = {worst!r}; the largest error is {largest}'s")
        )
    else:
        out.append(Case("worst", False, "the errors could not be recomputed for every algorithm"))
    return out


#: The notebook's ping-pong (cell real_run): the grader runs the same one to check pp.
PINGPONG = dict(sizes="0:16K", iters=200, warmup=20, iters_large=50, warmup_large=5)


def pingpong_fits(pp):
    """(intercept, slope) of the defensible fits of a ping-pong: one to three segments of the
    median, mean or slowest rank's one-way time, first segment."""
    rows = frame(pp)
    rows = rows[rows["mapping"] == "core"] if "mapping" in rows else rows
    out = []
    for value in ("maxrank_median_us", "avg_us", "maxrank_avg_us"):
        if value not in rows or rows[value].isna().all():
            continue
        for segments in (1, 2, 3):
            try:
                first = p2p.fit(rows, segments=segments, value=value).iloc[0]
            except (UsageError, ValueError, KeyError):
                continue
            out.append(
                (float(first["intercept"]), float(first["slope"]), f"{segments} segment(s) of {value}")
            )
    return out


def platform_cases(answers, ctx):
    my_platform, pp = answers["my_platform"], answers["pp"]
    if not isinstance(my_platform, str):
        return [Case("my_platform is a file", False, "my_platform should be the platform's path")]
    path = ctx.written_file(my_platform.rsplit("/", 1)[-1])
    if path is None or path.stat().st_size > 5_000_000:
        return [
            Case(
                "my_platform is next to the notebook",
                False,
                "the platform file was not found next to the notebook: write it there "
                "(e.g. path='my-machine.xml')",
            )
        ]
    try:
        a, b = lab4.core_link(path)
    except (UsageError, OSError, ValueError) as exc:
        return [Case("my_platform is a platform of THIN's shape", False, str(exc))]
    fits = pingpong_fits(pp) if not isinstance(pp, Exception) else []
    if not fits:
        return [Case("pp is your ping-pong", False, "pp holds no ping-pong rows the grader can fit")]
    near = min(fits, key=lambda f: abs(f[0] - a))
    ok_a = any(math.isclose(a, f[0], rel_tol=LINK_RTOL, abs_tol=LINK_ATOL) for f in fits)
    ok_b = any(math.isclose(b, f[1], rel_tol=LINK_RTOL) for f in fits)
    return credited_only_if(
        pingpong_gates(frame(pp), "pp", **PINGPONG),
        [
            Case(
                "the core link's latency is your ping-pong's α",
                ok_a,
                f"the platform's core latency is {a:.4g} us; a fit of pp gives {near[0]:.4g} us ({near[2]})",
            ),
            Case(
                "the core link's bandwidth is your ping-pong's 1/β",
                ok_b,
                f"the platform's core link costs {b:.4g} us/B; a fit of pp gives "
                f"{near[1]:.4g} us/B ({near[2]})",
            ),
        ],
    )


def _forgets_last_rank(p, n, root=0):
    """A wrong linear broadcast for the guide: the root sends to every rank but the last."""
    progs = [schedules.Program(r) for r in range(p)]
    for dst in range(p - 1):
        if dst != root:
            progs[root].send(dst, n)
            progs[dst].recv(root, n)
    return progs


RUBRIC = {
    "linear_bcast_check": Function(linear_cases, ("linear_bcast", "cost_linear_bcast")),
    "rank0_check": Function(rank0_cases, ("messages_from_rank0",)),
    "model_check": Function(model_cases, ("model",)),
    "errors_check": Function(errors_cases, ("errors", "worst", "results_df", "my_costs")),
    "calibrate_check": Function(platform_cases, ("my_platform", "pp")),
}

#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": (
        "4 to 5 hours for a typical MSc student, section by section below (the notebook's opening "
        "gives the same split); the notebook's own runs take 2-4 minutes on a 2-core machine"
    ),
    "sections": [
        ("1. Schedules, the event model, the linear broadcast and its cost", "60 to 75 min"),
        ("2. Measured diagrams: the reference allgathers, the library's broadcasts, a real run", "30 min"),
        ("3. Where overlap breaks the model (finding the model options by trial)", "45 min to 1 h"),
        ("4. The model's error per algorithm", "30 to 45 min"),
        ("5. Calibrating a platform to this machine", "30 min"),
        ("Written answers (four)", "45 min to 1 h"),
    ],
    "hidden": {
        "linear_bcast_check": (
            f"the schedule played at (p, root) = {', '.join(map(str, HIDDEN_BCAST))}; "
            "the cost's α and β terms"
        ),
        "rank0_check": "the library's three broadcasts traced again on SMPI (P = 8, 64 KiB)",
        "model_check": "SMPI traced again at "
        + ", ".join(f"{a} P = {p} {b} B" for a, p, b in HIDDEN_TRACES)
        + " (the threshold read either way: below 4096 B or up to 4095 B)",
        "errors_check": "one point of results_df simulated again; each MAPE recomputed from my_costs with "
        "the platform's core α and β (avg_us or maxrank_avg_us)",
        "calibrate_check": "the core link against fits of pp the grader makes (one to three segments; "
        "median, mean or slowest-rank times), credited only when pp holds every size of the notebook's "
        "ping-pong and the grader's own ping-pong agrees with it",
    },
    "quotes": {
        "alpha, beta of THIN's core link (us, us/B)": "(alpha, beta)",
        "rank 0's messages in the library's broadcasts (P = 8, 64 KiB)": "messages_from_rank0",
        "model options": "model",
        "MAPE per algorithm (%)": "dict(zip(errors.algorithm, errors.mape.round(1)))",
        "worst model": "worst",
        "this machine's ping-pong fit (us, us/B)": "(real_alpha, real_beta)",
    },
    "wrong": {
        "linear_bcast_check": [
            (
                "the root forgets the last rank, cost right",
                {
                    "linear_bcast": schedule_checks.schedules_data(_forgets_last_rank),
                    "cost_linear_bcast": (costs.p - 1) * (costs.alpha + costs.n * costs.beta),
                },
            ),
            (
                "right schedule, one α for all messages (the overlapping sends' cost)",
                {
                    "linear_bcast": InNotebook(
                        "__import__('mpilab.grade.checks.schedules', fromlist=['x'])"
                        ".schedules_data(linear_bcast)"
                    ),
                    "cost_linear_bcast": costs.alpha + (costs.p - 1) * costs.n * costs.beta,
                },
            ),
        ],
        "model_check": [
            ("4 kB read as 4000 B (eager below 4000 B)", {"model": dict(ports="shared", eager_bytes=4000)}),
            (
                "SimGrid's default eager limit (64 KiB), not the platform's",
                {"model": dict(ports="shared", eager_bytes=65536)},
            ),
            ("one port, nothing eager", {"model": dict(ports=1, eager_bytes=0)}),
        ],
        "rank0_check": [
            (
                "the root's children only (one message per algorithm)",
                {"messages_from_rank0": {"binomial": 3, "pipeline": 1, "scatter_allgather_ring": 3}},
            )
        ],
    },
}
