import multiprocessing

import pytest

from mpilab.core import results
from mpilab.core.errors import UsageError


def _row(b, rep=0, algo="ring"):
    return {"collective": "allgather", "algorithm": algo, "flavour": "openmpi", "launcher": "mpirun",
            "platform": "local", "mapping": "core", "nprocs": 2, "bytes": b, "datatype": "char",
            "root": 0, "repetition": rep, "iterations": 10, "avg_us": 1.5, "maxrank_avg_us": 2.0}


def test_columns_follow_the_contract_order():
    assert results.COLUMNS[:3] == ("collective", "algorithm", "flavour")
    assert results.COLUMNS[10] == "repetition"
    assert results.COLUMNS[-2:] == ("command", "job")
    assert len(results.COLUMNS) == 28


def test_table_without_the_job_column_reads_and_gains_it_on_append(results_csv):
    """A table written before the ``job`` column existed still reads, and the next append
    rewrites its header so that every row has the column (empty for the old rows)."""
    old = results.COLUMNS[:-1]
    results_csv.write_text(",".join(old) + "\n"
                           + ",".join(str(_row(32).get(c, "")) for c in old) + "\n")
    df = results.read_results(results_csv)
    assert df["job"].tolist() == [""] and df["bytes"].tolist() == [32]
    results.append_rows(results_csv, [dict(_row(64), job="17_2")])
    text = results_csv.read_text().splitlines()
    assert text[0] == ",".join(results.COLUMNS) and len(text) == 3
    df = results.read_results(results_csv)
    assert df["job"].tolist() == ["", "17_2"] and df["bytes"].tolist() == [32, 64]


def test_foreign_header_is_refused(results_csv):
    results_csv.write_text("size,latency\n1,2\n")
    from mpilab.core.errors import ParseError
    with pytest.raises(ParseError, match="line 1: the header is not the results table's"):
        results.append_rows(results_csv, [_row(32)])
    assert results_csv.read_text() == "size,latency\n1,2\n"


def test_append_and_read(results_csv):
    assert results.append_rows(results_csv, [_row(32), _row(64)]) == 2
    results.append_rows(results_csv, [_row(128)])
    text = results_csv.read_text().splitlines()
    assert text[0] == ",".join(results.COLUMNS)
    assert len(text) == 4          # one header only
    df = results.read_results(results_csv)
    assert list(df.columns) == list(results.COLUMNS)
    assert df["bytes"].tolist() == [32, 64, 128]
    assert df["avg_us"].iloc[0] == 1.5
    assert df["probe_us"].isna().all()


def test_unknown_column_is_named(results_csv):
    row = _row(32)
    row["latency"] = 3
    with pytest.raises(UsageError, match="'latency'"):
        results.append_rows(results_csv, [row])
    assert not results_csv.exists()


def test_measured_keys(results_csv):
    results.append_rows(results_csv, [_row(32), _row(32, rep=1)])
    keys = results.measured_keys(results_csv)
    assert results.key_of(_row(32)) in keys
    assert results.key_of(_row(32, rep=1)) in keys
    assert results.key_of(_row(64)) not in keys
    assert results.measured_keys(results_csv.parent / "nope.csv") == set()


def _writer(path, k):
    results.append_rows(path, [_row(b, rep=k) for b in range(1, 201)])


def test_concurrent_appends_do_not_interleave(results_csv):
    procs = [multiprocessing.Process(target=_writer, args=(results_csv, k)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    df = results.read_results(results_csv)
    assert len(df) == 800
    assert sorted(df.groupby("repetition").size().tolist()) == [200] * 4
