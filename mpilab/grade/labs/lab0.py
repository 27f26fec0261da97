"""Lab 0's graded cells, as the notebook sees them: the answers each hands in, the visible checks."""

import math
import numbers

import pandas as pd

from mpilab.grade.cases import Case
from mpilab.grade.checks import hello, pxcell
from mpilab.grade.labs import Cell
from mpilab.grade.runner import Run

#: The hello runs of the notebook's check: real Open MPI with 1 to 4 ranks, and 8 ranks dealt
#: over the two nodes of simulated THIN. Each run checks both kinds of case (the ranks and the
#: size; the hosts); the grader adds other process counts.
HELLO_RUNS = tuple(Run("openmpi", p) for p in (1, 2, 3, 4)) + (Run("smpi", 8, "orfeo-thin", "node"),)
#: The grader runs the %%px answer cell itself on this many ranks (the notebook's 4 engines),
#: and on others.
PX_RUNS = (Run("openmpi", 4),)
VISIBLE_RUNS = HELLO_RUNS + PX_RUNS


def _number(name, value, unit, positive=False):
    ok = (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > 0 or not positive)
    )
    return Case(
        f"{name} is a {'positive ' if positive else ''}number ({unit})",
        ok,
        f"{name} = {value!r}: give a {'positive ' if positive else ''}number in {unit}",
    )


def fit_form_cases(alpha_us, beta_us_per_byte, bandwidth_GBps, pp):
    """The visible checks of the fit: three numbers, and the ping-pong table they come from.

    Whether they are the fit of ``pp`` is the grader's to check, after you hand in.
    """
    table_ok = isinstance(pp, pd.DataFrame) and {"bytes", "avg_us"} <= set(pp.columns) and len(pp) >= 2
    return [
        _number("alpha_us", alpha_us, "µs"),
        _number("beta_us_per_byte", beta_us_per_byte, "µs per byte", positive=True),
        _number("bandwidth_GBps", bandwidth_GBps, "GB/s", positive=True),
        Case(
            "pp is the ping-pong's table",
            table_ok,
            "pp should be the table pingpong.run returned, with columns bytes and avg_us",
        ),
    ]


CELLS = {
    "hello_correct": Cell((), lambda: hello.hello_cases("hello.c", HELLO_RUNS)),
    "px_allgather": Cell(
        ("engines",),
        pxcell.engine_cases,
        "After you hand in, the grader runs your %%px cell itself, on 4 ranks and on "
        "other numbers of ranks, with other values in send.",
    ),
    "pingpong_fit": Cell(
        ("alpha_us", "beta_us_per_byte", "bandwidth_GBps", "pp"),
        fit_form_cases,
        "The grader fits your ping-pong rows itself after you hand in and compares.",
    ),
}
