"""Lab 3's reproduction study: hierarchical reductions on a simulated 32 x 16 cluster.

Venkata et al. (Cluster 2013) measured MPI_Reduce and MPI_Allreduce with Open MPI's default
collectives (coll/tuned, "algorithm 0") and with their hierarchical component (ml, "algorithm
90") for 16 to 512 processes, 16 per node, at 8 B, 128 B and 1 MB. A reproduction attempt on
the 32-node "jupiter" cluster (seed 001_a968b7c01287fc38.txt) ran 30 launches x 100 measures
per point, kept the median of each launch, drew boxplots, and typed the paper's values in
from its figures 6, 7, 10 and 11 (:func:`reference_table`).

This module replays that study under SimGrid SMPI on ``jupiter-32x16``:

* ``default`` is the library's own MPI_Reduce / MPI_Allreduce, with SMPI's ``ompi`` selector
  (``--cfg=smpi/coll-selector:ompi``: Open MPI's coll/tuned decision rules, re-implemented in
  SimGrid), the closest thing to the paper's "default Open MPI";
* ``two_level`` is the student's two-level allreduce (lab 3, part 3), whose inner collectives
  use the same selector. The reduce's ``two_level`` is timed only when a two-level reduce is
  given (``reduce_c``): the answer key has one (``solutions/c_reference/reduce/two_level.c``),
  which is lab 3's answer with a reduce among the leaders and so stays on the instructor's side;
  on the student's side the study times the library's reduce alone.

Each launch of ``data/lab3/bench_reduce.c`` measures every (collective, algorithm, size) of
the grid once, in a shuffled order, with I iterations; a point's R repetitions are R separate
launches (:func:`mpilab.model.stats.measurement_order` shuffles them too). Rows go to the kit's
results table (:mod:`mpilab.core.results`) as they come, so an interrupted study resumes.

Under SMPI every core of the kit's platforms is its own simulated host and SimGrid groups
``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`` by host; the kit builds the study's code with
``data/lab3/smpi_nodes.h`` so that the call groups ranks by simulated node instead (see
:func:`mpilab.grade.harness.build`).

What a simulator cannot give: run-to-run variation (SMPI is deterministic, so the R launches
of a point are identical, see :func:`spread`), the time of the reduction arithmetic (SMPI
does not charge the ``MPI_SUM`` of the data to the simulated clock), and memory effects
(copies, caches, shared-memory transports). :func:`jittered_platform` shows one explicit,
labelled way to put run-to-run variation back in.
"""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from tqdm import tqdm

from mpilab.core import results
from mpilab.core.errors import UsageError, one_of
from mpilab.grade import references, runner, sandbox
from mpilab.measure import driver, launch
from mpilab.measure.driver import BenchOptions
from mpilab.model import stats
from mpilab.simulate import platforms
from mpilab.studies import reference

#: The study's driver (``data/lab3/bench_reduce.c``) and the columns of its table.
PROGRAM = "bench_reduce"
COLUMNS = (
    "collective",
    "algorithm",
    "bytes",
    "count",
    "iterations",
    "warmup",
    "avg_us",
    "min_us",
    "max_us",
    "maxrank_avg_us",
    "maxrank_median_us",
)
PAPER = (
    "R. Venkata et al., Optimizing Blocking and Nonblocking Reduction Operations for "
    "Multicore Systems: Hierarchical Design and Implementation, IEEE Cluster 2013"
)
NPROCS_PAPER = (16, 32, 64, 128, 256, 512)
SIZES = (8, 128, 1_000_000)
ALGORITHMS = ("default", "two_level")
REDUCTIONS = ("reduce", "allreduce")
#: The paper's two curves and the kit's names for what stands in for them.
PAPER_LABELS = {"default": "Open MPI default (algorithm 0)", "two_level": "ml, hierarchical (algorithm 90)"}


def _figures():
    """``{figure: (collective, bytes)}`` of the paper's figures the seed typed in
    (``mpilab/data/reference/seed001_figures.csv``, :func:`mpilab.studies.reference.seed_table`)."""
    t = reference.seed_table("001-figures")
    return {int(f): (g["collective"].iloc[0], int(g["bytes"].iloc[0])) for f, g in t.groupby("figure")}


_FIGURES = _figures()
#: Figure 6 is the one place where the seed's typed-in table and its text disagree: the table
#: puts the 2.4 ms curve under ml, the text calls 2.4 ms the default ("23x faster than without
#: ml"). The table is kept as typed; this note travels with its rows.
FIGURE6_NOTE = "seed's table labels the 2.4 ms curve ml, its text says default: the two curves may be swapped"


def reference_table():
    """The paper's values as typed in by the seed, one row per (figure, algorithm, P).

    Returns
    -------
    pandas.DataFrame
        Columns ``figure``, ``collective``, ``bytes``, ``algorithm`` (the kit's name:
        ``default`` or ``two_level`` for the paper's ml), ``paper_label``, ``nprocs``,
        ``reference_us`` and ``note``.
    """
    t = reference.seed_table("001-figures")
    rows = []
    for r in t.itertuples():
        rows.append(
            dict(
                figure=int(r.figure),
                collective=r.collective,
                bytes=int(r.bytes),
                algorithm=r.algorithm,
                paper_label=PAPER_LABELS[r.algorithm],
                nprocs=int(r.nprocs),
                reference_us=round(float(r.seconds) * 1e6, 6),
                note=FIGURE6_NOTE if int(r.figure) == 6 else "",
            )
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Grid:
    """The points of a study and how often each is measured.

    Attributes
    ----------
    nprocs : tuple of int
    sizes : tuple of int
        Bytes (MPI_DOUBLE: multiples of 8).
    repetitions : int
        R, separate launches per process count.
    iters, warmup : int
        I timed iterations per launch and point, after W untimed ones (W >= 1: the first
        call of a two-level algorithm builds its communicators).
    """

    nprocs: tuple
    sizes: tuple = SIZES
    repetitions: int = 3
    iters: int = 5
    warmup: int = 1
    collectives: tuple = REDUCTIONS
    algorithms: tuple = ALGORITHMS

    def launches(self):
        """Number of smpirun launches."""
        return len(self.nprocs) * self.repetitions

    def options(self):
        """The benchmark options of every launch (sizes, I, W)."""
        return BenchOptions(sizes=tuple(self.sizes), iters=self.iters, warmup=self.warmup)


#: ``quick``: the tests and the autograder. ``default``: the notebook (about a minute here).
#: ``full``: the paper's process counts (measured time in the notebook). ``paper``: the
#: seed's 30 launches x 100 measures, for the record; in a deterministic simulator it gives the
#: same medians as ``full`` at ten times the cost.
GRIDS = {
    # six repetitions: [min, max] of six is a 97 % interval of the median (mpilab.model.stats);
    # SMPI is deterministic, so fewer iterations per launch lose nothing
    "quick": Grid(nprocs=(16, 32), repetitions=6, iters=1),
    "default": Grid(nprocs=(16, 32, 64, 128), repetitions=6, iters=2),
    "full": Grid(nprocs=NPROCS_PAPER, repetitions=3, iters=10, warmup=2),
    "paper": Grid(nprocs=NPROCS_PAPER, repetitions=30, iters=100, warmup=2),
}


def grid(name_or_grid="default"):
    """A :class:`Grid` from its name in :data:`GRIDS` (or a Grid, returned as is)."""
    if isinstance(name_or_grid, Grid):
        g = name_or_grid
    elif name_or_grid in GRIDS:
        g = GRIDS[name_or_grid]
    else:
        raise one_of("study grid", name_or_grid, GRIDS)
    bad = [s for s in g.sizes if int(s) < 8 or int(s) % 8]
    if bad:
        raise UsageError(f"bad size(s) {bad} in the grid; valid: multiples of 8 bytes (MPI_DOUBLE)")
    for c in g.collectives:
        if c not in REDUCTIONS:
            raise one_of("collective", c, REDUCTIONS)
    for a in g.algorithms:
        if a not in ALGORITHMS:
            raise one_of("study algorithm", a, ALGORITHMS)
    if g.repetitions < 1 or g.iters < 1 or g.warmup < 1:
        raise UsageError(
            f"repetitions, iters and warmup must be >= 1; got {g.repetitions}, {g.iters}, {g.warmup}"
        )
    return g


# --- building and checking the benchmark -------------------------------------------------------


def build_bench(allreduce_c, work=None, reduce_c=None):
    """Compile ``bench_reduce`` for SMPI with the student's two-level allreduce.

    Parameters
    ----------
    allreduce_c : path or mpilab.grade.references.Compiled
        The student's ``allreduce_two_level.c``, or the kit's compiled reference
        (``references.reference("allreduce_two_level")``: the program is ready, nothing is built).
    work : str, optional
        Directory to build in (default: a new scratch directory).
    reduce_c : path, optional
        A two-level reduce (``lab_reduce_two_level``, MPI_Reduce's signature) to time as the
        reduce's ``two_level``, e.g. the answer key's (instructor's side).

    Returns
    -------
    str
        The directory holding ``bench_reduce``; the caller removes it.

    Raises
    ------
    mpilab.grade.harness.BuildError
        A file that is missing or does not compile (the compiler's words).
    """
    if isinstance(allreduce_c, references.Compiled):
        if reduce_c is not None:
            raise UsageError("the compiled reference of the two-level allreduce is built without a reduce")
        return allreduce_c.scratch()
    sources = [os.fspath(allreduce_c)] + ([os.fspath(reduce_c)] if reduce_c else [])
    defines = ["WITH_REDUCE_TWO_LEVEL"] if reduce_c else []
    return references.build_bench_reduce(sources, defines, work=work, student=allreduce_c)


def jobs(g, with_reduce=False):
    """The (collective, algorithm) pairs a study of grid ``g`` times: the reduce's ``two_level``
    only ``with_reduce`` (a two-level reduce was built in)."""
    return [
        (c, a)
        for c in g.collectives
        for a in g.algorithms
        if with_reduce or (c, a) != ("reduce", "two_level")
    ]


def _jobs_arg(pairs):
    return ["--jobs", ",".join(f"{c}:{a}" for c, a in pairs)]


def _smpi(work, platform, selector):
    cfg = [f"smpi/coll-selector:{selector}"] if selector else []
    return launch.get_launcher("smpi", platform=platform, workdir=work, cfg=cfg)


def _smpi_argv(work, args, nprocs, platform, mapping, selector):
    return (
        _smpi(work, platform, selector)
        .command(os.path.join(work, "bench_reduce"), args, nprocs, mapping)
        .argv
    )


class Confined(launch.Launcher):
    """SMPI's launcher for ``bench_reduce``, each run confined (:func:`mpilab.grade.sandbox.run`:
    the student's code is in it) in the study's scratch directory; a failed run raises with
    :func:`failure`'s reason. The study's launches go through it and
    :func:`mpilab.measure.driver.run`, the drivers' one road."""

    name = "smpirun"
    flavour = "smpi"

    def __init__(self, work, platform, selector):
        self.work = work
        self.smpi = _smpi(work, platform, selector)
        self.platform = self.smpi.platform

    def command(self, program, args=(), nprocs=1, mapping="core"):
        return self.smpi.command(program, args, nprocs, mapping)

    def run(self, program, args=(), nprocs=1, mapping="core", timeout=None, **_):
        cmd = self.command(program, args, nprocs, mapping)
        res = sandbox.run(cmd.argv, cwd=self.work, timeout=timeout or 900, memory_mb=0, env=cmd.env)
        why = failure(res)
        if why or not res.ok:
            raise AssertionError(f"the study's launch at P = {nprocs} failed: {why or res.failure()}")
        return subprocess.CompletedProcess(cmd.argv, res.returncode, res.stdout, res.stderr)


def failure(res):
    """Why a ``bench_reduce`` launch failed, or None: its FAIL line, else what
    :func:`mpilab.grade.runner.failure` reads from a simulated run (a crash, a deadlock the
    simulator found, a time-out); a ``--check`` launch must also have printed PASS."""
    fails = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
    if fails:
        return fails[0][5:]
    why = runner.failure(res, runner.Run("smpi", 0))
    if why:
        return why
    if "--check" in res.argv and "PASS" not in res.stdout.split():
        last = (res.stderr.strip() or res.stdout.strip()).splitlines()[-3:]
        return "the check ended without PASS: " + " | ".join(last)
    return None


def check_bench(work, platform="jupiter-32x16", nprocs=20, mapping="core", timeout=120, with_reduce=False):
    """Run ``bench_reduce --check``: every element of every (collective, algorithm, size).

    The default, 20 ranks with 16 per node, gives two nodes of different sizes.

    Raises
    ------
    AssertionError
        Naming what failed (a wrong element, a deadlock, a crash), so that nothing wrong is
        ever timed.
    """
    pairs = jobs(Grid(nprocs=(nprocs,)), with_reduce)
    argv = _smpi_argv(
        work,
        BenchOptions(sizes=(8, 128, 8000), check=True).argv(PROGRAM) + _jobs_arg(pairs),
        nprocs,
        platform,
        mapping,
        None,
    )
    res = sandbox.run(argv, cwd=work, timeout=timeout, memory_mb=0)
    why = failure(res)
    if why:
        raise AssertionError(
            f"the study's correctness check failed at P = {nprocs} "
            f"(simulated, {mapping} mapping on {platform}): {why}"
        )


# --- the study ---------------------------------------------------------------------------------


def _rows(out, *, platform, mapping, repetition, selector, command):
    """Results rows of one launch; ``default`` is the library's, ``two_level`` the kit's code
    (the student's allreduce, the answer key's reduce)."""
    rows = []
    for line in out.table:
        if line["algorithm"] == "default":
            forced, evidence = "no", f"library default; SMPI coll-selector {selector or 'default'}"
        else:
            whose = (
                "the student's allreduce_two_level.c"
                if line["collective"] == "allreduce"
                else "the answer key's two-level reduce"
            )
            forced, evidence = (
                "yes",
                (f"{whose}: two-level, nodes from the simulated hosts' names (data/lab3/smpi_nodes.h)"),
            )
        rows += results.rows(
            out.meta,
            [line],
            flavour="smpi",
            launcher="smpirun",
            platform=platform,
            mapping=mapping,
            repetition=repetition,
            forced=forced,
            evidence=evidence,
            command=command,
        )
    return rows


def _keys(pairs, g, platform, mapping, p, rep):
    return {
        results.key_of(
            {
                "collective": c,
                "algorithm": a,
                "flavour": "smpi",
                "launcher": "smpirun",
                "platform": platform,
                "mapping": mapping,
                "nprocs": p,
                "bytes": b,
                "datatype": "double",
                "root": 0,
                "repetition": rep,
            }
        )
        for c, a in pairs
        for b in g.sizes
    }


def run_study(
    allreduce_c,
    output,
    grid_name="default",
    platform="jupiter-32x16",
    mapping="core",
    selector="ompi",
    jitter=0.0,
    seed=0,
    timeout=900,
    progress=True,
    reduce_c=None,
):
    """Measure the grid under SMPI and append the rows to ``output``; return them all.

    Parameters
    ----------
    allreduce_c : path
        The student's two-level allreduce (checked first with :func:`check_bench`).
    output : path
        Results CSV; points already there are skipped (resume).
    grid_name : str or Grid
        A name of :data:`GRIDS` or a :class:`Grid`.
    platform : str
        SMPI platform (16 cores per node on ``jupiter-32x16``, the seed's cluster).
    mapping : {"core", "socket", "node"}
        ``core`` fills a node before the next, like the seed's ``--npernode 16``.
    selector : str or None
        SMPI collective selector of the ``default`` algorithms (``ompi``: Open MPI's rules).
    jitter : float
        0 for the platform as it is. > 0: every repetition runs on its own copy of the
        platform whose link latencies and bandwidths are multiplied by log-normal factors of
        this sigma (:func:`jittered_platform`), recorded as platform ``<platform>+jitter<sigma>``.
    seed : int
        Seed of the measurement order (and of the jitter).
    timeout : float
        Seconds per launch.
    progress : bool
        Show a progress bar naming the launch.
    reduce_c : path, optional
        A two-level reduce to time as the reduce's ``two_level`` (:func:`build_bench`); without
        it the reduce is timed with the library's default only.

    Returns
    -------
    pandas.DataFrame
        The rows of ``output`` that belong to this study (its platform, mapping, grid).
    """
    g = grid(grid_name)
    pairs = jobs(g, with_reduce=reduce_c is not None)
    label = platform if not jitter else f"{platform}+jitter{jitter:g}"
    work = build_bench(allreduce_c, reduce_c=reduce_c)
    try:
        check_bench(
            work,
            platform=platform,
            nprocs=min(20, max(g.nprocs)),
            mapping=mapping,
            with_reduce=reduce_c is not None,
        )
        done = results.measured_keys(output)
        order = [
            (p, rep)
            for p, rep in stats.measurement_order(g.nprocs, g.repetitions, seed=seed)
            if not _keys(pairs, g, label, mapping, p, rep) <= done
        ]
        bar = tqdm(order, disable=not progress, unit="launch", dynamic_ncols=True)
        for p, rep in bar:
            bar.set_description(f"smpi {label} P={p} rep={rep}")
            plat = platform
            if jitter:
                plat = jittered_platform(
                    platform, jitter, seed=seed * 100003 + rep, path=os.path.join(work, f"jitter-{rep}.xml")
                )
            args = _jobs_arg(pairs) + g.options().argv(PROGRAM) + ["--seed", str(seed * 1000 + rep)]
            out, command = driver.run(
                Confined(work, plat, selector), _program(work), args, p, mapping, timeout, PROGRAM, COLUMNS
            )
            rows = _rows(
                out, platform=label, mapping=mapping, repetition=rep, selector=selector, command=command
            )
            results.append_rows(output, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    df = results.read_results(output)
    pair = df["collective"] + ":" + df["algorithm"]
    keep = (
        (df["platform"] == label)
        & (df["mapping"] == mapping)
        & df["nprocs"].isin(g.nprocs)
        & df["bytes"].isin(g.sizes)
        & pair.isin([f"{c}:{a}" for c, a in pairs])
        & (df["repetition"] < g.repetitions)
    )
    return df[keep].reset_index(drop=True)


def _program(work):
    return os.path.join(work, "bench_reduce")


def _launch(work, pairs, nprocs, nbytes, iters, warmup, platform, selector, timeout):
    """One launch of a built ``bench_reduce`` at one size: its table (driver.run's parse)."""
    args = _jobs_arg(pairs) + BenchOptions(sizes=[nbytes], iters=iters, warmup=warmup).argv(PROGRAM)
    out, _ = driver.run(
        Confined(work, platform, selector), _program(work), args, nprocs, "core", timeout, PROGRAM, COLUMNS
    )
    return out.table


def point_medians(
    allreduce_c,
    nprocs,
    nbytes,
    collective="allreduce",
    platform="jupiter-32x16",
    iters=2,
    warmup=1,
    selector="ompi",
    timeout=300,
):
    """The study's value (:data:`VALUE`) of both algorithms of one collective at one size, for
    each P: one launch per P (no correctness check first).

    Returns
    -------
    dict
        ``{(algorithm, P): µs}``; SMPI is deterministic, so it is what the study gives there.

    Raises
    ------
    AssertionError
        A launch that failed (the reason).
    mpilab.grade.harness.BuildError
        A file that does not compile.
    """
    g = grid(Grid(nprocs=tuple(nprocs), sizes=(nbytes,), collectives=(collective,)))
    work = build_bench(allreduce_c)
    out = {}
    try:
        for p in g.nprocs:
            table = _launch(work, jobs(g), p, nbytes, iters, warmup, platform, selector, timeout)
            out.update({(r["algorithm"], p): float(r[VALUE]) for r in table})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


# --- analysis ----------------------------------------------------------------------------------

#: The per-launch statistic the seed kept: the median over the launch's iterations of the
#: per-iteration maximum over ranks.
VALUE = "maxrank_median_us"
_POINT = ["collective", "algorithm", "bytes", "nprocs"]


def summary(df, value=VALUE):
    """Median and interval over the repetitions of each point, with the interval's real coverage
    (:func:`mpilab.model.stats.summarize`: 95 % from 6 repetitions on, [min, max] below)."""
    return stats.summarize(df, value=value, by=[c for c in _POINT + ["platform"] if c in df])


def spread(df, value=VALUE):
    """How much the R repetitions of each point differ.

    Returns
    -------
    pandas.DataFrame
        Per point: ``n`` repetitions, ``min_us``, ``max_us`` and ``rel_spread`` =
        (max - min) / median. On the plain simulated platform it is 0 everywhere.
    """
    g = df.groupby(_POINT)[value]
    out = pd.DataFrame({"n": g.size(), "min_us": g.min(), "max_us": g.max(), "median_us": g.median()})
    out["rel_spread"] = (out["max_us"] - out["min_us"]) / out["median_us"]
    return out.reset_index()


def compare(df, value=VALUE, figures=None):
    """Simulated medians next to the paper's values, one panel per paper figure.

    Parameters
    ----------
    df : pandas.DataFrame
        Study rows (:func:`run_study`).
    figures : sequence of int, optional
        Paper figures to show (default 6, 7, 10, 11: those whose collective and size the
        study measured).

    Returns
    -------
    (pandas.DataFrame, (Figure, array of Axes))
        One row per (figure, algorithm, P): ``median_us``, ``ci_low_us``, ``ci_high_us``,
        ``reference_us``, ``ratio`` (simulated / paper; NaN where one is missing) and the
        paper's label; and the figure (log y, both curves of the paper dashed).
    """
    ref = reference_table()
    figs = [
        f
        for f in (figures or sorted(_FIGURES))
        if ((df["collective"] == _FIGURES[f][0]) & (df["bytes"] == _FIGURES[f][1])).any()
    ]
    if not figs:
        raise UsageError(
            "the study has none of the paper's points (allreduce 8 B / 1 MB, "
            "reduce 128 B / 1 MB); measure at least one"
        )
    ncols = min(2, len(figs))
    nrows = (len(figs) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 4.2 * nrows), squeeze=False)
    axes = axes.ravel()
    for ax in axes[len(figs) :]:
        ax.set_visible(False)
    axes = axes[: len(figs)]
    tables = []
    for ax, f in zip(axes, figs):
        coll, nbytes = _FIGURES[f][:2]
        for algo, colour in zip(ALGORITHMS, ("tab:blue", "tab:orange")):
            m = df[(df["collective"] == coll) & (df["bytes"] == nbytes) & (df["algorithm"] == algo)]
            r = ref[(ref["figure"] == f) & (ref["algorithm"] == algo)]
            if m.empty:
                continue
            joined, _ = stats.compare_reference(m, r, value=value, on=("nprocs",), ax=ax)
            measured, paper = ax.containers[-1], ax.get_lines()[-1]
            data_line, caps, bars = measured.lines
            for artist in (data_line, *caps, *bars, paper):
                artist.set_color(colour)
            cover = stats.describe_coverage(joined["coverage"].min(), int(joined["n"].min()))
            measured.set_label(f"{algo} (simulated median, {cover})")
            paper.set_label(f"{PAPER_LABELS[algo]} (paper)")
            joined.insert(0, "algorithm", algo)
            joined.insert(0, "bytes", nbytes)
            joined.insert(0, "collective", coll)
            joined.insert(0, "figure", f)
            joined["paper_label"] = PAPER_LABELS[algo]
            tables.append(joined)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(NPROCS_PAPER, [str(p) for p in NPROCS_PAPER])
        ax.set_xlabel("processes (16 per node)")
        ax.set_ylabel("latency (µs)")
        ax.set_title(f"Fig. {f}: {coll}, {nbytes:,} B")
        ax.legend(fontsize=7)
    fig.tight_layout()
    table = pd.concat(tables, ignore_index=True)
    return table, (fig, axes)


def boxplots(df, collective, nbytes, value=VALUE):
    """Boxplots of the repetitions per process count, one panel per algorithm.

    Returns
    -------
    (Figure, array of Axes)
    """
    sub = df[(df["collective"] == collective) & (df["bytes"] == nbytes)]
    if sub.empty:
        raise UsageError(
            f"no rows for {collective} at {nbytes} bytes; measured: "
            f"{sorted(set(zip(df['collective'], df['bytes'])))}"
        )
    algos = [a for a in ALGORITHMS if (sub["algorithm"] == a).any()]
    fig, axes = plt.subplots(1, len(algos), figsize=(5 * len(algos), 3.5), squeeze=False, sharey=True)
    for ax, a in zip(axes[0], algos):
        stats.boxplot_by_nprocs(
            sub[sub["algorithm"] == a], value=value, ax=ax, title=f"{collective} {nbytes:,} B, {a}"
        )
    fig.tight_layout()
    return fig, axes[0]


# --- modelling run-to-run variation (an assumption, labelled as such) -------------------------

_LINK = re.compile(r'(<link id="[^"]+" bandwidth=")([0-9.eE+-]+)(Bps" latency=")([0-9.eE+-]+)(us")')


def jittered_platform(platform, sigma, seed, path):
    """Copy of a platform whose links are each made randomly slower or faster.

    Every link's latency is multiplied, and its bandwidth divided, by its own factor
    exp(N(0, sigma^2)) drawn with ``seed``. One copy per repetition models *run-to-run*
    variation (another placement, another background load for the whole launch), not noise
    from one message to the next; the spread it produces is the spread assumed through
    ``sigma``, not one measured on any machine.

    Parameters
    ----------
    platform : str
        A platform name or XML path (:func:`mpilab.simulate.platforms.platform_file`).
    sigma : float
        Standard deviation of the log of the factors (0.1: about ±10 %).
    seed : int
    path : str
        Where to write the copy.

    Returns
    -------
    str
        ``path``.
    """
    if not sigma > 0:
        raise UsageError(f"sigma must be > 0, got {sigma!r}")
    rng = np.random.default_rng(seed)
    text = platforms.platform_file(platform).read_text()

    def scale(m):
        f = float(np.exp(rng.normal(0.0, sigma)))
        return f"{m.group(1)}{float(m.group(2)) / f:.6g}{m.group(3)}{float(m.group(4)) * f:.6g}{m.group(5)}"

    new, n = _LINK.subn(scale, text)
    if n == 0:
        raise UsageError(f"platform {platform!r} has no <link bandwidth=...Bps latency=...us> to jitter")
    with open(path, "w") as f:
        f.write(new)
    return path
