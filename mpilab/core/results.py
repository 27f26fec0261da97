"""The one results table: a CSV file, one row per (measurement point, repetition).

The columns, their order and what each one means are the contract of ``docs/DEVELOPING.md``
section 3; :func:`row` is the one place that fills them, and :func:`rows` the one that turns a
driver's parsed output (:func:`mpilab.measure.driver.parse`) into rows. Appending takes an
exclusive ``fcntl`` lock so that concurrent sweeps never interleave rows.
"""

import csv
import fcntl
import io
import os
from pathlib import Path

import pandas as pd

from mpilab import __version__
from mpilab.core.errors import ParseError, UsageError, one_of

KEY_COLUMNS = (
    "collective",
    "algorithm",
    "flavour",
    "launcher",
    "platform",
    "mapping",
    "nprocs",
    "bytes",
    "datatype",
    "root",
    "repetition",
)
FIGURE_COLUMNS = (
    "iterations",
    "warmup",
    "avg_us",
    "min_us",
    "max_us",
    "maxrank_avg_us",
    "maxrank_median_us",
    "probe_us",
)
FORCING_COLUMNS = ("requested", "forced", "evidence")
PROVENANCE_COLUMNS = ("library", "host", "date", "kit_version", "command", "job")
COLUMNS = KEY_COLUMNS + FIGURE_COLUMNS + FORCING_COLUMNS + PROVENANCE_COLUMNS
#: Columns added at the end after the first version of the table: a table written before has
#: none of them, reads with them empty, and gains them on its next append.
ADDED_COLUMNS = ("job",)

_INT_COLUMNS = ("nprocs", "bytes", "root", "repetition", "iterations", "warmup")
_FLOAT_COLUMNS = ("avg_us", "min_us", "max_us", "maxrank_avg_us", "maxrank_median_us", "probe_us")
#: Columns every row must have a value in.
REQUIRED = ("collective", "algorithm", "launcher", "nprocs", "bytes")
#: The values of ``forced``.
FORCED = ("yes", "no", "unverified", "fallback")
#: Algorithm names that mean "the library chose" (collbench's ``native``, a library's ``default``).
LIBRARY_DEFAULT = ("native", "default")
#: Bytes above which the drivers use their "large" iteration and warm-up counts (as OSU).
LARGE_MESSAGE = 8192
#: Provenance block keys (``c_reference/include/labprov.h``) that are columns of every row.
_FROM_META = ("collective", "algorithm", "flavour", "nprocs", "datatype", "root", "library", "host", "date")


def _typed(column, value):
    if value is None or value == "":
        return None
    if column in _INT_COLUMNS:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise UsageError(f"bad {column} {value!r}; valid: an integer") from None
    if column in _FLOAT_COLUMNS:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise UsageError(f"bad {column} {value!r}; valid: a number of microseconds") from None
    return str(value)


def row(**columns):
    """One row of the results table: every column in order, each value of its column's type.

    Parameters
    ----------
    **columns
        Values by column name (:data:`COLUMNS`). Missing ones are None (written empty), but for
        ``requested`` (the algorithm), ``forced``/``evidence`` (``no``/``library default`` for
        :data:`LIBRARY_DEFAULT` algorithms, ``yes``/``kit implementation`` otherwise: the kit's
        own C code runs by construction), ``repetition`` (0), ``datatype`` (``char``), ``root``
        (0: collectives without a root are stored with root 0, as collbench prints them) and
        ``kit_version`` (this kit's).

    Returns
    -------
    dict

    Raises
    ------
    UsageError
        An unknown column, a missing one of :data:`REQUIRED`, a value of the wrong type, or a
        ``forced`` outside :data:`FORCED`.
    """
    check_row(columns)
    out = {c: _typed(c, columns.get(c)) for c in COLUMNS}
    missing = [c for c in REQUIRED if out[c] is None]
    if missing:
        raise UsageError(f"a results row needs {', '.join(missing)}; got {columns!r}")
    defaults = {
        "requested": out["algorithm"],
        "repetition": 0,
        "datatype": "char",
        "root": 0,
        "kit_version": __version__,
    }
    if out["algorithm"] in LIBRARY_DEFAULT:
        defaults.update(forced="no", evidence="library default")
    else:
        defaults.update(forced="yes", evidence="kit implementation")
    for c, v in defaults.items():
        if out[c] is None and (c != "evidence" or columns.get("forced") is None):
            out[c] = v
    if out["forced"] not in FORCED:
        raise one_of("forced value", out["forced"], FORCED)
    return out


def rows(meta, table, **columns):
    """Rows of the results table for one run of a driver.

    Parameters
    ----------
    meta : dict
        The provenance block (``# key: value``): collective, algorithm, flavour, nprocs,
        datatype, root, library, host, date fill those columns; ``iterations`` and
        ``iterations_large``, ``warmup`` and ``warmup_large`` the ``iterations`` and ``warmup``
        columns, by size (:data:`LARGE_MESSAGE`).
    table : list of dict
        The parsed table; its columns that are results columns (bytes, iterations, avg_us, ...,
        and per-line collective, algorithm, nprocs, warmup) fill them, the others are not kept.
    **columns
        Values for every row (launcher, platform, mapping, repetition, requested, forced,
        evidence, command, job, ...); they win over ``meta`` and ``table``.

    Returns
    -------
    list of dict
        One :func:`row` per line of ``table``.

    Examples
    --------
    >>> out = rows({"collective": "allgather", "algorithm": "ring", "nprocs": "4", "warmup": "10"},
    ...            [{"bytes": 32, "iterations": 100, "avg_us": 1.5}], launcher="mpirun")
    >>> out[0]["nprocs"], out[0]["warmup"], out[0]["forced"], out[0]["evidence"]
    (4, 10, 'yes', 'kit implementation')
    """
    out = []
    for line in table:
        fields = {k: meta[k] for k in _FROM_META if k in meta}
        size = line.get("bytes")
        large = "_large" if size is not None and int(size) > LARGE_MESSAGE else ""
        for count in ("iterations", "warmup"):
            if count + large in meta:
                fields[count] = meta[count + large]
        fields.update({k: v for k, v in line.items() if k in COLUMNS})
        fields.update(columns)
        out.append(row(**fields))
    return out


def check_row(row):
    """Raise :class:`UsageError` if ``row`` has a column that is not in :data:`COLUMNS`."""
    unknown = [k for k in row if k not in COLUMNS]
    if unknown:
        raise UsageError(
            f"unknown result column(s) {', '.join(map(repr, unknown))}; valid: {', '.join(COLUMNS)}"
        )


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
    if tuple(old) != COLUMNS[: len(old)] or len(old) < len(COLUMNS) - len(ADDED_COLUMNS):
        raise ParseError(
            f"{path}: line 1: the header is not the results table's; expected {','.join(COLUMNS)}"
        )
    f.seek(0)
    kept = list(csv.DictReader(f))
    f.truncate(0)  # "a+" writes at the end: now the start
    writer.writeheader()
    writer.writerows(kept)


def read_table(text, source, dtype=None):
    """A CSV table that one of the kit's C programs wrote (besides the drivers' results, which
    :func:`rows` takes from :func:`mpilab.measure.driver.parse`): today the ``labtrace`` tracer's
    per-rank event logs (:mod:`mpilab.measure.trace`). Every table a C program prints is read in
    this module.

    Parameters
    ----------
    text : str
        The table, its header line first (comment lines already removed).
    source : str
        Where it came from, for the error message.
    dtype : dict, optional
        Column -> pandas dtype.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    mpilab.core.errors.ParseError
        The text is not a CSV table (its message names ``source``).
    """
    try:
        return pd.read_csv(io.StringIO(text), dtype=dtype)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ParseError(f"{source}: {exc}") from None


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
