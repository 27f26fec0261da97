"""Comments in an Open MPI rules file: Open MPI 4.1 and the kit's reader both skip them.

Open MPI 4.1's reader (``ompi_coll_base_file_getnext_long``, ``coll_base_util.c``) skips a ``#``
and the rest of its line. Here a real Open MPI follows a commented file whose comments are full
of digits: if it read them as numbers it would run other algorithms (or refuse the file).
"""

import pandas as pd
import pytest

from mpilab.measure import collbench, driver, forcing, launch, libalgs, rules
from mpilab.measure.driver import BenchOptions
from mpilab_key.rules import write_ompi_rules

TABLE = pd.DataFrame(
    [
        dict(
            collective="bcast",
            nprocs_min=2,
            nprocs_max=2,
            bytes_min=1,
            bytes_max=4096,
            algorithm="basic_linear",
        ),
        dict(
            collective="bcast",
            nprocs_min=2,
            nprocs_max=2,
            bytes_min=8192,
            bytes_max=65536,
            algorithm="pipeline",
        ),
    ]
)


def test_commented_file_reads_as_the_plain_one(tmp_path):
    plain = write_ompi_rules(TABLE, tmp_path / "plain.txt", segsizes={("bcast", "pipeline"): 64})
    text = write_ompi_rules(TABLE, tmp_path / "c.txt", segsizes={("bcast", "pipeline"): 64}, comments=True)
    assert "#" in text and "#" not in plain
    a, b = rules.read_ompi_rules(tmp_path / "plain.txt"), rules.read_ompi_rules(tmp_path / "c.txt")
    pd.testing.assert_frame_equal(a, b)
    assert b.segsize.tolist() == [0, 64]


def _median_us(settings):
    args = collbench.collbench_args(
        "native", "bcast", BenchOptions(sizes="1K:64K", iters=20, warmup=2, iters_large=20, warmup_large=2)
    )
    proc = forcing.run(
        launch.get_launcher("openmpi"), collbench.collbench_program("openmpi"), args, 2, settings, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r["bytes"]: r["maxrank_median_us"] for r in driver.parse(proc.stdout).table}, proc.stderr


@pytest.mark.slow
@pytest.mark.serial
def test_openmpi_follows_a_commented_file(built_flavour, tmp_path):
    """basic_linear below 8 KiB, from 8 KiB a pipeline of 64-byte segments (a thousand segments
    at 64 KiB: many times slower than basic_linear, visible on a loaded machine)."""
    built_flavour("openmpi")
    path = tmp_path / "rules.txt"
    text = write_ompi_rules(TABLE, path, segsizes={("bcast", "pipeline"): 64}, comments=True)
    path.write_text("# 3 7 1 2: digits in a comment line\n" + text)
    with_rules, err = _median_us(rules.rules_settings(path))
    assert f"coll_tuned_dynamic_rules_filename={path}" in err
    linear, _ = _median_us(forcing.prepare("openmpi", "bcast", "basic_linear"))
    pipe64, _ = _median_us(forcing.prepare("openmpi", "bcast", "pipeline", segsize=64))
    assert with_rules[65536] > 5 * linear[65536]  # the file's 64-byte pipeline ran ...
    assert with_rules[65536] > 0.2 * pipe64[65536]
    assert with_rules[1024] < pipe64[1024]  # ... and its basic_linear below 8 KiB
    assert libalgs.lookup("bcast", "pipeline").ompi_id == 3
