"""Sweeps: algorithms x process counts x sizes (x repetitions) on one launcher.

One collbench launch per (algorithm, nprocs, repetition) covers the whole size range; its rows
are appended to the results table right after the launch, so a killed sweep loses only the
launch in progress, and a rerun skips every point whose rows are all present.
"""

import re
import sys
import warnings

from tqdm import tqdm

from mpilab.core import results, units
from mpilab.core.errors import one_of, UsageError
from mpilab.measure import collbench, forcing, libalgs
from mpilab.model.stats import measurement_order

MPICH_MAX_NPROCS = 4
#: Collectives with a root (collbench --root).
ROOTED = ("bcast", "reduce")


def parse_nprocs(text):
    """``"1,2,4"`` -> [1, 2, 4]; ranges ``"2..48:2"`` (step) and ``"1..4"`` are expanded.

    Raises
    ------
    UsageError
        For anything that is not a positive integer or a range of them.
    """
    out = []
    for part in str(text).split(","):
        part = part.strip()
        m = re.fullmatch(r"(-?\d+)(?:\.\.(-?\d+)(?::(-?\d+))?)?", part)
        if not m:
            raise UsageError(f"bad process count {part!r} in {text!r}; valid: integers >= 1 "
                             "separated by commas, or ranges like 2..48:2")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if step < 1:
            raise UsageError(f"bad step {step} in {part!r}; valid: a step >= 1")
        for n in (lo, hi):
            if n < 1:
                raise UsageError(f"bad process count {n} in {text!r}; valid: integers >= 1")
        if hi < lo:
            raise UsageError(f"bad range {part!r}: end {hi} < start {lo}")
        out.extend(range(lo, hi + 1, step))
    return sorted(set(out))


def validate_algorithms(algos, valid):
    """Return ``algos`` (a list or comma string) after checking each is in ``valid``."""
    if isinstance(algos, str):
        algos = [a.strip() for a in algos.split(",") if a.strip()]
    if not algos:
        raise UsageError(f"empty algorithm list; valid: {', '.join(valid)}")
    for a in algos:
        if a not in valid:
            raise one_of("algorithm", a, valid)
    return list(algos)


def plan(algos, nprocs, repetitions=1, shuffle=False, seed=None):
    """The (algorithm, nprocs, repetition) launches of a sweep, in run order.

    Unshuffled: repetition by repetition, each going through the process counts and, for each,
    the algorithms. Shuffled: the same launches in a random order
    (:func:`mpilab.model.stats.measurement_order`, reproducible with ``seed``), so that drift in the
    machine does not look like an effect of an algorithm or a process count.
    """
    points = [(a, p) for p in nprocs for a in algos]
    return [(a, p, r) for (a, p), r in measurement_order(points, repetitions, shuffle=shuffle,
                                                           seed=seed)]


def _point_keys(launcher, coll, algo, p, rep, sizes, mapping, datatype="char", root=0):
    rows = [{"collective": coll, "algorithm": algo, "flavour": launcher.flavour,
             "launcher": launcher.name, "platform": launcher.platform, "mapping": mapping,
             "nprocs": p, "bytes": b, "datatype": datatype, "root": root, "repetition": rep}
            for b in sizes]
    return [results.key_of(r) for r in rows]


def run_sweep(launcher, output, algos, nprocs, sizes="32:1M", *, coll="allgather", mapping="core",
              iters=None, warmup=None, iters_large=None, warmup_large=None, repetitions=1,
              check=False, timeout=600, progress=True, program=None, shuffle=False, seed=None,
              probe=None, datatype=None, root=None):
    """Run a sweep and append its rows to ``output``; skip points already measured.

    Parameters
    ----------
    launcher : mpilab.measure.launch.Launcher
    output : str or Path
        The results CSV (created if missing).
    algos : list of str
        The kit's registry names and ``native`` (collbench runs them), and library algorithms
        (:mod:`mpilab.measure.libalgs`, forced and verified; ``lib:ring`` is the library's ring,
        ``ring`` the kit's).
    nprocs : list of int
    sizes : str or (int, int)
        ``"MIN:MAX"`` in bytes (suffixes K, M) or a tuple.
    iters, warmup, iters_large, warmup_large : int, optional
        Passed to collbench (its defaults otherwise).
    repetitions : int
        Independent launches per (algorithm, nprocs).
    check : bool
        Pass ``--check`` (verify every element before timing).
    timeout : float
        Seconds per launch.
    progress : bool
        Show a tqdm bar naming the point being measured.
    probe : int, optional
        Bytes of the ping-pong between ranks 0 and P-1 that collbench times right before each
        size's collective (``--probe``; stored in ``probe_us``).
    shuffle, seed : bool, int
        Run the launches in random order (see :func:`plan`), reproducible with ``seed``.
    datatype : {'char', 'int', 'float', 'double'}, optional
        collbench's ``--datatype`` (default char). Sizes must be multiples of its size.
    root : int, optional
        Root of bcast and reduce (default 0); other collectives have none.

    Returns
    -------
    dict
        ``{"launched": n, "skipped": n, "rows": n, "order": [(algorithm, nprocs, repetition),
        ...]}``, ``order`` being the launches made, in the order they ran.
    """
    if repetitions < 1:
        raise UsageError(f"bad repetitions {repetitions}; valid: an integer >= 1")
    if root not in (None, 0) and coll not in ROOTED:
        raise UsageError(f"--root {root} given for {coll}, which has no root; valid: a root for "
                         f"{' or '.join(ROOTED)} only")
    lo, hi = units.parse_size_range(sizes) if isinstance(sizes, str) else sizes
    size_list = units.sizes_in_range(lo, hi)
    program = program or collbench.collbench_program(launcher.flavour)
    registered = set(collbench.algorithm_names(launcher.flavour, coll))
    # one spelling per algorithm in the table: lib:pipeline is stored as pipeline
    algos = [a if a in registered else libalgs.canonical(coll, a) for a in algos]
    done = results.measured_keys(output)
    points = plan(algos, nprocs, repetitions, shuffle=shuffle, seed=seed)
    key_opts = dict(datatype=datatype or "char", root=root or 0)
    todo = [pt for pt in points
            if not set(_point_keys(launcher, coll, *pt, size_list, mapping, **key_opts)) <= done]
    stats = {"launched": 0, "skipped": len(points) - len(todo), "rows": 0, "order": []}
    bar = tqdm(todo, disable=not progress, unit="launch", file=sys.stderr, dynamic_ncols=True)
    for algo, p, rep in bar:
        bar.set_description(f"{launcher.flavour} {algo} P={p} rep={rep}")
        stats["order"].append((algo, p, rep))
        if algo not in registered:  # a library algorithm (mpilab.measure.libalgs): forced and verified
            rows = forcing.measure(launcher, coll, algo, p, sizes=(lo, hi), mapping=mapping,
                                   repetition=rep, check=check, iters=iters, warmup=warmup,
                                   iters_large=iters_large, warmup_large=warmup_large,
                                   probe=probe, datatype=datatype, root=root, timeout=timeout)
            results.append_rows(output, rows)
            stats["launched"] += 1
            stats["rows"] += len(rows)
            continue
        args = collbench.collbench_args(algo=algo, coll=coll, sizes=(lo, hi), iters=iters,
                                        warmup=warmup, iters_large=iters_large,
                                        warmup_large=warmup_large, check=check, probe=probe,
                                        datatype=datatype, root=root)
        cmd = launcher.command(program, args, p, mapping)
        proc = launcher.run(program, args, p, mapping=mapping, timeout=timeout)
        meta, table = collbench.parse_output(proc.stdout, source=f"output of {cmd}")
        rows = collbench.to_results_rows(meta, table, launcher=launcher.name,
                                         platform=launcher.platform, mapping=mapping,
                                         repetition=rep, flavour=launcher.flavour,
                                         command=str(cmd))
        results.append_rows(output, rows)
        stats["launched"] += 1
        stats["rows"] += len(rows)
    return stats


def check_mpich_nprocs(flavour, nprocs):
    """Warn (not fail) when MPICH runs oversubscribed: it busy-polls and timings mean little."""
    big = [p for p in nprocs if p > MPICH_MAX_NPROCS]
    if flavour == "mpich" and big:
        warnings.warn(f"MPICH busy-polls when oversubscribed; process counts {big} > "
                      f"{MPICH_MAX_NPROCS} will be slow and their timings unrepresentative",
                      stacklevel=2)
        return True
    return False
