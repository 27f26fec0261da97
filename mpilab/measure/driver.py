"""The driver contract: the options a C benchmark takes and the output it prints, read once.

Every C program of the kit that measures something (``collbench``, ``pingpong``, ``timeline``,
lab 3's ``bench_reduce``, the grader's ``check_student``) prints from rank 0 the provenance block
of ``c_reference/include/labprov.h``, its own ``# key: value`` parameters, then one CSV table
(docs/DEVELOPING.md section 2)::

    # collbench 1
    # library: Open MPI v4.1.4, ...
    # flavour: openmpi
    # nprocs: 4
    # host: myhost
    # date: 2026-11-22T23:50:00Z
    # collective: allgather
    ...
    bytes,count,iterations,avg_us,...
    32,32,100,1.234,...

:func:`parse` reads that output, whatever the program and its columns; :class:`BenchOptions`
holds the benchmark options (sizes, iterations, warm-up, datatype, root, check, probe) and
spells them as each program's arguments; :func:`run` launches a program and parses what it
printed. :func:`mpilab.core.results.rows` turns the parsed output into rows of the results table.

>>> out = parse("# mybench 1\\n# nprocs: 2\\nalgorithm,bytes,maxrank_avg_us\\nring,8,1.5\\n")
>>> out.program, out.meta, out.table
('mybench', {'nprocs': '2'}, [{'algorithm': 'ring', 'bytes': 8, 'maxrank_avg_us': 1.5}])
"""

import csv
import io
import re
from dataclasses import dataclass, field

from mpilab.core import units
from mpilab.core.errors import ParseError, UsageError, one_of

#: Table columns read as integers; :data:`TEXT_FIELDS` as text; any other column is a number of
#: microseconds (or another measure), read as a float, empty for "not measured".
INT_FIELDS = ("bytes", "count", "iterations", "warmup", "nprocs", "root", "rep", "repetition")
TEXT_FIELDS = ("collective", "algorithm", "datatype", "flavour", "progress")  # progress: lab 6's overlap.c
#: ``--datatype`` of collbench.
DATATYPES = ("char", "int", "float", "double")

_OPENING = re.compile(r"#\s*([A-Za-z_][\w-]*)\s+(\d+)\s*$")
_KEY = re.compile(r"[a-z_]+")


@dataclass
class Output:
    """What a driver printed: who printed it, its provenance, its table.

    Attributes
    ----------
    program, version : str
        From the opening line ``# <program> <version>`` (empty when there is none).
    meta : dict of str
        The ``# key: value`` lines, values as printed.
    columns : tuple of str
        The table's header.
    table : list of dict
        One dict per line of the table, typed (:data:`INT_FIELDS`, :data:`TEXT_FIELDS`, floats;
        an empty field is None).
    """

    program: str
    version: str
    meta: dict
    columns: tuple
    table: list = field(default_factory=list)


def _value(name, text):
    text = text.strip()
    if name in TEXT_FIELDS:
        return text
    if text == "":
        return None
    return int(text) if name in INT_FIELDS else float(text)


def parse(text, source="driver output", program=None, columns=None):
    """Read a driver's output (the contract above).

    Parameters
    ----------
    text : str
        The program's standard output.
    source : str
        What to call it in error messages (a file name, a command line).
    program : str, optional
        The program that must have printed it (its opening line ``# <program> N``).
    columns : sequence of str, optional
        The header the table must have.

    Returns
    -------
    Output

    Raises
    ------
    ParseError
        Naming the line number and text of the first line that does not fit.
    """
    name = version = ""
    meta, header, rows = {}, None, []
    lines = text.splitlines()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            opening = _OPENING.fullmatch(line)
            if opening:
                name, version = opening.groups()
                if program is not None and name != program:
                    raise ParseError(f"{source}: line {no}: expected the output of {program}, got {line!r}")
                continue
            key, sep, value = line[1:].strip().partition(":")
            if not sep or not _KEY.fullmatch(key.strip()):
                raise ParseError(f"{source}: line {no}: expected '# key: value', got {line!r}")
            meta[key.strip()] = value.strip()
            continue
        if header is None:
            header = tuple(h.strip() for h in line.split(","))
            if columns is not None and header != tuple(columns):
                raise ParseError(f"{source}: line {no}: expected header {','.join(columns)}, got {line!r}")
            continue
        fields = next(csv.reader(io.StringIO(line)))
        if len(fields) != len(header):
            raise ParseError(
                f"{source}: line {no}: expected {len(header)} fields, got {len(fields)}: {line!r}"
            )
        try:
            rows.append({h: _value(h, v) for h, v in zip(header, fields)})
        except ValueError:
            raise ParseError(f"{source}: line {no}: non-numeric field in {line!r}") from None
    if header is None:
        want = f" {','.join(columns)}" if columns else ""
        raise ParseError(f"{source}: no table header{want} found ({len(lines)} lines)")
    if program is not None and not name:
        raise ParseError(f"{source}: no opening line '# {program} <version>'")
    return Output(name, version, meta, header, rows)


def _count(flag, value, least):
    """``value`` as an int >= ``least`` (None stays None); a UsageError naming it otherwise."""
    if value is None:
        return None
    try:
        v = int(value)
        whole = not isinstance(value, bool) and (not isinstance(value, float) or v == value)
    except (TypeError, ValueError):
        whole = False
    if not whole or v < least:
        raise UsageError(f"bad {flag} {value!r}; valid: an integer >= {least}")
    return v


#: The options each program takes, by :class:`BenchOptions` field.
ACCEPTS = {
    "collbench": (
        "sizes",
        "iters",
        "warmup",
        "iters_large",
        "warmup_large",
        "datatype",
        "root",
        "check",
        "probe",
    ),
    "pingpong": ("sizes", "iters", "warmup", "iters_large", "warmup_large"),
    "bench_reduce": ("sizes", "iters", "warmup", "check"),
}
#: The least size each program measures (collbench as OSU's collectives, pingpong as osu_latency).
SMALLEST = {"collbench": 1, "pingpong": 0, "bench_reduce": 8}


@dataclass(frozen=True)
class BenchOptions:
    """The benchmark options of the kit's drivers, checked once, spelled per program.

    Attributes
    ----------
    sizes : str, (int, int) or sequence of int, optional
        ``"MIN:MAX"`` in bytes (K/M suffixes; ``"MAX"`` alone starts at the program's smallest
        size) or a ``(MIN, MAX)`` pair: sizes double from MIN to MAX. ``bench_reduce`` takes a
        list of sizes instead.
    iters, warmup : int, optional
        Timed and untimed iterations up to 8 KiB (the program's defaults when None).
    iters_large, warmup_large : int, optional
        The same above 8 KiB.
    datatype : {'char', 'int', 'float', 'double'}, optional
    root : int, optional
        Root rank of bcast and reduce.
    check : bool
        Verify every element of every size before timing.
    probe : int, optional
        Bytes of the ping-pong between ranks 0 and P-1 timed right before each size.
    """

    sizes: object = None
    iters: object = None
    warmup: object = None
    iters_large: object = None
    warmup_large: object = None
    datatype: object = None
    root: object = None
    check: bool = False
    probe: object = None

    def __post_init__(self):
        for flag, least in (
            ("iters", 1),
            ("warmup", 0),
            ("iters_large", 1),
            ("warmup_large", 0),
            ("root", 0),
            ("probe", 0),
        ):
            object.__setattr__(self, flag, _count(flag.replace("_", "-"), getattr(self, flag), least))
        if self.datatype is not None and self.datatype not in DATATYPES:
            raise one_of("datatype", self.datatype, DATATYPES)

    def size_range(self, program="collbench", default=None):
        """``(MIN, MAX)`` bytes of :attr:`sizes` (or of ``default``) for ``program``."""
        sizes = self.sizes if self.sizes is not None else default
        if sizes is None:
            raise UsageError(f"no sizes given for {program}; valid: MIN:MAX bytes, e.g. 32:1M")
        if isinstance(sizes, str):
            return units.parse_size_range(sizes, smallest=SMALLEST.get(program, 1))
        lo, hi = sizes
        return int(lo), int(hi)

    def size_list(self, program="collbench", default=None):
        """Every size the program measures: the doubling sizes of :meth:`size_range`, or for
        ``bench_reduce`` the list itself."""
        if program == "bench_reduce":
            return [int(s) for s in (self.sizes if self.sizes is not None else default)]
        return units.sizes_in_range(*self.size_range(program, default))

    def argv(self, program="collbench"):
        """The options as ``program``'s arguments (options left None are not passed).

        Raises
        ------
        UsageError
            For an option the program does not take (pingpong has no ``--datatype``).
        """
        if program not in ACCEPTS:
            raise one_of("driver", program, ACCEPTS)
        given = [
            f
            for f in ("sizes", "iters", "warmup", "iters_large", "warmup_large", "datatype", "root", "probe")
            if getattr(self, f) is not None
        ]
        given += ["check"] if self.check else []
        refused = [f for f in given if f not in ACCEPTS[program]]
        if refused:
            raise UsageError(
                f"{program} does not take {', '.join(refused)}; valid: {', '.join(ACCEPTS[program])}"
            )
        args = []
        if self.sizes is not None:
            if program == "bench_reduce":
                args += ["--sizes", ",".join(map(str, self.size_list(program)))]
            else:
                lo, hi = self.size_range(program)
                args += ["-m", f"{lo}:{hi}"]
        for name in ("iters", "warmup", "iters_large", "warmup_large", "root", "probe"):
            value = getattr(self, name)
            if value is not None:
                args += ["--" + name.replace("_", "-"), str(value)]
        if self.datatype is not None:
            args += ["--datatype", self.datatype]
        if self.check:
            args.append("--check")
        return args


def options_of(options=None, **fields):
    """``options`` (a :class:`BenchOptions`) or one made of ``fields``; not both."""
    if options is None:
        return BenchOptions(**fields)
    if fields:
        raise UsageError(
            f"give the benchmark options either as options= or as keywords, not "
            f"both (got options and {', '.join(sorted(fields))})"
        )
    return options


def run(launcher, program, args, nprocs, mapping="core", timeout=600, expect=None, columns=None, cwd=None):
    """Launch ``program args`` on ``nprocs`` ranks and parse its output.

    Parameters
    ----------
    launcher : mpilab.measure.launch.Launcher
    program : path
        The built driver.
    args : list of str
    expect, columns : str, sequence of str, optional
        The program name and table header the output must have (:func:`parse`).
    cwd : path, optional
        The directory the ranks run in (default: the launcher's).

    Returns
    -------
    (Output, str)
        The parsed output and the command line that ran (with its environment), for the
        results table's ``command`` column.
    """
    cmd = launcher.command(program, args, nprocs, mapping)
    proc = launcher.run(program, args, nprocs, mapping=mapping, timeout=timeout, cwd=cwd)
    return parse(proc.stdout, source=f"output of {cmd}", program=expect, columns=columns), str(cmd)
