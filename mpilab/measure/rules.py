"""Open MPI 4.1 dynamic rules files: read back, looked up as Open MPI does, and measured.

Lab 5 asks students to write their decision table as such a file; the function that writes a
table as a rules file is the answer key's (``mpilab_key.rules``).

Rules file format (Open MPI 4.1 ``coll_tuned_dynamic_file.c``), whitespace-separated integers::

    <number of collectives>
    <collective id>            # COLLTYPE_T: allgather 0, allreduce 2, bcast 7, reduce 11
    <number of communicator sizes>
    <communicator size>        # rule applies from this size up (largest size <= P wins)
    <number of message sizes>
    <message size> <algorithm id> <fan in/out> <segment size>   # from this many bytes up

Use it with ``--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename F``
and no ``coll_tuned_<coll>_algorithm``. A ``#`` starts a comment that runs to the end of its line:
Open MPI 4.1's reader (``ompi_coll_base_file_getnext_long`` in ``coll_base_util.c``) skips it, and
so does :func:`read_ompi_rules`. Any other text that is not a number is skipped character by
character by Open MPI, so digits in it would be read as numbers: start every comment with ``#``.

Segment size. The last number of a rule is the segment size in bytes, 0 = no segmentation (the
whole message at once), as for ``coll_tuned_<coll>_algorithm_segmentsize``. A rule for a
segmented algorithm measured elsewhere takes the segment size it was measured with: under SMPI
the kit's sweeps run its clone of Open MPI's pipeline with the kit's 8 KiB segments
(:func:`mpilab.measure.libalgs.segment_size`).

Message size. Open MPI 4.1 (``coll_tuned_decision_dynamic.c``) compares the file's message
sizes with count × datatype size for bcast, reduce and allreduce, the kit's ``bytes``; for
allgather with datatype size × sendcount × communicator size, the whole gathered buffer, while
the kit's allgather ``bytes`` is one process's contribution. So an allgather threshold depends on
P: a file for allgather needs thresholds ``bytes × P`` per communicator-size block, and
:func:`rules_choose` multiplies the query by P as Open MPI does.
"""

import os
from pathlib import Path

import pandas as pd

from mpilab.core import results
from mpilab.core.errors import LaunchError, ParseError, UsageError
from mpilab.measure import collbench, driver, forcing, libalgs
from mpilab.measure.driver import BenchOptions

OMPI_COLL_IDS = {"allgather": 0, "allreduce": 2, "bcast": 7, "reduce": 11}


def read_ompi_rules(path):
    """Read an Open MPI 4.1 dynamic rules file back into a table.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    pandas.DataFrame
        One row per message-size rule: collective, comm_size (the rule holds from this many
        processes up), msg_size (from this many bytes up, as Open MPI counts them: for
        allgather the whole gathered buffer, P × the kit's ``bytes``), ompi_id, algorithm (the
        kit's name, see :mod:`mpilab.measure.libalgs`), faninout, segsize.

    Raises
    ------
    ParseError
        Naming the file and what was expected where the file stops making sense (too few
        numbers, an unknown collective id or algorithm id, sizes not increasing).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror}") from None
    words = []
    for line in text.splitlines():
        words += line.split("#", 1)[0].split()
    pos = [0]

    def take(what):
        if pos[0] >= len(words):
            raise ParseError(f"{path}: the file ends where {what} was expected")
        w = words[pos[0]]
        pos[0] += 1
        try:
            return int(w)
        except ValueError:
            raise ParseError(
                f"{path}: {what} must be an integer, found {w!r} (number {pos[0]} of the file)"
            ) from None

    names = {v: k for k, v in OMPI_COLL_IDS.items()}
    rows = []
    for _ in range(take("the number of collectives")):
        cid = take("a collective id")
        if cid not in names:
            raise ParseError(
                f"{path}: collective id {cid} is not one the kit writes; valid: "
                + ", ".join(f"{i} ({n})" for i, n in sorted(names.items()))
            )
        coll = names[cid]
        ids = {a.ompi_id: a.name for a in libalgs.TABLE[coll].values() if a.ompi_id is not None}
        last_comm = -1
        for _ in range(take(f"the number of communicator sizes of {coll}")):
            comm = take(f"a communicator size of {coll}")
            if comm <= last_comm:
                raise ParseError(f"{path}: {coll} communicator sizes must increase: {comm} after {last_comm}")
            last_comm, last_msg = comm, -1
            for _ in range(take(f"the number of message sizes of {coll} at {comm} processes")):
                msg = take(f"a message size of {coll} at {comm} processes")
                if msg <= last_msg:
                    raise ParseError(
                        f"{path}: {coll} message sizes at {comm} processes must "
                        f"increase: {msg} after {last_msg}"
                    )
                last_msg = msg
                alg = take(f"the algorithm id of {coll} at {comm} processes, {msg} bytes")
                if alg not in ids:
                    raise ParseError(
                        f"{path}: {coll} algorithm id {alg} (at {comm} processes, "
                        f"{msg} bytes) is not an Open MPI {coll} algorithm; valid: "
                        + ", ".join(f"{i} ({n})" for i, n in sorted(ids.items()))
                    )
                fan = take("the fan in/out")
                seg = take("the segment size")
                rows.append(
                    dict(
                        collective=coll,
                        comm_size=comm,
                        msg_size=msg,
                        ompi_id=alg,
                        algorithm=ids[alg],
                        faninout=fan,
                        segsize=seg,
                    )
                )
    if pos[0] != len(words):
        raise ParseError(f"{path}: {len(words) - pos[0]} numbers left over after the last rule")
    return pd.DataFrame(
        rows, columns=["collective", "comm_size", "msg_size", "ompi_id", "algorithm", "faninout", "segsize"]
    )


def rules_rule(rules, collective, nprocs, nbytes):
    """The rule (a row of :func:`read_ompi_rules`: algorithm, faninout, segsize, ...) that a rules
    table gives Open MPI for one call, or ``None`` when no rule applies (Open MPI then uses its
    fixed decisions).

    As coll/tuned does: the communicator rule with the largest size not above ``nprocs``, then
    its message rule with the largest size not above the message size. ``nbytes`` is the kit's
    ``bytes``; for allgather Open MPI's message size is ``nbytes × nprocs`` (the gathered
    buffer).
    """
    r = rules[(rules["collective"] == collective) & (rules["comm_size"] <= nprocs)]
    if r.empty:
        return None
    r = r[r["comm_size"] == r["comm_size"].max()]
    msg = nbytes * nprocs if collective == "allgather" else nbytes
    r = r[r["msg_size"] <= msg]
    if r.empty:
        return None
    return r.sort_values("msg_size").iloc[-1]


def rules_choose(rules, collective, nprocs, nbytes):
    """The algorithm a rules table (from :func:`read_ompi_rules`) gives Open MPI for one call
    (:func:`rules_rule`), or ``None`` when no rule applies."""
    rule = rules_rule(rules, collective, nprocs, nbytes)
    return None if rule is None else rule["algorithm"]


def rules_settings(path):
    """:class:`mpilab.measure.libalgs.Settings` that make Open MPI follow the rules file at ``path``.

    Dynamic rules on, the file named, and :data:`mpilab.measure.forcing.OMPI_VERIFY_ENV` so that the
    run echoes what it read. Open MPI 4.1 consults the file before any forced
    ``coll_tuned_<coll>_algorithm`` (``coll_tuned_decision_dynamic.c``; checked on 4.1.4 by
    ``tests/test_selection.py``), so where the file has a rule it decides.
    """
    env = {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
        "OMPI_MCA_coll_tuned_dynamic_rules_filename": os.path.abspath(path),
        **forcing.OMPI_VERIFY_ENV,
    }
    return libalgs.Settings(
        env=env, mca={k[len("OMPI_MCA_") :]: v for k, v in env.items() if k.startswith("OMPI_MCA_")}
    )


def measure_with_rules(launcher, path, collective, nprocs, sizes="2:1M", repetition=0, **kw):
    """Run collbench's native ``collective`` on Open MPI following the rules file ``path``.

    Parameters
    ----------
    launcher : mpilab.measure.launch.Launcher
        An Open MPI launcher.
    path : str or Path
        The rules file.
    collective : str
    nprocs : int
    sizes : str or (int, int)
    repetition : int
    **kw
        collbench options: iters, warmup, iters_large, warmup_large, probe, check, timeout.

    Returns
    -------
    list of dict
        Results rows with ``algorithm="rules"``, ``requested`` the file's path, and
        ``forced``/``evidence`` saying whether Open MPI echoed that it read the file with
        dynamic rules on (and any ``coll_tuned_<coll>_algorithm`` also set, which the file
        overrides where it has a rule).
    """
    if launcher.flavour != "openmpi":
        raise UsageError(
            f"rules files are Open MPI's; launcher flavour is {launcher.flavour!r}, valid: openmpi"
        )
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise UsageError(
            f"rules file {path!r} does not exist; valid: the path of an Open MPI dynamic rules file"
        )
    timeout = kw.pop("timeout", 600)
    args = collbench.collbench_args("native", collective, BenchOptions(sizes=sizes, **kw))
    proc = forcing.run(
        launcher, collbench.collbench_program("openmpi"), args, nprocs, rules_settings(path), timeout=timeout
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise LaunchError(f"exit {proc.returncode}: {proc.args}\nstderr tail:\n{tail}")
    echo = dict(forcing._OMPI_ECHO.findall(proc.stderr))
    if echo.get("coll_tuned_dynamic_rules_filename") == path and echo.get("coll_tuned_use_dynamic_rules") in (
        "true",
        "1",
    ):
        also = echo.get(f"coll_tuned_{collective}_algorithm")
        forced, evidence = (
            "yes",
            (
                f"Open MPI echoed coll_tuned_use_dynamic_rules=true and "
                f"coll_tuned_dynamic_rules_filename={path}; "
                + (
                    f"coll_tuned_{collective}_algorithm={also} was also set, "
                    f"which Open MPI 4.1 consults only where the file has no rule"
                    if also
                    else f"no coll_tuned_{collective}_algorithm forced"
                )
            ),
        )
    else:
        forced, evidence = "no", f"Open MPI echoed {echo or 'no MCA parameters'}"
    out = driver.parse(proc.stdout, source=proc.args, program=collbench.PROGRAM, columns=collbench.COLUMNS)
    return results.rows(
        out.meta,
        out.table,
        algorithm="rules",
        flavour="openmpi",
        launcher=launcher.name,
        platform="local",
        mapping="core",
        repetition=repetition,
        requested=path,
        forced=forced,
        evidence=evidence,
        command=proc.args,
    )
