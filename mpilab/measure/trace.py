"""Measured timing diagrams: run an algorithm's C code under the ``labtrace`` PMPI tracer and
read the per-rank logs back as a :class:`mpilab.model.timeline.Timeline`, next to the α-β
prediction of the same run (:func:`predicted_and_measured`).
"""

import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from mpilab.core import paths, results
from mpilab.core.errors import ParseError, ToolMissing, UsageError, one_of
from mpilab.core.vocabulary import FLAVOURS
from mpilab.measure import driver, launch, pingpong
from mpilab.model import algorithms, schedules
from mpilab.model import fits as models
from mpilab.model.timeline import POINT_TO_POINT, Timeline, largest_message, predict
from mpilab.simulate.routes import platform_model

_TRACE_RE = re.compile(r"^trace\.(\d+)\.csv$")
_TRACE_DTYPES = {"region": "int64", "call": "string", "req": "string", "data": "string"}
#: The fields of a ``# blocked:`` line (LABTRACE_LIVE): the call a rank had entered and not left.
_BLOCKED_FIELDS = ("call", "start", "dst", "sbytes", "stag", "src", "rbytes", "rtag", "reqs")


def _read_rank_log(path):
    head, body = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                head[key.strip()] = value.strip()
            else:
                body.append(line)
    if "rank" not in head or not body:
        raise ParseError(f"{path}: not a labtrace log (no '# rank:' line or no table)")
    df = results.read_table("".join(body), path, dtype=_TRACE_DTYPES)
    syncs = []
    for key in ("clock_init", "clock_final"):
        parts = head.get(key, "").split()
        if len(parts) == 3:
            syncs.append(tuple(float(x) for x in parts))
    return (
        int(head["rank"]),
        int(head.get("nprocs", 0)),
        syncs,
        int(head.get("dropped", 0)),
        df,
        _blocked(head.get("blocked")),
    )


def _blocked(line):
    """A ``# blocked:`` line as a dict (numbers as int or float, empty fields as None), or None."""
    if not line:
        return None
    parts = line.split(",")
    if len(parts) != len(_BLOCKED_FIELDS):
        raise ParseError(f"bad '# blocked:' line {line!r}; expected {len(_BLOCKED_FIELDS)} fields")
    out = dict(zip(_BLOCKED_FIELDS, parts))
    for key in ("dst", "sbytes", "stag", "src", "rbytes", "rtag"):
        out[key] = int(out[key]) if out[key] else None
    out["start"] = float(out["start"])
    out["reqs"] = [int(x) for x in out["reqs"].split()]
    return out


def _best_offset(syncs):
    """The offset (s) of the synchronisation with the shortest round trip, and its error bound."""
    if not syncs:
        return 0.0, 0.0
    local, offset, rtt = min(syncs, key=lambda s: s[2])
    return offset, rtt / 2


def read_trace(directory, region=None, drop_self=True):
    """Merge the per-rank labtrace logs of a directory into one measured :class:`Timeline`.

    Parameters
    ----------
    directory : str or Path
        Holds ``trace.<rank>.csv`` for ranks 0..p-1.
    region : int, optional
        Which region (``MPI_Pcontrol`` level; the timeline program's repetition) to keep.
        Default: the region of median duration (region 0 if the program marked none).
    drop_self : bool
        Leave out the point-to-point calls whose only peer is the rank itself (how logs written
        before `copy` rows showed the C code's local copies). `copy` rows are always kept.

    Returns
    -------
    Timeline
        ``meta`` has ``regions`` (duration in µs of each region), ``region``,
        ``clock_error_us`` (per rank), ``unmatched_sends`` and ``unmatched_recvs``, and
        ``blocked``: for a log written with ``LABTRACE_LIVE`` by a run that never finished
        (a deadlock, a crash, a time limit), ``{rank: call}`` with the call each rank of the
        region had entered and not left (``call``, ``start_us``, peers, sizes, tags and, for a
        wait, ``reqs``: the ``Isend``/``Irecv`` rows it waited for, as dicts). When the
        program probed its sends (``LABTRACE_PROBE``) the calls table has a ``data`` column.

    Raises
    ------
    ParseError
        Missing or malformed logs (naming the file).
    UsageError
        A region that is not in the logs.
    """
    directory = Path(directory)
    files = (
        {int(m.group(1)): directory / f for f in os.listdir(directory) if (m := _TRACE_RE.match(f))}
        if directory.is_dir()
        else {}
    )
    if not files:
        raise ParseError(
            f"no trace.<rank>.csv files in {str(directory)!r}; run a program linked "
            "with liblabtrace (e.g. build/<flavour>/timeline) there first"
        )
    frames, errors, dropped, blocked = [], {}, 0, {}
    nprocs = None
    for _r, path in sorted(files.items()):
        rank, p, syncs, drops, df, stuck = _read_rank_log(path)
        nprocs = nprocs or p
        offset, errors[rank] = _best_offset(syncs)
        dropped += drops
        for col in ("start", "end", "done"):
            df[col] = (df[col] - offset) * 1e6
        if stuck is not None:
            stuck["start"] = (stuck["start"] - offset) * 1e6
            stuck["region"] = int(df["region"].iloc[-1]) if len(df) else 0
            blocked[rank] = stuck
        frames.append(df.assign(rank=rank))
    missing = sorted(set(range(nprocs)) - set(files))
    if missing:
        raise ParseError(f"{directory}: no log for rank(s) {missing} of {nprocs}")
    log = pd.concat(frames, ignore_index=True)
    marks = log[log["call"] == "Pcontrol"]
    durations = {}
    for k, g in log.groupby("region"):
        t0 = (
            marks.loc[marks["region"] == k, "start"].min()
            if (marks["region"] == k).any()
            else g["start"].min()
        )
        durations[int(k)] = float(g["end"].max() - t0)
    regions = sorted(k for k in durations if k > 0) or sorted(durations)
    if region is None:
        region = sorted(regions, key=lambda k: (durations[k], k))[(len(regions) - 1) // 2]
    elif region not in durations:
        raise one_of("trace region", region, sorted(durations))
    sel = log[log["region"] == region]
    start = marks.loc[marks["region"] == region, "start"]
    t0 = start.min() if len(start) else sel["start"].min()
    rank_start = {
        int(r): float(t - t0)
        for r, t in marks[marks["region"] == region].groupby("rank")["start"].min().items()
    }
    sel = sel[sel["call"] != "Pcontrol"].copy()
    for col in ("start", "end", "done"):
        sel[col] = sel[col] - t0
    if drop_self:
        peers_self = (sel["dst"].isna() | (sel["dst"] == sel["rank"])) & (
            sel["src"].isna() | (sel["src"] == sel["rank"])
        )
        sel = sel[~(sel["call"].isin(POINT_TO_POINT) & peers_self)]
    calls = pd.DataFrame(
        {
            "rank": sel["rank"].astype(int),
            "call": sel["call"].astype(str),
            "start_us": sel["start"],
            "end_us": sel["end"],
            "dst": sel["dst"].astype("Int64"),
            "sbytes": sel["sbytes"].astype("Int64"),
            "src": sel["src"].astype("Int64"),
            "rbytes": sel["rbytes"].astype("Int64"),
            "tag": sel["stag"].fillna(sel["rtag"]).astype("Int64"),
        }
    )
    if "data" in sel and sel["data"].notna().any():
        calls["data"] = sel["data"].fillna("").astype(str)
    calls = calls.sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True)
    messages, unmatched_s, unmatched_r = _match(sel)
    stuck = {}
    for rank, b in blocked.items():
        if b["region"] != region:
            continue
        b = dict(b, start_us=b.pop("start") - t0)
        b["reqs"] = [
            row
            for row in sel[sel["rank"] == rank].to_dict("records")
            if row["call"] in ("Isend", "Irecv") and str(row.get("req")) in map(str, b["reqs"])
        ]
        for row in b["reqs"]:
            row["start_us"] = row.pop("start")
        stuck[rank] = b
    meta = dict(
        kind="measured",
        regions=durations,
        region=int(region),
        dropped_events=dropped,
        blocked=stuck,
        rank_start_us=rank_start,
        clock_error_us={r: e * 1e6 for r, e in errors.items()},
        unmatched_sends=unmatched_s,
        unmatched_recvs=unmatched_r,
        directory=str(directory),
    )
    return Timeline(calls, messages, int(nprocs), f"measured (region {region})", meta)


def _match(sel):
    """Pair sends and receives by (source, destination, tag) in posting order (MPI's rule)."""
    sends = sel[sel["call"].isin(["Send", "Isend", "Sendrecv"]) & (sel["dst"] >= 0)]
    recvs = sel[sel["call"].isin(["Recv", "Irecv", "Sendrecv"]) & (sel["src"] >= 0)]
    sends = pd.DataFrame(
        {
            "src": sends["rank"],
            "dst": sends["dst"],
            "tag": sends["stag"],
            "bytes": sends["sbytes"],
            "send_us": sends["start"],
        }
    )
    recvs = pd.DataFrame(
        {
            "src": recvs["src"],
            "dst": recvs["rank"],
            "tag": recvs["rtag"],
            "rbytes": recvs["rbytes"],
            "posted": recvs["start"],
            "recv_us": np.where(recvs["call"] == "Irecv", recvs["done"], recvs["end"]),
        }
    )
    for df in (sends, recvs):
        for col in ("src", "dst", "tag", "bytes" if "bytes" in df else "rbytes"):
            df[col] = df[col].astype(int)
    sends = sends.sort_values(["send_us"], kind="stable")
    recvs = recvs.sort_values(["posted"], kind="stable")
    sends["seq"] = sends.groupby(["src", "dst", "tag"]).cumcount()
    recvs["seq"] = recvs.groupby(["src", "dst", "tag"]).cumcount()
    both = sends.merge(recvs, on=["src", "dst", "tag", "seq"], how="outer", indicator=True)
    unmatched_s = both[both["_merge"] == "left_only"][["src", "dst", "tag", "bytes"]].to_dict("records")
    unmatched_r = both[both["_merge"] == "right_only"][["src", "dst", "tag", "rbytes"]].to_dict("records")
    msgs = both[both["_merge"] == "both"].copy()
    msgs["bytes"] = msgs["bytes"].astype(int)
    msgs["rbytes"] = msgs["rbytes"].astype(int)
    messages = msgs[schedules.MESSAGE_COLUMNS + ["rbytes"]].sort_values("send_us").reset_index(drop=True)
    return messages, unmatched_s, unmatched_r


def timeline_program(flavour):
    """``c_reference/build/<flavour>/timeline`` (the traced driver), checked to exist."""
    prog = paths.build_dir(flavour) / "timeline"
    if not prog.is_file():
        raise ToolMissing(f"{prog} is missing; build it with `make -C c_reference FLAVOUR={flavour}`")
    return prog


def run_traced(
    algorithm,
    nprocs,
    nbytes,
    flavour="smpi",
    platform=None,
    mapping="core",
    reps=3,
    warmup=1,
    root=0,
    region=None,
    directory=None,
    timeout=300,
):
    """Run the C algorithm under the PMPI tracer and return its measured :class:`Timeline`.

    Parameters
    ----------
    algorithm : str
        One of :func:`mpilab.model.algorithms.with_schedule` that the traced program
        (``c_reference/trace/timeline.c``) has: gather_bcast, pairwise and binomial; ring and bruck
        in an instructor's checkout.
    nprocs, nbytes : int
        Processes; bytes per rank (allgather) or of the buffer (bcast).
    flavour : {"openmpi", "mpich", "smpi"}
    platform : str, optional
        SMPI platform name or XML file (default ``orfeo-thin``); only for ``smpi``.
    mapping : {"core", "socket", "node"}
    reps, warmup : int
        Traced repetitions (each checked element by element) and untraced warm-up runs.
    region : int, optional
        Which repetition to return (default: the one of median duration).
    directory : str or Path, optional
        Where the per-rank logs go (kept); default a temporary directory, removed afterwards.
    timeout : float
        Seconds before the launch is killed.

    Returns
    -------
    Timeline
        ``meta`` adds ``command``, ``rep_us`` (each repetition's slowest rank, from the
        program's output), ``flavour``, ``platform``, ``mapping``, ``algorithm``, ``bytes``.
    """
    algorithms.collective_of(algorithm)
    if flavour not in FLAVOURS:
        raise one_of("flavour", flavour, FLAVOURS)
    if platform is not None and flavour != "smpi":
        raise UsageError(f"platform {platform!r} only applies to flavour smpi")
    for name, v, low in (("reps", reps, 1), ("warmup", warmup, 0)):
        if not isinstance(v, int) or v < low:
            raise UsageError(f"bad {name} {v!r}; valid: an integer >= {low}")
    prog = timeline_program(flavour)
    if flavour == "smpi":
        platform = platform or "orfeo-thin"
        launcher = launch.get_launcher("smpi", platform=platform, cfg=["smpi/wtime:0"])
    else:
        launcher = launch.get_launcher(flavour)
    args = [
        "--coll",
        algorithms.collective_of(algorithm),
        "--algo",
        algorithm,
        "-b",
        str(int(nbytes)),
        "--reps",
        str(reps),
        "--warmup",
        str(warmup),
        "--root",
        str(root),
    ]
    tmp = None
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="mpilab-trace-")
        directory = tmp.name
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("trace.*.csv"):
        old.unlink()
    try:
        cmd = launcher.command(prog, args, nprocs, mapping)
        proc = launcher.run(prog, args, nprocs, mapping, timeout=timeout, cwd=directory)
        tl = read_trace(directory, region=region)
    finally:
        if tmp is not None:
            tmp.cleanup()
    out = driver.parse(proc.stdout, source=f"output of {cmd}", program="timeline", columns=("rep", "max_us"))
    rep_us = [r["max_us"] for r in out.table]
    tl.meta.update(
        command=str(cmd),
        rep_us=rep_us,
        flavour=flavour,
        platform=launcher.platform,
        mapping=mapping,
        algorithm=algorithm,
        bytes=int(nbytes),
    )
    if tmp is not None:
        tl.meta["directory"] = None
    where = f"{flavour}" + (f" on {launcher.platform}" if flavour == "smpi" else "")
    tl.label = f"measured, {where} (repetition {tl.meta['region']} of {reps})"
    return tl


def pingpong_alpha_beta(flavour, max_bytes, mapping="core", timeout=300):
    """α (µs) and β (µs/B) of this machine: a Hockney fit to a ping-pong up to ``max_bytes``.

    Runs ``c_reference/build/<flavour>/pingpong`` (:func:`mpilab.measure.pingpong.run`, short
    iteration counts) and fits :func:`mpilab.model.fits.hockney_fit` to sizes 0..``max_bytes``.

    Returns
    -------
    (float, float)
    """
    hi = max(int(max_bytes), 1024)
    rows = pingpong.run(
        flavour, mapping, sizes=(0, hi), iters=200, warmup=20, iters_large=50, warmup_large=5, timeout=timeout
    )
    fit = models.hockney_fit(rows["bytes"].astype(float), rows["avg_us"].astype(float))
    return max(float(fit["alpha"]), 0.0), max(float(fit["beta"]), 0.0)


def predicted_and_measured(
    algorithm,
    nprocs,
    nbytes,
    flavour="smpi",
    platform=None,
    mapping="core",
    alpha=None,
    beta=None,
    ports=1,
    eager_bytes=0,
    same_start=True,
    **run_opts,
):
    """Run the algorithm traced and predict it with the α-β model, for :func:`plot_side_by_side`.

    ``alpha`` and ``beta`` default, on SMPI, to each pair's route on the platform
    (:func:`platform_model`, which also says how a shared port is shared) and, on a real MPI, to a ping-pong
    fit on this machine up to
    the run's largest message (:func:`pingpong_alpha_beta`).
    ``same_start``: start each rank of the prediction when it started in the measured run
    (ranks leave the barrier before the run at slightly different times); False starts all
    at 0. ``ports``, ``eager_bytes``: see :func:`predict`; ``run_opts``: see :func:`run_traced`.

    Returns
    -------
    (Timeline, Timeline)
        Predicted, measured.
    """
    if (alpha is None) != (beta is None):
        raise UsageError("give both alpha and beta, or neither")
    source, sharing = "given", {}
    if alpha is None and flavour == "smpi":
        sharing = platform_model(platform or "orfeo-thin", nprocs, mapping)
        alpha, beta = sharing.pop("alpha"), sharing.pop("beta")
        source = f"routes of {platform or 'orfeo-thin'}"
    elif alpha is None:
        alpha, beta = pingpong_alpha_beta(
            flavour, largest_message(algorithm, nprocs, nbytes, run_opts.get("root", 0))
        )
        source = f"{flavour} ping-pong fit"
    measured = run_traced(
        algorithm, nprocs, nbytes, flavour=flavour, platform=platform, mapping=mapping, **run_opts
    )
    predicted = predict(
        algorithm,
        nprocs,
        nbytes,
        alpha,
        beta,
        ports=ports,
        eager_bytes=eager_bytes,
        root=run_opts.get("root", 0),
        start_us=measured.rank_start_us() if same_start else None,
        **sharing,
    )
    predicted.meta["alpha_beta_from"] = source
    return predicted, measured


# --- drawing ------------------------------------------------------------------------------------
