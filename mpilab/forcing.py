"""Force a library collective algorithm and verify that the forcing took effect.

MPI libraries fail silently when asked for an algorithm: Open MPI ignores
``coll_tuned_<coll>_algorithm`` without ``coll_tuned_use_dynamic_rules``, MPICH falls back
unless ``MPIR_CVAR_COLLECTIVE_FALLBACK=error``. Every row this module produces records
``requested`` (the kit's name), ``forced`` (``yes`` | ``no`` | ``unverified``) and ``evidence``
(the text that justifies it). A run of ``default`` is always ``forced=no``.

The signals, and their limits:

SMPI (SimGrid 3.32)
    smpirun logs ``[smpi_coll/INFO] Switch to algorithm NAME for collective COLL`` on stderr
    when ``--cfg=smpi/COLL:NAME`` is applied. ``yes`` when that line names the requested
    algorithm. Limit: it shows the configured algorithm, which SMPI then always calls (SMPI has
    no silent fallback), so this is the strongest of the three signals.
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

import os
import re
import shutil
import signal
import subprocess

from . import libalgs
from .errors import LaunchError, ToolMissing, UsageError

_SMPI_SWITCH = re.compile(r"Switch to algorithm (\S+) for collective (\w+)")
_OMPI_ECHO = re.compile(r"\] (coll_tuned_\w+)=(\S+) \((?:environment|command line)\)")
_OMPI_SELECT = re.compile(r"coll:base:comm_select: selecting\s+(\w+), priority\s+(-?\d+), Enabled")

OMPI_VERIFY_ENV = {"OMPI_MCA_mpi_show_mca_params": "enviro", "OMPI_MCA_coll_base_verbose": "10"}


def prepare(flavour, collective, name):
    """Return :class:`mpilab.libalgs.Settings` that force ``name`` and make the run verifiable.

    For Open MPI this adds :data:`OMPI_VERIFY_ENV` to the forcing parameters.
    """
    s = libalgs.settings(flavour, collective, name)
    if flavour == "openmpi" and s.forcing:
        s.env.update(OMPI_VERIFY_ENV)
    return s


def _ompi_name_matches(echoed, name):
    e = echoed.replace("-", "_")
    return e == name or (e == "linear" and name == "basic_linear")


def verify(flavour, collective, name, stderr, returncode=0):
    """Decide from a run's stderr whether ``name`` was really forced.

    Parameters
    ----------
    flavour, collective, name : str
        What was requested (kit names, see :mod:`mpilab.libalgs`).
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
    if name == "default":
        return "no", "library default; nothing forced"
    if returncode != 0:
        return "no", f"run failed (exit {returncode})"
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
        if dyn not in ("true", "1") or got is None or not _ompi_name_matches(got, name):
            return "no", (f"Open MPI read coll_tuned_use_dynamic_rules={dyn}, "
                          f"coll_tuned_{collective}_algorithm={got}; requested {name}")
        if not tuned or above:
            return "no", f"coll/tuned not the selected component (enabled above it: {above})"
        return "yes", (f"Open MPI echoed coll_tuned_use_dynamic_rules={dyn}, "
                       f"coll_tuned_{collective}_algorithm={got}; coll_base_verbose: tuned "
                       f"Enabled at priority 30, nothing higher but self")
    if flavour == "mpich":
        return "yes", (f"MPICH ran with MPIR_CVAR_{collective.upper()}_INTRA_ALGORITHM={alg.mpich}, "
                       "DEVICE_COLLECTIVES=none, COLLECTIVE_FALLBACK=error and did not abort "
                       "(inferred: MPICH prints no positive signal)")
    libalgs.check_flavour(flavour)


def run(launcher, program, args, nprocs, settings, mapping="core", timeout=600):
    """Launch ``program`` with ``launcher`` plus the forcing ``settings``; return CompletedProcess.

    Unlike ``launcher.run`` this returns failed runs too (their stderr is evidence).
    """
    if launcher.flavour == "smpi" and settings.args:
        old = list(launcher.cfg)
        launcher.cfg = old + settings.args
        try:
            cmd = launcher.command(program, args, nprocs, mapping)
        finally:
            launcher.cfg = old
    else:
        cmd = launcher.command(program, args, nprocs, mapping)
    exe = str(cmd.argv[0])
    if shutil.which(exe) is None:
        raise ToolMissing(f"{exe!r} not found on PATH")
    env = dict(os.environ)
    env.update(cmd.env)
    env.update(settings.env)
    proc = subprocess.Popen([str(a) for a in cmd.argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LaunchError(f"timed out after {timeout} s: {' '.join(map(str, cmd.argv))}")
    cmdline = " ".join(f"{k}={v}" for k, v in sorted(settings.env.items()))
    cmdline = (cmdline + " " if cmdline else "") + " ".join(map(str, cmd.argv))
    return subprocess.CompletedProcess(cmdline, proc.returncode, out, err)


def measure(launcher, collective, name, nprocs, sizes="2:1M", mapping="core", repetition=0,
            check=False, iters=None, warmup=None, iters_large=None, warmup_large=None,
            probe=None, datatype=None, root=None, timeout=600):
    """Run collbench's native ``collective`` with library algorithm ``name`` forced.

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
    from . import collbench

    flavour = launcher.flavour
    settings = prepare(flavour, collective, name)
    program = collbench.collbench_program(flavour)
    args = collbench.collbench_args("native", collective, sizes, iters=iters, warmup=warmup,
                                    iters_large=iters_large, warmup_large=warmup_large,
                                    datatype=datatype, root=root, check=check, probe=probe)
    proc = run(launcher, program, args, nprocs, settings, mapping=mapping, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        if "not usable for the provided arguments" in proc.stderr or (
                flavour == "mpich" and settings.forcing and "MPI error" in proc.stderr):
            raise UsageError(f"{flavour} refused {collective} algorithm {name!r} at P={nprocs} "
                             f"(COLLECTIVE_FALLBACK=error): {tail}")
        raise LaunchError(f"exit {proc.returncode}: {proc.args}\nstderr tail:\n{tail}")
    forced, evidence = verify(flavour, collective, name, proc.stderr, proc.returncode)
    meta, table = collbench.parse_output(proc.stdout, source=proc.args)
    rows = collbench.to_results_rows(meta, table, launcher=launcher.name,
                                     platform=getattr(launcher, "platform", "local") or "local",
                                     mapping=mapping, repetition=repetition, requested=name,
                                     forced=forced, evidence=evidence, command=proc.args,
                                     flavour=flavour)
    for r in rows:
        r["algorithm"] = name
    return rows
