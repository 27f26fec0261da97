"""Predict, then run: a student's own cost expressions predict the winner before the measurement.

:func:`predict` evaluates the student's expressions (their answers, not the kit's: the kit has
no costs on the student's side) on the grid a lab will measure and records the prediction with
the time it was made, in ``prediction-<name>.json`` next to the notebook, before any measurement
of that grid exists. :func:`compare` then puts the measurement next to it: the winner each
predicted and measured at every point, the predicted and measured times and the error, and the
crossover sizes (where the winner changes) of both. Labs grade making the prediction and
reflecting on where it missed, not its accuracy.
"""

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mpilab.core.errors import UsageError
from mpilab.model import costs


@dataclass
class Prediction:
    """A recorded prediction: when, with which α and β, and the predicted table."""

    name: str
    made_at: str
    alpha_us: float
    beta_us_per_byte: float
    table: pd.DataFrame = field(repr=False)

    @property
    def winners(self):
        """``nprocs``, ``bytes``, ``winner`` (the algorithm with the smallest predicted time)."""
        t = self.table
        idx = t.groupby(["nprocs", "bytes"])["predicted_us"].idxmin()
        return (
            t.loc[idx, ["nprocs", "bytes", "algorithm"]]
            .rename(columns={"algorithm": "winner"})
            .reset_index(drop=True)
        )

    def crossovers(self):
        """Per P, the sizes where the predicted winner changes: ``nprocs``, ``bytes``, ``from``, ``to``."""
        return _crossovers(self.winners)


def _value(expr, pv, nv, alpha, beta, segment):
    try:
        v = float(
            expr.subs({costs.p: pv, costs.n: nv, costs.alpha: alpha, costs.beta: beta, costs.s: segment})
        )
    except (TypeError, ValueError):
        return math.nan
    return v


def predicted_rows(expressions, nprocs, sizes, alpha_us, beta_us_per_byte, segment=8192):
    """The expressions evaluated on the grid: ``({algorithm: expression}, rows)``, one row
    (``algorithm``, ``nprocs``, ``bytes``, ``predicted_us``) per algorithm and point. The grader
    recomputes a prediction with it from the student's own cost answers.

    Raises
    ------
    UsageError
        An expression that is missing or not allowed (:func:`mpilab.model.costs.expression`), or
        an empty grid.
    """
    if not expressions:
        raise UsageError("give at least one cost expression to predict with, e.g. {'ring': cost_ring}")
    if not list(nprocs) or not list(sizes):
        raise UsageError("the grid is empty: give process counts and sizes")
    parsed = {}
    for algo, e in expressions.items():
        if e is None or e is Ellipsis:
            raise UsageError(f"no expression for {algo!r} yet: give its cost first")
        parsed[algo] = costs.expression(e)
    rows = [
        dict(
            algorithm=a,
            nprocs=int(pv),
            bytes=int(nv),
            predicted_us=_value(e, pv, nv, alpha_us, beta_us_per_byte, segment),
        )
        for a, e in parsed.items()
        for pv in nprocs
        for nv in sizes
    ]
    return parsed, rows


def predict(name, expressions, nprocs, sizes, alpha_us, beta_us_per_byte, segment=8192, directory="."):
    """Evaluate one's own cost expressions on a grid and record the prediction with its time.

    Parameters
    ----------
    name : str
        What is predicted (e.g. ``"lab2-thin"``); the file is ``prediction-<name>.json``.
    expressions : dict
        Algorithm name -> sympy expression or text in ``p``, ``n``, ``alpha``, ``beta`` (``s``).
    nprocs, sizes : sequence of int
        The grid: process counts and bytes (per rank for allgather).
    alpha_us, beta_us_per_byte : float
        The α and β the prediction uses.
    directory : path
        Where the record is written.

    Returns
    -------
    Prediction

    Raises
    ------
    UsageError
        An expression that is missing or not in the allowed symbols, or an empty grid.
    """
    parsed, rows = predicted_rows(expressions, nprocs, sizes, alpha_us, beta_us_per_byte, segment)
    made = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    pred = Prediction(name, made, float(alpha_us), float(beta_us_per_byte), pd.DataFrame(rows))
    record = {
        "name": name,
        "made_at": made,
        "alpha_us": alpha_us,
        "beta_us_per_byte": beta_us_per_byte,
        "expressions": {a: str(e) for a, e in parsed.items()},
        "rows": rows,
    }
    Path(directory, f"prediction-{name}.json").write_text(json.dumps(record, indent=1, default=float))
    return pred


def _crossovers(winners):
    out = []
    for pv, g in winners.sort_values(["nprocs", "bytes"]).groupby("nprocs"):
        prev = None
        for r in g.itertuples():
            if prev is not None and r.winner != prev:
                out.append(dict(nprocs=int(pv), bytes=int(r.bytes), **{"from": prev, "to": r.winner}))
            prev = r.winner
    return pd.DataFrame(out, columns=["nprocs", "bytes", "from", "to"])


def compare(prediction, measured, value="maxrank_avg_us"):
    """The measurement next to the prediction, point by point.

    Parameters
    ----------
    prediction : Prediction
    measured : pandas.DataFrame
        Rows with ``algorithm``, ``nprocs``, ``bytes`` and ``value`` (other algorithms, such as
        the library's, are kept as measured-only).

    Returns
    -------
    pandas.DataFrame
        Per (nprocs, bytes): ``predicted_winner``, ``measured_winner`` (among the predicted
        algorithms), ``agree``, and per algorithm ``predicted_us``, ``measured_us``,
        ``error_pct``; ``attrs["crossovers"]`` holds both sets of crossovers.
    """
    if value not in measured.columns:
        raise UsageError(f"the measurement has no column {value!r}; columns: {', '.join(measured.columns)}")
    m = measured.groupby(["algorithm", "nprocs", "bytes"], as_index=False)[value].median()
    both = prediction.table.merge(
        m.rename(columns={value: "measured_us"}), on=["algorithm", "nprocs", "bytes"], how="inner"
    )
    if both.empty:
        raise UsageError("the measurement has no point of the prediction's grid and algorithms")
    both["error_pct"] = 100 * (both["predicted_us"] - both["measured_us"]) / both["measured_us"]
    pw = both.loc[
        both.groupby(["nprocs", "bytes"])["predicted_us"].idxmin(), ["nprocs", "bytes", "algorithm"]
    ]
    mw = both.loc[both.groupby(["nprocs", "bytes"])["measured_us"].idxmin(), ["nprocs", "bytes", "algorithm"]]
    w = pw.rename(columns={"algorithm": "predicted_winner"}).merge(
        mw.rename(columns={"algorithm": "measured_winner"}), on=["nprocs", "bytes"]
    )
    w["agree"] = w["predicted_winner"] == w["measured_winner"]
    wide = both.pivot_table(
        index=["nprocs", "bytes"], columns="algorithm", values=["predicted_us", "measured_us", "error_pct"]
    )
    wide.columns = [f"{alg} {what}" for what, alg in wide.columns]
    out = (
        w.merge(wide.reset_index(), on=["nprocs", "bytes"])
        .sort_values(["nprocs", "bytes"])
        .reset_index(drop=True)
    )
    out.attrs["crossovers"] = {
        "predicted": prediction.crossovers(),
        "measured": _crossovers(mw.rename(columns={"algorithm": "winner"})),
    }
    out.attrs["agreement"] = float(np.mean(w["agree"])) if len(w) else math.nan
    return out
