"""Checks of a latency plot, read as data (:func:`mpilab.grade.answers.encode_figure`).

One case per thing a reader needs: each axis's scale, each axis's label and its unit, a
legend, and one line per algorithm that is the student's own measurements. The axes and labels
count only when at least one line shows the data: a figure's description is computed in the
student's kernel, so an empty figure whose axes claim to be logarithmic earns nothing.
"""

import re

import numpy as np

from mpilab.core.errors import UsageError
from mpilab.grade.answers import encode_figure
from mpilab.grade.cases import Case
from mpilab.grade.checks import Verdict, missing


def figure_data(fig):
    """Figure data from a live figure or axes, or from a decoded answer (returned as is)."""
    if isinstance(fig, dict) and "axes" in fig:
        return fig
    if hasattr(fig, "savefig") or hasattr(fig, "get_lines"):
        return {"axes": encode_figure(fig)["axes"]}
    raise UsageError(f"expected a matplotlib figure or axes, got {type(fig).__name__}")


#: Spellings of the unit of a plotted column, as whole words anywhere in its axis label:
#: "latency (µs)", "time [us]", "latency in microseconds", "size, bytes" all say the unit.
UNITS = {
    "us": r"µs|μs|us|usec|microseconds?",
    "bytes": r"B|bytes?",
}


def column_unit(column):
    """The unit of a results column (``"us"`` for times ``*_us``, ``"bytes"``), or None (a count)."""
    if str(column).endswith("_us"):
        return "us"
    if column in ("bytes", "segsize"):
        return "bytes"
    return None


def has_unit(label, column):
    """Whether an axis label names the unit of ``column`` (any wording, :data:`UNITS`)."""
    unit = column_unit(column)
    return unit is None or re.search(rf"(?<![A-Za-z])(?:{UNITS[unit]})(?![A-Za-z])", label) is not None


def _words(text):
    return " ".join(re.sub(r"[^0-9a-z]+", " ", str(text).lower()).split())


def label_names(label, name, names):
    """Whether a line label refers to algorithm ``name``: the name itself, or a label that
    contains it as whole words ("basic_linear (simulated)", "pipeline, 8 KiB segments",
    "basic linear"), unless a longer name of ``names`` fits the label better (a label
    "scatter_allgather_ring" is that algorithm's, not ``scatter_allgather``'s)."""
    if str(label) == str(name):
        return True
    words = f" {_words(label)} "
    found = [n for n in names if f" {_words(n)} " in words]
    return bool(found) and max(found, key=lambda n: len(_words(n))) == name


def latency_plot_cases(fig, table, x="bytes", y="avg_us", by="algorithm", log="xy", axes=0):
    """Check a latency plot against the table it should show.

    Parameters
    ----------
    fig : matplotlib Figure or Axes, or figure data
    table : pandas.DataFrame
        The student's own results (columns ``x``, ``y`` and ``by``).
    x, y, by : str
        Columns plotted on x, on y, and one line per value of ``by``. A count (``nprocs``)
        needs a label but no unit.
    log : str
        The axes that must be logarithmic: ``"xy"``, ``"x"``, ``"y"`` or ``""``.
    axes : int
        Which axes of the figure.

    Returns
    -------
    list of Case
    """
    if set(log) - {"x", "y"}:
        raise UsageError(f"bad log {log!r}; valid: 'xy', 'x', 'y' or ''")
    try:
        data = figure_data(fig)
    except UsageError as exc:
        return [Case("the figure", False, str(exc))]
    if len(data["axes"]) <= axes:
        return [
            Case(
                "the figure", False, f"the figure has {len(data['axes'])} axes, expected at least {axes + 1}"
            )
        ]
    ax = data["axes"][axes]
    missing_cols = [c for c in (x, y, by) if c not in getattr(table, "columns", ())]
    if missing_cols:
        return [Case("the table", False, f"the table has no column {missing_cols[0]!r}")]
    out = []
    for axis in ("x", "y"):
        scale = ax[f"{axis}scale"]
        want = "log" if axis in log else None
        if want:
            out.append(
                Case(
                    f"the {axis} axis is logarithmic",
                    scale == "log",
                    f"the {axis} axis is {scale}: use a log scale (ax.set_{axis}scale('log'))",
                )
            )
    for axis, col in (("x", x), ("y", y)):
        label = (ax[f"{axis}label"] or "").strip()
        ok = bool(label) and has_unit(label, col)
        why = (
            f"the {axis} axis has no label"
            if not label
            else f"the {axis} label {label!r} does not say its unit ({column_unit(col)}), e.g. "
            f"'{'latency (µs)' if column_unit(col) == 'us' else 'message size (bytes)'}'"
        )
        out.append(
            Case(f"the {axis} axis is labelled" + ("" if col == "nprocs" else " with its unit"), ok, why)
        )
    out.append(Case("a legend", ax["legend"] is not None, "there is no legend (ax.legend())"))
    lines = [ln for ln in ax["lines"] if not str(ln["label"]).startswith("_")]
    names = sorted(map(str, table[by].unique()))
    for name in names:
        title = f"the line {name!r}"
        mine = [ln for ln in lines if label_names(ln["label"], name, names)]
        if not mine:
            labels = ", ".join(sorted(str(ln["label"]) for ln in lines)) or "none"
            out.append(Case(title, False, f"no line's label names {name!r} (lines: {labels})"))
            continue
        sub = table[table[by].astype(str) == name].groupby(x)[y].mean().sort_index()

        def shows(line, sub=sub):
            xs = np.asarray(line["x"], dtype=float)
            ys = np.asarray(line["y"], dtype=float)
            order = np.argsort(xs)
            return (
                len(xs) == len(sub)
                and np.allclose(xs[order], sub.index.to_numpy(float))
                and np.allclose(ys[order], sub.to_numpy(float), rtol=1e-6)
            )

        ok = any(shows(ln) for ln in mine)
        out.append(Case(title, ok, f"it does not show your table's {y} against {x} for {name}"))
    if not any(c.passed for c in out if c.name.startswith("the line ")):
        # axes and labels count only on a plot of the data: an empty figure earns nothing
        return [
            Case(
                "the plot shows your data",
                False,
                f"no line of the plot is your table's {y} "
                f"against {x} for one {by}; the axes and labels count once the lines are there",
            )
        ]
    return out


class LatencyPlotVerdict(Verdict):
    """The grader's verdict on a latency plot handed in with its table."""

    def __init__(self, figure, table, **options):
        self.figure, self.table = figure, table
        self.needs = (figure, table)
        self.options = options

    def cases(self, answers, ctx):
        bad = missing(answers, self.figure, self.table)
        if bad:
            return [bad]
        return latency_plot_cases(answers[self.figure], answers[self.table], **self.options)
