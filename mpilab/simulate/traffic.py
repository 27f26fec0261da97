"""Background traffic on a simulated cluster's network: one seeded realisation per run.

Other jobs share the network with ours. A loaded platform (:func:`loaded_platform`) is a shipped
platform on which, for one run:

* each node's network card and the switch get their own *utilisation* ``u`` (Beta distribution
  of mean ``mean_utilisation``): the link keeps ``1 - u`` of its bandwidth, and its latency
  grows to ``latency / (1 - u)`` (an M/M/1 queue's time in system);
* during the run, *bursts* come and go on each of these links independently: quiet and busy
  periods alternate with exponential durations (mean ``burst_us``), and a busy period leaves a
  fraction drawn uniformly in ``burst_left`` of what the run's utilisation left.

A probe between two ranks crosses two cards and the switch, at one moment; a collective crosses
every card its ranks use, for its whole duration. A small probe sees those links' latency, a
large one their bandwidth at that moment. How well the probe predicts the collective is therefore a
measurement, which depends
on the probe's size, the collective's size and the time scale of the bursts.

These numbers are a teaching scenario, not a measurement: seed 003 reports that its probe and its
broadcasts were "highly correlated" over 100 runs but gives no traffic statistics.

SimGrid 3.32 limits (checked): a link profile file serves one link only; profile paths must be
relative to the platform file; a bandwidth profile that raises a link's bandwidth while a small
message is in flight deadlocks the simulation unless ``network/weight-S`` is 0 (so loaded
platforms share bandwidth max-min fairly, without SimGrid's round-trip weighting); latency
profiles deadlock even then, so latency changes only from run to run, not inside a run.
"""

import dataclasses
import re
from pathlib import Path

import numpy as np

from mpilab.core.errors import UsageError
from mpilab.simulate.platform_xml import render_xml
from mpilab.simulate.platforms import _cache_dir, _spec, _write_text

#: Simulated seconds of burst profile written per link (the profile then repeats).
PROFILE_SECONDS = 2.0


def _bursts(rng, peak_bps, mean_us, left, seconds):
    """Profile lines ``time value``: alternating quiet (``peak``) and busy periods."""
    t, busy, lines = 0.0, bool(rng.integers(2)), []
    while t < seconds:
        value = peak_bps * (rng.uniform(*left) if busy else 1.0)
        lines.append(f"{t:.9f} {value:.6g}")
        t += rng.exponential(mean_us * 1e-6)
        busy = not busy
    lines.append(f"LOOPAFTER {mean_us * 1e-6:.9f}")
    return "\n".join(lines) + "\n"


def loaded_platform(
    base="orfeo-thin",
    seed=0,
    directory=None,
    mean_utilisation=0.35,
    utilisation=None,
    burst_us=300.0,
    burst_left=(0.2, 0.8),
):
    """Write one seeded realisation of background traffic on ``base``.

    Parameters
    ----------
    base : str
        A shipped platform with two or more nodes.
    seed : int
        The realisation: the same seed gives the same files.
    directory : str or Path, optional
        Where the platform and its profile files go (default: the user cache).
    mean_utilisation : float
        Mean of the run's network utilisation (0 < mean < 1).
    utilisation : float, optional
        The run's utilisation itself instead of a draw (0 <= u < 1).
    burst_us : float
        Mean length of quiet and of busy periods, µs.
    burst_left : (float, float)
        Range of the fraction of bandwidth a busy period leaves.

    Returns
    -------
    (Path, dict)
        The platform file (named ``<base>+load<seed>.xml``, so SMPI rows record that label as
        their platform) and what was drawn: ``utilisation``, ``seed``, ``burst_us``.
    """
    spec = _spec(base)
    if spec.nodes < 2:
        raise UsageError(
            f"platform {base!r} has one node: background traffic loads the network "
            f"between nodes; use a platform with 2+ nodes (e.g. orfeo-thin)"
        )
    if not 0 < mean_utilisation < 1:
        raise UsageError(f"bad mean_utilisation {mean_utilisation!r}; valid: 0 < value < 1")
    lo, hi = burst_left
    if not 0 < lo <= hi <= 1:
        raise UsageError(f"bad burst_left {burst_left!r}; valid: 0 < low <= high <= 1")
    if not burst_us > 0:
        raise UsageError(f"bad burst_us {burst_us!r}; valid: a positive number of µs")
    seed = int(seed)
    rng = np.random.default_rng(seed)

    def draw():
        if utilisation is not None:
            return float(utilisation)
        a = 2.0
        return float(rng.beta(a, a * (1 - mean_utilisation) / mean_utilisation))

    if utilisation is not None and not 0 <= float(utilisation) < 1:
        raise UsageError(f"bad utilisation {utilisation!r}; valid: 0 <= value < 1")
    # one utilisation per node's card and one for the switch: other jobs load parts of the
    # network independently, so a probe between two nodes sees only part of what a collective
    # over every node meets
    u = {f"nic{n}": draw() for n in range(spec.nodes)}
    u["switch"] = draw()
    name = f"{base}+load{seed:03d}"
    directory = Path(directory) if directory is not None else _cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    attrs, lat = {}, {}
    for lid, peak in [(f"nic{n}", spec.bw_switch) for n in range(spec.nodes)] + [("switch", spec.bw_nic)]:
        left = 1.0 - u[lid]
        fname = f"{name}.{lid}.bw"
        (directory / fname).write_text(_bursts(rng, peak * left * 1e6, burst_us, (lo, hi), PROFILE_SECONDS))
        attrs[lid] = f'bandwidth_file="{fname}"'
        lat[lid] = (spec.lat_switch if lid == "switch" else spec.lat_nic) / left
    loaded = dataclasses.replace(
        spec,
        description=f"{spec.description}; background traffic, seed {seed}: utilisation "
        + ", ".join(f"{k} {v:.3f}" for k, v in u.items())
        + f"; bursts of mean {burst_us:g} us leaving {lo:g}..{hi:g}",
    )
    text = render_xml(loaded, link_attrs=attrs, config=[("network/weight-S", "0")], link_latency=lat)
    path = _write_text(text, directory / f"{name}.xml")
    return path, dict(seed=seed, utilisation=u, burst_us=burst_us, burst_left=(lo, hi))


def label_seed(platform_label):
    """The seed of a loaded platform's label (``orfeo-thin+load007`` -> 7), None for others."""
    m = re.search(r"\+load(\d+)$", str(platform_label))
    return int(m.group(1)) if m else None
