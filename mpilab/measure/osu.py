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

from mpilab.core import paths, process, results
from mpilab.core.errors import LaunchError, ParseError, ToolMissing, UsageError, one_of
from mpilab.core.vocabulary import COMPILERS, MAPPINGS
from mpilab.measure import forcing, libalgs

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
        text = path.read_text()
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror}") from None
    return parse_text(text, path)


def parse_text(text, path="OSU output"):
    """:func:`parse` for the text of an OSU program's output (``path`` names it in errors)."""
    lines = text.splitlines()
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


# --- OSU itself, built from the vendored tarball and run like the kit's drivers ---------------

#: The OSU release the kit builds (seed 000 ran 7.3; 7.4 times its collectives the same way).
OSU_VERSION = "7.4"
TARBALL = f"osu-micro-benchmarks-{OSU_VERSION}.tar.gz"
#: Where each program is in OSU's tree, and the collective it times.
PROGRAM_DIRS = {
    "osu_bcast": ("c/mpi/collective/blocking", "bcast"),
    "osu_reduce": ("c/mpi/collective/blocking", "reduce"),
    "osu_allgather": ("c/mpi/collective/blocking", "allgather"),
    "osu_allreduce": ("c/mpi/collective/blocking", "allreduce"),
    "osu_latency": ("c/mpi/pt2pt/standard", "pt2pt"),
}
#: What building OSU for SMPI needs besides ``CC=smpicc`` (both are environment variables of
#: ``./configure`` only, not of make): ``SMPI_PRETEND_CC=1``, because configure runs the test
#: programs it compiles and smpicc's programs only run under smpirun; and ``LD=ld``, because
#: libtool asks the compiler which linker it uses and smpicc does not answer. OSU's own code needs
#: no change.
SMPI_CONFIGURE_ENV = {"SMPI_PRETEND_CC": "1", "LD": "ld"}


def vendor_tarball():
    """OSU's source as the developers' machines and CI keep it: ``../shared/vendor/`` next to the
    repository, or the folder ``$MPILAB_VENDOR`` names (as ``scripts/install-apptainer.sh``
    reads it; the kit never copies it; elsewhere OSU comes from its site)."""
    vendor = os.environ.get("MPILAB_VENDOR") or paths.repo_root().parent / "shared" / "vendor"
    return Path(vendor) / TARBALL


def cache_dir():
    """Where the kit builds OSU when not told (``$XDG_CACHE_HOME/mpilab/osu``, never the
    repository)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mpilab" / "osu"


def build(flavour, builddir, programs=("osu_bcast", "osu_reduce", "osu_latency"), tarball=None, timeout=1800):
    """Build OSU programs for ``flavour`` from the vendored tarball under ``builddir`` (once).

    Returns
    -------
    dict
        Program name -> path.

    Raises
    ------
    ToolMissing
        The tarball is not there (:func:`vendor_tarball`) or the flavour's compiler is missing.
    LaunchError
        Unpacking, configure or make failed (the last lines of their output).
    """
    tarball = Path(tarball or vendor_tarball())
    if not tarball.is_file():
        raise ToolMissing(
            f"OSU's source {tarball} is not there: the developers' machines and CI keep it in "
            f"../shared/vendor next to the repository (MPILAB_VENDOR names another folder); "
            f"elsewhere get OSU {OSU_VERSION} from its site"
        )
    unknown = [p for p in programs if p not in PROGRAM_DIRS]
    if unknown:
        raise one_of("OSU program", unknown[0], PROGRAM_DIRS)
    cc = COMPILERS[flavour] if flavour in COMPILERS else None
    if cc is None or shutil.which(cc) is None:
        raise ToolMissing(f"no compiler for flavour {flavour!r} ({cc or 'unknown flavour'})")
    top = Path(builddir) / f"osu-{OSU_VERSION}-{flavour}" / f"osu-micro-benchmarks-{OSU_VERSION}"
    found = {p: top / PROGRAM_DIRS[p][0] / p for p in programs}
    if all(f.is_file() for f in found.values()):
        return found
    # configure only: smpicc pretending to be cc for make would build programs SMPI cannot load
    configure_env = dict(os.environ, **(SMPI_CONFIGURE_ENV if flavour == "smpi" else {}))
    cxx = "smpicxx" if flavour == "smpi" else cc.replace("mpicc", "mpicxx")
    steps = []
    if not (top / "Makefile").is_file():
        shutil.rmtree(top.parent, ignore_errors=True)
        top.parent.mkdir(parents=True)
        steps += [(["tar", "-xzf", str(tarball), "-C", str(top.parent)], top.parent, None)]
        steps += [(["./configure", f"CC={cc}", f"CXX={cxx}"], top, configure_env)]
    for d in sorted({PROGRAM_DIRS[p][0] for p in programs}):
        steps.append((["make", "-C", d, *[p for p in programs if PROGRAM_DIRS[p][0] == d]], top, None))
    for argv, cwd, env in steps:
        res = process.run(argv, timeout=timeout, env=env, cwd=cwd)
        if res.returncode != 0 or res.timed_out:
            raise LaunchError(f"building OSU failed: {' '.join(argv)} in {cwd}:\n{res.tail()}")
    return found


def run(launcher, program, nprocs, sizes, iters, warmup, mapping="core", algorithm="default", timeout=900):
    """Run one OSU program (``-m``, ``-i``, ``-x``, ``-f``) on ``launcher``, the library algorithm
    forced as :mod:`mpilab.measure.forcing` forces it, and return its results rows.

    OSU calls the library's own collective: under SMPI an algorithm that only the kit's clones
    run (Open MPI's chain and pipeline, :mod:`mpilab.measure.libalgs`) is refused.

    Returns
    -------
    list of dict
        Results-table rows (``launcher`` the launcher's, ``library`` ``OSU 7.4``, min/max/avg
        over ranks; OSU prints no per-iteration maximum), ``forced``/``evidence`` as
        :func:`mpilab.measure.forcing.verify` finds them.
    """
    name = Path(program).name
    coll = PROGRAM_DIRS.get(name, (None, None))[1]
    if coll is None:
        raise one_of("OSU program", name, PROGRAM_DIRS)
    lo, hi = (sizes.split(":") + [None])[:2] if isinstance(sizes, str) else sizes
    args = ["-m", f"{lo}:{hi or lo}", "-i", str(int(iters)), "-x", str(int(warmup)), "-f"]
    if name == "osu_latency":
        args.remove("-f")
    settings = libalgs.Settings(forcing=False)
    if coll != "pt2pt":
        algorithm = libalgs.canonical(coll, algorithm)
        settings = forcing.prepare(launcher.flavour, coll, algorithm)
        if settings.kit:
            raise UsageError(
                f"OSU runs the library's MPI_{coll.capitalize()}, and SimGrid has no faithful copy of "
                f"Open MPI's {algorithm} (the kit's clone runs in collbench: mpilab.measure.forcing)"
            )
    proc = forcing.run(launcher, program, args, nprocs, settings, mapping=mapping, timeout=timeout)
    if proc.returncode != 0:
        raise LaunchError(f"exit {proc.returncode}: {proc.args}\n{proc.stderr[-2000:]}")
    parsed = parse_text(proc.stdout, f"output of {name}")
    if coll == "pt2pt":
        forced, evidence = "no", "osu_latency: point to point"
    else:
        forced, evidence = forcing.verify(launcher.flavour, coll, algorithm, proc.stderr, proc.returncode)
    meta = {
        "collective": coll,
        "algorithm": algorithm if coll != "pt2pt" else "blocking",
        "nprocs": nprocs,
        "datatype": parsed["datatype"],
        "library": f"OSU {parsed['version']}".strip(),
    }
    return results.rows(
        meta,
        parsed["points"],
        flavour=launcher.flavour,
        launcher=launcher.name,
        platform=launcher.platform,
        mapping=mapping,
        forced=forced,
        evidence=evidence,
        command=proc.args,
    )
