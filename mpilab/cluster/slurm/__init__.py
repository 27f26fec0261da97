"""SLURM for the kit: cluster profiles, sbatch templates, submission and collection.

A *profile* is one small TOML file per cluster under ``slurm_templates/profiles/``
(:mod:`~mpilab.cluster.slurm.profiles`). A *template* is a jinja2 file under
``slurm_templates/templates/`` that renders, for a profile and a partition, into a plain sbatch
script a person can read and edit (:mod:`~mpilab.cluster.slurm.render`). Everything is
validated before anything is submitted: an unknown profile or partition, more tasks than the
partition has cores, a time limit above the partition's or a missing module line is a
:class:`~mpilab.core.errors.UsageError` naming the bad value and what would be valid. Jobs are
submitted and followed by :mod:`~mpilab.cluster.slurm.jobs`; their point files become rows of
the results table through :mod:`~mpilab.cluster.slurm.collection`.

Typical use (the CLI ``mpilab slurm render|submit|collect|profiles`` does the same)::

    from mpilab.cluster import slurm
    script = slurm.render_to_dir("sweep", "local", "local", "runs/s1",
                                 algos=["native"], nprocs=[1, 2], sizes="32:1K")
    job = slurm.submit(script)
    slurm.wait(job)
    report = slurm.collect("runs/s1")
"""

from mpilab.cluster.slurm.collection import (
    Collected,
    append_results,
    collect,
    collect_osu,
    ingest_point,
    point_rows,
    read_kv,
)
from mpilab.cluster.slurm.jobs import (
    DONE_STATES,
    FAILED_STATES,
    SACCT_FIELDS,
    TaskState,
    cluster_answers,
    job_states,
    log_paths,
    parse_jobcomp,
    parse_sacct,
    submit,
    wait,
)
from mpilab.cluster.slurm.profiles import (
    Partition,
    Profile,
    check_resources,
    format_time,
    list_profiles,
    load_profile,
    parse_time,
    profiles_dir,
    templates_dir,
)
from mpilab.cluster.slurm.render import SEED_ALGORITHMS, TEMPLATES, render, render_to_dir

__all__ = [
    "append_results",
    "check_resources",
    "cluster_answers",
    "collect",
    "collect_osu",
    "Collected",
    "DONE_STATES",
    "FAILED_STATES",
    "format_time",
    "ingest_point",
    "job_states",
    "list_profiles",
    "load_profile",
    "log_paths",
    "parse_jobcomp",
    "parse_sacct",
    "parse_time",
    "Partition",
    "point_rows",
    "Profile",
    "profiles_dir",
    "read_kv",
    "render",
    "render_to_dir",
    "SACCT_FIELDS",
    "SEED_ALGORITHMS",
    "submit",
    "TaskState",
    "templates_dir",
    "TEMPLATES",
    "wait",
]
