"""Lab 1's rubric: the plots, the segmented fits and the ranking, judged on the student's data.

Every graded cell hands in ``fixed`` (the simulated results at the student's FIXED_BYTES). The
grader first checks that the table is a whole design at one size and simulates one of its points
again (:mod:`mpilab_key.resimulate`); only then are the answers compared with what the key
computes from the same table:

* fits: per curve, four segments whose ranges hold every measured P, with an R² at least that of
  the best four-segment fit less 0.01, or of the report's own cuts at 12, 24 and 36
  (:func:`mpilab_key.fits.r2_needed`): breakpoints found in the data or taken from the
  hardware both count;
* ranking: per collective, the order of the algorithms' mean or median ``avg_us`` over the
  process counts every algorithm was measured at; two algorithms within 1 % of each other may
  come in either order.
"""

from mpilab.grade.cases import Case
from mpilab.grade.checks import Function, Verdict, missing, plots
from mpilab.grade.checks.fits import curves, piecewise_r2
from mpilab.grade.checks.tables import frame
from mpilab.grade.labs import lab1
from mpilab_key import InNotebook
from mpilab_key.fits import r2_needed
from mpilab_key.resimulate import spot_case

#: The notebook's simulated launcher: THIN, SimGrid running Open MPI's decision rules for default.
PLATFORM, CFG = "orfeo-thin", ("smpi/coll-selector:ompi",)
#: Points simulated again, first present first (P of the reduced and of the full design).
SPOT = (("bcast", "binomial", 16), ("reduce", "binomial", 16), ("bcast", "basic_linear", 8))
#: Two algorithms whose statistics differ by less than this may be ranked either way.
TIE = 0.01


def data_gate(fixed):
    """The failed cases that stop the grading of a cell built on ``fixed`` (empty: go on)."""
    bad = lab1.data_cases(fixed)
    if bad:
        return bad
    spot = spot_case(frame(fixed), "fixed", PLATFORM, CFG, SPOT)
    return [] if spot.passed else [spot]


class Panel(Verdict):
    """The bcast or reduce panel of ``fig``: presentation counts only on a plot of the data, and
    only once ``fixed`` is the student's simulation (:func:`data_gate`)."""

    needs = ("fig", "fixed")

    def __init__(self, axes, collective):
        self.axes, self.collective = axes, collective

    def cases(self, answers, ctx):
        bad = missing(answers, *self.needs)
        if bad:
            return [bad]
        gate = data_gate(answers["fixed"])
        if gate:
            return gate
        fixed = frame(answers["fixed"])
        return plots.latency_plot_cases(
            answers["fig"],
            fixed[fixed["collective"] == self.collective],
            x="nprocs",
            y="avg_us",
            log="y",
            axes=self.axes,
        )


def fit_cases(answers, ctx):
    fits, fixed = answers["fits"], answers["fixed"]
    gate = data_gate(fixed)
    if gate:
        return gate
    form = {c.name.split(" (R²")[0]: c for c in lab1.CELLS["fits_check"].visible(fits, fixed)}
    out = []
    for (coll, alg), (x, y) in curves(frame(fixed)).items():
        title = f"{coll} {alg}"
        if title not in form or not form[title].passed:
            out.append(form.get(title) or next(iter(form.values())))
            continue
        rows = frame(fits)[
            (frame(fits)["collective"].astype(str) == coll) & (frame(fits)["algorithm"].astype(str) == alg)
        ]
        r2, _ = piecewise_r2(rows, x, y)
        need, best, report = r2_needed(x, y)
        out.append(
            Case(
                title,
                r2 >= need - 1e-9,
                f"your segments give R² = {r2:.4f}; the best four segments give {best:.4f}"
                + (f", the report's cuts at 12, 24, 36 give {report:.4f}" if report == report else "")
                + f": choose the breakpoints where the curve bends (R² of at least {need:.4f})",
            )
        )
    return out


def statistics(fixed, coll):
    """``{convention: {algorithm: value}}``: the mean and the median over P of each algorithm's
    median ``avg_us``, over the process counts every algorithm of ``coll`` was measured at."""
    t = frame(fixed)
    wide = (
        t[t["collective"] == coll]
        .groupby(["nprocs", "algorithm"])["avg_us"]
        .median()
        .unstack("algorithm")
        .dropna()
    )
    return {"mean": wide.mean().to_dict(), "median": wide.median().to_dict()}


def order_ok(order, values):
    """Whether ``order`` is fastest first under ``values``, near-ties (:data:`TIE`) either way."""
    return all(values[a] <= values[b] * (1 + TIE) for i, a in enumerate(order) for b in order[i + 1 :])


def ranking_cases(answers, ctx):
    ranking, fixed = answers["ranking"], answers["fixed"]
    gate = data_gate(fixed)
    if gate:
        return gate
    form = lab1.ranking_form_cases(ranking, fixed)
    failed = [c for c in form if not c.passed]
    if failed and not any(c.name.startswith("ranking[") for c in form):
        return failed
    out = []
    for coll, case in zip(lab1.COLLECTIVES, form):
        if not case.passed:
            out.append(Case(f"{coll}: the ranking", False, case.message))
            continue
        stats = statistics(fixed, coll)
        order = [str(a) for a in ranking[coll]]
        ok = any(order_ok(order, v) for v in stats.values())
        means = ", ".join(f"{a} {m:.2f}" for a, m in sorted(stats["mean"].items(), key=lambda kv: kv[1]))
        out.append(
            Case(
                f"{coll}: the ranking",
                ok,
                f"your ranking is {order}; the mean avg_us over the common P in your table (us): {means}",
            )
        )
    return out


RUBRIC = {
    "plot_bcast": Panel(0, "bcast"),
    "plot_reduce": Panel(1, "reduce"),
    "fits_check": Function(fit_cases, ("fits", "fixed")),
    "ranking_check": Function(ranking_cases, ("ranking", "fixed")),
}


#: The instructor's guide (mpilab_key.guide): times, the numbers the rubric quotes, wrong answers.
GUIDE = {
    "time": (
        "3.5 to 4.5 hours for a typical MSc student, section by section below (the notebook's "
        "opening gives the same split); the notebook's runs took 8 minutes on a busy 2-core machine"
    ),
    "sections": [
        ("1-3. Forcing an algorithm, the report's design, the SLURM job (reading, one run)", "45 min to 1 h"),
        ("4. The sweeps: two loops (the whole notebook's runs: 8 min on a busy 2-core machine)", "30 min"),
        ("5-7. Latency against P, a fixed size, the plot", "30 min"),
        ("8. Segmented fits (choosing breakpoints, one fit per curve)", "45 min to 1 h"),
        ("9. The point-to-point model and the α-β cost of two broadcasts", "20 to 30 min"),
        ("10. The ranking", "15 min"),
        ("11. What your numbers say: the two written answers (comparing with the report)", "30 to 45 min"),
    ],
    "hidden": {
        gid: f"one point of fixed simulated again ({'; '.join(f'{c} {a} at P = {p}' for c, a, p in SPOT)}); "
        + what
        for gid, what in {
            "plot_bcast": "the plot read as data against fixed (every algorithm's line, its values)",
            "plot_reduce": "the plot read as data against fixed (every algorithm's line, its values)",
            "fits_check": "each curve's R² against the best four-segment fit (at least three P per "
            "segment) and the report's cuts at 12, 24, 36",
            "ranking_check": "the order by the mean and by the median over the common P, near-ties "
            "within 1 % either way",
        }.items()
    },
    "quotes": {
        "FIXED_BYTES of the solution": "FIXED_BYTES",
        "bcast ranking at FIXED_BYTES (simulated THIN, fastest first)": "ranking['bcast']",
        "reduce ranking at FIXED_BYTES": "ranking['reduce']",
        "simulated points below one message on the core link (section 9)": "len(too_fast)",
        "simulated ping-pong fit, core/socket/node (section 9; the p2p rubric)": (
            "p2p_fit[p2p_fit.flavour == 'smpi'][['mapping', 'segment', 'intercept', 'slope']]"
            ".round(6).to_dict('records')"
        ),
    },
    "wrong": {
        "fits_check": [
            (
                "flat lines (every slope 0)",
                {"fits": InNotebook("fits.assign(slope=0.0)"), "fixed": InNotebook("fixed")},
            ),
            (
                "three segments per curve",
                {"fits": InNotebook("fits[fits.segment < 4]"), "fixed": InNotebook("fixed")},
            ),
        ],
        "ranking_check": [
            (
                "slowest first",
                {
                    "ranking": InNotebook("{c: v[::-1] for c, v in ranking.items()}"),
                    "fixed": InNotebook("fixed"),
                },
            )
        ],
        "plot_bcast": [
            (
                "linear latency axis",
                {
                    "fig": InNotebook("(fig.axes[0].set_yscale('linear'), fig)[1]"),
                    "fixed": InNotebook("fixed"),
                },
            )
        ],
    },
}
