"""Published numbers the labs compare against: the ORFEO THIN report (000_38563ac10c2a463a.txt).

The report fitted segmented linear models and printed them as tables, which
``mpilab/data/reference/orfeo_thin_report.csv`` holds as typed in:

``bcast``, ``reduce``
    latency (µs) of Open MPI's basic_linear, chain and pipeline at 1024 bytes against the
    number of processes P on two THIN nodes: ``intercept + slope * P`` for P below ``upper``
    (12, 24, 36, 48: socket, node and two-node boundaries);
``pingpong``
    point-to-point latency (µs) against message size in bytes, per mapping (core, socket,
    node), below ``upper`` bytes.

The last segment of each table is read as holding up to and including its ``upper`` (the report
measured P = 48 and 4 MiB while writing "< 48" and "< 4194304").

Examples
--------
>>> from mpilab.studies import reference
>>> round(float(reference.predict("bcast", "chain", 16)), 2)
72.54
>>> reference.ranking("bcast")["algorithm"].tolist()
['chain', 'basic_linear', 'pipeline']
"""

import importlib.resources

import numpy as np
import pandas as pd

from mpilab.core.errors import one_of

TABLES = ("bcast", "reduce", "pingpong")
#: Message size of the report's bcast and reduce tables (bytes).
REPORT_BYTES = 1024
#: Process counts of the report's design (1..48 by 2 in the text; P = 1 has no collective).
REPORT_NPROCS = tuple(range(2, 49, 2))


def orfeo_report(table):
    """One of the report's segmented tables.

    Parameters
    ----------
    table : {'bcast', 'reduce', 'pingpong'}

    Returns
    -------
    pandas.DataFrame
        ``algorithm`` (or ``mapping`` for pingpong), ``segment`` (1, 2, ...), ``lower``
        (inclusive), ``upper`` (exclusive, except the last segment), ``intercept``, ``slope``.
    """
    if table not in TABLES:
        raise one_of("report table", table, TABLES)
    path = importlib.resources.files("mpilab") / "data" / "reference" / "orfeo_thin_report.csv"
    with importlib.resources.as_file(path) as p:
        df = pd.read_csv(p, comment="#")
    df = df[df["table"] == table].drop(columns="table").reset_index(drop=True)
    name = "mapping" if table == "pingpong" else "algorithm"
    df = df.rename(columns={"name": name})
    df.insert(1, "segment", df.groupby(name).cumcount() + 1)
    df.insert(2, "lower", df.groupby(name)["upper"].shift(1).fillna(0).astype(int))
    return df[[name, "segment", "lower", "upper", "intercept", "slope"]]


def predict(table, name, x):
    """The report's model value at ``x`` (P for bcast/reduce, bytes for pingpong).

    Parameters
    ----------
    table : {'bcast', 'reduce', 'pingpong'}
    name : str
        Algorithm (bcast, reduce) or mapping (pingpong).
    x : float or array_like

    Returns
    -------
    numpy.ndarray or float
        Latency in µs (NaN outside the report's range).
    """
    t = orfeo_report(table)
    col = t.columns[0]
    if name not in set(t[col]):
        raise one_of(f"{table} {col} of the report", name, sorted(set(t[col])))
    t = t[t[col] == name]
    xs = np.asarray(x, dtype=float)
    out = np.full(xs.shape, np.nan)
    last = len(t) - 1
    for i, (_, seg) in enumerate(t.iterrows()):
        inside = (xs >= seg["lower"]) & ((xs < seg["upper"]) | ((i == last) & (xs == seg["upper"])))
        out[inside] = seg["intercept"] + seg["slope"] * xs[inside]
    return out if out.ndim else float(out)


def ranking(collective, nprocs=REPORT_NPROCS):
    """The report's algorithms ranked at 1024 bytes by their mean modelled latency over ``nprocs``.

    Returns
    -------
    pandas.DataFrame
        ``algorithm``, ``mean_us``, ``rank`` (1 = fastest).
    """
    if collective not in ("bcast", "reduce"):
        raise one_of("collective of the report", collective, ("bcast", "reduce"))
    algs = orfeo_report(collective)["algorithm"].unique()
    rows = [dict(algorithm=a, mean_us=float(np.nanmean(predict(collective, a, list(nprocs))))) for a in algs]
    df = pd.DataFrame(rows).sort_values("mean_us").reset_index(drop=True)
    df["rank"] = np.arange(1, len(df) + 1)
    return df


# ---- the other seeds' numbers, each in a data file that names its source -------------------

#: The seeds' reference files under ``mpilab/data/reference``, each opening with ``# source:``
#: lines naming the seed file and the table or sentence the numbers come from.
SEED_FILES = {
    "000": "orfeo_thin_report.csv",
    "001-figures": "seed001_figures.csv",
    "001-measured": "seed001_measured.csv",
    "002": "seed002_allgather.csv",
    "003": "seed003_selection.csv",
    "004": "seed004_bunyip.csv",
}


def seed_table(key):
    """One seed's reference numbers (:data:`SEED_FILES`) as a DataFrame."""
    if key not in SEED_FILES:
        raise one_of("seed table", key, sorted(SEED_FILES))
    path = importlib.resources.files("mpilab") / "data" / "reference" / SEED_FILES[key]
    with importlib.resources.as_file(path) as p:
        return pd.read_csv(p, comment="#")


def seed_source(key):
    """The ``# source:`` lines of a seed's reference file, as one paragraph."""
    if key not in SEED_FILES:
        raise one_of("seed table", key, sorted(SEED_FILES))
    path = importlib.resources.files("mpilab") / "data" / "reference" / SEED_FILES[key]
    lines = [ln[1:].strip() for ln in path.read_text().splitlines() if ln.startswith("#")]
    return " ".join(lines).removeprefix("source: ")


def allgather_002(algorithm, nprocs, nbytes):
    """Seed 002's measured allgather time in µs (``gather_bcast`` or ``pairwise``)."""
    t = seed_table("002")
    hit = t[(t["algorithm"] == algorithm) & (t["nprocs"] == nprocs) & (t["bytes"] == nbytes)]
    if hit.empty:
        raise one_of(
            "seed 002 point (algorithm, P, bytes)",
            (algorithm, nprocs, nbytes),
            sorted(set(zip(t["algorithm"], t["nprocs"], t["bytes"]))),
        )
    return float(hit["seconds"].iloc[0]) * 1e6
