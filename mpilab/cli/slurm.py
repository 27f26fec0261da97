"""``mpilab slurm``: render, submit and collect sbatch jobs for a cluster profile.

::

    mpilab slurm profiles
    mpilab slurm render sweep --profile orfeo --partition THIN --algos ring,bruck --nprocs 2,24 -o runs/thin
    mpilab slurm submit runs/thin/sweep.sbatch
    mpilab slurm collect runs/thin

Inside jobs the rendered scripts call ``python -m mpilab.cli.slurm ingest POINT.csv`` to append
a finished point to the results table.
"""

import argparse
import shlex
import sys
from pathlib import Path

from mpilab import cli
from mpilab.cluster import slurm
from mpilab.core.errors import MpilabError
from mpilab.core.vocabulary import COLLECTIVES


def _cmd_profiles(args):
    for name in slurm.list_profiles():
        prof = slurm.load_profile(name)
        flavours = ", ".join(
            f"{f} (srun --mpi={t.get('srun_mpi', 'pmix')}; modules: "
            f"{' '.join(t.get('modules', [])) or 'none'})"
            for f, t in prof.mpi.items()
        )
        print(f"{name}: {prof.description}")
        print(f"  MPI: {flavours or 'none'}")
        for p in prof.partitions.values():
            print(
                f"  {p.name:8s} {p.nodes:3d} nodes x {p.sockets} sockets x {p.cores_per_socket:2d} cores"
                f" = {p.cores_per_node:3d} cores/node, {p.memory or '?'} memory, time limit "
                f"{slurm.format_time(p.max_time)}"
            )
    return 0


def _cmd_render(args):
    params = dict(
        flavour=args.flavour,
        job_name=args.job_name,
        nodes=args.nodes,
        ntasks_per_node=args.ntasks_per_node,
        time=args.time,
        collective=args.coll,
        algos=args.algos,
        nprocs=args.nprocs,
        mappings=args.mapping,
        sizes=args.sizes,
        iters=args.iters,
        warmup=args.warmup,
        repetitions=args.repetitions,
        cooldown=args.cooldown,
        collbench=args.collbench,
        image=args.image,
        container_kit_dir=args.container_kit_dir,
        osu_dir=args.osu_dir,
        exclusive=args.exclusive,
        exchange=args.exchange,
        course=args.course,
        command="mpilab slurm " + " ".join(map(shlex.quote, sys.argv[2:]))
        if sys.argv[1:2] == ["slurm"]
        else None,
    )
    if args.stdout:
        print(
            slurm.render(args.template, args.profile, args.partition, run_dir=args.output, **params), end=""
        )
        return 0
    path = slurm.render_to_dir(args.template, args.profile, args.partition, args.output, **params)
    print(path)
    return 0


def _cmd_submit(args):
    job = slurm.submit(args.script, sbatch_args=args.sbatch_arg or ())
    print(job)
    if args.wait:
        for t in slurm.wait(job, timeout=args.timeout):
            print(f"job {t.label}: {t.state} exit {t.exit_code}")
    return 0


def _cmd_collect(args):
    if args.wait:
        for job in args.job or []:
            slurm.wait(job, timeout=args.timeout)
    report = slurm.collect(args.run_dir, job_ids=args.job, results=args.results)
    print(report.summary())
    return 1 if report.failed else 0


def _cmd_ingest(args):
    point = Path(args.point)
    meta = point.with_suffix(".meta")
    if not meta.is_file():
        raise MpilabError(f"{meta} is missing: a point file needs its .meta sidecar")
    n = slurm.ingest_point(point, args.results, slurm.read_kv(meta))
    print(f"{point.name}: {n} rows appended to {args.results}")
    return 0


def configure(p):
    """Add the arguments of ``mpilab slurm`` to its parser ``p``."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
    sub = p.add_subparsers(dest="slurm_command", metavar="profiles|render|submit|collect")

    q = sub.add_parser("profiles", help="list the cluster profiles and their partitions")
    q.set_defaults(func=_cmd_profiles)

    r = sub.add_parser("render", help="render a template into an sbatch script in a run directory")
    r.add_argument("template", help="one of: " + ", ".join(slurm.TEMPLATES))
    r.add_argument(
        "--profile",
        required=True,
        help="cluster profile: " + ", ".join(slurm.list_profiles()) + ", or a path to a .toml file",
    )
    r.add_argument("--partition", required=True, help="a partition of the profile (e.g. THIN)")
    r.add_argument("-o", "--output", default="slurm-run", help="run directory (default: slurm-run)")
    r.add_argument("--flavour", default="openmpi", help="openmpi or mpich (default: openmpi)")
    r.add_argument("--job-name")
    r.add_argument("--nodes", type=int, default=1)
    r.add_argument("--ntasks-per-node", type=int)
    r.add_argument("--time", default="00:10:00", help="time limit (per array task for sweeps)")
    r.add_argument("--coll", default="allgather", help="collective: " + ", ".join(COLLECTIVES))
    r.add_argument("--algos", default="native", help="comma-separated algorithms (default: native)")
    r.add_argument("--nprocs", default="1,2", help="comma-separated process counts")
    r.add_argument("--mapping", default="core", help="comma-separated: core, socket, node")
    r.add_argument("-m", "--sizes", default="32:1K", help="MIN:MAX bytes, e.g. 32:1M")
    r.add_argument("--iters", type=int, default=100)
    r.add_argument("--warmup", type=int, default=10)
    r.add_argument("--repetitions", type=int, default=1)
    r.add_argument("--cooldown", type=float, default=0, help="seconds to sleep after each point")
    r.add_argument("--collbench", help="path of collbench (default: c_reference/build/<flavour>/collbench)")
    r.add_argument("--image", help="Apptainer image (sweep-apptainer)")
    r.add_argument(
        "--container-kit-dir",
        default="/opt/mpilab",
        help="where the kit is inside the image (default: /opt/mpilab)",
    )
    r.add_argument("--osu-dir", default="", help="directory of osu_bcast/osu_reduce (osu-seed)")
    r.add_argument("--exchange", help="nbgrader's exchange root on a shared filesystem (jupyter-exchange)")
    r.add_argument(
        "--course", default="mpilab", help="nbgrader course id (jupyter-exchange; default: mpilab)"
    )
    r.add_argument("--exclusive", action=argparse.BooleanOptionalAction, default=None)
    r.add_argument("--stdout", action="store_true", help="print the script instead of writing it")
    r.set_defaults(func=_cmd_render)

    s = sub.add_parser("submit", help="sbatch a rendered script (records the job id in its run directory)")
    s.add_argument("script")
    s.add_argument("--sbatch-arg", action="append", help="extra sbatch option, e.g. --sbatch-arg=--time=5")
    s.add_argument("--wait", action="store_true", help="wait for the job to finish")
    s.add_argument("--timeout", type=float, default=3600)
    s.set_defaults(func=_cmd_submit)

    c = sub.add_parser("collect", help="append a run's points to the results table; report failed tasks")
    c.add_argument("run_dir")
    c.add_argument("--job", action="append", help="job id (default: every job submitted from run_dir)")
    c.add_argument("--results", help="results table (default: RUN_DIR/results.csv)")
    c.add_argument("--wait", action="store_true", help="wait for the --job ids to finish first")
    c.add_argument("--timeout", type=float, default=3600)
    c.set_defaults(func=_cmd_collect)

    i = sub.add_parser("ingest", help="(used inside jobs) append one point file to a results table")
    i.add_argument("point")
    i.add_argument("--results", required=True)
    i.set_defaults(func=_cmd_ingest)
    return p


if __name__ == "__main__":  # python -m mpilab.cli.slurm ARGS, e.g. inside jobs
    sys.exit(cli.main(["slurm", *sys.argv[1:]]))
