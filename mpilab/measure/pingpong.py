"""Point-to-point ping-pong between two ranks: run it, keep the rows, fit α and β per mapping.

The C program ``c_reference/pingpong.c`` (built into ``c_reference/build/<flavour>/pingpong``)
times round trips of MPI_Send/MPI_Recv between exactly two ranks and prints half the round-trip
time for sizes 0 B, 1 B, 2 B, ... 4 MiB. :func:`run` launches it with the two ranks placed by a
mapping and turns its output into rows of the results table (collective ``pingpong``):

``core``
    two cores of one socket;
``socket``
    one core on each of two sockets of a node;
``node``
    one core on each of two nodes.

Real runs (Open MPI, MPICH) place the ranks with the launcher's ``--map-by``/``--bind-to``
options (:mod:`mpilab.measure.launch`: map and bind by the mapping's object). The program prints where each
rank ran (``# rank_hosts``, ``# rank_cpus``) and every
row's ``evidence`` says so; when the machine cannot give the requested distance (one node, one
socket) the row and a warning say that the mapping was **not** real. Under SMPI the platform's
hostfile puts the ranks on the simulated hosts (:func:`mpilab.simulate.platforms.placement`).

:func:`fit` fits the kit's segmented model (:func:`mpilab.model.fits.segmented_fit`) per mapping:
the first segment's intercept and slope are the α and β of that distance, the numbers the
ORFEO report gives per mapping and :func:`mpilab.simulate.calibration.calibrate` turns into a platform.

Examples
--------
>>> rows = run("smpi", "socket", platform="orfeo-thin", sizes="0:1K")   # doctest: +SKIP
>>> fit(rows)                                                           # doctest: +SKIP
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd

from mpilab.core import paths, results
from mpilab.core.errors import ToolMissing, UsageError, one_of
from mpilab.core.vocabulary import FLAVOURS, MAPPINGS
from mpilab.measure import driver, launch
from mpilab.measure.driver import BenchOptions
from mpilab.simulate.platforms import host_location

PROGRAM = "pingpong"
COLLECTIVE = "pingpong"
ALGORITHM = "blocking"
#: Columns of the table the C program prints.
COLUMNS = ("bytes", "iterations", "avg_us", "min_us", "max_us", "median_us")
DEFAULT_SIZES = "0:4M"


class PlacementWarning(UserWarning):
    """A real run could not place the two ranks at the requested distance."""


def program(flavour):
    """Path of the built ``pingpong`` for ``flavour``.

    Raises
    ------
    ToolMissing
        When it is not built; the message gives the ``make`` command.
    """
    p = paths.build_dir(flavour) / PROGRAM
    if not p.exists():
        raise ToolMissing(f"{p} is not built; run: make -C c_reference FLAVOUR={flavour}")
    return p


def _socket_of(cpu):
    f = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id")
    try:
        return int(f.read_text().strip())
    except (OSError, ValueError):
        return None


def placement_note(meta, mapping, flavour):
    """Say where the two ranks ran and whether that is the requested distance.

    Parameters
    ----------
    meta : dict
        Provenance of one run (``rank_hosts``, ``rank_cpus``).
    mapping : {'core', 'socket', 'node'}
    flavour : str

    Returns
    -------
    (bool, str)
        Whether the placement is the requested one (or cannot be checked), and a sentence.
    """
    hosts = [h.strip() for h in meta.get("rank_hosts", "").split(",")]
    if len(hosts) != 2 or not all(hosts):
        return True, "placement not reported"
    if flavour == "smpi":
        return _simulated_note(hosts, mapping)
    try:
        cpus = [int(c) for c in meta.get("rank_cpus", "-1,-1").split(",")]
    except ValueError:
        cpus = [-1, -1]
    where = f"rank 0 on {hosts[0]} cpu {cpus[0]}, rank 1 on {hosts[1]} cpu {cpus[1]}"
    if mapping == "node":
        if hosts[0] == hosts[1]:
            return False, (
                f"NOT a node mapping: both ranks ran on host {hosts[0]} (one node); "
                f"this row measures two ranks of one node ({where})"
            )
        return True, where
    if hosts[0] != hosts[1]:
        return False, f"NOT a {mapping} mapping: the ranks ran on two hosts ({where})"
    if mapping == "socket" and hosts[0] == os.uname().nodename and min(cpus) >= 0:
        s0, s1 = _socket_of(cpus[0]), _socket_of(cpus[1])
        if s0 is not None and s0 == s1:
            return False, (
                f"NOT a socket mapping: both ranks ran on socket {s0} of {hosts[0]} "
                f"(it has {len(_sockets())} socket(s)); {where}"
            )
    if mapping == "core" and cpus[0] == cpus[1] and cpus[0] >= 0:
        return True, f"{where} (both started on one cpu: the ranks are not bound)"
    return True, where


def _simulated_note(hosts, mapping):
    """:func:`placement_note` for SMPI: the distance read off the kit's host names
    (``<prefix><node>-s<socket>-c<core>``); a platform without a second node (or socket)
    cannot give that mapping, and the row says so."""
    where = f"simulated: rank 0 on {hosts[0]}, rank 1 on {hosts[1]}"
    locs = [host_location(h) for h in hosts]
    if None in locs:
        return True, f"{where} (distance not checked: host names without node and socket)"
    (n0, s0), (n1, s1) = locs
    got = "node" if n0 != n1 else "socket" if s0 != s1 else "core"
    if got == mapping:
        return True, where
    return False, (
        f"NOT a {mapping} mapping: the platform placed the ranks at {got} distance "
        f"(it has no second {'node' if mapping == 'node' else 'socket'} to offer); {where}"
    )


def _sockets():
    out = set()
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        s = _socket_of(d.name[3:])
        if s is not None:
            out.add(s)
    return out or {0}


def results_rows(out, *, launcher, mapping, repetition=0, command="", note=""):
    """Rows of the results table (:func:`mpilab.core.results.rows`) for one parsed run.

    ``avg_us``/``min_us``/``max_us`` are the mean, min and max of the half round trips; only
    rank 0 times, so ``maxrank_avg_us`` is ``avg_us`` and ``maxrank_median_us`` the median;
    ``evidence`` says where the two ranks ran (``note``, from :func:`placement_note`).
    """
    rank0 = [dict(r, maxrank_avg_us=r["avg_us"], maxrank_median_us=r["median_us"]) for r in out.table]
    return results.rows(
        out.meta,
        rank0,
        flavour=launcher.flavour,
        launcher=launcher.name,
        platform=launcher.platform or "local",
        mapping=mapping,
        repetition=repetition,
        command=command,
        evidence=f"kit implementation; {note}" if note else None,
    )


def _launcher(flavour, platform, launcher):
    if launcher is not None:
        return launcher
    if flavour not in FLAVOURS:
        raise one_of("flavour", flavour, FLAVOURS)
    if flavour == "smpi":
        return launch.get_launcher("smpi", platform=platform or "orfeo-thin")
    if platform not in (None, "local"):
        raise UsageError(
            f"platform {platform!r} only applies to flavour smpi; real runs are "
            f"on this machine (platform 'local')"
        )
    return launch.get_launcher(flavour)


def run(
    flavour="smpi",
    mapping="core",
    platform=None,
    sizes=DEFAULT_SIZES,
    iters=None,
    warmup=None,
    iters_large=None,
    warmup_large=None,
    output=None,
    repetition=0,
    timeout=600,
    launcher=None,
):
    """Launch the ping-pong once with two ranks placed by ``mapping``.

    Parameters
    ----------
    flavour : {'smpi', 'openmpi', 'mpich'}
    mapping : {'core', 'socket', 'node'}
    platform : str, optional
        SMPI only: a shipped platform name (default ``orfeo-thin``) or a SimGrid XML path.
    sizes : str or (int, int)
        ``"MIN:MAX"`` in bytes (K/M suffixes; ``"MAX"`` = ``"0:MAX"``), default 0 B..4 MiB.
    iters, warmup, iters_large, warmup_large : int, optional
        Round trips up to / above 8 KiB (the program's defaults: 1000/100 and 100/10).
    output : str or Path, optional
        Results CSV to append the rows to.
    repetition : int
        Stored in the rows (independent launches of the same point).
    timeout : float
        Seconds before the launch is killed.
    launcher : mpilab.measure.launch.Launcher, optional
        Use this launcher instead of the flavour's default one.

    Returns
    -------
    pandas.DataFrame
        The rows (results-table columns). A real run whose placement is not the requested
        distance (e.g. ``node`` on one machine) also issues a :class:`PlacementWarning`.
    """
    if mapping not in MAPPINGS:
        raise one_of("mapping", mapping, MAPPINGS)
    options = BenchOptions(
        sizes=sizes, iters=iters, warmup=warmup, iters_large=iters_large, warmup_large=warmup_large
    )
    args = options.argv(PROGRAM)
    launcher = _launcher(flavour, platform, launcher)
    flavour = launcher.flavour
    out, command = driver.run(
        launcher, program(flavour), args, 2, mapping, timeout, expect=PROGRAM, columns=COLUMNS
    )
    ok, note = placement_note(out.meta, mapping, flavour)
    if not ok:
        warnings.warn(f"{flavour} ping-pong, mapping {mapping!r}: {note}", PlacementWarning, stacklevel=2)
    rows = results_rows(
        out, launcher=launcher, mapping=mapping, repetition=repetition, command=command, note=note
    )
    if output is not None:
        results.append_rows(output, rows)
    return pd.DataFrame(rows, columns=results.COLUMNS)


def measure(
    flavour="smpi",
    mappings=MAPPINGS,
    output="results.csv",
    platform=None,
    sizes=DEFAULT_SIZES,
    repetitions=1,
    progress=None,
    **kwargs,
):
    """Run :func:`run` for each mapping and repetition, appending to ``output``; resume.

    A (mapping, repetition) whose rows are all in ``output`` already is skipped.

    Parameters
    ----------
    progress : callable, optional
        Called with a one-line message before each launch.
    **kwargs
        Passed to :func:`run` (iterations, timeout, launcher).

    Returns
    -------
    dict
        ``launched``, ``skipped``, ``rows`` and ``notes`` (placement warnings, one per launch
        that did not get its distance).
    """
    if isinstance(mappings, str):
        mappings = [m.strip() for m in mappings.split(",") if m.strip()]
    for m in mappings:
        if m not in MAPPINGS:
            raise one_of("mapping", m, MAPPINGS)
    if int(repetitions) < 1:
        raise UsageError(f"bad repetitions {repetitions!r}; valid: an integer >= 1")
    launcher = _launcher(flavour, platform, kwargs.pop("launcher", None))
    size_list = BenchOptions(sizes=sizes).size_list(PROGRAM)
    done = results.measured_keys(output)
    stats = {"launched": 0, "skipped": 0, "rows": 0, "notes": []}
    for rep in range(int(repetitions)):
        for m in mappings:
            keys = {
                results.key_of(
                    {
                        "collective": COLLECTIVE,
                        "algorithm": ALGORITHM,
                        "flavour": launcher.flavour,
                        "launcher": launcher.name,
                        "platform": launcher.platform,
                        "mapping": m,
                        "nprocs": 2,
                        "bytes": b,
                        "datatype": "char",
                        "root": 0,
                        "repetition": rep,
                    }
                )
                for b in size_list
            }
            if keys <= done:
                stats["skipped"] += 1
                continue
            if progress:
                progress(f"{launcher.flavour} ping-pong, mapping {m}, repetition {rep}")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PlacementWarning)
                rows = run(mapping=m, sizes=sizes, output=output, repetition=rep, launcher=launcher, **kwargs)
            stats["notes"] += [str(w.message) for w in caught if w.category is PlacementWarning]
            stats["launched"] += 1
            stats["rows"] += len(rows)
    return stats
