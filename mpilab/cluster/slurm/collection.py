"""Collecting a SLURM run: the point files its jobs wrote become rows of the results table
(through the one parser, :func:`mpilab.measure.driver.parse`, and the one row builder,
:func:`mpilab.core.results.rows`), with the provenance of each job beside them and the reason
of every failed task."""

import csv
import fcntl
import json
from dataclasses import dataclass
from pathlib import Path

from mpilab.cluster.slurm.jobs import TaskState, job_states, log_paths
from mpilab.core import results as _results
from mpilab.core.errors import UsageError
from mpilab.measure import collbench, driver, libalgs, osu


def point_rows(text, meta, source="collbench output"):
    """Turn one point's collbench output into rows of the results table.

    Parameters
    ----------
    text : str
        collbench ``--format csv`` output (:func:`mpilab.measure.driver.parse` reads it).
    meta : dict
        The point's sidecar (``POINT.meta``, written by the sweep templates): ``flavour,
        launcher, platform, mapping, repetition, requested, command`` and ``job`` (the SLURM job
        or array task that measured the point: the key of its provenance record).

    Returns
    -------
    list of dict
        Rows of :func:`mpilab.core.results.rows`.
    """
    out = driver.parse(text, source=source, program=collbench.PROGRAM, columns=collbench.COLUMNS)
    return _results.rows(out.meta, out.table, **{k: v for k, v in meta.items() if k in _results.COLUMNS})


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


def read_kv(path):
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
        lines = [
            f"run directory: {self.run_dir}",
            f"results: {self.results} ({self.points} point files, {self.ingested} new rows)",
        ]
        for p in self.provenance:
            lines.append(
                f"provenance {p.get('job_id', '?')}"
                f"{'_' + p['array_task_id'] if p.get('array_task_id') else ''}: "
                f"nodes {p.get('nodelist', '?')}; MPI {p.get('mpi_version', '?')}; "
                f"modules {p.get('modules', '') or 'none'}"
            )
        for t in self.tasks:
            lines.append(
                f"job {t.label}: {t.state} exit {t.exit_code or '?'}" + (f" ({t.source})" if t.source else "")
            )
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
        bits.append(
            "killed at its time limit; resubmit the same script to resume "
            "(finished points are kept and skipped)"
        )
    for log in {task.stderr, task.stdout} - {""}:
        p = Path(log)
        if p.is_file():
            tail = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()][-3:]
            if tail:
                bits.append(f"last lines of {p.name}: " + " | ".join(tail))
    return "; ".join(bits)


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
    submitted = (
        [json.loads(l) for l in jobs_file.read_text().splitlines() if l.strip()]
        if jobs_file.is_file()
        else []
    )
    scripts = {j["job_id"]: j.get("script", "") for j in submitted}
    if job_ids is None:
        job_ids = [j["job_id"] for j in submitted]
    ingested, npoints = 0, 0
    for meta_file in sorted((run_dir / "points").glob("*.meta")):
        point = meta_file.with_suffix(".csv")
        if point.is_file():
            npoints += 1
            ingested += ingest_point(point, results, read_kv(meta_file))
    provenance = [read_kv(p) for p in sorted((run_dir / "provenance").glob("*.txt"))]
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
            found = [
                TaskState(
                    str(jid),
                    "",
                    "UNKNOWN",
                    reason="no record: not in sacct, scontrol or the job completion log",
                )
            ]
        for t in found:
            if t.failed:
                script = scripts.get(t.job_id, "")
                if not (t.stdout or t.stderr) and script and Path(script).is_file():
                    t.stdout, t.stderr = log_paths(script, t)
                t.reason = _failure_reason(t)
            tasks.append(t)
    return Collected(run_dir, results, tasks, ingested, npoints, provenance)


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
        raise UsageError(
            f"{index} does not exist: the osu-seed job has not finished a point yet (see {run_dir / 'logs'})"
        )
    if platform is None:
        prov = [read_kv(p) for p in sorted((run_dir / "provenance").glob("*.txt"))]
        platform = f"{prov[0].get('profile', 'slurm')}/{prov[0].get('partition', '')}" if prov else "slurm"
    results = Path(results) if results else run_dir / "results.csv"
    rows = []
    with open(index, newline="") as f:
        for entry in csv.DictReader(f):
            coll, tuned_id = entry["collective"], int(entry["coll_tuned_id"])
            name = next(a.name for a in libalgs.TABLE[coll].values() if a.ompi_id == tuned_id)
            rows += osu.to_rows(
                run_dir / "osu" / entry["file"],
                nprocs=int(entry["nprocs"]),
                algorithm=name,
                mapping=entry["mapping"],
                flavour=flavour,
                platform=platform,
                launcher="srun",
                host=entry.get("nodelist", ""),
                command=entry.get("command", ""),
                job=entry.get("job", ""),
            )
    return append_results(rows, results)
