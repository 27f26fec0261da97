"""Lab 4's graded cells, as the notebook sees them: the answers each hands in, the visible checks.

What only the grader knows stays out: the linear broadcast's cost, the other process counts and
roots its schedule is played at, the message counts of the library's broadcasts, the SMPI runs
the model options must also reproduce, the model errors recomputed from the student's own cost
expressions, and the fits of the ping-pong the calibrated platform must match.
"""

import os

import numpy as np
import sympy

from mpilab.core.errors import UsageError
from mpilab.grade.cases import Case
from mpilab.grade.checks import costs as cost_checks
from mpilab.grade.checks import schedules as schedule_checks
from mpilab.grade.checks.tables import dict_case, frame, slim, table_case
from mpilab.grade.labs import Cell
from mpilab.model import costs, timeline
from mpilab.simulate import platforms, routes

#: The platform of the lab's simulated runs.
PLATFORM = "orfeo-thin"
#: (p, root) the notebook's check plays the linear broadcast at: powers of two and not, and a
#: root other than 0. The grader adds other p and roots.
VISIBLE_BCAST = ((2, 0), (3, 0), (5, 0), (8, 0), (5, 2))
#: The library broadcasts whose measured diagrams section 2 draws (P = 8, 64 KiB).
LIBRARY_BCASTS = ("binomial", "pipeline", "scatter_allgather_ring")
LIBRARY_P, LIBRARY_BYTES = 8, 65536
#: The SMPI runs of section 3 (algorithm, P, bytes), traced in the notebook.
VISIBLE_TRACES = tuple((a, 8, b) for a in ("gather_bcast", "pairwise") for b in (1024, 65536))
#: Options of :func:`mpilab.model.timeline.predict` the model answer may set.
MODEL_OPTIONS = ("ports", "eager_bytes")
#: The columns of a results table the grader reads (the rest stays in the notebook).
KEPT = (
    "collective",
    "algorithm",
    "flavour",
    "platform",
    "mapping",
    "nprocs",
    "bytes",
    "repetition",
    "avg_us",
    "maxrank_avg_us",
    "maxrank_median_us",
)
#: The allgathers of section 4's sweep.
ERROR_ALGORITHMS = ("gather_bcast", "pairwise", "lib:bruck")


def to_expression(value):
    """A cost answer as a sympy expression (text is parsed here, in the kernel); else as given."""
    try:
        return cost_checks.to_expression(value)
    except ValueError:
        return value if isinstance(value, (str, sympy.Basic)) else None


# ---- the linear broadcast ---------------------------------------------------------------------


def linear_bcast_cases(build, cost):
    """The visible cases: the schedule at :data:`VISIBLE_BCAST`, each timed against the student's
    own cost ``cost`` (their formula and their schedule must agree), and the cost's form."""
    form = cost_checks.form_cases(cost, name="cost_linear_bcast")
    expr = None
    if all(c.passed for c in form):
        expr = cost_checks.to_expression(cost)
    data = schedule_checks.read_data(
        schedule_checks.schedules_data(build, max_p=max(p for p, _ in VISIBLE_BCAST))
    )
    out = []
    for p, root in VISIBLE_BCAST:
        want = None
        if expr is not None:
            want = float(
                costs.evaluate_expression(
                    expr, p, schedule_checks.NBYTES, schedule_checks.ALPHA, schedule_checks.BETA
                )
            )
        out.append(
            schedule_checks.bcast_case(
                data.get(f"{p},{root}", data.get("error", "error: no schedule")),
                p,
                root,
                want,
                what="your cost_linear_bcast's",
            )
        )
    return out + form


def _linear_prepare(build, cost):
    return schedule_checks.schedules_data(build), to_expression(cost)


# ---- messages of rank 0 -----------------------------------------------------------------------


def rank0_cases(counts):
    bad = dict_case(counts, "messages_from_rank0", LIBRARY_BCASTS, "int")
    return [bad] if bad else [Case("messages_from_rank0 has a count for each broadcast", True)]


# ---- the model options ------------------------------------------------------------------------


def model_form_case(model):
    """None when ``model`` is a dict of valid :func:`mpilab.model.timeline.predict` options."""
    bad = dict_case(model, "model")
    if bad:
        return bad
    extra = sorted(set(map(str, model)) - set(MODEL_OPTIONS))
    if extra:
        return Case(
            "model is a dict",
            False,
            f"model has the key(s) {', '.join(extra)}; valid: {', '.join(MODEL_OPTIONS)}",
        )
    try:
        timeline.predict("pairwise", 2, 1, 1.0, 1.0, **model)
    except (UsageError, TypeError) as exc:
        return Case("model is a dict", False, str(exc))
    return None


def model_match_case(model, measured, hidden=False, rtol=0.01):
    """One case: the event model with ``model`` and the platform's routes ends every rank of the
    measured SMPI timeline within ``rtol`` (and 0.01 µs)."""
    meta = measured.meta
    title = f"{meta['algorithm']}, P = {measured.nprocs}, {meta['bytes']} B"
    pair = routes.platform_model(meta["platform"], measured.nprocs, meta.get("mapping", "core"))
    pred = timeline.predict(
        meta["algorithm"], measured.nprocs, meta["bytes"], **pair, start_us=measured.rank_start_us(), **model
    )
    got, want = pred.rank_end_us().to_numpy(), measured.rank_end_us().to_numpy()
    bad = np.flatnonzero(np.abs(got - want) > rtol * np.abs(want) + 0.01)
    if len(bad):
        r = int(bad[np.argmax(np.abs(got - want)[bad])])
        return Case(
            title,
            False,
            f"the model ends rank {r} at {got[r]:.3f} us, SMPI at {want[r]:.3f} us",
            hidden=hidden,
        )
    return Case(title, True, hidden=hidden)


def model_cases(model, traces):
    bad = model_form_case(model)
    if bad:
        return [bad]
    runs = [tl for tl in (traces or []) if getattr(tl, "meta", {}).get("flavour") == "smpi"]
    if not runs:
        return [Case("the SMPI runs", False, "no SMPI traces to compare with: run the cells above first")]
    return [model_match_case(model, tl) for tl in runs]


def _model_prepare(model, traces):
    described = [
        dict(algorithm=tl.meta.get("algorithm"), nprocs=tl.nprocs, bytes=tl.meta.get("bytes"))
        for tl in (traces if isinstance(traces, (list, tuple)) else [])
        if hasattr(tl, "meta") and hasattr(tl, "nprocs")
    ]
    return (model if isinstance(model, dict) else None), described


# ---- the model errors -------------------------------------------------------------------------


def errors_form_cases(errors, worst, results_df, my_costs):
    """The visible checks: ``errors`` has one row per algorithm of ``results_df`` with its
    ``mape``, ``my_costs`` an expression for each, ``worst`` the largest error of ``errors``.
    Whether the errors are right the grader decides (it recomputes them from your costs)."""
    bad = (
        table_case(errors, "errors", ("algorithm", "mape"))
        or table_case(results_df, "results_df", ("algorithm", "nprocs", "bytes", "avg_us"))
        or dict_case(my_costs, "my_costs")
    )
    if bad:
        return [bad]
    errors, results_df = frame(errors), frame(results_df)
    want = sorted(set(results_df["algorithm"].astype(str)))
    out = [
        Case(
            "errors has one row per algorithm of results_df",
            sorted(errors["algorithm"].astype(str)) == want,
            f"errors has {sorted(errors['algorithm'].astype(str))}, results_df {want}",
        )
    ]
    nocost = [a for a in want if a not in my_costs or to_expression(my_costs[a]) is None]
    out.append(
        Case(
            "my_costs has an expression for each algorithm",
            not nocost,
            f"no readable cost for {', '.join(nocost)}",
        )
    )
    ok = (
        worst is not None
        and not errors.empty
        and str(worst) == str(errors.loc[errors["mape"].astype(float).idxmax(), "algorithm"])
    )
    out.append(
        Case(
            "worst is the algorithm with the largest mape in errors",
            ok,
            f"worst = {worst!r}; errors' largest mape is "
            f"{errors.loc[errors['mape'].astype(float).idxmax(), 'algorithm'] if len(errors) else 'none'}",
        )
    )
    return out


def _errors_prepare(errors, worst, results_df, my_costs):
    costs_in = {str(k): to_expression(v) for k, v in my_costs.items()} if isinstance(my_costs, dict) else None
    return errors, worst, slim(results_df, KEPT), costs_in


# ---- the calibrated platform ------------------------------------------------------------------


def core_link(path):
    """(α µs, β µs/B) between two cores of one socket of a platform file.

    Raises
    ------
    UsageError
        A file that is not a platform the kit can read (the message says why).
    """
    hosts = platforms.placement(str(path), 2, "core")
    return routes.route_cost(str(path), hosts[0], hosts[1])


def platform_cases(my_platform, pp):
    """The visible checks: ``my_platform`` is a platform file next to the notebook, of THIN's
    shape, and ``pp`` the ping-pong rows. Whether its core link is your ping-pong's the grader
    decides, from fits of ``pp`` it makes itself."""
    bad = table_case(pp, "pp", ("bytes", "mapping"))
    if bad:
        return [bad]
    if not isinstance(my_platform, (str, os.PathLike)):
        return [
            Case(
                "my_platform is a file",
                False,
                f"my_platform should be the platform's path, got {type(my_platform).__name__}",
            )
        ]
    name = os.path.basename(str(my_platform))
    ok = os.path.isfile(name) and os.path.samefile(name, str(my_platform))
    out = [
        Case(
            "my_platform is next to the notebook",
            ok,
            f"write the platform next to this notebook (path={name!r}): the grader reads it there",
        )
    ]
    try:
        a, b = core_link(my_platform)
    except (UsageError, OSError, ValueError) as exc:
        return out + [Case("my_platform is a platform of THIN's shape", False, str(exc))]
    out.append(
        Case(
            "its core link has a latency and a bandwidth",
            a > 0 and b > 0,
            f"latency {a:g} us, time per byte {b:g} us/B",
        )
    )
    return out


def _platform_prepare(my_platform, pp):
    return (str(my_platform) if isinstance(my_platform, (str, os.PathLike)) else None), slim(pp, KEPT)


_NOTE = "The grader checks the values after you hand in."

CELLS = {
    "linear_bcast_check": Cell(
        ("linear_bcast", "cost_linear_bcast"),
        linear_bcast_cases,
        "The grader plays your schedule at other p and roots and checks "
        "its time, and your cost, against the linear broadcast's.",
        _linear_prepare,
    ),
    "rank0_check": Cell(("messages_from_rank0",), rank0_cases, _NOTE),
    "model_check": Cell(
        ("model", "traces"),
        model_cases,
        "The grader runs these SMPI runs again, and more (other process counts and "
        "sizes of the same two algorithms).",
        _model_prepare,
    ),
    "errors_check": Cell(
        ("errors", "worst", "results_df", "my_costs"),
        errors_form_cases,
        "The grader recomputes each mape from your costs, results_df, alpha and beta.",
        _errors_prepare,
    ),
    "calibrate_check": Cell(
        ("my_platform", "pp"),
        platform_cases,
        "The grader compares the platform's core link with fits of your ping-pong pp.",
        _platform_prepare,
    ),
}
