"""Checking a calibrated platform: simulate its ping-pong per mapping against the target."""
import pandas as pd

from mpilab.core.vocabulary import MAPPINGS
from mpilab.measure import pingpong
from mpilab.model import p2p
from mpilab.simulate.calibration import _first_segments


def check_calibration(platform, target, sizes="0:4M", segments=2, **run_opts):
    """Simulate the ping-pong on ``platform`` per mapping and compare with ``target``.

    Parameters
    ----------
    platform : str or Path
        Platform name or XML file (e.g. what :func:`calibrate` wrote).
    target : dict or pandas.DataFrame or path
        What the platform should reproduce (any input of :func:`calibrate`).
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
    want = _first_segments(target, segments)
    opts = dict(iters=5, warmup=1, iters_large=2, warmup_large=1)
    opts.update(run_opts)
    rows = []
    for m in MAPPINGS:
        if m not in want:
            continue
        df = pingpong.run("smpi", m, platform=platform, sizes=sizes, **opts)
        ic, sl = p2p.first_segment(p2p.fit(df, segments=segments))[m]
        t_ic, t_sl = want[m]
        rows.append(dict(mapping=m, target_intercept=t_ic, simulated_intercept=ic,
                         intercept_error_pct=100 * (ic - t_ic) / t_ic if t_ic else float("nan"),
                         target_slope=t_sl, simulated_slope=sl,
                         slope_error_pct=100 * (sl - t_sl) / t_sl))
    return pd.DataFrame(rows)
