"""Run the C benchmark driver ``collbench`` and turn its output into results rows.

Its command line and output are the contract of ``docs/DEVELOPING.md`` section 2; the output
is read by :func:`mpilab.measure.driver.parse` and becomes rows through
:func:`mpilab.core.results.rows`, as every driver's does.
"""

import dataclasses
import functools
import json
from pathlib import Path

from mpilab.core import paths, results
from mpilab.core.errors import ParseError, ToolMissing, one_of
from mpilab.core.vocabulary import COLLECTIVES
from mpilab.measure import driver

PROGRAM = "collbench"
#: The columns of collbench's table (docs/DEVELOPING.md section 2).
COLUMNS = (
    "bytes",
    "count",
    "iterations",
    "avg_us",
    "min_us",
    "max_us",
    "maxrank_avg_us",
    "maxrank_median_us",
    "probe_us",
)


def collbench_args(algo="native", coll="allgather", options=None):
    """collbench's argument list (not including the program) for ``coll``, ``algo`` and the
    benchmark ``options`` (:class:`mpilab.measure.driver.BenchOptions`; default sizes 32:1M)."""
    if coll not in COLLECTIVES:
        raise one_of("collective", coll, COLLECTIVES)
    options = options or driver.BenchOptions()
    lo, hi = options.size_range(PROGRAM, default="32:1M")
    return ["--coll", coll, "--algo", algo, "-m", f"{lo}:{hi}", "--format", "csv"] + dataclasses.replace(
        options, sizes=None
    ).argv(PROGRAM)


def measure(
    launcher,
    coll,
    algo,
    nprocs,
    options=None,
    *,
    mapping="core",
    repetition=0,
    timeout=600,
    program=None,
    **option_fields,
):
    """Run collbench once (every size of ``options``) and return its results rows.

    Parameters
    ----------
    launcher : mpilab.measure.launch.Launcher
    coll, algo : str
        The collective and a kit algorithm (registry name) or ``native``.
    nprocs : int
    options : mpilab.measure.driver.BenchOptions, optional
        The benchmark options; or give them as keywords (``sizes="32:1K", iters=5, ...``).
    mapping : {'core', 'socket', 'node'}
    repetition : int
    timeout : float
        Seconds before the launch is killed.
    program : path, optional
        Another build of collbench (default: the flavour's).

    Returns
    -------
    list of dict
        Rows of the results table (:func:`mpilab.core.results.rows`).
    """
    program = program or collbench_program(launcher.flavour)
    args = collbench_args(algo, coll, driver.options_of(options, **option_fields))
    out, command = driver.run(
        launcher, program, args, nprocs, mapping, timeout, expect=PROGRAM, columns=COLUMNS
    )
    return results.rows(
        out.meta,
        out.table,
        flavour=launcher.flavour,
        launcher=launcher.name,
        platform=launcher.platform,
        mapping=mapping,
        repetition=repetition,
        command=command,
    )


def collbench_program(flavour):
    """Path of the built collbench for ``flavour``; :class:`ToolMissing` says how to build it."""
    p = paths.collbench_path(flavour)
    if not p.exists():
        raise ToolMissing(f"{p} is not built; run: make -C c_reference FLAVOUR={flavour}")
    return p


def registry(flavour="openmpi", coll="allgather"):
    """The algorithms this build of collbench runs for ``coll``: a list of ``{"name": ...}`` (what
    each is: :mod:`mpilab.model.algorithms`). ``native`` is not in the list; it is always accepted.

    Read from the build's ``registry.json``, which the Makefile writes next to collbench from the
    same registry (``collbench --list --json`` prints the same; tests/test_c_reference.py checks
    it), once per build: no MPI launch, and the same answer for every flavour's build.
    """
    if coll not in COLLECTIVES:
        raise one_of("collective", coll, COLLECTIVES)
    prog = collbench_program(flavour)
    path = prog.parent / "registry.json"
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise ToolMissing(f"{path} is not built; run: make -C c_reference FLAVOUR={flavour}") from None
    data = _read_registry(str(path), stamp)
    if data.get("collective", coll) != coll:
        # registry.json holds the allgather table; the other collectives run native only
        return []
    return [dict(a) for a in data["algorithms"]]


@functools.lru_cache(maxsize=8)
def _read_registry(path, stamp):
    """``registry.json`` at ``path`` as written at ``stamp`` (its mtime: a rebuild reads it again)."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ParseError(f"{path}: line {e.lineno}: {e.msg}") from None


def algorithm_names(flavour="openmpi", coll="allgather"):
    """Registered names plus ``native``."""
    return [a["name"] for a in registry(flavour, coll)] + ["native"]
