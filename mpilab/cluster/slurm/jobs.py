"""SLURM jobs: submit a rendered script, follow its tasks (sacct, else the controller, else the
job completion log), wait for them, find their logs, and say whether a cluster answers at all."""

import datetime as _dt
import getpass
import json
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from mpilab.core import process
from mpilab.core.errors import LaunchError, ParseError, ToolMissing, UsageError

FAILED_STATES = {
    "FAILED",
    "TIMEOUT",
    "CANCELLED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}
DONE_STATES = FAILED_STATES | {"COMPLETED"}
#: Seconds a SLURM command (sbatch, sacct, scontrol) may take before it is stopped.
COMMAND_TIMEOUT = 120


# --------------------------------------------------------------------------- submit, wait


def _tool(name):
    path = shutil.which(name)
    if not path:
        raise ToolMissing(
            f"{name} is not installed or not on PATH; on a test machine run "
            "scripts/local-slurm.sh start (Debian packages slurm-wlm, munge)"
        )
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
    proc = process.run(
        [_tool("sbatch"), "--parsable", *sbatch_args, script],
        env=full_env,
        cwd=script.parent,
        timeout=COMMAND_TIMEOUT,
    )
    if proc.timed_out:
        raise LaunchError(f"sbatch {script} did not answer within {COMMAND_TIMEOUT} s")
    if proc.returncode != 0:
        raise LaunchError(f"sbatch {script} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    with open(script.parent / "jobs.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "job_id": job_id,
                    "script": str(script),
                    "sbatch_args": list(sbatch_args),
                    "submitted": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                }
            )
            + "\n"
        )
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
    raw_id: str = ""  # the task's own job id (SLURM's %j); for a plain job, job_id
    name: str = ""  # the job name (SLURM's %x)

    @property
    def failed(self):
        return self.state.split()[0] in FAILED_STATES or (
            self.state == "COMPLETED" and self.exit_code not in ("", "0:0")
        )

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
            raise ParseError(
                f"{source}: line {n}: {len(fields)} fields, expected "
                f"{len(SACCT_FIELDS)} ({'|'.join(SACCT_FIELDS)}): {line!r}"
            )
        kv = dict(zip(SACCT_FIELDS, fields))
        base, _, task = kv["JobID"].partition("_")
        out.append(
            TaskState(
                base,
                task,
                kv["State"],
                kv["ExitCode"],
                kv["Reason"],
                nodelist=kv["NodeList"],
                source="sacct",
                raw_id=kv["JobIDRaw"],
                name=kv["JobName"],
            )
        )
    return out


def _sacct(job_id):
    """sacct's records of a job: None when there is no accounting (no sacct, or it is
    disabled), an empty list when sacct has no record of the job (yet)."""
    if not shutil.which("sacct"):
        return None
    proc = process.run(
        ["sacct", "-j", job_id, "-X", "--parsable2", "--noheader", "-o", ",".join(SACCT_FIELDS)],
        timeout=COMMAND_TIMEOUT,
    )
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
    proc = process.run([_tool("scontrol"), "show", "job", "-o", job_id], timeout=COMMAND_TIMEOUT)
    if proc.returncode != 0:
        return None
    out = []
    for line in proc.stdout.strip().splitlines():
        kv = _kv(line)
        base = kv.get("ArrayJobId") or kv.get("JobId", "")
        out.append(
            TaskState(
                base,
                kv.get("ArrayTaskId", ""),
                kv.get("JobState", "?"),
                kv.get("ExitCode", ""),
                kv.get("Reason", ""),
                kv.get("StdOut", ""),
                kv.get("StdErr", ""),
                kv.get("NodeList", ""),
                "scontrol",
                kv.get("JobId", ""),
                kv.get("JobName", ""),
            )
        )
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
    return [
        TaskState(
            kv.get("ArrayJobId") or jid,
            kv.get("ArrayTaskId", ""),
            kv.get("JobState", "?"),
            kv.get("ExitCode", ""),
            "",
            nodelist=kv.get("NodeList", ""),
            source="jobcomp",
            raw_id=jid,
            name=kv.get("Name", ""),
        )
        for jid, kv in found.items()
    ]


def _jobcomp(job_ids):
    """Finished jobs from the ``jobcomp/filetxt`` log (clusters without accounting)."""
    proc = process.run([_tool("scontrol"), "show", "config"], timeout=COMMAND_TIMEOUT)
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
            raise LaunchError(
                f"job {job_id} is unknown to SLURM (not in sacct, scontrol or the "
                "job completion log): check the id with squeue"
            )
        if (
            states
            and all(s.done for s in states)
            and not any(s.array_task.startswith("[") or "-" in s.array_task for s in states)
        ):
            # Finished for the controller: give accounting, where there is some, up to 30 s
            # to record the same, so that what is returned (and reported later) is sacct's.
            finished = finished or time.monotonic()
            if states[0].source != "scontrol" or time.monotonic() - finished > 30 or _sacct(job_id) is None:
                return states
        if time.monotonic() > deadline:
            raise LaunchError(
                f"job {job_id} not finished after {timeout} s: "
                + ", ".join(f"{s.label} {s.state}" for s in states)
            )
        time.sleep(poll)


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
    subs = {
        "x": task.name or d.get("job-name", ""),
        "j": own,
        "A": task.job_id if array else own,
        "a": array,
        "u": getpass.getuser(),
        "%": "%",
    }
    default = "slurm-%A_%a.out" if array else "slurm-%j.out"

    def expand(pattern):
        path = Path(re.sub(r"%([xjAau%])", lambda m: subs[m.group(1)], pattern))
        return str(path if path.is_absolute() else script.parent / path)

    out = expand(d.get("output") or default)
    return out, expand(d["error"]) if d.get("error") else out


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
        proc = process.run(["sinfo", "--noheader", "--format=%P"], timeout=timeout)
    except ToolMissing:
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())
