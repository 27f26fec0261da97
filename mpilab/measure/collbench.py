"""Run the C benchmark driver ``collbench`` and turn its output into results rows.

The output format is the contract of ``docs/DEVELOPING.md`` section 2: ``# key: value``
provenance lines, then a CSV table printed by rank 0.
"""

import csv
import io
import json
import re
import subprocess

from mpilab import __version__
from mpilab.core import paths, units
from mpilab.core.errors import LaunchError, one_of, ParseError, ToolMissing
from mpilab.core.vocabulary import COLLECTIVES

DATATYPES = ("char", "int", "float", "double")
TABLE_HEADER = ("bytes", "count", "iterations", "avg_us", "min_us", "max_us",
                "maxrank_avg_us", "maxrank_median_us", "probe_us")
def collbench_args(algo="native", coll="allgather", sizes="32:1M", iters=None, warmup=None,
                   iters_large=None, warmup_large=None, datatype=None, root=None, check=False,
                   probe=None):
    """Build collbench's argument list (not including the program) from parameters."""
    if coll not in COLLECTIVES:
        raise one_of("collective", coll, COLLECTIVES)
    lo, hi = units.parse_size_range(sizes) if isinstance(sizes, str) else sizes
    args = ["--coll", coll, "--algo", algo, "-m", f"{lo}:{hi}", "--format", "csv"]
    for flag, val in (("--iters", iters), ("--warmup", warmup), ("--iters-large", iters_large),
                      ("--warmup-large", warmup_large), ("--root", root), ("--probe", probe)):
        if val is not None:
            args += [flag, str(int(val))]
    if datatype is not None:
        if datatype not in DATATYPES:
            raise one_of("datatype", datatype, DATATYPES)
        args += ["--datatype", datatype]
    if check:
        args.append("--check")
    return args


def parse_output(text, source="collbench output", program="collbench", header=TABLE_HEADER):
    """Split collbench's csv output into (provenance dict, list of table row dicts).

    Parameters
    ----------
    text : str
        The program's standard output.
    source : str
        What to call it in error messages.
    program, header : str, tuple of str
        The program whose ``# <program> <version>`` line opens the output and the columns of
        its table; the kit's other drivers (``pingpong``) print the same layout.

    Raises
    ------
    ParseError
        Naming the line number and text of the first line that does not fit the format.
    """
    meta, table_lines, first_table = {}, [], None
    header = tuple(header)
    lines = text.splitlines()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            body = line[1:].strip()
            if body.split()[:1] == [program]:
                meta["format_version"] = body.split()[-1]
                continue
            key, sep, value = body.partition(":")
            if not sep or not re.fullmatch(r"[a-z_]+", key.strip()):
                raise ParseError(f"{source}: line {no}: expected '# key: value', got {line!r}")
            meta[key.strip()] = value.strip()
            continue
        if first_table is None:
            first_table = no
            got = tuple(h.strip() for h in line.split(","))
            if got != header:
                raise ParseError(f"{source}: line {no}: expected header {','.join(header)}, "
                                 f"got {line!r}")
            continue
        table_lines.append((no, line))
    if first_table is None:
        raise ParseError(f"{source}: no table header {','.join(header)} found "
                         f"({len(lines)} lines)")
    rows = []
    for no, line in table_lines:
        fields = next(csv.reader(io.StringIO(line)))
        if len(fields) != len(header):
            raise ParseError(f"{source}: line {no}: expected {len(header)} fields, "
                             f"got {len(fields)}: {line!r}")
        row = {}
        try:
            for name, val in zip(header, fields):
                val = val.strip()
                if name in ("bytes", "count", "iterations"):
                    row[name] = int(val)
                else:
                    row[name] = float(val) if val else None
        except ValueError:
            raise ParseError(f"{source}: line {no}: non-numeric field in {line!r}") from None
        rows.append(row)
    return meta, rows


def to_results_rows(meta, table, *, launcher, platform, mapping="core", repetition=0,
                    requested=None, forced=None, evidence="", command="", flavour=None):
    """Combine provenance and table rows into rows of the results table (``mpilab.core.results``)."""
    algo = meta.get("algorithm", "")
    requested = requested if requested is not None else algo
    if forced is None:
        # the kit's own algorithms run the code we wrote: forced by construction
        forced, evidence = ("yes", "kit implementation") if algo != "native" else ("no", "library default")
    out = []
    for r in table:
        out.append({
            "collective": meta.get("collective", ""), "algorithm": algo,
            "flavour": flavour or meta.get("flavour", ""), "launcher": launcher,
            "platform": platform, "mapping": mapping, "nprocs": int(meta.get("nprocs", 0)),
            "bytes": r["bytes"], "datatype": meta.get("datatype", ""),
            "root": int(meta.get("root", 0) or 0), "repetition": repetition,
            "iterations": r["iterations"],
            "warmup": int(meta.get("warmup_large" if r["bytes"] > 8192 else "warmup", 0) or 0),
            "avg_us": r["avg_us"], "min_us": r["min_us"], "max_us": r["max_us"],
            "maxrank_avg_us": r["maxrank_avg_us"], "maxrank_median_us": r["maxrank_median_us"],
            "probe_us": r["probe_us"], "requested": requested, "forced": forced,
            "evidence": evidence, "library": meta.get("library", ""), "host": meta.get("host", ""),
            "date": meta.get("date", ""), "kit_version": __version__, "command": command,
        })
    return out


def collbench_program(flavour):
    """Path of the built collbench for ``flavour``; :class:`ToolMissing` says how to build it."""
    p = paths.collbench_path(flavour)
    if not p.exists():
        raise ToolMissing(f"{p} is not built; run: make -C c_reference FLAVOUR={flavour}")
    return p


def registry(flavour="openmpi", coll="allgather"):
    """The algorithms collbench registers for ``coll``: a list of dicts
    (name, description, cost, restrictions), read from ``collbench --list --json``.

    ``native`` is not in the list; it is always accepted.
    """
    prog = collbench_program(flavour)
    cached = prog.parent / "registry.json"
    if flavour == "smpi":
        # an SMPI binary needs smpirun; use the json the build writes, else the openmpi build's
        if cached.exists():
            text = cached.read_text()
        else:
            return registry("openmpi", coll)
    else:
        try:
            proc = subprocess.run([str(prog), "--coll", coll, "--list", "--json"], capture_output=True,
                                  text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise LaunchError(f"{prog} --list --json timed out") from None
        if proc.returncode != 0:
            if cached.exists():
                text = cached.read_text()
            else:
                raise LaunchError(f"{prog} --list --json failed ({proc.returncode}): {proc.stderr.strip()}")
        else:
            text = proc.stdout
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"{prog} --list --json: line {e.lineno}: {e.msg}") from None
    if data.get("collective", coll) != coll:
        # registry.json holds the allgather table; the other collectives run native only
        return []
    return list(data["algorithms"])


def algorithm_names(flavour="openmpi", coll="allgather"):
    """Registered names plus ``native``."""
    return [a["name"] for a in registry(flavour, coll)] + ["native"]
