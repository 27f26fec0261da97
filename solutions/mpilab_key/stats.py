"""The answer key's statistics of lab 5: the correlation of the probe with the collective.

Lab 5 asks students for Pearson's r between the probe and the broadcast per algorithm and size;
:func:`correlate` computes that table, so it is on the instructor's side (the rubric recomputes
the expected r with it from the rows a student hands in).
"""

import pandas as pd
from scipy import stats as _st

from mpilab.core.errors import UsageError


def correlate(df, x="probe_us", y="avg_us", by=("collective", "algorithm", "bytes")):
    """Correlation between two columns over the rows of each group, e.g. probe ping-pong and
    collective latency across runs under different load (003_25a9e71ac18c5178.txt).

    Parameters
    ----------
    df : pandas.DataFrame
        Results rows; rows where ``x`` or ``y`` is empty are left out.
    x, y : str
        Columns to correlate (default: ``probe_us``, stored by ``collbench --probe``, and
        ``avg_us``).
    by : sequence of str
        One correlation per group of these columns (those present in ``df``; none: one in all).

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, ``n``, ``pearson_r``, ``pearson_p``, ``spearman_rho``
        (NaN for groups with fewer than 3 rows or a constant column).
    """
    for col in (x, y):
        if col not in df.columns:
            raise UsageError(f"results table has no column {col!r}; columns: {', '.join(df.columns)}")
    d = df.assign(_x=pd.to_numeric(df[x], errors="coerce"), _y=pd.to_numeric(df[y], errors="coerce")).dropna(
        subset=["_x", "_y"]
    )
    if d.empty:
        raise UsageError(f"no row has both {x} and {y} (for probe_us, measure with --probe)")
    keys = [c for c in by if c in d.columns]
    out = []
    for key, g in d.groupby(keys, sort=True) if keys else [((), d)]:
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row["n"] = len(g)
        r = pr = rho = float("nan")
        if len(g) >= 3 and g["_x"].nunique() > 1 and g["_y"].nunique() > 1:
            r, pr = (float(v) for v in _st.pearsonr(g["_x"], g["_y"]))
            rho = float(_st.spearmanr(g["_x"], g["_y"])[0])
        row.update(pearson_r=r, pearson_p=pr, spearman_rho=rho)
        out.append(row)
    return pd.DataFrame(out)
