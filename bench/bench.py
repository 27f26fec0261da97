"""``make bench``: how fast the kit's C algorithms and its driver are, next to the references.

A benchmark, not a test: it prints tables and always exits 0 unless something could not run.
Three parts by default, each printed as a table with the conditions it was measured under:

1. **Real**: for Open MPI and MPICH, P = 2 and 4, sizes 4 KiB..1 MiB, the library's
   ``MPI_Allgather`` (``native``) next to each of the kit's allgathers. One launch of
   ``collbench`` per algorithm per round, the algorithms' order rotating from round to round
   (interleaved rounds), ``--rounds`` rounds (default 15). A launch's figure is
   ``maxrank_median_us``: per iteration the slowest rank, the median over iterations. The
   table gives the median over rounds and kit / native.
2. **Simulated**: the kit's algorithm next to SimGrid's implementation of the same schedule
   (bruck = ``bruck``, ring = ``NTSLR``, pairwise = ``rdb`` at a power of two) in SMPI on
   ``orfeo-thin``; a simulation is deterministic, so one launch each.
3. **OSU**: OSU micro-benchmarks 7.4, built here from ``../shared/vendor`` (relative to the
   repository) into ``bench/build/``, against collbench (``osu_bcast``, ``osu_reduce``,
   ``osu_allgather``) and pingpong (``osu_latency``): same sizes, iterations and warm-up, P = 2,
   interleaved runs, the median of each one's average latency, and kit / OSU.

4. **Scale** (only with ``--parts scale``, about an hour on 2 cores): SMPI at P = 512 and
   1,024, 1 MiB per rank, allgather (the kit's Bruck and ring) and bcast (SimGrid's
   implementation of Open MPI's choice), on a jupiter-like and a THIN-like platform with one
   rank per core; wall time and peak memory (PSS) per launch.

5. **Grading** (only with ``--parts grading``, about two hours at the default 100 students on 2
   cores): a seeded class of lab 2 submissions graded serially and as a SLURM job array, side
   by side (``bench/grading.py``).

Launches go through :mod:`mpilab.measure.launch` and :mod:`mpilab.measure.collbench` like every
other measurement of the kit. ``--c-build DIR`` times another build of ``c_reference`` (e.g. a copy
of an older tree's ``c_reference/build``) to get a before/after table. Raw outputs are kept
under ``results/bench/<date>/``.

    .venv/bin/python bench/bench.py [--parts real,sim,osu] [--rounds 15] [--osu-runs 9]
"""

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from mpilab.core import paths, units
from mpilab.core.errors import MpilabError
from mpilab.measure import collbench, driver, launch, osu, pingpong
from mpilab.measure.driver import BenchOptions


def cb_args(algo="native", coll="allgather", **options):
    """collbench's arguments for ``algo`` of ``coll`` with the benchmark ``options``."""
    return collbench.collbench_args(algo, coll, BenchOptions(**options))


def parsed(stdout, program=collbench):
    """(meta, rows) of a driver's output (collbench or pingpong), typed by the one parser."""
    out = driver.parse(stdout, program=program.PROGRAM, columns=program.COLUMNS)
    return out.meta, out.table


REAL_SIZES = "4K:1M"
REAL_LIMIT = 1.15  # the kit's target against the library, real runs
SIM_LIMIT = 1.10  # against SimGrid's same algorithm, simulated
OSU_LIMIT = 0.05  # collbench and pingpong against OSU
#: the kit's allgather -> SimGrid's implementation of the same schedule, and where it is one
SIM_PAIRS = {"bruck": ("bruck", "any P"), "ring": ("NTSLR", "any P"), "pairwise": ("rdb", "P a power of two")}
SIM_PLATFORM = "orfeo-thin"
SIM_NPROCS = (16, 48)
SIM_SIZES = "1K:1M"
OSU_TARBALL = "osu-micro-benchmarks-7.4.tar.gz"
OSU_PROGRAMS = {
    "bcast": "c/mpi/collective/blocking/osu_bcast",
    "reduce": "c/mpi/collective/blocking/osu_reduce",
    "allgather": "c/mpi/collective/blocking/osu_allgather",
    "latency": "c/mpi/pt2pt/standard/osu_latency",
}
MPICH_OVERSUBSCRIBED = (
    "MPICH 4.0 (ch4:ucx) busy-polls: 4 ranks on 2 cores took ~25 ms per "
    "allgather here, scheduler quanta rather than the algorithm; "
    "--mpich-oversubscribed runs it anyway"
)


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def conditions(nprocs_list=()):
    """One line about the machine: cores, load, and whether the runs oversubscribe it."""
    cores = os.cpu_count() or 1
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    over = [p for p in nprocs_list if p > cores]
    text = f"{cores} cores, load average {load} (1, 5, 15 min)"
    if over:
        text += f"; P = {', '.join(map(str, over))} oversubscribes the cores (Open MPI yields)"
    return text


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    """(max - min) / median of the rounds, in %: how noisy a point was."""
    m = median(xs)
    return 100 * (max(xs) - min(xs)) / m if xs and m > 0 else float("nan")


def program(build, flavour, name):
    exe = Path(build) / flavour / name
    if not exe.exists():
        raise MpilabError(f"{exe} is not built; run: make -C c_reference FLAVOUR={flavour}")
    return exe


def save(outdir, name, text):
    path = outdir / name
    path.write_text(text)
    return path


# --- 1. real: the library's MPI_Allgather next to the kit's algorithms ---------------------


def real_part(args, outdir):
    plan = []
    for flavour in ("openmpi", "mpich"):
        for p in (2, 4):
            if flavour == "mpich" and p > (os.cpu_count() or 1) and not args.mpich_oversubscribed:
                print(f"\nMPICH P = {p}: skipped. {MPICH_OVERSUBSCRIBED}.")
                continue
            plan.append((flavour, p))
    algos = [a for a in collbench.algorithm_names("openmpi") if a != "native"]
    order = ["native"] + algos
    total = len(plan) * len(order) * args.rounds
    done = 0
    results = {}
    for flavour, p in plan:
        exe = program(args.c_build, flavour, "collbench")
        runner = launch.get_launcher(flavour)
        samples = {a: {} for a in order}
        library = ""
        for r in range(args.rounds):
            turn = order[r % len(order) :] + order[: r % len(order)]  # rotate the order
            for algo in turn:
                done += 1
                say(f"[{done}/{total}] {flavour} P={p} round {r + 1}: {algo}")
                out = runner.run(exe, cb_args(algo, sizes=REAL_SIZES), p, timeout=args.timeout)
                save(outdir, f"real-{flavour}-p{p}-{algo}-r{r + 1}.csv", out.stdout)
                meta, rows = parsed(out.stdout)
                library = meta.get("library", library)
                for row in rows:
                    samples[algo].setdefault(row["bytes"], []).append(row["maxrank_median_us"])
        results[(flavour, p)] = samples
        print_real(flavour, p, samples, algos, library, args.rounds)
    return results


def print_real(flavour, p, samples, algos, library, rounds):
    print(
        f"\n## {flavour}, P = {p}: MPI_Allgather vs the kit (µs, median of {rounds} "
        f"interleaved rounds of the slowest rank's median; ratio = kit / MPI_Allgather)"
    )
    print(f"# {library.split(' MPICH configure:')[0][:160]}")
    print(f"# conditions after the runs: {conditions([p])}")
    head = f"{'bytes':>8} {'MPI_Allgather':>13} {'spread':>6}"
    for a in algos:
        head += f" {a:>12} {'ratio':>6}"
    print(head + f" {'best':>6}")
    worst = []
    for nbytes in sorted(samples["native"]):
        nat = median(samples["native"][nbytes])
        noise = spread(samples["native"][nbytes])
        line = f"{units.format_bytes(nbytes):>8} {nat:13.2f} {noise:5.0f}%"
        ratios = {}
        for a in algos:
            m = median(samples[a].get(nbytes, []))
            ratios[a] = m / nat
            line += f" {m:12.2f} {ratios[a]:6.2f}"
        best = min(ratios, key=ratios.get)
        mark = "" if ratios[best] <= REAL_LIMIT else f"  > {REAL_LIMIT:.2f}"
        print(line + f" {ratios[best]:6.2f} {best}{mark}")
        worst.append((ratios[best], nbytes, best))
    r, nbytes, a = max(worst)
    ok = sum(x <= REAL_LIMIT for x, _, _ in worst)
    print(
        f"# best kit algorithm within {REAL_LIMIT}x of MPI_Allgather at {ok} of {len(worst)} "
        f"sizes; the farthest: {a} at {units.format_bytes(nbytes)}, {r:.2f}x. "
        "spread = (max - min) / "
        f"median of MPI_Allgather's rounds"
    )


# --- 2. simulated: the kit's algorithm next to SimGrid's same algorithm --------------------


def sim_part(args, outdir):
    exe = program(args.c_build, "smpi", "collbench")
    print(
        f"\n## SMPI on {SIM_PLATFORM}: the kit vs SimGrid's same algorithm (simulated µs, "
        f"slowest rank, one launch each: a simulation is deterministic)"
    )
    print(f"{'kit':>9} {'SimGrid':>8} {'P':>4} {'bytes':>8} {'kit µs':>10} {'SimGrid µs':>11} {'ratio':>6}")
    worst = []
    for kit, (lib, where) in SIM_PAIRS.items():
        for p in SIM_NPROCS:
            if where.startswith("P a power") and p & (p - 1):
                continue
            figures = {}
            for side, algo, coll in (("kit", kit, None), ("SimGrid", "native", {"allgather": lib})):
                runner = launch.get_launcher("smpi", platform=SIM_PLATFORM, coll=coll)
                say(f"SMPI P={p}: {side} {kit if side == 'kit' else lib}")
                out = runner.run(
                    exe, cb_args(algo, sizes=SIM_SIZES, iters=5, warmup=1), p, timeout=args.timeout
                )
                save(outdir, f"sim-p{p}-{side}-{kit if side == 'kit' else lib}.csv", out.stdout)
                figures[side] = {r["bytes"]: r["maxrank_median_us"] for r in parsed(out.stdout)[1]}
            for nbytes in sorted(figures["kit"])[::2]:
                k, s = figures["kit"][nbytes], figures["SimGrid"][nbytes]
                mark = "" if k / s <= SIM_LIMIT else f"  > {SIM_LIMIT}"
                size = units.format_bytes(nbytes)
                print(f"{kit:>9} {lib:>8} {p:4d} {size:>8} {k:10.2f} {s:11.2f} {k / s:6.3f}{mark}")
                worst.append((k / s, kit, p, nbytes))
    r, kit, p, nbytes = max(worst)
    print(
        f"# within {SIM_LIMIT}x at {sum(x[0] <= SIM_LIMIT for x in worst)} of {len(worst)} "
        f"points; the farthest: {kit} at P = {p}, {units.format_bytes(nbytes)}: {r:.3f}x. "
        "(gather_bcast has no SimGrid twin: SimGrid's GB calls MPI_Gather and MPI_Bcast.)"
    )


# --- 3. OSU micro-benchmarks 7.4 against collbench and pingpong -----------------------------


def osu_tarball():
    return paths.repo_root().parent / "shared" / "vendor" / OSU_TARBALL


def build_osu(flavour, builddir):
    """Build OSU 7.4 for ``flavour`` under ``builddir`` (once); returns its source directory."""
    src = builddir / f"osu-7.4-{flavour}"
    top = src / "osu-micro-benchmarks-7.4"
    if all((top / p).exists() for p in OSU_PROGRAMS.values()):
        return top
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    say(f"building OSU 7.4 for {flavour} in {src} (about 20 s idle, a few minutes loaded)")
    proc = subprocess.run(["tar", "-xzf", str(osu_tarball()), "-C", str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MpilabError(f"cannot unpack {osu_tarball()}: {proc.stderr.strip()}")
    cc = launch.COMPILERS[flavour]
    cxx = cc.replace("mpicc", "mpicxx")
    for cmd in (["./configure", f"CC={cc}", f"CXX={cxx}"], ["make", "-j2"]):
        proc = subprocess.run(cmd, cwd=top, capture_output=True, text=True)
        if proc.returncode != 0:
            raise MpilabError(
                f"building OSU failed: {' '.join(cmd)} in {top}:\n"
                + "\n".join(proc.stderr.splitlines()[-15:])
            )
    return top


def run_osu_pair(args, outdir, runner, top, name, lo, hi, p):
    """Interleaved runs of one OSU program and the kit's driver for it: two lists (OSU's, the
    kit's) of {bytes: avg_us}, one dict per run."""
    it, wu = args.osu_iters, args.osu_warmup
    osu_argv = [
        str(top / OSU_PROGRAMS[name]),
        "-m",
        f"{lo if name == 'latency' else max(lo, 1)}:{hi}",
        "-i",
        str(it),
        "-x",
        str(wu),
    ]
    if name == "latency":
        kit_exe = program(args.c_build, "openmpi", "pingpong")
        kit_args = BenchOptions(
            sizes=f"{lo}:{hi}", iters=it, warmup=wu, iters_large=it, warmup_large=wu
        ).argv(pingpong.PROGRAM)
    else:
        kit_exe = program(args.c_build, "openmpi", "collbench")
        kit_args = cb_args(coll=name, sizes=(max(lo, 1), hi), iters=it, warmup=wu)
    osu_runs, kit_runs = [], []
    for r in range(args.osu_runs):
        for side in ("osu", "kit") if r % 2 == 0 else ("kit", "osu"):
            say(f"OSU part: {name} run {r + 1}: {side}")
            if side == "osu":
                out = runner.run(osu_argv[0], osu_argv[1:], p, timeout=args.timeout)
                path = save(outdir, f"osu-{name}-r{r + 1}.txt", out.stdout)
                osu_runs.append({pt["bytes"]: pt["avg_us"] for pt in osu.parse(path)["points"]})
            else:
                out = runner.run(kit_exe, kit_args, p, timeout=args.timeout)
                save(outdir, f"kit-{name}-r{r + 1}.csv", out.stdout)
                rows = parsed(out.stdout, pingpong if name == "latency" else collbench)[1]
                kit_runs.append({row["bytes"]: row["avg_us"] for row in rows})
    return osu_runs, kit_runs


def osu_part(args, outdir):
    tarball = osu_tarball()
    print("\n## OSU micro-benchmarks 7.4 vs the kit's drivers (Open MPI, P = 2)")
    if not tarball.exists():
        print(
            f"skipped: {tarball} is not there. The developers' machines and CI keep the "
            "third-party sources in ../shared/vendor next to the repository; elsewhere get "
            "OSU 7.4 from its site and run it by hand (mpilab import-osu reads its output)."
        )
        return None
    p = 2
    top = build_osu("openmpi", Path(__file__).resolve().parent / "build")
    runner = launch.get_launcher("openmpi")
    lo, hi = units.parse_size_range(args.osu_sizes)
    print(
        f"# sizes {lo}..{hi} B, {args.osu_iters} iterations and {args.osu_warmup} warm-up at "
        f"every size (OSU -i/-x), median of {args.osu_runs} interleaved runs of each side's "
        "average latency"
    )
    print(f"# collbench/pingpong: {args.c_build}; OSU: {top}")
    print(
        f"{'benchmark':>14} {'bytes':>8} {'OSU µs':>10} {'kit µs':>10} {'kit/OSU':>8} "
        f"{'noise':>6} {'min ratio':>9}  verdict"
    )
    verdicts = []
    for name in OSU_PROGRAMS:
        osu_runs, kit_runs = run_osu_pair(args, outdir, runner, top, name, lo, hi, p)
        for nbytes in sorted(osu_runs[0]):
            o_all = [run[nbytes] for run in osu_runs if nbytes in run]
            k_all = [run[nbytes] for run in kit_runs if nbytes in run]
            o, k = median(o_all), median(k_all)
            ratio = k / o if o > 0 else float("nan")
            # fewer than 3 runs say nothing about the noise: never call such a point a difference
            noise = max(spread(o_all), spread(k_all)) if len(o_all) >= 3 else float("inf")
            if abs(ratio - 1) <= OSU_LIMIT:
                verdict = "agrees"
            elif noise > 100 * OSU_LIMIT:
                verdict = "noisy"
            else:
                verdict = "DIFFERS"
            verdicts.append((verdict, abs(ratio - 1), name, nbytes, ratio))
            if nbytes in args.osu_show or nbytes == hi:
                print(
                    f"{'osu_' + name:>14} {units.format_bytes(nbytes):>8} {o:10.2f} {k:10.2f} "
                    f"{ratio:8.3f} {noise:5.0f}% {min(k_all) / min(o_all):9.3f}  {verdict}"
                )
    count = {v: sum(x[0] == v for x in verdicts) for v in ("agrees", "noisy", "DIFFERS")}
    differs = sorted((x for x in verdicts if x[0] == "DIFFERS"), key=lambda x: -x[1])
    print(
        f"# all {len(verdicts)} (benchmark, size) points: {count['agrees']} agree within "
        f"±{OSU_LIMIT:.0%}; {count['noisy']} are outside it but their runs spread more than "
        f"that (noise = (max - min) / median over the runs, the larger side): inconclusive; "
        f"{count['DIFFERS']} differ beyond the noise"
        + (
            f", the farthest: {differs[0][2]} at {units.format_bytes(differs[0][3])}, {differs[0][4]:.3f}"
            if differs
            else ""
        )
        + ". min ratio = the kit's fastest run / OSU's fastest run (noise only adds time)"
    )
    print(f"# conditions after the runs: {conditions([p])}")
    return verdicts


# --- 4. scale: P = 512 and 1,024 in SMPI, wall time and peak memory per launch ------------

#: (label, platform per P): a jupiter-like cluster of 16-core nodes and THIN's nodes, with as
#: many nodes as the ranks need at one rank per core (THIN itself has 10 nodes, 240 cores).
SCALE_PLATFORMS = (
    ("jupiter-like", {512: "jupiter-32x16", 1024: "jupiter-64x16"}),
    ("THIN-like", {512: "thin-like-22", 1024: "thin-like-43"}),
)
SCALE_RUNS = (("allgather", "bruck"), ("allgather", "ring"), ("bcast", "native"))


def _children(pid):
    """pid and all its descendants (from /proc)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def _pss(pid):
    """Proportional set size in bytes: a page mapped n times counts 1/n, so SMPI's folded
    (aliased) buffers count once; RSS (and /usr/bin/time's maximum) counts every alias."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measured_run(cmd, timeout):
    """Run a Command; return (CompletedProcess-like dict, wall s, peak PSS bytes of its tree)."""
    import threading
    import time

    env = dict(os.environ)
    env.update(cmd.env)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [str(a) for a in cmd.argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    box = {}
    th = threading.Thread(target=lambda: box.update(zip(("out", "err"), proc.communicate())))
    th.start()
    peak = 0
    while th.is_alive():
        peak = max(peak, sum(_pss(p) for p in _children(proc.pid)))
        th.join(1.0)
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, 9)
    return proc.returncode, box.get("out", ""), box.get("err", ""), time.monotonic() - t0, peak


def scale_part(args, outdir):
    exe = program(args.c_build, "smpi", "collbench")
    print(
        "\n## SMPI at scale: 1 MiB per rank, one timed iteration, wall time and peak memory "
        "(PSS of smpirun and its children, sampled every second) per launch"
    )
    print(
        "# allgather: the kit's algorithms; bcast native: SimGrid's copy of Open MPI's decision "
        "(smpi/coll-selector:ompi). THIN has 10 nodes (240 cores): THIN-like here means THIN's "
        "nodes and network with 22 or 43 nodes, one rank per core, not ranks stacked on cores"
    )
    print(f"# conditions at the start: {conditions()}")
    print(
        f"{'platform':>24} {'P':>5} {'collective':>10} {'algorithm':>9} {'wall s':>7} "
        f"{'peak GiB':>8} {'simulated µs':>13}"
    )
    for label, by_p in SCALE_PLATFORMS:
        if label not in args.scale_platforms:
            continue
        for p, platform in by_p.items():
            for coll, algo in SCALE_RUNS:
                runner = launch.get_launcher("smpi", platform=platform, cfg=["smpi/coll-selector:ompi"])
                cmd = runner.command(exe, cb_args(algo, coll, sizes=(1 << 20, 1 << 20), iters=1, warmup=0), p)
                say(f"scale: {platform} P={p} {coll} {algo}")
                rc, out, err, wall, peak = measured_run(cmd, args.scale_timeout)
                runner._cleanup()
                save(outdir, f"scale-{platform}-p{p}-{coll}-{algo}.csv", out + err)
                timeout = args.scale_timeout
                sim = (
                    (f"timeout {timeout:.0f} s" if wall >= timeout else f"failed, exit {rc}")
                    if rc
                    else f"{parsed(out)[1][0]['maxrank_median_us']:13.1f}"
                )
                print(
                    f"{label + ' ' + platform:>24} {p:5d} {coll:>10} {algo:>9} {wall:7.0f} "
                    f"{peak / 2**30:8.2f} {sim:>13}"
                )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--parts",
        default="real,sim,osu",
        help="comma-separated parts to run: real, sim, osu (default), and scale "
        "(SMPI at P = 512 and 1,024: about an hour on 2 cores)",
    )
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds of the real part")
    ap.add_argument(
        "--mpich-oversubscribed", action="store_true", help="also run MPICH at P = 4 on fewer cores"
    )
    ap.add_argument(
        "--c-build",
        default=str(paths.c_reference_dir() / "build"),
        help="the c_reference build tree to time (default c_reference/build)",
    )
    ap.add_argument(
        "--osu-runs",
        type=int,
        default=9,
        help="interleaved runs of each OSU program and the kit's driver (default 9)",
    )
    ap.add_argument("--osu-sizes", default="1:1M")
    ap.add_argument("--osu-iters", type=int, default=200)
    ap.add_argument("--osu-warmup", type=int, default=20)
    ap.add_argument(
        "--scale-platforms",
        default=",".join(label for label, _ in SCALE_PLATFORMS),
        help="the scale part's platforms, comma-separated (default: all of "
        + ", ".join(label for label, _ in SCALE_PLATFORMS)
        + ")",
    )
    ap.add_argument("--students", type=int, default=100, help="the grading part's class size (default 100)")
    ap.add_argument("--seed", type=int, default=1, help="the grading part's mix of submissions (default 1)")
    ap.add_argument(
        "--cell-timeout", type=float, default=120, help="the grading part's per-cell limit, s (default 120)"
    )
    ap.add_argument(
        "--run-timeout", type=float, default=10, help="the grading part's per-run limit, s (default 10)"
    )
    ap.add_argument("--timeout", type=float, default=600, help="seconds per launch")
    ap.add_argument(
        "--scale-timeout",
        type=float,
        default=1800,
        help="seconds per launch of the scale part (default 1800: the ring's 1,023 "
        "steps at P = 1,024 on THIN-like took more than 600 s)",
    )
    ap.add_argument(
        "-o", "--output", default=None, help="directory for the raw outputs (default results/bench/<date>)"
    )
    args = ap.parse_args(argv)
    parts = [x for x in args.parts.split(",") if x]
    bad = [x for x in parts if x not in ("real", "sim", "osu", "scale", "grading")]
    labels = [label for label, _ in SCALE_PLATFORMS]
    args.scale_platforms = [x for x in args.scale_platforms.split(",") if x]
    unknown = [x for x in args.scale_platforms if x not in labels]
    if unknown:
        ap.error(f"bad --scale-platforms {unknown} (valid: {', '.join(labels)})")
    if not args.timeout > 0 or not args.scale_timeout > 0:
        ap.error(
            f"--timeout and --scale-timeout are seconds above 0, not {args.timeout:g} and "
            f"{args.scale_timeout:g}"
        )
    if bad or args.rounds < 1 or args.osu_runs < 1:
        ap.error(f"bad --parts {bad} (valid: real, sim, osu, scale, grading) or --rounds/--osu-runs below 1")
    if args.students < 1 or not args.cell_timeout > 0 or not args.run_timeout > 0:
        ap.error(
            f"--students is a count above 0 and --cell-timeout/--run-timeout seconds above 0, not "
            f"{args.students}, {args.cell_timeout:g} and {args.run_timeout:g}"
        )
    args.osu_show = {4, 1024, 64 << 10, 256 << 10, 512 << 10}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = Path(args.output or paths.repo_root() / "results" / "bench" / stamp)
    outdir.mkdir(parents=True, exist_ok=True)
    print(f"# mpilab bench, {datetime.datetime.now().isoformat(timespec='seconds')}, {os.uname().nodename}")
    print(f"# c_reference build: {args.c_build}; raw outputs: {outdir}")
    print(
        f"# conditions at the start: {conditions()}. Timings on a shared machine are noisy: "
        "compare the columns of one table, measured side by side, not tables of other days."
    )
    try:
        if "real" in parts:
            real_part(args, outdir)
        if "sim" in parts:
            sim_part(args, outdir)
        if "osu" in parts:
            osu_part(args, outdir)
        if "scale" in parts:
            scale_part(args, outdir)
        if "grading" in parts:
            import grading

            grading.run(args, outdir)
    except (MpilabError, RuntimeError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    print(f"\n# conditions at the end: {conditions()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
