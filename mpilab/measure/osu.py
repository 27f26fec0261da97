"""Import OSU micro-benchmarks output (osu_bcast, osu_reduce, osu_allgather, osu_allreduce,
osu_latency; 7.x, with or without ``-f``) into the results table.

The collective comes from the title line (``# OSU MPI Broadcast Latency Test v7.3``), the
parameters (process count, algorithm, mapping) from keyword arguments or else from the file
name, e.g. ``bcast_np24_chain_core.txt`` -> nprocs 24, algorithm ``chain``, mapping ``core``.
In a name, ``npN`` (or ``nN``, ``pN``) is the process count, ``core``/``socket``/``node`` the
mapping, and only a known library algorithm of the file's collective (``mpilab libalgs``; for
allgather ``ring`` and ``bruck`` are the library's, stored as ``lib:ring``, ``lib:bruck``) is taken
as the algorithm; other words (``osu``, ``bcast``, ``run2``) are ignored. Without a process count
in the name or the arguments the import fails, naming the file and ``--nprocs``.
A file is parsed completely before anything is written: a malformed file raises
:class:`~mpilab.core.errors.ParseError` naming the file and line, and nothing is appended.

Rows get ``launcher=osu-import``. Their ``forced`` column is ``unverified`` when an algorithm
other than ``default`` is named (OSU output does not show what the library ran) and ``no``
for ``default``: an import never claims a verified forcing.
"""

import os
import re
import shutil
from pathlib import Path

from mpilab.core import results
from mpilab.core.errors import ParseError, UsageError, one_of
from mpilab.core.vocabulary import MAPPINGS
from mpilab.measure import libalgs

TITLES = {
    "broadcast": "bcast",
    "reduce": "reduce",
    "allreduce": "allreduce",
    "allgather": "allgather",
    "": "pt2pt",
}
_TITLE = re.compile(r"^#\s*OSU MPI(?:-\w+)?\s+(\w*)\s*Latency Test\s*(v[\w.]+)?", re.I)
_DTYPE = re.compile(r"^#\s*Datatype:\s*MPI_(\w+)\.?", re.I)


_NAME_COLLECTIVES = {
    "bcast": "bcast",
    "reduce": "reduce",
    "allreduce": "allreduce",
    "allgather": "allgather",
    "latency": "pt2pt",
}


def library_algorithm(collective, name):
    """The stored name of the library algorithm ``name`` of ``collective`` as OSU ran it, or
    None if the library has no such algorithm. OSU measures the library, so allgather ``ring``
    is the library's ring, ``lib:ring``."""
    if collective not in libalgs.TABLE:
        return None
    for cand in (name, libalgs.PREFIX + name):
        if libalgs.is_library(collective, cand):
            return libalgs.canonical(collective, cand)
    return None


def params_from_name(path, collective=None):
    """Read (collective, nprocs, algorithm, mapping) from a name like ``bcast_np24_chain_core.txt``.

    Parameters
    ----------
    path : str or Path
    collective : str, optional
        The file's collective (from its title line); else a collective word in the name. Only
        a known library algorithm of that collective is taken as ``algorithm``, the longest
        run of words that spells one (``basic_linear`` is two words).

    Returns
    -------
    dict
        The keys found (any may be missing).
    """
    stem = Path(path).name.split(".")[0]
    tokens = [t for t in re.split(r"[_\-]", stem) if t]
    out, rest = {}, []
    for tok in tokens:
        low = tok.lower()
        m = re.fullmatch(r"(?:np|n|p)(\d+)", low)
        if m and "nprocs" not in out:
            out["nprocs"] = int(m.group(1))
        elif low in MAPPINGS and "mapping" not in out:
            out["mapping"] = low
        elif low in _NAME_COLLECTIVES and "collective" not in out:
            out["collective"] = _NAME_COLLECTIVES[low]
        else:
            rest.append(low)
    coll = collective or out.get("collective")
    best = None
    for i in range(len(rest)):
        for j in range(len(rest), i, -1):
            name = library_algorithm(coll, "_".join(rest[i:j])) if coll else None
            if name and (best is None or j - i > best[0]):
                best = (j - i, name)
    if best:
        out["algorithm"] = best[1]
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
                    raise ParseError(
                        f"{path}:{no}: unsupported OSU test {s!r}; "
                        f"supported: {', '.join(sorted(k for k in TITLES if k))}, latency"
                    )
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
            raise ParseError(
                f"{path}:{no}: expected {len(header)} columns ({', '.join(header)}), got {len(fields)}: {s!r}"
            )
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


def to_rows(
    path, nprocs=None, algorithm=None, mapping=None, flavour="", platform="", repetition=0, **columns
):
    """Parse ``path`` and return its results-table rows (:func:`mpilab.core.results.rows`).

    Parameters not given are read from the file name (see :func:`params_from_name`). OSU times
    as collbench does (each rank averages its iterations; min/max/avg over ranks), so its
    columns fill ``avg_us``, ``min_us``, ``max_us`` and ``iterations``; OSU does not print the
    per-iteration maximum over ranks, so ``maxrank_*`` stay empty. ``columns`` sets other
    columns of every row (``launcher``, ``host``, ``command``, ``job`` of a SLURM run).
    """
    parsed = parse(path)
    coll = parsed["collective"]
    guess = params_from_name(path, coll)
    if mapping is not None and mapping not in MAPPINGS:
        raise one_of("mapping", mapping, MAPPINGS)
    if nprocs is not None:
        if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
            raise UsageError(f"bad --nprocs {nprocs!r}; valid: an integer >= 1")
        if coll == "pt2pt" and nprocs != 2:
            raise UsageError(f"bad --nprocs {nprocs} for {path} (osu_latency): valid: 2")
    nprocs = nprocs or guess.get("nprocs") or (2 if coll == "pt2pt" else None)
    if nprocs is None:
        raise ParseError(
            f"{path}: the number of processes is missing: it is not in the file name "
            f"and was not given; pass --nprocs N (nprocs=N to import_osu/to_rows) or "
            f"name the file with npN, e.g. {coll}_np24_chain_core.txt"
        )
    if algorithm is not None and coll != "pt2pt":
        given = library_algorithm(coll, algorithm)
        if given is None:
            raise UsageError(
                f"unknown {coll} algorithm {algorithm!r} for {path}; valid: "
                f"{', '.join(libalgs.names(coll))} (`mpilab libalgs --coll {coll}`)"
            )
        algorithm = given
    algorithm = algorithm or guess.get("algorithm") or "default"
    mapping = mapping or guess.get("mapping") or ""
    if algorithm == "default":
        forced, evidence = "no", "OSU import: library default, nothing forced"
    else:
        forced = "unverified"
        evidence = (
            f"OSU import: algorithm {algorithm!r} named by the user/file name; "
            "OSU output does not show what ran"
        )
    meta = {
        "collective": coll,
        "algorithm": algorithm,
        "nprocs": nprocs,
        "datatype": parsed["datatype"],
        "library": f"OSU {parsed['version']}".strip(),
    }
    given = {"launcher": "osu-import", "command": f"import-osu {path}", **columns}
    return results.rows(
        meta,
        parsed["points"],
        flavour=flavour,
        platform=platform,
        mapping=mapping,
        repetition=repetition,
        forced=forced,
        evidence=evidence,
        **given,
    )


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
    return results.append_rows(output, rows)


#: The OSU programs the labs run (seed 000's, and allgather).
OSU_PROGRAMS = ("osu_bcast", "osu_reduce", "osu_allgather", "osu_allreduce", "osu_latency")


def osu_programs(names=OSU_PROGRAMS, osu_dir=None):
    """Find real OSU Micro-Benchmarks programs, to run next to ``collbench --format osu``.

    Looks in ``osu_dir``, else in ``$MPILAB_OSU_DIR`` (the kit's images set it to
    ``/opt/osu/bin``), else on ``PATH``. A directory may also be an OSU build tree
    (``.../c/mpi/collective/blocking/osu_bcast``): it is searched below.

    Returns
    -------
    dict
        Program name -> absolute path, for each of ``names`` found; empty where OSU is not
        installed.

    Examples
    --------
    >>> osu = osu_programs()                                   # doctest: +SKIP
    >>> osu["osu_bcast"]                                       # in the kit's image
    '/opt/osu/bin/osu_bcast'
    """
    where = osu_dir or os.environ.get("MPILAB_OSU_DIR")
    found = {}
    for name in names:
        if where:
            hits = [Path(where) / name] + sorted(Path(where).rglob(name))
            path = next((str(p) for p in hits if p.is_file() and os.access(p, os.X_OK)), None)
        else:
            path = shutil.which(name)
        if path:
            found[name] = os.path.abspath(path)
    return found
