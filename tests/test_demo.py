import importlib.util

import pytest

from mpilab.core import results
from mpilab.studies import demo


@pytest.mark.slow
@pytest.mark.mpi
def test_demo_quick(built_flavour, tmp_path, capsys):
    built_flavour("openmpi")
    built_flavour("mpich")
    have_platforms = importlib.util.find_spec("mpilab.simulate.platforms") is not None
    if have_platforms:
        built_flavour("smpi")
    out = demo.run_demo(tmp_path, quick=True, progress=False)
    df = results.read_results(out["results"])
    expected = {("openmpi", 1), ("openmpi", 2), ("mpich", 2)}
    if have_platforms:
        expected |= {("smpi", 2), ("smpi", 4)}
    assert set(zip(df["flavour"], df["nprocs"])) == expected
    assert set(df["algorithm"]) == set(demo.ALGOS)
    assert not df.duplicated(list(results.KEY_COLUMNS)).any()
    names = {p.name for p in out["pngs"]}
    assert "allgather_openmpi_local_core_P2_vs_size.png" in names
    assert "allgather_mpich_local_core_P2_vs_size.png" in names
    if have_platforms:
        assert "allgather_smpi_orfeo-thin_core_1024B_vs_nprocs.png" in names
    text = demo.format_summary(out)
    assert "wall time:" in text and "gather_bcast" in text
    # a rerun finds every point measured and launches nothing
    again = demo.run_demo(tmp_path, quick=True, progress=False)
    assert len(results.read_results(again["results"])) == len(df)
