"""SLURM for the kit: cluster profiles, sbatch templates, submission and collection.

A *profile* is one small TOML file per cluster under ``slurm_templates/profiles/`` (its
partitions, the module lines of its MPI flavours, the ``srun --mpi`` plugin of each). A
*template* is a jinja2 file under ``slurm_templates/templates/`` that renders, for a profile and
a partition, into a plain sbatch script a person can read and edit. Everything is validated
before anything is submitted: an unknown profile or partition, more tasks than the partition
has cores, a time limit above the partition's or a missing module line is a
:class:`~mpilab.core.errors.UsageError` naming the bad value and what would be valid.

Typical use (the CLI ``mpilab slurm render|submit|collect|profiles`` does the same)::

    from mpilab.cluster import slurm
    script = slurm.render_to_dir("sweep", "local", "local", "runs/s1",
                                 algos=["native"], nprocs=[1, 2], sizes="32:1K")
    job = slurm.submit(script)
    slurm.wait(job)
    report = slurm.collect("runs/s1")
"""

from __future__ import annotations

import csv
import datetime as _dt
import fcntl
import getpass
import itertools
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from mpilab import __version__
from mpilab.core import results as _results
from mpilab.core.errors import LaunchError, one_of, ParseError, ToolMissing, UsageError
from mpilab.core.paths import collbench_path, repo_root
from mpilab.core.vocabulary import (COLLECTIVES, FLAVOURS, MAPPINGS, SRUN_DISTRIBUTION,
    SRUN_MPI_PLUGINS)
from mpilab.measure import libalgs, osu

#: The templates the kit ships, by the name ``render`` takes.
TEMPLATES = {
    "sweep": "sweep.sbatch.j2",
    "sweep-apptainer": "sweep-apptainer.sbatch.j2",
    "jupyter": "jupyter.sbatch.j2",
    "ipyparallel": "ipyparallel.sbatch.j2",
    "osu-seed": "osu-seed.sbatch.j2",
}
#: The algorithms of seed 000's job (kit names; Open MPI ids come from :mod:`mpilab.measure.libalgs`).
SEED_ALGORITHMS = ("default", "basic_linear", "chain", "pipeline")

#: Columns of the results table, docs/DEVELOPING.md §3, in order.
KEY_COLUMNS = ("collective", "algorithm", "flavour", "launcher", "platform", "mapping",
               "nprocs", "bytes", "datatype", "root", "repetition")
RESULT_COLUMNS = KEY_COLUMNS + (
    "iterations", "warmup", "avg_us", "min_us", "max_us", "maxrank_avg_us",
    "maxrank_median_us", "probe_us", "requested", "forced", "evidence",
    "library", "host", "date", "kit_version", "command", "job")

FAILED_STATES = {"FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
                 "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
DONE_STATES = FAILED_STATES | {"COMPLETED"}


def templates_dir():
    """``slurm_templates/templates/`` of the checkout."""
    return repo_root() / "slurm_templates" / "templates"


def profiles_dir():
    """``slurm_templates/profiles/`` of the checkout (one TOML file per cluster)."""
    return repo_root() / "slurm_templates" / "profiles"


# --------------------------------------------------------------------------- time limits

_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time(text):
    """Parse a SLURM time limit into seconds.

    Accepts SLURM's formats: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.

    Parameters
    ----------
    text : str or int
        The time limit; an int is minutes, as for ``sbatch --time``.

    Returns
    -------
    int
        Seconds.

    Raises
    ------
    UsageError
        If ``text`` is not in one of those formats.
    """
    if isinstance(text, int):
        return text * 60
    s = str(text).strip()
    m = _TIME_RE.match(s)
    if not m:
        raise UsageError(f"bad time limit {text!r}; valid forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S")
    days, a, b, c = m.groups()
    if days is None:
        if b is None:
            secs = int(a) * 60                                   # M
        elif c is None:
            secs = int(a) * 60 + int(b)                          # M:S
        else:
            secs = int(a) * 3600 + int(b) * 60 + int(c)          # H:M:S
    else:
        secs = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    return secs


def format_time(seconds):
    """Format seconds as SLURM's ``[D-]HH:MM:SS``."""
    days, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{h:02d}:{m:02d}:{s:02d}"


# --------------------------------------------------------------------------- profiles

@dataclass
class Partition:
    """One partition of a cluster profile."""

    name: str
    nodes: int
    sockets: int
    cores_per_socket: int
    memory: str
    max_time: int  # seconds

    @property
    def cores_per_node(self):
        return self.sockets * self.cores_per_socket


@dataclass
class Profile:
    """A cluster: its partitions and, per MPI flavour, module lines and ``srun --mpi`` plugin."""

    name: str
    path: Path
    description: str = ""
    login_host: str = ""
    account: str = ""
    qos: str = ""
    mpi: dict = field(default_factory=dict)
    partitions: dict = field(default_factory=dict)

    def partition(self, name):
        """The partition called ``name``; a UsageError listing the valid ones otherwise."""
        if name not in self.partitions:
            raise one_of(f"partition of profile {self.name!r}", name, self.partitions)
        return self.partitions[name]

    def mpi_for(self, flavour):
        """The ``[mpi.<flavour>]`` table; it must carry a ``modules`` line (possibly empty)."""
        with_modules = sorted(f for f, t in self.mpi.items() if "modules" in t)
        if flavour not in self.mpi or "modules" not in self.mpi[flavour]:
            raise UsageError(
                f"profile {self.name!r} ({self.path}) has no module line for flavour {flavour!r}: "
                f"add [mpi.{flavour}] with modules = [\"...\"] (an empty list when the MPI is on "
                f"PATH without modules); flavours with one: {', '.join(with_modules) or 'none'}")
        return self.mpi[flavour]


def list_profiles():
    """Names of the shipped profiles (the stems of ``slurm_templates/profiles/*.toml``)."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def load_profile(name):
    """Load and check a profile by name (a shipped one) or by path to a TOML file.

    Parameters
    ----------
    name : str or path
        ``"orfeo"``, ``"local"``, ... or a path ending in ``.toml``.

    Returns
    -------
    Profile

    Raises
    ------
    UsageError
        Unknown profile (listing the valid ones) or a malformed file (naming file and field).
    """
    path = Path(name)
    if path.suffix != ".toml":
        path = profiles_dir() / f"{name}.toml"
        if not path.is_file():
            raise one_of("SLURM profile", str(name), list_profiles())
    elif not path.is_file():
        raise UsageError(f"SLURM profile file {str(path)!r} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ParseError(f"{path}: {e}") from None
    parts = {}
    for pname, p in data.get("partitions", {}).items():
        try:
            parts[pname] = Partition(pname, int(p["nodes"]), int(p["sockets"]),
                                     int(p["cores_per_socket"]), str(p.get("memory", "")),
                                     parse_time(p["max_time"]))
        except KeyError as e:
            raise ParseError(f"{path}: partition {pname!r} lacks {e.args[0]!r}; needs nodes, "
                             "sockets, cores_per_socket, max_time (memory optional)") from None
    if not parts:
        raise ParseError(f"{path}: no [partitions.<NAME>] table")
    for flavour, table in data.get("mpi", {}).items():
        if flavour not in FLAVOURS:
            raise ParseError(f"{path}: [mpi.{flavour}]: unknown flavour; valid: {', '.join(FLAVOURS)}")
        plugin = table.get("srun_mpi", "pmix")
        if plugin not in SRUN_MPI_PLUGINS:
            raise ParseError(f"{path}: [mpi.{flavour}] srun_mpi = {plugin!r}; valid: {', '.join(SRUN_MPI_PLUGINS)}")
    return Profile(name=data.get("name", path.stem), path=path,
                   description=data.get("description", ""), login_host=data.get("login_host", ""),
                   account=data.get("account", ""), qos=data.get("qos", ""),
                   mpi=data.get("mpi", {}), partitions=parts)


# --------------------------------------------------------------------------- rendering

def _as_list(value, kind, cast=str):
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    try:
        return [cast(v.strip() if isinstance(v, str) else v) for v in value]
    except ValueError:
        raise UsageError(f"bad {kind} list {value!r}; expected comma-separated values like 1,2,4") from None


def check_resources(profile, partition, nodes, ntasks, time_limit, ntasks_per_node=None):
    """Check a request against a partition before anything is submitted.

    Parameters
    ----------
    profile : Profile
    partition : Partition
    nodes : int
        Nodes requested.
    ntasks : int
        Tasks (MPI processes) the job needs at most.
    time_limit : str
        The job's ``--time``.
    ntasks_per_node : int, optional
        Tasks per node, when the template fixes it.

    Returns
    -------
    int
        The time limit in seconds.

    Raises
    ------
    UsageError
        Naming the bad value and what the partition allows.
    """
    where = f"partition {partition.name!r} of profile {profile.name!r}"
    if nodes < 1 or nodes > partition.nodes:
        raise UsageError(f"--nodes {nodes} is not available in {where}: valid 1..{partition.nodes}")
    if ntasks < 1:
        raise UsageError(f"{ntasks} tasks requested; need at least 1")
    have = nodes * partition.cores_per_node
    if ntasks > have:
        raise UsageError(
            f"{ntasks} tasks need more cores than the {have} of {nodes} node(s) of {where} "
            f"({partition.cores_per_node} cores per node, {partition.nodes} nodes): ask for "
            f"--nodes {-(-ntasks // partition.cores_per_node)} or fewer processes")
    if ntasks_per_node is not None and ntasks_per_node > partition.cores_per_node:
        raise UsageError(f"--ntasks-per-node {ntasks_per_node} is more than the "
                         f"{partition.cores_per_node} cores per node of {where}")
    secs = parse_time(time_limit)
    if secs <= 0:
        raise UsageError(f"time limit {time_limit!r} must be positive")
    if secs > partition.max_time:
        raise UsageError(f"time limit {time_limit!r} ({format_time(secs)}) is above the "
                         f"{format_time(partition.max_time)} limit of {where}")
    return secs


def _environment():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["q"] = lambda v: shlex.quote(str(v))
    return env


def render(template, profile, partition, *, run_dir, flavour="openmpi", job_name=None,
           nodes=1, ntasks_per_node=None, time="00:10:00", collective="allgather",
           algos=("native",), nprocs=(1, 2), mappings=("core",), sizes="32:1K", iters=100,
           warmup=10, repetitions=1, cooldown=0, exclusive=None, collbench=None, image=None,
           container_kit_dir="/opt/mpilab", osu_dir="", notebook_dir=None, command=None):
    """Render one of :data:`TEMPLATES` into the text of an sbatch script.

    Parameters
    ----------
    template : str
        One of ``sweep``, ``sweep-apptainer``, ``jupyter``, ``ipyparallel``, ``osu-seed``.
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
        ``#SBATCH --exclusive`` (default: only for ``osu-seed``).
    collbench : path, optional
        The benchmark driver (default ``c_reference/build/<flavour>/collbench``).
    image : str, optional
        Apptainer image for ``sweep-apptainer``.
    osu_dir : str
        Directory with ``osu_bcast``/``osu_reduce`` for ``osu-seed``; empty: use collbench.
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
    if flavour not in FLAVOURS or flavour == "smpi":
        raise one_of("flavour for SLURM", flavour, ("openmpi", "mpich"))
    mpi = prof.mpi_for(flavour)
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
    if int(repetitions) < 1 or int(iters) < 1:
        raise UsageError(f"--repetitions and --iters must be >= 1 (got {repetitions}, {iters})")
    if not re.match(r"^(\d+[KkMm]?:)?\d+[KkMm]?$", str(sizes)):
        raise UsageError(f"bad size range {sizes!r}; valid forms: MAX or MIN:MAX with K/M suffixes, e.g. 32:1M")

    if template == "osu-seed":
        ntasks_per_node = ntasks_per_node or part.cores_per_node
        ntasks = nodes * ntasks_per_node
        if max(nprocs) > ntasks:
            raise UsageError(f"process count {max(nprocs)} is more than the {ntasks} tasks of "
                             f"{nodes} node(s) x {ntasks_per_node}")
    elif template == "jupyter":
        ntasks = 1
    elif template == "ipyparallel":
        ntasks = max(nprocs)
    else:
        ntasks = max(nprocs)
    if ntasks_per_node is None and nodes > 1:
        ntasks_per_node = -(-ntasks // nodes)
    secs = check_resources(prof, part, nodes, ntasks, time, ntasks_per_node)
    if template == "sweep-apptainer" and not image:
        raise UsageError("template 'sweep-apptainer' needs --image PATH.sif (the kit's Apptainer image)")

    run_dir = Path(run_dir).resolve()
    if collbench is None:
        collbench = collbench_path(flavour)
    points = [dict(algo=a, nprocs=p, mapping=m)
              for a, p, m in itertools.product(algos, nprocs, mappings)]
    params = dict(template=template, profile=prof.name, partition=part.name, flavour=flavour,
                  nodes=nodes, ntasks=ntasks, time=format_time(secs), collective=collective,
                  algos=",".join(algos), nprocs=",".join(map(str, nprocs)),
                  mappings=",".join(mappings), sizes=sizes, iters=iters, warmup=warmup,
                  repetitions=repetitions)
    context = dict(
        profile=prof, partition=part, flavour=flavour, mpi=mpi, modules=mpi.get("modules", []),
        srun_mpi=mpi.get("srun_mpi", "pmix"), mpi_env=mpi.get("env", {}),
        job_name=job_name or f"mpilab-{template}", nodes=nodes, ntasks=ntasks,
        ntasks_per_node=ntasks_per_node, time=format_time(secs),
        exclusive=(template == "osu-seed") if exclusive is None else exclusive,
        run_dir=str(run_dir), results=str(run_dir / "results.csv"), collbench=str(collbench),
        python=sys.executable, kit_dir=str(repo_root()), kit_version=__version__,
        collective=collective, algos=algos, nprocs=nprocs, mappings=mappings, sizes=sizes,
        iters=int(iters), warmup=int(warmup), repetitions=int(repetitions), cooldown=cooldown,
        points=points, distribution=SRUN_DISTRIBUTION, platform=f"{prof.name}/{part.name}",
        image=image or "", container_kit_dir=container_kit_dir,
        container_collbench=f"{container_kit_dir}/c_reference/build/{flavour}/collbench",
        osu_dir=osu_dir, notebook_dir=notebook_dir or str(repo_root() / "labs"),
        rendered_at=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=command or "", params=params,
        osu_algorithms={c: {a: libalgs.lookup(c, a).ompi_id for a in SEED_ALGORITHMS}
                        for c in ("bcast", "reduce")},
        template_file=TEMPLATES[template],
    )
    return _environment().get_template(TEMPLATES[template]).render(**context)


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


# --------------------------------------------------------------------------- submit, wait

def _tool(name):
    path = shutil.which(name)
    if not path:
        raise ToolMissing(f"{name} is not installed or not on PATH; on a test machine run "
                          "scripts/local-slurm.sh start (Debian packages slurm-wlm, munge)")
    return path


def _sbatch_directives(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"#SBATCH\s+--([\w-]+)(?:[= ](.*))?$", line.strip())
        if m:
            out[m.group(1)] = (m.group(2) or "").strip()
    return out


def submit(script, sbatch_args=(), env=None):
    """Submit a rendered script with ``sbatch`` and record the job in its run directory.

    Parameters
    ----------
    script : path
        A script written by :func:`render_to_dir`.
    sbatch_args : sequence of str
        Extra ``sbatch`` options (e.g. ``["--time=5"]``); they override the script's.
    env : dict, optional
        Extra environment for the job (``sbatch`` exports the submitting environment).

    Returns
    -------
    str
        The job id.
    """
    script = Path(script).resolve()
    if not script.is_file():
        raise UsageError(f"script {str(script)!r} does not exist; render one with mpilab slurm render")
    # sbatch does not create the directories of --output/--error: a missing one makes the job
    # fail without a log. Create them first.
    for key in ("output", "error"):
        value = _sbatch_directives(script.read_text()).get(key)
        if value:
            Path(value).parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([_tool("sbatch"), "--parsable", *sbatch_args, str(script)],
                          capture_output=True, text=True, env=full_env, cwd=script.parent)
    if proc.returncode != 0:
        raise LaunchError(f"sbatch {script} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    with open(script.parent / "jobs.jsonl", "a") as f:
        f.write(json.dumps({"job_id": job_id, "script": str(script), "sbatch_args": list(sbatch_args),
                            "submitted": _dt.datetime.now(_dt.timezone.utc).isoformat()}) + "\n")
    return job_id


@dataclass
class TaskState:
    """The state of a job or of one array task, with the reason when it failed."""

    job_id: str
    array_task: str
    state: str
    exit_code: str = ""
    reason: str = ""
    stdout: str = ""
    stderr: str = ""
    nodelist: str = ""
    source: str = ""
    raw_id: str = ""     # the task's own job id (SLURM's %j); for a plain job, job_id
    name: str = ""       # the job name (SLURM's %x)

    @property
    def failed(self):
        return self.state.split()[0] in FAILED_STATES or (
            self.state == "COMPLETED" and self.exit_code not in ("", "0:0"))

    @property
    def done(self):
        return self.state.split()[0] in DONE_STATES

    @property
    def label(self):
        return f"{self.job_id}_{self.array_task}" if self.array_task not in ("", "N/A") else self.job_id


#: The fields :func:`job_states` asks ``sacct`` for (``sacct -X --parsable2 --noheader -o ...``).
SACCT_FIELDS = ("JobID", "JobIDRaw", "JobName", "State", "ExitCode", "Reason", "NodeList")


def parse_sacct(text, source="sacct output"):
    """Parse ``sacct -X --parsable2 --noheader -o`` :data:`SACCT_FIELDS` into task states.

    One line per job or array task, e.g. ``41_2|43|mpilab-sweep|FAILED|1:0|None|node7``;
    a pending array range reads ``41_[3-5]``.

    Returns
    -------
    list of TaskState

    Raises
    ------
    ParseError
        A line without the expected number of ``|``-separated fields.
    """
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != len(SACCT_FIELDS):
            raise ParseError(f"{source}: line {n}: {len(fields)} fields, expected "
                             f"{len(SACCT_FIELDS)} ({'|'.join(SACCT_FIELDS)}): {line!r}")
        kv = dict(zip(SACCT_FIELDS, fields))
        base, _, task = kv["JobID"].partition("_")
        out.append(TaskState(base, task, kv["State"], kv["ExitCode"], kv["Reason"],
                             nodelist=kv["NodeList"], source="sacct", raw_id=kv["JobIDRaw"],
                             name=kv["JobName"]))
    return out


def _sacct(job_id):
    """sacct's records of a job: None when there is no accounting (no sacct, or it is
    disabled), an empty list when sacct has no record of the job (yet)."""
    if not shutil.which("sacct"):
        return None
    proc = subprocess.run(["sacct", "-j", str(job_id), "-X", "--parsable2", "--noheader",
                           "-o", ",".join(SACCT_FIELDS)], capture_output=True, text=True)
    if proc.returncode != 0 or "disabled" in proc.stderr + proc.stdout:
        return None
    return parse_sacct(proc.stdout, f"sacct -j {job_id}")


def _agree(a, b):
    """True when two views of a job list the same tasks in the same states."""
    def view(states):
        return sorted((t.label, t.state.split()[0] if t.state else "", t.exit_code) for t in states)
    return view(a) == view(b)


def _kv(text):
    return dict(re.findall(r"(\w+)=(\S*)", text))


def _scontrol(job_id):
    proc = subprocess.run([_tool("scontrol"), "show", "job", "-o", str(job_id)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    out = []
    for line in proc.stdout.strip().splitlines():
        kv = _kv(line)
        base = kv.get("ArrayJobId") or kv.get("JobId", "")
        out.append(TaskState(base, kv.get("ArrayTaskId", ""), kv.get("JobState", "?"),
                             kv.get("ExitCode", ""), kv.get("Reason", ""), kv.get("StdOut", ""),
                             kv.get("StdErr", ""), kv.get("NodeList", ""), "scontrol",
                             kv.get("JobId", ""), kv.get("JobName", "")))
    return out or None


def parse_jobcomp(text, job_ids):
    """The records of ``job_ids`` in a ``jobcomp/filetxt`` log, as task states.

    Each line of the log is one finished job or array task in ``Key=value`` form
    (``JobId=43 ... JobState=FAILED ... ArrayJobId=41 ArrayTaskId=2 ... ExitCode=1:0``).

    Parameters
    ----------
    text : str
        The log.
    job_ids : set of str
        Job ids (an array job's id selects all its tasks).

    Returns
    -------
    list of TaskState
        One per job or task; the last record of a job wins (a requeued job is logged twice).
    """
    found = {}
    for line in text.splitlines():
        kv = _kv(line)
        if "JobId" in kv and (kv["JobId"] in job_ids or kv.get("ArrayJobId") in job_ids):
            found[kv["JobId"]] = kv
    return [TaskState(kv.get("ArrayJobId") or jid, kv.get("ArrayTaskId", ""),
                      kv.get("JobState", "?"), kv.get("ExitCode", ""), "",
                      nodelist=kv.get("NodeList", ""), source="jobcomp", raw_id=jid,
                      name=kv.get("Name", ""))
            for jid, kv in found.items()]


def _jobcomp(job_ids):
    """Finished jobs from the ``jobcomp/filetxt`` log (clusters without accounting)."""
    proc = subprocess.run([_tool("scontrol"), "show", "config"], capture_output=True, text=True)
    conf = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", proc.stdout, re.M))
    loc = conf.get("JobCompLoc", "")
    if "filetxt" not in conf.get("JobCompType", "") or not Path(loc).is_file():
        return []
    return parse_jobcomp(Path(loc).read_text(), set(job_ids))


def job_states(job_id):
    """States of a job (one entry per array task): from sacct, else scontrol and jobcomp.

    sacct (accounting) is the record that lasts; the controller (``scontrol``) is the live
    view, and slurmdbd hears of a job's changes a moment after it. While the controller still
    knows the job and the two disagree, the controller's states are returned; once they agree,
    sacct's. A job that neither knows is looked up in the job completion log.

    Parameters
    ----------
    job_id : str

    Returns
    -------
    list of TaskState
        Their ``source`` says where they came from: ``sacct``, ``scontrol`` or ``jobcomp``.
    """
    acct = _sacct(job_id)
    live = _scontrol(job_id)
    if acct and (not live or _agree(acct, live)):
        return acct
    states = live or acct or _jobcomp({str(job_id)})
    return sorted(states, key=lambda t: (t.job_id, t.array_task.zfill(9)))


def wait(job_id, timeout=600, poll=1.0):
    """Wait until every task of a job has finished; return their states.

    Raises
    ------
    LaunchError
        If the job is still running after ``timeout`` seconds.
    """
    start = time.monotonic()
    deadline = start + timeout
    finished = None
    while True:
        states = job_states(job_id)
        if not states and time.monotonic() - start > 15:
            raise LaunchError(f"job {job_id} is unknown to SLURM (not in sacct, scontrol or the "
                              "job completion log): check the id with squeue")
        if states and all(s.done for s in states) and not any(
                s.array_task.startswith("[") or "-" in s.array_task for s in states):
            # Finished for the controller: give accounting, where there is some, up to 30 s
            # to record the same, so that what is returned (and reported later) is sacct's.
            finished = finished or time.monotonic()
            if (states[0].source != "scontrol" or time.monotonic() - finished > 30
                    or _sacct(job_id) is None):
                return states
        if time.monotonic() > deadline:
            raise LaunchError(f"job {job_id} not finished after {timeout} s: "
                              + ", ".join(f"{s.label} {s.state}" for s in states))
        time.sleep(poll)


# --------------------------------------------------------------------------- results

def parse_collbench(text, source="collbench output"):
    """Split collbench's CSV output (docs/DEVELOPING.md §2) into header and rows.

    Returns
    -------
    (dict, list of dict)
        The ``# key: value`` header and the data rows.
    """
    header, lines = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            key, sep, value = line[1:].strip().partition(":")
            if sep:
                header[key.strip()] = value.strip()
        elif line.strip():
            lines.append(line)
    if not lines or not lines[0].startswith("bytes,"):
        raise ParseError(f"{source}: no 'bytes,...' table in collbench output")
    return header, list(csv.DictReader(lines))


def point_rows(text, meta, source="collbench output"):
    """Turn one point's collbench output into rows of the results table.

    Parameters
    ----------
    text : str
        collbench ``--format csv`` output.
    meta : dict
        ``flavour, launcher, platform, mapping, repetition, command`` and optionally
        ``requested`` and ``job`` (the SLURM job or array task that measured the point: the
        key of its provenance record).

    Returns
    -------
    list of dict
        Rows with :data:`RESULT_COLUMNS`.
    """
    head, rows = parse_collbench(text, source)
    algo = head.get("algorithm", meta.get("requested", ""))
    out = []
    for r in rows:
        large = int(r["bytes"]) > 8192
        out.append({
            "collective": head.get("collective", ""), "algorithm": algo,
            "flavour": head.get("flavour", meta.get("flavour", "")),
            "launcher": meta.get("launcher", "srun"), "platform": meta.get("platform", ""),
            "mapping": meta.get("mapping", "core"), "nprocs": head.get("nprocs", ""),
            "bytes": r["bytes"], "datatype": head.get("datatype", ""), "root": head.get("root", ""),
            "repetition": meta.get("repetition", 0), "iterations": r.get("iterations", ""),
            "warmup": head.get("warmup_large" if large else "warmup", ""),
            **{k: r.get(k, "") for k in ("avg_us", "min_us", "max_us", "maxrank_avg_us",
                                         "maxrank_median_us", "probe_us")},
            "requested": meta.get("requested", algo),
            "forced": "no" if algo == "native" else "yes",
            "evidence": ("library default selection" if algo == "native"
                         else "kit algorithm from the registry, run by collbench --algo"),
            "library": head.get("library", ""), "host": head.get("host", ""),
            "date": head.get("date", ""), "kit_version": __version__,
            "command": meta.get("command", ""), "job": meta.get("job", ""),
        })
    return out


def append_results(rows, results):
    """Append rows to a results table, skipping keys already present.

    Writing goes through :func:`mpilab.core.results.append_rows` (its lock, its columns); a second
    lock, ``<results>.lock``, makes "check the keys, then write" one step for concurrent
    array tasks and ``collect``.

    Returns
    -------
    int
        Rows written.
    """
    results = Path(results)
    results.parent.mkdir(parents=True, exist_ok=True)
    with open(str(results) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = _results.measured_keys(results)
        new = [r for r in rows if _results.key_of(r) not in have]
        return _results.append_rows(results, new) if new else 0


def ingest_point(point, results, meta):
    """Append one finished point file (collbench output) to the results table.

    Returns
    -------
    int
        Rows written (0 when they were there already).
    """
    point = Path(point)
    return append_results(point_rows(point.read_text(), meta, str(point)), results)


def _read_kv(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


@dataclass
class Collected:
    """What :func:`collect` found: task states, rows ingested, provenance, failures."""

    run_dir: Path
    results: Path
    tasks: list
    ingested: int
    points: int
    provenance: list

    @property
    def failed(self):
        return [t for t in self.tasks if t.failed]

    def summary(self):
        """A human-readable report (what ``mpilab slurm collect`` prints)."""
        lines = [f"run directory: {self.run_dir}",
                 f"results: {self.results} ({self.points} point files, {self.ingested} new rows)"]
        for p in self.provenance:
            lines.append(f"provenance {p.get('job_id', '?')}"
                         f"{'_' + p['array_task_id'] if p.get('array_task_id') else ''}: "
                         f"nodes {p.get('nodelist', '?')}; MPI {p.get('mpi_version', '?')}; "
                         f"modules {p.get('modules', '') or 'none'}")
        for t in self.tasks:
            lines.append(f"job {t.label}: {t.state} exit {t.exit_code or '?'}"
                         + (f" ({t.source})" if t.source else ""))
        for t in self.failed:
            lines.append(f"FAILED {t.label}: {t.reason}")
        return "\n".join(lines)


def _failure_reason(task):
    bits = [f"state {task.state}"]
    if task.exit_code and task.exit_code != "0:0":
        code, _, sig = task.exit_code.partition(":")
        bits.append(f"exit code {code}" + (f", signal {sig}" if sig not in ("", "0") else ""))
    if task.reason and task.reason not in ("None", "NonZeroExitCode"):
        bits.append(f"reason {task.reason}")
    if task.state.startswith("TIMEOUT"):
        bits.append("killed at its time limit; resubmit the same script to resume "
                    "(finished points are kept and skipped)")
    for log in {task.stderr, task.stdout} - {""}:
        p = Path(log)
        if p.is_file():
            tail = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()][-3:]
            if tail:
                bits.append(f"last lines of {p.name}: " + " | ".join(tail))
    return "; ".join(bits)


def log_paths(script, task):
    """The output and error files of a job or array task, from its script's ``#SBATCH`` lines.

    ``sacct`` and the job completion log do not say where a job's logs went (``scontrol`` does,
    but only for a few minutes after the end): the ``--output``/``--error`` patterns of the
    script, with SLURM's ``%x`` (job name), ``%j`` (job id), ``%A`` (array job id), ``%a``
    (task id), ``%u`` (user) and ``%%`` filled in, say it for as long as the files exist.
    Relative paths are taken from the script's directory, where :func:`submit` runs sbatch.

    Parameters
    ----------
    script : path
        The submitted script.
    task : TaskState

    Returns
    -------
    (str, str)
        The output and the error file (the same file when the script has no ``--error``).
    """
    script = Path(script)
    d = _sbatch_directives(script.read_text())
    array = task.array_task if task.array_task not in ("", "N/A") else ""
    own = task.raw_id or task.job_id
    subs = {"x": task.name or d.get("job-name", ""), "j": own, "A": task.job_id if array else own,
            "a": array, "u": getpass.getuser(), "%": "%"}
    default = "slurm-%A_%a.out" if array else "slurm-%j.out"

    def expand(pattern):
        path = Path(re.sub(r"%([xjAau%])", lambda m: subs[m.group(1)], pattern))
        return str(path if path.is_absolute() else script.parent / path)

    out = expand(d.get("output") or default)
    return out, expand(d["error"]) if d.get("error") else out


def collect(run_dir, job_ids=None, results=None):
    """Gather a run directory's finished points into the results table and report its jobs.

    Parameters
    ----------
    run_dir : path
        The directory a template was rendered into.
    job_ids : list of str, optional
        Jobs to report on (default: every job ``submit`` recorded in ``run_dir/jobs.jsonl``).
    results : path, optional
        The results table (default ``run_dir/results.csv``).

    Returns
    -------
    Collected
        ``failed`` lists the failed tasks with the reason (state, exit code, the end of the
        task's error log).
    """
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise UsageError(f"run directory {str(run_dir)!r} does not exist")
    results = Path(results) if results else run_dir / "results.csv"
    jobs_file = run_dir / "jobs.jsonl"
    submitted = ([json.loads(l) for l in jobs_file.read_text().splitlines() if l.strip()]
                 if jobs_file.is_file() else [])
    scripts = {j["job_id"]: j.get("script", "") for j in submitted}
    if job_ids is None:
        job_ids = [j["job_id"] for j in submitted]
    ingested, npoints = 0, 0
    for meta_file in sorted((run_dir / "points").glob("*.meta")):
        point = meta_file.with_suffix(".csv")
        if point.is_file():
            npoints += 1
            ingested += ingest_point(point, results, _read_kv(meta_file))
    provenance = [_read_kv(p) for p in sorted((run_dir / "provenance").glob("*.txt"))]
    if provenance:
        # One table of what each job recorded (node list, MPI version, modules), next to the
        # results: the rows of a point and its job share platform and date.
        fields = sorted({k for p in provenance for k in p})
        with open(run_dir / "provenance.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(provenance)
    tasks = []
    for jid in job_ids:
        found = job_states(jid)
        if not found:
            found = [TaskState(str(jid), "", "UNKNOWN", reason="no record: not in sacct, "
                               "scontrol or the job completion log")]
        for t in found:
            if t.failed:
                script = scripts.get(t.job_id, "")
                if not (t.stdout or t.stderr) and script and Path(script).is_file():
                    t.stdout, t.stderr = log_paths(script, t)
                t.reason = _failure_reason(t)
            tasks.append(t)
    return Collected(run_dir, results, tasks, ingested, npoints, provenance)


# --------------------------------------------------------------------------- helpers for labs

def _controller_refuses(conf=None):
    """True when slurm.conf names a controller whose port refuses a connection right now.

    ``sinfo`` retries a dead controller for about ``MessageTimeout`` (10 s); a TCP connect to the
    port says the same in milliseconds. False when there is no readable slurm.conf (configless
    clusters) or something listens: then ``sinfo`` decides.
    """
    conf = Path(conf or os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    try:
        text = conf.read_text()
    except OSError:
        return False
    kv = {}
    for line in text.splitlines():
        key, sep, value = line.split("#", 1)[0].partition("=")
        if sep and key.strip().lower() not in kv:
            kv[key.strip().lower()] = value.strip()
    host = (kv.get("slurmctldhost") or kv.get("controlmachine") or "").split("(")[0].strip()
    port = (kv.get("slurmctldport") or "6817").split("-")[0].strip()
    addr = (kv.get("slurmctldhost") or "").partition("(")[2].rstrip(")").strip() or host
    if not addr or not port.isdigit():
        return False
    try:
        with socket.create_connection((addr, int(port)), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def cluster_answers(timeout=10):
    """True when ``sbatch`` is installed and a SLURM controller answers ``sinfo``.

    A notebook uses it to submit only where a cluster exists (a real one, or the test cluster of
    ``scripts/local-slurm.sh``); installed SLURM commands without a running controller give
    False — at once when slurm.conf names a controller port that refuses connections — as does
    a controller that does not answer within ``timeout`` seconds.
    """
    if not shutil.which("sbatch") or not shutil.which("sinfo"):
        return False
    if _controller_refuses():
        return False
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%P"], capture_output=True,
                              text=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def collect_osu(run_dir, results=None, flavour="openmpi", platform=None):
    """Append the OSU-format files of an ``osu-seed`` run to the results table.

    The job writes ``RUN_DIR/osu/<coll>_<algorithm>_<mapping>_p<P>.txt`` and an ``index.csv``
    saying which coll_tuned id, mapping and P each file measured; each file is imported with
    :func:`mpilab.measure.osu.to_rows` and its algorithm named as in :mod:`mpilab.measure.libalgs` (the
    template's reduce ``linear`` is ``basic_linear``). Files already in the table are skipped.

    Parameters
    ----------
    run_dir : path
        The directory the ``osu-seed`` template was rendered into.
    results : path, optional
        The results table (default ``RUN_DIR/results.csv``).
    flavour : str
        MPI flavour of the job.
    platform : str, optional
        Platform column (default ``<profile>/<partition>`` from the provenance, else ``slurm``).

    Returns
    -------
    int
        Rows appended.
    """
    run_dir = Path(run_dir).resolve()
    index = run_dir / "osu" / "index.csv"
    if not index.is_file():
        raise UsageError(f"{index} does not exist: the osu-seed job has not finished a point yet "
                         f"(see {run_dir / 'logs'})")
    if platform is None:
        prov = [_read_kv(p) for p in sorted((run_dir / "provenance").glob("*.txt"))]
        platform = (f"{prov[0].get('profile', 'slurm')}/{prov[0].get('partition', '')}"
                    if prov else "slurm")
    results = Path(results) if results else run_dir / "results.csv"
    rows = []
    with open(index, newline="") as f:
        for entry in csv.DictReader(f):
            coll, tuned_id = entry["collective"], int(entry["coll_tuned_id"])
            name = next(a.name for a in libalgs.TABLE[coll].values() if a.ompi_id == tuned_id)
            for row in osu.to_rows(run_dir / "osu" / entry["file"], nprocs=int(entry["nprocs"]),
                                   algorithm=name, mapping=entry["mapping"], flavour=flavour,
                                   platform=platform):
                row.update(launcher="srun", host=entry.get("nodelist", ""),
                           command=entry.get("command", ""), job=entry.get("job", ""))
                rows.append(row)
    return append_results(rows, results)
