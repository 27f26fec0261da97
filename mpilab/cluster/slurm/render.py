"""SLURM templates: jinja2 files under ``slurm_templates/templates/`` rendered, for a profile
and a partition, into plain sbatch scripts a person can read and edit."""

import datetime as _dt
import itertools
import os
import re
import shlex
import sys
from pathlib import Path

import jinja2

from mpilab import __version__
from mpilab.cluster.slurm.profiles import Profile, check_resources, format_time, load_profile, templates_dir
from mpilab.core.errors import UsageError, one_of
from mpilab.core.paths import collbench_path, repo_root
from mpilab.core.vocabulary import COLLECTIVES, MAPPINGS, REAL_FLAVOURS, SRUN_DISTRIBUTION, srun_placement
from mpilab.measure import libalgs
from mpilab.measure.collbench import PROGRAM as COLLBENCH
from mpilab.measure.driver import BenchOptions

#: The templates the kit ships, by the name ``render`` takes.
TEMPLATES = {
    "sweep": "sweep.sbatch.j2",
    "sweep-apptainer": "sweep-apptainer.sbatch.j2",
    "jupyter": "jupyter.sbatch.j2",
    "jupyter-exchange": "jupyter-exchange.sbatch.j2",
    "ipyparallel": "ipyparallel.sbatch.j2",
    "osu-seed": "osu-seed.sbatch.j2",
}
#: The algorithms of seed 000's job (kit names; Open MPI ids come from :mod:`mpilab.measure.libalgs`).
SEED_ALGORITHMS = ("default", "basic_linear", "chain", "pipeline")


def _as_list(value, kind, cast=str):
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    try:
        return [cast(v.strip() if isinstance(v, str) else v) for v in value]
    except ValueError:
        raise UsageError(f"bad {kind} list {value!r}; expected comma-separated values like 1,2,4") from None


def _environment():
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = lambda v: shlex.quote(str(v))
    return env


def render(
    template,
    profile,
    partition,
    *,
    run_dir,
    flavour="openmpi",
    job_name=None,
    nodes=1,
    ntasks_per_node=None,
    time="00:10:00",
    collective="allgather",
    algos=("native",),
    nprocs=(1, 2),
    mappings=("core",),
    sizes="32:1K",
    iters=100,
    warmup=10,
    repetitions=1,
    cooldown=0,
    exclusive=None,
    collbench=None,
    image=None,
    container_kit_dir="/opt/mpilab",
    osu_dir="",
    notebook_dir=None,
    exchange=None,
    course="mpilab",
    command=None,
):
    """Render one of :data:`TEMPLATES` into the text of an sbatch script.

    Parameters
    ----------
    template : str
        One of ``sweep``, ``sweep-apptainer``, ``jupyter``, ``jupyter-exchange``, ``ipyparallel``,
        ``osu-seed``.
    profile : str or Profile
        Cluster profile name (``orfeo``, ``local``) or a loaded profile.
    partition : str
        A partition of that profile (``THIN``, ``EPYC``, ``FAT``, ``local``).
    run_dir : path
        Where the job writes its logs, points, provenance and results (made absolute).
    flavour : str
        MPI flavour; the profile must have a module line for it.
    nodes, ntasks_per_node : int
        Nodes; tasks per node (default: what the largest process count needs).
    time : str
        ``--time`` of the job (or of each array task), checked against the partition.
    collective, algos, nprocs, mappings, sizes, iters, warmup, repetitions
        The sweep: one array task per (algorithm, process count, mapping); each runs
        ``repetitions`` points of ``collbench -m sizes``.
    cooldown : float
        Seconds to sleep after each point (``$MPILAB_COOLDOWN`` overrides it at run time).
    exclusive : bool, optional
        ``#SBATCH --exclusive`` (default: for ``osu-seed`` and for a sweep of several mappings;
        a sweep of one mapping asks for its CPUs with that mapping's ``--distribution``).
    collbench : path, optional
        The benchmark driver (default ``c_reference/build/<flavour>/collbench``).
    image : str, optional
        Apptainer image for ``sweep-apptainer``.
    osu_dir : str
        Directory with ``osu_bcast``/``osu_reduce`` for ``osu-seed``; empty: use collbench.
    exchange, course : str
        ``jupyter-exchange``: nbgrader's exchange root on a filesystem the nodes share, and the
        course id.
    command : str, optional
        The command line that asked for this rendering, copied into the provenance.

    Returns
    -------
    str
        The script.
    """
    if template not in TEMPLATES:
        raise one_of("SLURM template", template, TEMPLATES)
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    part = prof.partition(partition)
    if flavour not in REAL_FLAVOURS:
        raise one_of("flavour for SLURM", flavour, REAL_FLAVOURS)
    mpi = prof.mpi_for(flavour)
    algos, nprocs, mappings, options = _checked_sweep(
        collective, algos, nprocs, mappings, nodes, repetitions, sizes, iters, warmup
    )
    ntasks, ntasks_per_node = _tasks(template, part, nodes, nprocs, ntasks_per_node)
    secs = check_resources(prof, part, nodes, ntasks, time, ntasks_per_node)
    _check_template_needs(template, exchange, course, image)

    # Where the ranks go: a sweep of one mapping asks SLURM for its CPUs with that mapping's
    # distribution, so that its steps get the CPUs the srun launcher's would; a sweep of
    # several mappings (and osu-seed) takes whole nodes, and each step places its ranks.
    sweep = template.startswith("sweep")
    job_distribution = SRUN_DISTRIBUTION[mappings[0]] if sweep and len(mappings) == 1 else None
    if exclusive is None:
        exclusive = template == "osu-seed" or (sweep and len(mappings) > 1)
    run_dir = Path(run_dir).resolve()
    if collbench is None:
        collbench = collbench_path(flavour)
    points = [dict(algo=a, nprocs=p, mapping=m) for a, p, m in itertools.product(algos, nprocs, mappings)]
    params = dict(
        template=template,
        profile=prof.name,
        partition=part.name,
        flavour=flavour,
        nodes=nodes,
        ntasks=ntasks,
        time=format_time(secs),
        collective=collective,
        algos=",".join(algos),
        nprocs=",".join(map(str, nprocs)),
        mappings=",".join(mappings),
        sizes=sizes,
        iters=iters,
        warmup=warmup,
        repetitions=repetitions,
    )
    context = dict(
        profile=prof,
        partition=part,
        flavour=flavour,
        mpi=mpi,
        modules=mpi.get("modules", []),
        srun_mpi=mpi.get("srun_mpi", "pmix"),
        mpi_env=mpi.get("env", {}),
        job_name=job_name or f"mpilab-{template}",
        nodes=nodes,
        ntasks=ntasks,
        ntasks_per_node=ntasks_per_node,
        time=format_time(secs),
        exclusive=exclusive,
        job_distribution=job_distribution,
        run_dir=str(run_dir),
        results=str(run_dir / "results.csv"),
        collbench=str(collbench),
        python=sys.executable,
        kit_dir=str(repo_root()),
        kit_version=__version__,
        collective=collective,
        algos=algos,
        nprocs=nprocs,
        mappings=mappings,
        sizes=sizes,
        iters=int(iters),
        warmup=int(warmup),
        repetitions=int(repetitions),
        cooldown=cooldown,
        points=points,
        platform=f"{prof.name}/{part.name}",
        placement={m: srun_placement(m) for m in MAPPINGS},
        bench_options=shlex.join(options.argv(COLLBENCH)),
        image=image or "",
        container_kit_dir=container_kit_dir,
        container_collbench=f"{container_kit_dir}/c_reference/build/{flavour}/collbench",
        osu_dir=osu_dir,
        # a course's student works in their home, where the Assignment List fetches
        notebook_dir=notebook_dir
        or str(Path.home() if template == "jupyter-exchange" else repo_root() / "labs"),
        exchange=str(exchange or ""),
        course=course,
        rendered_at=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=command or "",
        params=params,
        osu_algorithms={
            c: {a: libalgs.lookup(c, a).ompi_id for a in SEED_ALGORITHMS} for c in ("bcast", "reduce")
        },
        template_file=TEMPLATES[template],
    )
    return _environment().get_template(TEMPLATES[template]).render(**context)


def _checked_sweep(collective, algos, nprocs, mappings, nodes, repetitions, sizes, iters, warmup):
    """The sweep's algorithms, process counts and mappings as lists, and its collbench options;
    a bad value is refused here (UsageError), not in the job."""
    if collective not in COLLECTIVES:
        raise one_of("collective", collective, COLLECTIVES)
    algos = _as_list(algos, "algorithm")
    nprocs = _as_list(nprocs, "process count", int)
    mappings = _as_list(mappings, "mapping")
    for m in mappings:
        if m not in MAPPINGS:
            raise one_of("mapping", m, MAPPINGS)
    if "node" in mappings and nodes < 2:
        raise UsageError("mapping 'node' spreads ranks round-robin over nodes: it needs --nodes 2 or more")
    if not algos or not nprocs or not mappings:
        raise UsageError("a sweep needs at least one algorithm, one process count and one mapping")
    if min(nprocs) < 1:
        raise UsageError(f"process counts must be >= 1, got {min(nprocs)}")
    if int(repetitions) < 1:
        raise UsageError(f"bad --repetitions {repetitions!r}; valid: an integer >= 1")
    options = BenchOptions(sizes=str(sizes), iters=iters, warmup=warmup)
    options.size_range(COLLBENCH)
    return algos, nprocs, mappings, options


def _tasks(template, part, nodes, nprocs, ntasks_per_node):
    """``(ntasks, ntasks_per_node)`` of the job: osu-seed fills its nodes (and refuses a process
    count they cannot hold), a notebook server is one task, the others need the largest P."""
    if template == "osu-seed":
        ntasks_per_node = ntasks_per_node or part.cores_per_node
        ntasks = nodes * ntasks_per_node
        if max(nprocs) > ntasks:
            raise UsageError(
                f"process count {max(nprocs)} is more than the {ntasks} tasks of "
                f"{nodes} node(s) x {ntasks_per_node}"
            )
    elif template in ("jupyter", "jupyter-exchange"):
        ntasks = 1
    else:
        ntasks = max(nprocs)
    if ntasks_per_node is None and nodes > 1:
        ntasks_per_node = -(-ntasks // nodes)
    return ntasks, ntasks_per_node


def _check_template_needs(template, exchange, course, image):
    """What a template needs besides the sweep: jupyter-exchange a shared exchange and a valid
    course id, sweep-apptainer its image."""
    if template == "jupyter-exchange":
        if not exchange or not os.path.isabs(str(exchange)):
            raise UsageError(
                f"template 'jupyter-exchange' needs --exchange, an absolute path on a filesystem "
                f"the compute nodes share (got {exchange!r})"
            )
        if not re.match(r"^[A-Za-z0-9_-]+$", str(course)):
            raise UsageError(f"course id {course!r} is not valid: letters, digits, - and _")
    if template == "sweep-apptainer" and not image:
        raise UsageError("template 'sweep-apptainer' needs --image PATH.sif (the kit's Apptainer image)")


def render_to_dir(template, profile, partition, run_dir, **params):
    """Render a template into ``run_dir/<template>.sbatch`` (creating ``run_dir/logs``).

    Returns
    -------
    pathlib.Path
        The script's path. Other parameters are those of :func:`render`.
    """
    run_dir = Path(run_dir).resolve()
    text = render(template, profile, partition, run_dir=run_dir, **params)
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    path = run_dir / f"{template}.sbatch"
    path.write_text(text)
    path.chmod(0o755)
    return path
