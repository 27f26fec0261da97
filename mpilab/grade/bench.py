"""Timing students' collectives, on the kit's one road: harness → driver → results rows.

:func:`benchmark_c` (lab 2's allgathers next to ``MPI_Allgather``) and :func:`benchmark_bcast`
(lab 6's broadcasts next to ``MPI_Bcast``) build the student's files with the grading harness,
check them first (a wrong algorithm's time means nothing) and time them with the harness's
timing mode, which prints the kit's provenance block and one CSV table. Every launch goes
``mpilab.measure.driver.run`` with a :class:`mpilab.grade.launcher.SandboxLauncher` (the
flavour's launcher, under the sandbox) → :func:`mpilab.core.results.rows`: the rows are results
rows, with the MPI library, the host, the date and the command that measured them.
"""

import os
import shutil
import warnings

import pandas as pd

from mpilab.core import results
from mpilab.core.errors import LaunchError, LeftOut, ParseError, one_of
from mpilab.grade import harness, references, runner
from mpilab.grade.checks.collectives import AllgatherCases
from mpilab.grade.launcher import SandboxLauncher
from mpilab.measure import driver

#: Timed iterations and warm-up ones of :func:`benchmark_c` per flavour (SMPI's time repeats exactly).
BENCH_ITERS = {"openmpi": (20, 5), "smpi": (2, 1)}
#: SMPI's MPI_Allgather (``native``) in a timing run picks its algorithm as Open MPI 4.1's tuned
#: component does (SimGrid's ``ompi`` selector), as ORFEO's Open MPI would. SimGrid's default
#: allgather posts all P - 1 sends and receives at once: P = 48 took 25 s to simulate, 0.8 s this way.
BENCH_SMPI_CFG = ("smpi/coll-selector:ompi",)
#: The tables the harnesses' timing modes print.
ALLGATHER_COLUMNS = ("algorithm", "nprocs", "bytes", "maxrank_avg_us")
BCAST_COLUMNS = ("algorithm", "nprocs", "bytes", "segsize", "maxrank_avg_us")


def _launcher(flavour, work, platform, cfg=()):
    memory = runner.SMPI_MEMORY_MB if flavour == "smpi" else runner.REAL_MEMORY_MB
    options = (
        {"platform": runner.smpi_platform(platform, work), "cfg": list(cfg)} if flavour == "smpi" else {}
    )
    return SandboxLauncher(flavour, work, memory, env=runner.RUN_ENV, **options)


def timed_rows(launcher, program, args, nprocs, mapping, timeout, columns, repetition=0):
    """One timing launch: ``(rows, table)``: the results rows of what it printed (the driver's
    one parser, the one row builder), and the table itself (its own columns, e.g. ``segsize``)."""
    out, command = driver.run(
        launcher,
        program,
        args,
        nprocs,
        mapping=mapping,
        timeout=timeout,
        expect=program.split("_smpi")[0],
        columns=columns,
    )
    rows = results.rows(
        out.meta,
        out.table,
        launcher=launcher.name,
        platform=launcher.platform,
        mapping=mapping,
        repetition=repetition,
        command=command,
    )
    return rows, out


def _frame(rows, extra=None):
    df = pd.DataFrame(rows, columns=list(results.COLUMNS))
    for name, values in (extra or {}).items():
        df[name] = values
    return df


def _left_out(algorithms, why, nprocs=None):
    """Warn that ``algorithms`` are left out (at ``nprocs``, or everywhere), and why: a
    :class:`mpilab.core.errors.LeftOut`, "ring left out: ..." or "chain, native left out at P = 8: ..."."""
    at = f" at P = {nprocs}" if nprocs is not None else ""
    warnings.warn(
        LeftOut(f"{', '.join(algorithms)} left out{at}: {why}", algorithms, why, nprocs), stacklevel=2
    )


def benchmark_c(
    c_files,
    nprocs=(2, 4),
    flavour="openmpi",
    platform="orfeo-thin",
    mapping="core",
    reference=False,
    timeout=runner.RUN_TIMEOUT,
):
    """Time students' allgathers and MPI_Allgather (``native``), for real or simulated.

    Parameters
    ----------
    c_files : dict
        Algorithm name ("ring", "bruck") to C file.
    nprocs : sequence of int
        Process counts.
    flavour : {"openmpi", "smpi"}
        Real Open MPI on this machine, or SimGrid SMPI on ``platform``.
    platform, mapping : str
        SMPI only: the simulated cluster and how ranks are placed on it.
    reference : bool
        Also time the kit's ``gather_bcast`` and ``pairwise`` (the kit's own sources).
    timeout : float
        Limit of each run in seconds.

    Returns
    -------
    pandas.DataFrame
        Results rows (:data:`mpilab.core.results.COLUMNS`: algorithm, nprocs, bytes per rank,
        maxrank_avg_us, the slowest rank's average over the timed calls, SMPI's simulated;
        library, host, date, command ...), one per algorithm, P and size (``MPI_Allgather``,
        timed next to each algorithm on real MPI, is their mean). An algorithm that fails to
        build, fails its correctness check or fails to run is left out with a warning saying why.
    """
    if flavour not in BENCH_ITERS:
        raise one_of("flavour for benchmark_c", flavour, BENCH_ITERS)
    iters = [str(i) for i in BENCH_ITERS[flavour]]
    program = "check_student" + ("_smpi" if flavour == "smpi" else "")
    rows = []
    # Real times are noisy: MPI_Allgather is timed in the same launch as each algorithm, side by
    # side. Simulated times repeat exactly: its curve, and the references', are simulated once.
    native_timed = reference_timed = False
    for algorithm, c_file in c_files.items():
        once = flavour == "smpi" and native_timed
        modes = [["--time-alone" if once else "--time", algorithm] + iters]
        if reference and not reference_timed:
            modes.append(["--time-reference"] + iters)
        try:
            work = harness.build_allgather(os.fspath(c_file), algorithm, flavour, reference=reference)
        except harness.BuildError as exc:
            _left_out([algorithm], str(exc))
            continue
        try:
            # a wrong algorithm's time means nothing: check it first (every kind, at the
            # smallest P above 1 that is timed)
            where = platform if flavour == "smpi" else None
            run = runner.Run(flavour, min([q for q in nprocs if q > 1] or nprocs), where, mapping)
            wrong = [
                c
                for c in runner.run_cases(work, "check_student", [run], AllgatherCases(), timeout)
                if not c.passed
            ]
            if wrong:
                why = "it is not right yet, so its time would mean nothing"
                why = f"{why} ({wrong[0].name}: {wrong[0].message})"
                _left_out([algorithm], why)
                continue
            lau = _launcher(flavour, work, platform, BENCH_SMPI_CFG)
            mine = []
            try:
                for p in nprocs:
                    for args in modes:
                        got, _ = timed_rows(lau, program, args, p, mapping, timeout, ALLGATHER_COLUMNS)
                        mine += got
            except (LaunchError, ParseError) as exc:
                why = f"timing it: {exc}"
                _left_out([algorithm], why)
                continue
            rows += mine
            native_timed = True
            reference_timed = reference_timed or reference
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if not rows:
        raise AssertionError("no algorithm could be timed; fix the correctness checks first")
    df = _frame(rows)
    keep = list(c_files) + ["native"] + (["gather_bcast", "pairwise"] if reference else [])
    df = df[df["algorithm"].isin(keep)]
    # MPI_Allgather timed next to each algorithm: one row per point, the mean of its times
    key = ["algorithm", "nprocs", "bytes"]
    means = df.groupby(key, as_index=False)["maxrank_avg_us"].mean()
    first = df.drop(columns=["maxrank_avg_us"]).drop_duplicates(key)
    return first.merge(means, on=key)[list(df.columns)].reset_index(drop=True)


def benchmark_bcast(
    c_files,
    nprocs=(2, 4),
    sizes=(8, 1024, 65536),
    segsizes=(8192,),
    flavour="openmpi",
    platform="orfeo-thin",
    mapping="core",
    native=True,
    iters=None,
    warmup=None,
    timeout=runner.RUN_TIMEOUT,
):
    """Time students' broadcasts (and MPI_Bcast, ``native``), for real or simulated.

    All the files are built into one program, which checks every byte of one broadcast of an
    algorithm before it times it at each size (a wrong result leaves that algorithm out from
    there, with a warning). A file that does not build is left out with a warning; when a run
    crashes or hangs, each algorithm is timed on its own so that one bad file costs only itself.

    Parameters
    ----------
    c_files : dict
        Algorithm name (:data:`mpilab.grade.harness.BCAST_FUNCTIONS`) to C file, or to the kit's
        compiled reference of that algorithm (:func:`mpilab.grade.references.reference`; SMPI,
        timed on its own).
    nprocs : sequence of int
    sizes : sequence of int
        Bytes broadcast (MPI_BYTE) from rank 0.
    segsizes : sequence of int
        The pipeline's segment sizes in bytes (each size is timed with each).
    flavour : {"openmpi", "smpi"}
    platform, mapping : str
        SMPI only: the simulated cluster (a name or an XML path) and how ranks are placed.
    native : bool
        Also time ``MPI_Bcast`` (the library's own choice; SMPI's default selector).
    iters, warmup : int, optional
        Timed and warm-up calls per point (default :data:`BENCH_ITERS` of the flavour).
    timeout : float
        Limit of each launch in seconds.

    Returns
    -------
    pandas.DataFrame
        Results rows (:data:`mpilab.core.results.COLUMNS`: algorithm, nprocs, bytes,
        maxrank_avg_us, the slowest rank's average over the timed calls, SMPI's simulated;
        library, host, date, command ...) and ``segsize`` (0 but for the pipeline).
    """
    if flavour not in BENCH_ITERS:
        raise one_of("flavour for benchmark_bcast", flavour, BENCH_ITERS)
    unknown = [a for a in c_files if a not in harness.BCAST_FUNCTIONS]
    if unknown:
        raise one_of("broadcast algorithm", unknown[0], harness.BCAST_FUNCTIONS)
    it, wu = BENCH_ITERS[flavour]
    iters, warmup = it if iters is None else int(iters), wu if warmup is None else int(warmup)
    # a compiled reference (mpilab.grade.references) is a program ready to run: timed on its own
    files = {a: f if isinstance(f, references.Compiled) else os.fspath(f) for a, f in c_files.items()}
    args = [
        "--sizes",
        ",".join(str(int(b)) for b in sizes),
        "--segsizes",
        ",".join(str(int(s)) for s in segsizes),
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
    ]
    program = "check_bcast" + ("_smpi" if flavour == "smpi" else "")
    frames = []

    def time_group(algorithms, with_native, strict):
        """Build ``algorithms`` together and time them (and native) at every P; False when the
        build or a launch fails and ``strict`` (the caller then times one at a time)."""
        compiled = [files[a] for a in algorithms if isinstance(files[a], references.Compiled)]
        if compiled and (len(algorithms) > 1 or flavour != references.FLAVOUR):
            if strict:
                return False
            why = f"{compiled[0]} runs on {references.FLAVOUR} only, alone"
            _left_out(algorithms[:1], why)
            return True
        try:
            work = (
                compiled[0].scratch()
                if compiled
                else harness.build_bcast([files[a] for a in algorithms], flavour, require=algorithms)
            )
        except harness.BuildError as exc:
            if strict:
                return False
            _left_out(algorithms[:1], str(exc))
            return True
        names = list(algorithms) + (["native"] if with_native else [])
        got = []
        lau = _launcher(flavour, work, platform)
        try:
            for p in nprocs:
                try:
                    rows, out = timed_rows(
                        lau, program, ["--time", ",".join(names), *args], p, mapping, timeout, BCAST_COLUMNS
                    )
                except (LaunchError, ParseError) as exc:
                    if strict:
                        return False
                    _left_out(names, str(exc), nprocs=p)
                    continue
                # the provenance block keeps one "# skip:" line, "<algorithm> <bytes>: <why>" (the
                # last): an algorithm skipped by another is found by its missing rows (the harness
                # stops timing one only when its check fails)
                said = out.meta.get("skip")
                if said:
                    head, _, why = said.partition(": ")
                    a, _, where = head.partition(" ")
                    warnings.warn(
                        LeftOut(f"P = {p}: SKIP {said}", [a], why, p, int(where) if where.isdigit() else None)
                    )
                for a in algorithms:
                    nseg = len(segsizes) if a == "pipeline" else 1
                    timed = sum(1 for line in out.table if line["algorithm"] == a)
                    if timed < len(sizes) * nseg and not (said or "").startswith(f"{a} "):
                        where, why = int(sizes[timed // nseg]), "a rank got a wrong byte or an error"
                        warnings.warn(LeftOut(f"P = {p}: SKIP {a} {where}: {why}", [a], why, p, where))
                # whole bytes (the driver reads the table as floats): "segments of 4096 B"
                got.append(_frame(rows, {"segsize": [int(line["segsize"]) for line in out.table]}))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        frames.extend(got)
        return True

    if not time_group(list(files), native, strict=len(files) > 1):
        for algorithm in files:  # one bad file costs only itself
            time_group([algorithm], False, strict=False)
        if native:
            time_group([], True, strict=False)
    if not frames:
        raise AssertionError("no broadcast could be timed; fix the correctness checks first")
    return pd.concat(frames, ignore_index=True)
