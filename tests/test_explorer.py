"""The phase-diagram explorer's model (mpilab.studies.explorer); the panel itself is tested in
the browser (tests/test_browser.py)."""

import numpy as np
import pytest

from mpilab.core.errors import UsageError
from mpilab.simulate import platforms
from mpilab.studies import explorer

BCASTS = {
    "binomial": "ceiling(log(p, 2)) * (alpha + n * beta)",
    "scatter_allgather": "(ceiling(log(p, 2)) + p - 1) * alpha + 2 * (p - 1) / p * n * beta",
}


def crossover(params, nprocs=64):
    """The smallest size at which scatter_allgather beats binomial at ``nprocs``."""
    names, best, _ = explorer.fastest(BCASTS, params, "bcast", nprocs=[nprocs])
    wins = explorer.SIZES[best[:, 0] == names.index("scatter_allgather")]
    return wins.min()


def test_binomial_wins_small_messages_scatter_allgather_large():
    names, best, times = explorer.fastest(BCASTS, explorer.presets()["THIN"], "bcast", nprocs=[64])
    assert names[best[0, 0]] == "binomial" and names[best[-1, 0]] == "scatter_allgather"
    # at P = 64 on one node (no shared port) with no rendezvous below 4 MiB: binomial
    # 6(α + nβ), scatter_allgather 69α + 1.97nβ: the crossover is n = 63α / (4.03β)
    p = dict(explorer.presets()["THIN"], cores=128, eager=1 << 22)
    want = 63 * p["alpha"] / ((6 - 2 * 63 / 64) * p["beta"])
    got = crossover(p)
    assert want <= got < 2 * want  # the grid's sizes are powers of two and halves


def test_the_crossover_follows_alpha_and_the_shared_port():
    p = dict(explorer.presets()["THIN"], cores=128, eager=1 << 22)
    base = crossover(p)
    assert crossover(dict(p, alpha=10 * p["alpha"])) > 4 * base
    # 64 ranks on 24-core nodes with one port: 24 ranks share it, beta x 24, the crossover / 24
    assert crossover(dict(p, cores=24)) < base / 8
    # past the eager limit a message pays one more α: the crossover moves up
    assert crossover(dict(p, eager=1024)) > base


def test_bad_parameters_and_missing_costs_are_named():
    with pytest.raises(UsageError, match=r"bad alpha -1.*valid: 0.1 to 1000"):
        explorer.fastest(BCASTS, dict(explorer.presets()["THIN"], alpha=-1), "bcast")
    with pytest.raises(UsageError, match="no expression for 'ring'"):
        explorer.fastest({"ring": None}, explorer.presets()["THIN"])


def test_presets_come_from_the_platforms_and_seed_004():
    pr = explorer.presets()
    assert set(pr) == {"THIN", "jupiter", "Bunyip-like (seed 004)"}
    assert pr["THIN"]["cores"] == 24 and pr["jupiter"]["cores"] == 16
    assert pr["Bunyip-like (seed 004)"]["alpha"] == 204.0 and pr["Bunyip-like (seed 004)"]["beta"] == 0.125
    assert np.isclose(pr["jupiter"]["alpha"], 1.3)  # seed 001's interconnect
    for preset, name in (("THIN", "orfeo-thin"), ("jupiter", "jupiter-32x16")):
        p = {k: v.value for k, v in platforms.cluster_params(name)[0].items()}
        # a message between two nodes: its whole one-way time, overheads included
        assert pr[preset]["alpha"] == pytest.approx(p["one_way_node"]), preset
        assert pr[preset]["beta"] == pytest.approx(p["beta_node"]), preset
        assert (
            pr[preset]["eager"] == p["eager_bytes"]
            and pr[preset]["cores"] == p["sockets"] * p["cores_per_socket"]
        )
