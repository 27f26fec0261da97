import itertools

import matplotlib

matplotlib.use("Agg")

import pytest

from mpilab.core import results
from mpilab.core.errors import UsageError
from mpilab.studies import plots


@pytest.fixture
def df(results_csv):
    rows = []
    for algo, p, b in itertools.product(["ring", "pairwise", "native"], [2, 4, 8], [32, 1024, 1 << 20]):
        rows.append(
            {
                "collective": "allgather",
                "algorithm": algo,
                "flavour": "smpi",
                "launcher": "smpirun",
                "platform": "orfeo-thin",
                "mapping": "core",
                "nprocs": p,
                "bytes": b,
                "datatype": "char",
                "root": 0,
                "repetition": 0,
                "maxrank_avg_us": 1 + p * b / 1000,
                "avg_us": 1.0,
            }
        )
    results.append_rows(results_csv, rows)
    return results.read_results(results_csv)


def test_latency_vs_size(df):
    fig, ax = plots.latency_vs_size(df, nprocs=4)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "bytes" in ax.get_xlabel() and "µs" in ax.get_ylabel()
    assert "orfeo-thin" in ax.get_title() and "P = 4" in ax.get_title()
    labels = [l.get_label() for l in ax.get_lines()]
    assert sorted(labels) == ["native", "pairwise", "ring"]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == sorted(labels)
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [32, 1024, 1 << 20]
    assert line.get_ydata()[-1] == pytest.approx(1 + 4 * (1 << 20) / 1000)


def test_latency_vs_nprocs(df):
    fig, ax = plots.latency_vs_nprocs(df, bytes=1024, algorithms=["ring"])
    assert [l.get_label() for l in ax.get_lines()] == ["ring"]
    assert list(ax.get_lines()[0].get_xdata()) == [2, 4, 8]
    assert "1 KiB" in ax.get_title() and "processes" in ax.get_xlabel()


def test_ambiguous_or_bad_selection(df):
    with pytest.raises(UsageError, match="several nprocs values"):
        plots.latency_vs_size(df)
    with pytest.raises(UsageError, match="unknown nprocs 3; valid: 2, 4, 8"):
        plots.latency_vs_size(df, nprocs=3)
    with pytest.raises(UsageError, match="unknown metric 'p99'"):
        plots.latency_vs_size(df, nprocs=2, metric="p99")


def test_plot_all_writes_pngs(df, tmp_path):
    written = plots.plot_all(df, tmp_path / "png")
    names = sorted(p.name for p in written)
    assert len(names) == 3 + 2
    assert "allgather_smpi_orfeo-thin_core_1048576B_vs_nprocs.png" in names
    for p in written:
        assert p.read_bytes()[:4] == b"\x89PNG"
