"""The one results table: a CSV file, one row per (measurement point, repetition).

The columns and their order are the contract of ``docs/DEVELOPING.md`` section 3.
Appending takes an exclusive ``fcntl`` lock so that concurrent sweeps never interleave rows.
"""

import csv
import fcntl
import os
from pathlib import Path

import pandas as pd

from mpilab.core.errors import ParseError, UsageError

KEY_COLUMNS = ("collective", "algorithm", "flavour", "launcher", "platform", "mapping",
               "nprocs", "bytes", "datatype", "root", "repetition")
FIGURE_COLUMNS = ("iterations", "warmup", "avg_us", "min_us", "max_us", "maxrank_avg_us",
                  "maxrank_median_us", "probe_us")
FORCING_COLUMNS = ("requested", "forced", "evidence")
PROVENANCE_COLUMNS = ("library", "host", "date", "kit_version", "command", "job")
COLUMNS = KEY_COLUMNS + FIGURE_COLUMNS + FORCING_COLUMNS + PROVENANCE_COLUMNS
#: Columns added at the end after the first version of the table: a table written before has
#: none of them, reads with them empty, and gains them on its next append.
ADDED_COLUMNS = ("job",)

_INT_COLUMNS = ("nprocs", "bytes", "root", "repetition", "iterations", "warmup")
_FLOAT_COLUMNS = ("avg_us", "min_us", "max_us", "maxrank_avg_us", "maxrank_median_us", "probe_us")


def check_row(row):
    """Raise :class:`UsageError` if ``row`` has a column that is not in :data:`COLUMNS`."""
    unknown = [k for k in row if k not in COLUMNS]
    if unknown:
        raise UsageError(f"unknown result column(s) {', '.join(map(repr, unknown))}; "
                         f"valid: {', '.join(COLUMNS)}")


def append_rows(path, rows):
    """Append ``rows`` (mappings column -> value) to the results CSV at ``path``.

    Parameters
    ----------
    path : str or Path
        The results file; created with a header if missing or empty.
    rows : iterable of dict
        Missing columns are written empty; an unknown column is an error.

    Returns
    -------
    int
        The number of rows written.
    """
    rows = list(rows)
    for row in rows:
        check_row(row)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, restval="")
            f.seek(0)
            header = f.readline().rstrip("\r\n")
            if header and header != ",".join(COLUMNS):
                _upgrade_table(f, path, header, writer)
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    return len(rows)


def _upgrade_table(f, path, header, writer):
    """Rewrite a table written before :data:`ADDED_COLUMNS` with the current header (in place,
    under the caller's lock); anything else that is not the current header is an error."""
    old = header.split(",")
    if tuple(old) != COLUMNS[:len(old)] or len(old) < len(COLUMNS) - len(ADDED_COLUMNS):
        raise ParseError(f"{path}: line 1: the header is not the results table's; expected "
                         f"{','.join(COLUMNS)}")
    f.seek(0)
    kept = list(csv.DictReader(f))
    f.truncate(0)                      # "a+" writes at the end: now the start
    writer.writeheader()
    writer.writerows(kept)


def read_results(path):
    """Read a results CSV into a :class:`pandas.DataFrame` with the columns in order.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    pandas.DataFrame
        Integer columns as integers, timing columns as floats (NaN where empty).
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for c in ADDED_COLUMNS:
        if c not in df.columns:
            df[c] = ""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ParseError(f"{path}: line 1: missing column(s) {', '.join(missing)}")
    df = df[list(COLUMNS)]
    for c in _INT_COLUMNS:
        df[c] = pd.to_numeric(df[c].replace("", None), errors="coerce").astype("Int64")
    for c in _FLOAT_COLUMNS:
        df[c] = pd.to_numeric(df[c].replace("", None), errors="coerce").astype(float)
    return df


def measured_keys(path):
    """The set of key tuples (:data:`KEY_COLUMNS`, as strings) already in ``path``."""
    path = Path(path)
    if not path.exists():
        return set()
    with open(path, newline="") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            return {tuple(str(r[c]) for c in KEY_COLUMNS) for r in csv.DictReader(f)}
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def key_of(row):
    """The key tuple of a row, as :func:`measured_keys` stores it."""
    return tuple("" if row.get(c) is None else str(row.get(c)) for c in KEY_COLUMNS)
