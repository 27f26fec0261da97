"""Background traffic: seeded loaded platforms, and a probe whose correlation with the collective
is measured, not built in."""

import pandas as pd
import pytest

from mpilab.core.errors import UsageError
from mpilab.simulate import traffic
from mpilab.studies import load


def test_the_same_seed_writes_the_same_traffic(tmp_path):
    a, info_a = traffic.loaded_platform("orfeo-thin-4", seed=3, directory=tmp_path / "a")
    b, info_b = traffic.loaded_platform("orfeo-thin-4", seed=3, directory=tmp_path / "b")
    c, info_c = traffic.loaded_platform("orfeo-thin-4", seed=4, directory=tmp_path / "c")
    assert a.name == "orfeo-thin-4+load003.xml" and info_a == info_b and info_a != info_c
    assert a.read_text() == b.read_text()
    profiles = sorted(p.name for p in a.parent.glob("*.bw"))
    assert profiles == sorted(
        [f"orfeo-thin-4+load003.nic{n}.bw" for n in range(4)] + ["orfeo-thin-4+load003.switch.bw"]
    )
    assert (a.parent / profiles[0]).read_text() != (c.parent / profiles[0].replace("003", "004")).read_text()
    text = a.read_text()
    assert 'bandwidth_file="orfeo-thin-4+load003.switch.bw"' in text  # relative: SimGrid 3.32
    assert '<prop id="network/weight-S" value="0"/>' in text
    assert set(info_a["utilisation"]) == {"nic0", "nic1", "nic2", "nic3", "switch"}
    assert traffic.label_seed(a.stem) == 3 and traffic.label_seed("orfeo-thin") is None


def test_bad_traffic_parameters_are_refused(tmp_path):
    with pytest.raises(UsageError, match="one node"):
        traffic.loaded_platform("orfeo-fat", directory=tmp_path)
    with pytest.raises(UsageError, match="mean_utilisation 1.5"):
        traffic.loaded_platform("orfeo-thin", mean_utilisation=1.5, directory=tmp_path)
    with pytest.raises(UsageError, match="burst_left"):
        traffic.loaded_platform("orfeo-thin", burst_left=(0.5, 0.2), directory=tmp_path)


def test_probe_ranges_and_best_algorithm():
    rows = []
    for run in range(6):
        probe = 1.0 + run
        for alg, k in (("a", 1.0), ("b", 2.0)):
            rows.append(
                dict(
                    collective="bcast",
                    algorithm=alg,
                    bytes=1024,
                    probe_bytes=8,
                    run=run,
                    probe_us=probe,
                    maxrank_avg_us=k * probe + (10.0 if alg == "a" and run >= 3 else 0),
                )
            )
    df = pd.DataFrame(rows)
    t = load.probe_ranges(df, 1024, bins=2)
    assert list(t["runs"]) == [3, 3, 3, 3]
    best = t[t["best"]].set_index("range")["algorithm"]
    assert list(best) == ["a", "b"]  # the winner changes between the two ranges


def test_the_probe_does_not_predict_the_collective_by_construction(built_flavour, tmp_path):
    """Six runs of background traffic: the probe correlates with the broadcast, but how much
    depends on the probe's size and the broadcast's; not r = 1 everywhere."""
    built_flavour("smpi")
    df = load.run(
        tmp_path / "load.csv",
        ["binomial", "scatter_allgather_ring"],
        nprocs=16,
        sizes="1K:64K",
        runs=6,
        probes=(8, 65536),
        base="orfeo-thin-4",
        mapping="node",
        directory=tmp_path / "plat",
    )
    assert set(df["run"]) == set(range(6)) and set(df["probe_bytes"]) == {8, 65536}
    r = load.correlations(df)["pearson_r"].dropna()
    assert len(r) == 2 * 2 * 7
    assert r.max() - r.min() > 0.3, r.describe()
    assert (r < 0.9).mean() > 0.25, r.describe()
    again = load.run(
        tmp_path / "load.csv",
        ["binomial", "scatter_allgather_ring"],
        nprocs=16,
        sizes="1K:64K",
        runs=6,
        probes=(8, 65536),
        base="orfeo-thin-4",
        mapping="node",
        directory=tmp_path / "plat",
    )
    assert len(again) == len(df)  # resumed: nothing measured twice
