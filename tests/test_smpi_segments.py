"""How the kit's back-ends cut a message into segments, checked against the back-ends.

SimGrid 3.32 takes no segment size for its copies of Open MPI's algorithms: each picks its own
(``bcast-ompi-pipeline.cpp``, ``reduce-ompi.cpp``). :func:`mpilab.measure.libalgs.smpi_segment`
writes those rules again; here SMPI itself says how many messages the root sends.
"""

import pytest

from mpilab.core.errors import UsageError
from mpilab.measure import libalgs, libtrace

pytestmark = pytest.mark.smpi  # runs smpirun (tests/conftest.py LAUNCHES)


@pytest.mark.parametrize(
    "nprocs,nbytes,segment",
    [(4, 65536, 16384), (10, 524288, 16384), (16, 1 << 20, 131072), (2, 262144, 131072), (48, 4096, 0)],
)
def test_smpi_pipeline_segments_are_simgrids(nprocs, nbytes, segment):
    """SimGrid's own copy (what a trace runs); sweeps run the kit's clone, at Open MPI's segments."""
    seg = libalgs.smpi_segment("bcast", "pipeline", nprocs, nbytes)
    assert (0 if seg >= nbytes else seg) == segment
    assert libalgs.segment_size("smpi", "bcast", "pipeline", nprocs, nbytes) == (8192 if nbytes > 8192 else 0)
    tl = libtrace.run_library_traced("bcast", "pipeline", nprocs, nbytes)
    sent = int((tl.messages["src"] == 0).sum())
    assert sent == (nbytes // segment if segment else 1), (nprocs, nbytes, sent)


def test_open_mpi_segment_size_zero_is_one_segment():
    assert libalgs.segment_size("openmpi", "bcast", "pipeline", 48, 1 << 20) == 8192
    assert libalgs.segment_size("openmpi", "bcast", "pipeline", 48, 1 << 20, segsize=0) == 0
    assert libalgs.segment_size("openmpi", "bcast", "pipeline", 48, 1024) == 0  # one 8 KiB segment
    assert libalgs.segment_size("openmpi", "bcast", "binomial", 48, 1 << 20) == 0


def test_names_say_the_segments():
    assert libalgs.describe("openmpi", "bcast", "pipeline") == "pipeline, 8 KiB segments"
    assert libalgs.describe("openmpi", "bcast", "pipeline", segsize=0).startswith("chain, unsegmented")
    # SMPI sweeps run the kit's clones of Open MPI's chain and pipeline, given Open MPI's settings
    assert libalgs.describe("smpi", "bcast", "pipeline") == "pipeline, 8 KiB segments"
    assert (
        libalgs.describe("smpi", "reduce", "chain")
        == "chain, 4 chains (Open MPI's default fan-out), unsegmented"
    )
    assert libalgs.describe("openmpi", "bcast", "binomial") == "binomial"
    with pytest.raises(UsageError, match="'pipe'"):
        libalgs.describe("smpi", "bcast", "pipe")
