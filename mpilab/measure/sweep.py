"""Sweeps: algorithms x process counts x sizes (x repetitions) on one launcher.

One collbench launch per (algorithm, nprocs, repetition) covers the whole size range; its rows
are appended to the results table right after the launch, so a killed sweep loses only the
launch in progress, and a rerun skips every point whose rows are all present.
"""

import re
import sys
import warnings

from tqdm import tqdm

from mpilab.core import results
from mpilab.core.errors import UsageError, one_of
from mpilab.measure import collbench, forcing, libalgs
from mpilab.measure.driver import BenchOptions
from mpilab.model.stats import measurement_order

MPICH_MAX_NPROCS = 4
#: Collectives with a root (collbench --root).
ROOTED = ("bcast", "reduce")

#: What a launch needs besides its message buffers, measured here (PSS, which counts SMPI's
#: folded buffers once): an SMPI rank about 1.2 MiB (P = 512 and 1,024, 1 MiB allgather), the
#: simulator itself and a 1,024-host platform 0.15 GiB; a real Open MPI or MPICH rank tens of
#: MiB. Rounded up: the estimate is meant to refuse what cannot fit, not to be exact.
SMPI_RANK_BYTES = 2 << 20
SMPI_BASE_BYTES = 512 << 20
REAL_RANK_BYTES = 64 << 20
#: Launchers whose ranks run on this machine (srun's run on the cluster's nodes).
LOCAL_LAUNCHERS = ("mpirun", "smpirun", "apptainer")


def available_memory():
    """Bytes this machine can give a launch now: ``MemAvailable`` of ``/proc/meminfo``
    (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_estimate(flavour, coll, algo, nprocs, nbytes, check=False):
    """Bytes one collbench launch needs at its largest size, and how that was counted.

    Each rank has a send buffer of ``nbytes``, a receive buffer (``nprocs`` blocks for
    allgather, else ``nbytes``) and, for an allgather that may use one (Bruck, the library's
    own), a temporary buffer of ``nprocs`` blocks. Under SMPI without ``check`` collbench's
    buffers and the kit's temporary buffers are folded (SMPI_SHARED_MALLOC, content-free) and
    only the simulator's own memory counts; with ``check`` every rank's buffers are real.

    Returns
    -------
    (int, str)
    """
    recv = nprocs * nbytes if coll == "allgather" else nbytes
    temp = nprocs * nbytes if coll == "allgather" and algo not in ("ring", "pairwise", "gather_bcast") else 0
    buffers = nbytes + recv + temp
    parts = (
        f"{_gib(nbytes)} sent + {_gib(recv)} received"
        + (f" + {_gib(temp)} temporary" if temp else "")
        + " per rank"
    )
    if flavour == "smpi":
        base = SMPI_BASE_BYTES + nprocs * SMPI_RANK_BYTES
        if not check:
            return base, (
                f"the simulator: {_gib(SMPI_BASE_BYTES)} + {nprocs} ranks x "
                f"{_gib(SMPI_RANK_BYTES)}; buffers folded ({parts}, content-free)"
            )
        return base + nprocs * buffers, (
            f"{nprocs} ranks x ({parts}), real with --check, + the simulator {_gib(base)}"
        )
    return nprocs * (REAL_RANK_BYTES + buffers), (
        f"{nprocs} ranks x ({parts} + {_gib(REAL_RANK_BYTES)} of MPI library)"
    )


def _gib(b):
    """1.5 GiB, 512 MiB, 2.05 TiB: three significant digits in the largest binary unit."""
    for unit, f in (("TiB", 2**40), ("GiB", 2**30)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b / 2**20:.3g} MiB"


def check_memory(launcher, coll, points, nbytes, check=False, limit=None):
    """Refuse (UsageError) the sweep if any (algorithm, nprocs) point will not fit in memory.

    ``limit`` defaults to :func:`available_memory`; launches on a cluster (srun) are not
    checked. The message names each point, its size, the estimate and the limit.
    """
    if launcher.name not in LOCAL_LAUNCHERS:
        return
    limit = available_memory() if limit is None else limit
    if limit is None:
        return
    too_big = []
    for algo, p in sorted(set(points), key=lambda x: (x[1], x[0])):
        need, how = memory_estimate(launcher.flavour, coll, algo, p, nbytes, check)
        if need > limit:
            too_big.append(f"{coll} {algo} at P = {p}, {nbytes} bytes per rank: about {_gib(need)} ({how})")
    if too_big:
        hint = (
            " or run without --check (SMPI then folds the buffers)"
            if check and launcher.flavour == "smpi"
            else ""
        )
        raise UsageError(
            f"will not fit in memory, not launched: {'; '.join(too_big)}; the limit "
            f"is {_gib(limit)} (MemAvailable of this machine). Use fewer ranks or "
            f"smaller sizes{hint}"
        )


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
            raise UsageError(
                f"bad process count {part!r} in {text!r}; valid: integers >= 1 "
                "separated by commas, or ranges like 2..48:2"
            )
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
    return [(a, p, r) for (a, p), r in measurement_order(points, repetitions, shuffle=shuffle, seed=seed)]


def _point_keys(launcher, coll, algo, p, rep, sizes, mapping, datatype="char", root=0):
    rows = [
        {
            "collective": coll,
            "algorithm": algo,
            "flavour": launcher.flavour,
            "launcher": launcher.name,
            "platform": launcher.platform,
            "mapping": mapping,
            "nprocs": p,
            "bytes": b,
            "datatype": datatype,
            "root": root,
            "repetition": rep,
        }
        for b in sizes
    ]
    return [results.key_of(r) for r in rows]


def run_sweep(
    launcher,
    output,
    algos,
    nprocs,
    sizes="32:1M",
    *,
    coll="allgather",
    mapping="core",
    iters=None,
    warmup=None,
    iters_large=None,
    warmup_large=None,
    repetitions=1,
    check=False,
    timeout=600,
    progress=True,
    program=None,
    shuffle=False,
    seed=None,
    probe=None,
    datatype=None,
    root=None,
    memory_limit=None,
):
    """Run a sweep and append its rows to ``output``; skip points already measured.

    Before launching anything it refuses (``UsageError``) a sweep with a point that will not
    fit in this machine's memory (:func:`check_memory`).

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
    memory_limit : int, optional
        Bytes a launch may use (default: :func:`available_memory`).

    Returns
    -------
    dict
        ``{"launched": n, "skipped": n, "rows": n, "order": [(algorithm, nprocs, repetition),
        ...]}``, ``order`` being the launches made, in the order they ran.
    """
    if repetitions < 1:
        raise UsageError(f"bad repetitions {repetitions}; valid: an integer >= 1")
    if root not in (None, 0) and coll not in ROOTED:
        raise UsageError(
            f"--root {root} given for {coll}, which has no root; valid: a root for {' or '.join(ROOTED)} only"
        )
    options = BenchOptions(
        sizes=sizes,
        iters=iters,
        warmup=warmup,
        iters_large=iters_large,
        warmup_large=warmup_large,
        check=check,
        probe=probe,
        datatype=datatype,
        root=root,
    )
    size_list = options.size_list(collbench.PROGRAM)
    registered = set(collbench.algorithm_names(launcher.flavour, coll))
    # one spelling per algorithm in the table: lib:pipeline is stored as pipeline
    algos = [a if a in registered else libalgs.canonical(coll, a) for a in algos]
    done = results.measured_keys(output)
    points = plan(algos, nprocs, repetitions, shuffle=shuffle, seed=seed)
    key_opts = dict(datatype=datatype or "char", root=root or 0)
    todo = [
        pt
        for pt in points
        if not set(_point_keys(launcher, coll, *pt, size_list, mapping, **key_opts)) <= done
    ]
    check_memory(launcher, coll, [(a, p) for a, p, _ in todo], max(size_list), check, memory_limit)
    stats = {"launched": 0, "skipped": len(points) - len(todo), "rows": 0, "order": []}
    bar = tqdm(todo, disable=not progress, unit="launch", file=sys.stderr, dynamic_ncols=True)
    for algo, p, rep in bar:
        bar.set_description(f"{launcher.flavour} {algo} P={p} rep={rep}")
        stats["order"].append((algo, p, rep))
        if algo in registered:
            rows = collbench.measure(
                launcher,
                coll,
                algo,
                p,
                options,
                mapping=mapping,
                repetition=rep,
                timeout=timeout,
                program=program,
            )
        else:  # a library algorithm (mpilab.measure.libalgs): forced and verified
            rows = forcing.measure(
                launcher, coll, algo, p, options, mapping=mapping, repetition=rep, timeout=timeout
            )
        results.append_rows(output, rows)
        stats["launched"] += 1
        stats["rows"] += len(rows)
    return stats


def check_mpich_nprocs(flavour, nprocs):
    """Warn (not fail) when MPICH runs oversubscribed: it busy-polls and timings mean little."""
    big = [p for p in nprocs if p > MPICH_MAX_NPROCS]
    if flavour == "mpich" and big:
        warnings.warn(
            f"MPICH busy-polls when oversubscribed; process counts {big} > "
            f"{MPICH_MAX_NPROCS} will be slow and their timings unrepresentative",
            stacklevel=2,
        )
        return True
    return False
