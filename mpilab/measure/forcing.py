"""Force a library collective algorithm and verify that the forcing took effect.

MPI libraries fail silently when asked for an algorithm: Open MPI ignores
``coll_tuned_<coll>_algorithm`` without ``coll_tuned_use_dynamic_rules``, MPICH falls back
unless ``MPIR_CVAR_COLLECTIVE_FALLBACK=error``. Every row this module produces records
``requested`` (the kit's name), ``forced`` (``yes`` | ``no`` | ``unverified`` | ``fallback``) and
``evidence`` (the text that justifies it). A run of ``default`` is always ``forced=no``;
``fallback`` marks a size at which the forced library hands the call to another algorithm
(:data:`FALLBACKS`).

The signals, and their limits:

SMPI (SimGrid 3.32)
    smpirun logs ``[smpi_coll/INFO] Switch to algorithm NAME for collective COLL`` on stderr
    when ``--cfg=smpi/COLL:NAME`` is applied. ``yes`` when that line names the requested
    algorithm. Limit: it shows the configured algorithm, which SMPI then always calls (SMPI has
    no silent fallback), so this is the strongest of the three signals. Where SimGrid has no
    faithful copy of Open MPI's algorithm (chain and pipeline, bcast and reduce:
    :mod:`mpilab.measure.libalgs`), collbench runs the kit's clone instead (``--algo
    ompi_chain``), given Open MPI's own segment size and fan-out variables: ``yes``, the
    evidence naming the clone's file and what it was given.
Open MPI 4.1
    We add ``OMPI_MCA_mpi_show_mca_params=enviro`` (each rank echoes the MCA parameters it read
    from the environment, resolved to the enum name, e.g. ``coll_tuned_bcast_algorithm=chain
    (environment)``) and ``OMPI_MCA_coll_base_verbose=10`` (prints the coll component selection:
    ``selecting tuned, priority 30, Enabled``). ``yes`` when the echo shows dynamic rules on and
    the requested algorithm, and tuned is enabled with no higher-priority component enabled
    other than ``self`` (which only serves MPI_COMM_SELF). Limits: this proves that coll/tuned
    serves the communicator and read the forced id; it does not trace inside the algorithm, so
    an algorithm's own internal special cases (e.g. a segmented algorithm on a message smaller
    than one segment) are not visible.
Per size: known internal fallbacks
    The signals above are per launch. Inside a forced algorithm a library may still hand some
    calls to another algorithm, silently, depending on the element count and P: Open MPI 4.1's
    bcast ``scatter_allgather`` runs ``basic_linear`` when count < P, for example. These cases,
    read from the libraries' sources, are the table :data:`FALLBACKS`; a row whose (count, P)
    falls under one gets ``forced=fallback`` and the evidence names what ran instead and the
    condition. An algorithm that refuses a case instead (Open MPI's allgather ``two_proc`` at
    P != 2 returns ``MPI_ERR_UNSUPPORTED_OPERATION``) is refused by :func:`measure` before the
    launch. MPICH needs no such table: with ``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` its
    restrictions abort the call (handled below) and its scatter-allgather broadcasts have no
    count < P switch (they scatter zero-byte blocks).
MPICH 4.0.2
    MPICH prints no CVAR echo (``MPIR_CVAR_DEBUG_SUMMARY`` prints only structure sizes). The
    signal is negative but real: an invalid ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` value aborts
    ``MPI_Init`` ("Invalid ... value"), and with ``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` and
    ``MPIR_CVAR_DEVICE_COLLECTIVES=none`` an algorithm that cannot run aborts the collective
    ("User set collective algorithm is not usable"), instead of silently running another. So a
    run that completes with those settings ran the requested algorithm: ``yes``, with the
    evidence saying it is inferred from the absence of the abort. Limit: nothing positive is
    printed; if MPICH's dispatch changes, the inference does.
"""

import re
import subprocess
from dataclasses import dataclass

from mpilab.core import results
from mpilab.core.errors import LaunchError, UsageError
from mpilab.measure import collbench, driver, libalgs

_SMPI_SWITCH = re.compile(r"Switch to algorithm (\S+) for collective (\w+)")
_OMPI_ECHO = re.compile(r"\] (coll_tuned_\w+)=(\S+) \((?:environment|command line)\)")
_OMPI_SELECT = re.compile(r"coll:base:comm_select: selecting\s+(\w+), priority\s+(-?\d+), Enabled")

OMPI_VERIFY_ENV = {"OMPI_MCA_mpi_show_mca_params": "enviro", "OMPI_MCA_coll_base_verbose": "10"}


def _pof2_floor(p):
    """The largest power of two <= p (Open MPI's ``nprocs_pof2``)."""
    return 1 << (int(p).bit_length() - 1)


def _segcount(count, type_size, segsize):
    """Open MPI's ``COLL_BASE_COMPUTED_SEGCOUNT``: elements per segment (``count`` when the
    segment size is 0, smaller than one element, or not smaller than the message)."""
    if segsize >= type_size and segsize < type_size * count:
        seg = segsize // type_size
        if segsize - seg * type_size > type_size // 2:
            seg += 1
        return seg
    return count


@dataclass(frozen=True)
class Fallback:
    """A case where a library, forced to run ``algorithm``, silently runs another one.

    Attributes
    ----------
    flavour, collective, algorithm : str
        Where the rule holds (the kit's names, :mod:`mpilab.measure.libalgs`).
    when : str
        The condition, in the terms of :meth:`runs` (count = elements per call, P, type size
        in bytes, segsize = the segment size the library was given).
    source : str
        The library function that decides (Open MPI 4.1.4 ``coll_base_*.c``, SimGrid 3.32
        ``src/smpi/colls``).
    replacement : callable
        ``(count, nprocs, type_size, segsize) -> str or None``: what runs instead, None when
        the forced algorithm itself runs.
    fails : bool
        The library returns an error instead of running anything (no row can be measured).
    """

    flavour: str
    collective: str
    algorithm: str
    when: str
    source: str
    replacement: object
    fails: bool = False

    def runs(self, count, nprocs, type_size=1, segsize=0):
        """What the library runs for one call, or None when the forced algorithm runs."""
        return self.replacement(int(count), int(nprocs), int(type_size), int(segsize or 0))


def _ompi_split_bintree(count, p, ts, seg):
    halves = (count + 1) // 2, count // 2
    if 0 in halves or (seg > 0 and max(seg, ts) > min(halves) * ts):
        return "chain (fanout 1)"
    return None


def _ompi_segmented_ring(count, p, ts, seg):
    if count < p * _segcount(count, ts, seg):
        return "recursive_doubling" if count < p else "ring"
    return None


def _smpi_segmented_ring(count, p, ts, seg):
    # SimGrid's copy fixes the segment at 1 MiB, then its ring ("lr") has its own switch
    if count < p * _segcount(count, ts, 1 << 20):
        return "default (via lr)" if count < p else "lr (ring)"
    return None


_OMPI = "Open MPI 4.1.4 ompi/mca/coll/base/"
_SG = "SimGrid 3.32 src/smpi/colls/"

#: Known silent fallbacks inside forced algorithms, per (count, P). See :class:`Fallback`.
FALLBACKS = (
    Fallback(
        "openmpi",
        "bcast",
        "split_binary_tree",
        "count < 2, or segsize > 0 and max(segsize, type size) > floor(count/2) x type size "
        "(the message is too small to split into two halves of segments)",
        _OMPI + "coll_base_bcast.c ompi_coll_base_bcast_intra_split_bintree",
        _ompi_split_bintree,
    ),
    Fallback(
        "openmpi",
        "bcast",
        "scatter_allgather",
        "count < P",
        _OMPI + "coll_base_bcast.c ompi_coll_base_bcast_intra_scatter_allgather",
        lambda c, p, ts, seg: "basic_linear" if c < p else None,
    ),
    Fallback(
        "openmpi",
        "bcast",
        "scatter_allgather_ring",
        "count < P",
        _OMPI + "coll_base_bcast.c ompi_coll_base_bcast_intra_scatter_allgather_ring",
        lambda c, p, ts, seg: "basic_linear" if c < p else None,
    ),
    Fallback(
        "openmpi",
        "reduce",
        "rabenseifner",
        "count < the largest power of two <= P (for a commutative op such as MPI_SUM)",
        _OMPI + "coll_base_reduce.c ompi_coll_base_reduce_intra_redscat_gather",
        lambda c, p, ts, seg: "basic_linear" if c < _pof2_floor(p) else None,
    ),
    Fallback(
        "openmpi",
        "allreduce",
        "ring",
        "count < P",
        _OMPI + "coll_base_allreduce.c ompi_coll_base_allreduce_intra_ring",
        lambda c, p, ts, seg: "recursive_doubling" if c < p else None,
    ),
    Fallback(
        "openmpi",
        "allreduce",
        "segmented_ring",
        "count < P x segcount (segcount = count when segsize is 0: always, at P >= 2), "
        "then the ring's own count < P",
        _OMPI + "coll_base_allreduce.c ompi_coll_base_allreduce_intra_ring_segmented",
        _ompi_segmented_ring,
    ),
    Fallback(
        "openmpi",
        "allreduce",
        "rabenseifner",
        "count < the largest power of two <= P (for a commutative op such as MPI_SUM)",
        _OMPI + "coll_base_allreduce.c ompi_coll_base_allreduce_intra_redscat_allgather",
        lambda c, p, ts, seg: "basic_linear" if c < _pof2_floor(p) else None,
    ),
    Fallback(
        "openmpi",
        "allgather",
        "recursive_doubling",
        "P is not a power of two",
        _OMPI + "coll_base_allgather.c ompi_coll_base_allgather_intra_recursivedoubling",
        lambda c, p, ts, seg: "lib:bruck" if p & (p - 1) else None,
    ),
    Fallback(
        "openmpi",
        "allgather",
        "neighbor",
        "P is odd",
        _OMPI + "coll_base_allgather.c ompi_coll_base_allgather_intra_neighborexchange",
        lambda c, p, ts, seg: "lib:ring" if p % 2 else None,
    ),
    Fallback(
        "openmpi",
        "allgather",
        "two_proc",
        "P != 2 (returns MPI_ERR_UNSUPPORTED_OPERATION)",
        _OMPI + "coll_base_allgather.c ompi_coll_base_allgather_intra_two_procs",
        lambda c, p, ts, seg: "nothing (an MPI error)" if p != 2 else None,
        fails=True,
    ),
    Fallback(
        "smpi",
        "allreduce",
        "ring",
        "count < P (SimGrid warns 'MPI_allreduce_lr use default')",
        _SG + "allreduce/allreduce-lr.cpp allreduce__lr",
        lambda c, p, ts, seg: "default" if c < p else None,
    ),
    Fallback(
        "smpi",
        "allreduce",
        "segmented_ring",
        "count < P x segcount, the segment fixed at 1 MiB (so every message up to P MiB), "
        "then lr's own count < P",
        _SG + "allreduce/allreduce-ompi-ring-segmented.cpp allreduce__ompi_ring_segmented",
        _smpi_segmented_ring,
    ),
    Fallback(
        "smpi",
        "allgather",
        "neighbor",
        "P is odd",
        _SG + "allgather/allgather-ompi-neighborexchange.cpp",
        lambda c, p, ts, seg: (
            ("SimGrid's allgather ring (each rank's block sent straight to every other rank, not lib:ring)")
            if p % 2
            else None
        ),
    ),
)


def fallback(flavour, collective, name, count, nprocs, type_size=1, segsize=0):
    """The :class:`Fallback` that applies to one call, and what runs: ``(rule, runs)``.

    ``(None, None)`` when the forced algorithm runs (as far as :data:`FALLBACKS` knows).
    """
    name = libalgs.canonical(collective, name)
    for rule in FALLBACKS:
        if (rule.flavour, rule.collective, rule.algorithm) == (flavour, collective, name):
            runs = rule.runs(count, nprocs, type_size, segsize)
            if runs is not None:
                return rule, runs
    return None, None


def prepare(flavour, collective, name, segsize=None, chain_fanout=None):
    """Return :class:`mpilab.measure.libalgs.Settings` that force ``name`` and make the run verifiable.

    For Open MPI this adds :data:`OMPI_VERIFY_ENV` to the forcing parameters; ``segsize`` and
    ``chain_fanout`` (Open MPI only) replace the segment size and the number of chains
    (:func:`mpilab.measure.libalgs.settings`).
    """
    s = libalgs.settings(flavour, collective, name, segsize=segsize, chain_fanout=chain_fanout)
    if flavour == "openmpi" and s.forcing:
        s.env.update(OMPI_VERIFY_ENV)
    return s


def _ompi_name_matches(echoed, name):
    e = echoed.replace("-", "_")
    name = name[len(libalgs.PREFIX) :] if name.startswith(libalgs.PREFIX) else name
    return e == name or (e == "linear" and name == "basic_linear")


def verify(flavour, collective, name, stderr, returncode=0):
    """Decide from a run's stderr whether ``name`` was really forced.

    Parameters
    ----------
    flavour, collective, name : str
        What was requested (kit names, see :mod:`mpilab.measure.libalgs`).
    stderr : str
        The launched program's standard error.
    returncode : int
        Its exit status.

    Returns
    -------
    (str, str)
        ``forced`` in {'yes', 'no', 'unverified'} and the evidence text.
    """
    alg = libalgs.lookup(collective, name)
    name = alg.name
    if name == "default":
        return "no", "library default; nothing forced"
    if returncode != 0:
        return "no", f"run failed (exit {returncode})"
    if flavour == "smpi" and (alg.smpi or "").startswith(libalgs.KIT_PREFIX):
        clone = alg.smpi[len(libalgs.KIT_PREFIX) :]
        return "yes", (
            f"the kit's clone of Open MPI 4.1's forced {name} (c_reference/{collective}/{clone}.c), "
            "run by collbench instead of SimGrid's call"
        )
    if flavour == "smpi":
        switches = {c: a for a, c in _SMPI_SWITCH.findall(stderr)}
        got = switches.get(collective)
        if got == alg.smpi:
            return "yes", f"smpirun: Switch to algorithm {got} for collective {collective}"
        if got:
            return "no", f"smpirun switched {collective} to {got}, not {alg.smpi}"
        return "unverified", f"smpirun printed no 'Switch to algorithm' line for {collective}"
    if flavour == "openmpi":
        echo = dict(_OMPI_ECHO.findall(stderr))
        dyn = echo.get("coll_tuned_use_dynamic_rules")
        got = echo.get(f"coll_tuned_{collective}_algorithm")
        sel = [(c, int(p)) for c, p in _OMPI_SELECT.findall(stderr)]
        tuned = any(c == "tuned" for c, _ in sel)
        above = sorted({c for c, p in sel if p > 30 and c != "self"})
        if not echo:
            return "unverified", "Open MPI echoed no MCA parameters (mpi_show_mca_params not honoured)"
        rules = echo.get("coll_tuned_dynamic_rules_filename")
        if rules:
            return "no", (
                f"Open MPI read a rules file, coll_tuned_dynamic_rules_filename={rules}: "
                f"Open MPI 4.1 consults it before coll_tuned_{collective}_algorithm, so "
                f"the file, not the forced {name}, decides wherever it has a rule"
            )
        if dyn not in ("true", "1") or got is None or not _ompi_name_matches(got, name):
            return "no", (
                f"Open MPI read coll_tuned_use_dynamic_rules={dyn}, "
                f"coll_tuned_{collective}_algorithm={got}; requested {name}"
            )
        if not tuned or above:
            return "no", f"coll/tuned not the selected component (enabled above it: {above})"
        return "yes", (
            f"Open MPI echoed coll_tuned_use_dynamic_rules={dyn}, "
            f"coll_tuned_{collective}_algorithm={got}; coll_base_verbose: tuned "
            f"Enabled at priority 30, nothing higher but self"
        )
    if flavour == "mpich":
        return "yes", (
            f"MPICH ran with MPIR_CVAR_{collective.upper()}_INTRA_ALGORITHM={alg.mpich}, "
            "DEVICE_COLLECTIVES=none, COLLECTIVE_FALLBACK=error and did not abort "
            "(inferred: MPICH prints no positive signal)"
        )
    libalgs.check_flavour(flavour)


def run(launcher, program, args, nprocs, settings, mapping="core", timeout=600):
    """Launch ``program`` with ``launcher`` plus the forcing ``settings``; return CompletedProcess.

    Unlike a plain ``launcher.run`` this returns failed runs too (their stderr is evidence);
    ``args`` of the result is the command line with the forcing environment in front.
    """
    if launcher.flavour == "smpi" and settings.args:
        launcher = launcher.with_cfg(settings.args)
    proc = launcher.run(program, args, nprocs, mapping, timeout=timeout, env=settings.env, check=False)
    cmdline = " ".join(f"{k}={v}" for k, v in sorted(settings.env.items()))
    cmdline = (cmdline + " " if cmdline else "") + " ".join(map(str, proc.args))
    return subprocess.CompletedProcess(cmdline, proc.returncode, proc.stdout, proc.stderr)


def measure(
    launcher,
    collective,
    name,
    nprocs,
    options=None,
    *,
    mapping="core",
    repetition=0,
    timeout=600,
    segsize=None,
    chain_fanout=None,
    **option_fields,
):
    """Run collbench's native ``collective`` with library algorithm ``name`` forced.

    Parameters
    ----------
    launcher : mpilab.measure.launch.Launcher
    collective, name : str
        The collective and a library algorithm (:mod:`mpilab.measure.libalgs`).
    nprocs : int
    options : mpilab.measure.driver.BenchOptions, optional
        The benchmark options; or give them as keywords (``sizes="2:1M", iters=5, ...``).
    mapping, repetition, timeout
        As for :func:`mpilab.measure.collbench.measure`.
    segsize, chain_fanout : int, optional
        Open MPI (and the kit's clones of its chain and pipeline under SMPI): the segment size in
        bytes and the number of chains the library is given (:func:`prepare`); the rows'
        ``evidence`` names them.

    Returns
    -------
    list of dict
        Results-table rows, each with ``algorithm=name``, ``requested=name`` and the
        ``forced``/``evidence`` that :func:`verify` found.

    Raises
    ------
    UsageError
        The algorithm is unknown or not available on the launcher's flavour, or the library
        refused it for this case (MPICH: "not usable for the provided arguments").
    LaunchError
        Any other failure (stderr tail included).
    """
    flavour = launcher.flavour
    name = libalgs.canonical(collective, name)
    settings = prepare(flavour, collective, name, segsize=segsize, chain_fanout=chain_fanout)
    refused = [
        r
        for r in FALLBACKS
        if r.fails
        and (r.flavour, r.collective, r.algorithm) == (flavour, collective, name)
        and r.runs(1, nprocs) is not None
    ]
    if refused:
        raise UsageError(
            f"{flavour} cannot run {collective} algorithm {name!r} at P={nprocs}: "
            f"{refused[0].when} ({refused[0].source})"
        )
    options = driver.options_of(options, **option_fields)
    program = collbench.collbench_program(flavour)
    args = collbench.collbench_args(settings.kit or "native", collective, options)
    proc = run(launcher, program, args, nprocs, settings, mapping=mapping, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        if "not usable for the provided arguments" in proc.stderr or (
            flavour == "mpich" and settings.forcing and "MPI error" in proc.stderr
        ):
            raise UsageError(
                f"{flavour} refused {collective} algorithm {name!r} at P={nprocs} "
                f"(COLLECTIVE_FALLBACK=error): {tail}"
            )
        raise LaunchError(f"exit {proc.returncode}: {proc.args}\nstderr tail:\n{tail}")
    forced, evidence = verify(flavour, collective, name, proc.stderr, proc.returncode)
    out = driver.parse(proc.stdout, source=proc.args, program=collbench.PROGRAM, columns=collbench.COLUMNS)
    rows = results.rows(
        out.meta,
        out.table,
        algorithm=name,
        flavour=flavour,
        launcher=launcher.name,
        platform=launcher.platform,
        mapping=mapping,
        repetition=repetition,
        forced=forced,
        evidence=evidence,
        command=proc.args,
    )
    segsize = int(settings.mca.get(f"coll_tuned_{collective}_algorithm_segmentsize", 0) or 0)
    given = [f"{k}={v}" for k, v in settings.mca.items() if k.endswith(("_segmentsize", "_chain_fanout"))]
    if settings.kit and not any(k.endswith("_chain_fanout") for k in settings.mca) and name == "chain":
        given.append(f"coll_tuned_{collective}_algorithm_chain_fanout=4 (Open MPI's default)")
    if settings.kit and not any(k.endswith("_segmentsize") for k in settings.mca):
        given.append(f"coll_tuned_{collective}_algorithm_segmentsize=0 (Open MPI's default)")
    for r in rows:
        if given and r.get("forced") == "yes":
            r["evidence"] = f"{r['evidence']}; given {', '.join(given)}"
        label_fallback(r, flavour, collective, name, segsize)
    return rows


TYPE_SIZES = {"char": 1, "int": 4, "float": 4, "double": 8}


def label_fallback(row, flavour, collective, name, segsize=0):
    """Turn a ``forced=yes`` row into ``forced=fallback`` when :data:`FALLBACKS` says the library
    ran another algorithm for this row's size and P; the evidence says what and why.

    Returns the row (changed in place).
    """
    if row.get("forced") != "yes" or name == "default":
        return row
    ts = TYPE_SIZES.get(str(row.get("datatype") or "char"), 1)
    count = int(row["bytes"]) // ts
    rule, runs = fallback(flavour, collective, name, count, int(row["nprocs"]), ts, segsize)
    if rule is not None:
        row["forced"] = "fallback"
        row["evidence"] = (
            f"{row['evidence']}; BUT at {row['bytes']} B (count {count}) and "
            f"P={row['nprocs']} {flavour} runs {runs} instead of {name}: "
            f"{rule.when} ({rule.source})"
        )
    return row
