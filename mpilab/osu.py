"""Import OSU micro-benchmarks output (osu_bcast, osu_reduce, osu_allgather, osu_allreduce,
osu_latency; 7.x, with or without ``-f``) into the results table.

The collective comes from the title line (``# OSU MPI Broadcast Latency Test v7.3``), the
parameters (process count, algorithm, mapping) from keyword arguments or else from the file
name, e.g. ``bcast_np24_chain_core.txt`` -> nprocs 24, algorithm ``chain``, mapping ``core``.
A file is parsed completely before anything is written: a malformed file raises
:class:`~mpilab.errors.ParseError` naming the file and line, and nothing is appended.

Rows get ``launcher=osu-import``. Their ``forced`` column is ``unverified`` when an algorithm
other than ``default`` is named (OSU output does not show what the library ran) and ``no``
for ``default``: an import never claims a verified forcing.
"""

import re
from pathlib import Path

from .errors import ParseError, UsageError, one_of

from .results import COLUMNS, append_rows

TITLES = {
    "broadcast": "bcast", "reduce": "reduce", "allreduce": "allreduce",
    "allgather": "allgather", "": "pt2pt",
}
MAPPINGS = ("core", "socket", "node")
_TITLE = re.compile(r"^#\s*OSU MPI(?:-\w+)?\s+(\w*)\s*Latency Test\s*(v[\w.]+)?", re.I)
_DTYPE = re.compile(r"^#\s*Datatype:\s*MPI_(\w+)\.?", re.I)


def params_from_name(path):
    """Guess (collective, nprocs, algorithm, mapping) from a name like ``bcast_np24_chain_core.txt``.

    Returns a dict with the keys found (any may be missing).
    """
    stem = Path(path).name.split(".")[0]
    tokens = stem.split("_")
    out, rest = {}, []
    for i, tok in enumerate(tokens):
        low = tok.lower()
        m = re.fullmatch(r"(?:np|n|p)(\d+)", low)
        if m and "nprocs" not in out:
            out["nprocs"] = int(m.group(1))
        elif low in MAPPINGS and "mapping" not in out:
            out["mapping"] = low
        elif i == 0 and low in ("bcast", "reduce", "allreduce", "allgather", "latency"):
            out["collective"] = low
        else:
            rest.append(tok)
    if rest:
        out["algorithm"] = "_".join(rest)
    return out


def parse(path):
    """Parse one OSU output file.

    Returns
    -------
    dict
        ``collective``, ``version``, ``datatype``, ``points``: list of dicts with ``bytes``,
        ``avg_us`` and, with ``-f``, ``min_us``, ``max_us``, ``iterations``.

    Raises
    ------
    ParseError
        Naming the file and the line that is not OSU output.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror}") from None
    coll = version = header = None
    dtype = "char"
    points = []
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            m = _TITLE.match(s)
            if m and coll is None:
                word = m.group(1).lower()
                if word not in TITLES:
                    raise ParseError(f"{path}:{no}: unsupported OSU test {s!r}; "
                                     f"supported: {', '.join(sorted(k for k in TITLES if k))}, latency")
                coll, version = TITLES[word], m.group(2) or ""
                continue
            m = _DTYPE.match(s)
            if m:
                dtype = m.group(1).lower()
                continue
            if s.lstrip("# ").lower().startswith("size"):
                header = [h.lower() for h in re.findall(r"\b(Size|Avg|Min|Max|Iterations)\b", s, re.I)]
                if "avg" not in header:  # osu_latency: "# Size   Latency (us)"
                    header.insert(1, "avg")
                continue
            continue  # other comments (e.g. "# Validation") are ignored
        if coll is None:
            raise ParseError(f"{path}:{no}: data before the '# OSU MPI ... Latency Test' title line: {s!r}")
        if header is None:
            raise ParseError(f"{path}:{no}: data before the '# Size ...' header line: {s!r}")
        fields = s.split()
        if len(fields) < len(header):
            raise ParseError(f"{path}:{no}: expected {len(header)} columns "
                             f"({', '.join(header)}), got {len(fields)}: {s!r}")
        try:
            vals = dict(zip(header, fields))
            pt = {"bytes": int(vals["size"]), "avg_us": float(vals["avg"])}
            for k in ("min", "max"):
                if k in vals:
                    pt[f"{k}_us"] = float(vals[k])
            if "iterations" in vals:
                pt["iterations"] = int(vals["iterations"])
        except (ValueError, KeyError):
            raise ParseError(f"{path}:{no}: not a row of numbers: {s!r}") from None
        points.append(pt)
    if coll is None:
        raise ParseError(f"{path}:1: no '# OSU MPI ... Latency Test' title line")
    if not points:
        raise ParseError(f"{path}:{len(lines)}: no measurements found")
    return {"collective": coll, "version": version, "datatype": dtype, "points": points}


def to_rows(path, nprocs=None, algorithm=None, mapping=None, flavour="", platform="",
            repetition=0):
    """Parse ``path`` and return its results-table rows (dicts keyed by :data:`COLUMNS`).

    Parameters not given are read from the file name (see :func:`params_from_name`).
    """
    parsed = parse(path)
    guess = params_from_name(path)
    if mapping is not None and mapping not in MAPPINGS:
        raise one_of("mapping", mapping, MAPPINGS)
    coll = parsed["collective"]
    nprocs = nprocs or guess.get("nprocs") or (2 if coll == "pt2pt" else "")
    algorithm = algorithm or guess.get("algorithm") or "default"
    mapping = mapping or guess.get("mapping") or ""
    if algorithm == "default":
        forced, evidence = "no", "OSU import: library default, nothing forced"
    else:
        forced = "unverified"
        evidence = f"OSU import: algorithm {algorithm!r} named by the user/file name; OSU output does not show what ran"
    rows = []
    for pt in parsed["points"]:
        row = dict.fromkeys(COLUMNS, "")
        row.update(collective=coll, algorithm=algorithm, flavour=flavour, launcher="osu-import",
                   platform=platform, mapping=mapping, nprocs=nprocs, bytes=pt["bytes"],
                   datatype=parsed["datatype"], root=0 if coll in ("bcast", "reduce") else "",
                   repetition=repetition, iterations=pt.get("iterations", ""),
                   avg_us=pt["avg_us"], min_us=pt.get("min_us", ""), max_us=pt.get("max_us", ""),
                   requested=algorithm, forced=forced, evidence=evidence,
                   library=f"OSU {parsed['version']}".strip(), command=f"import-osu {path}")
        rows.append(row)
    return rows


def import_osu(paths, output, **params):
    """Parse every file in ``paths`` and append their rows to the CSV ``output``.

    All files are parsed first; if any is malformed nothing is written.

    Returns
    -------
    int
        The number of rows appended.
    """
    if not paths:
        raise UsageError("import-osu needs at least one OSU output file")
    rows = []
    for p in paths:
        rows.extend(to_rows(p, **params))
    return append_rows(output, rows)
