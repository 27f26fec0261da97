import multiprocessing

import pytest

import mpilab
from mpilab.core import results
from mpilab.core.errors import UsageError


def _row(b, rep=0, algo="ring"):
    return {
        "collective": "allgather",
        "algorithm": algo,
        "flavour": "openmpi",
        "launcher": "mpirun",
        "platform": "local",
        "mapping": "core",
        "nprocs": 2,
        "bytes": b,
        "datatype": "char",
        "root": 0,
        "repetition": rep,
        "iterations": 10,
        "avg_us": 1.5,
        "maxrank_avg_us": 2.0,
    }


def test_columns_follow_the_contract_order():
    assert results.COLUMNS[:3] == ("collective", "algorithm", "flavour")
    assert results.COLUMNS[10] == "repetition"
    assert results.COLUMNS[-2:] == ("command", "job")
    assert len(results.COLUMNS) == 28


def test_table_without_the_job_column_reads_and_gains_it_on_append(results_csv):
    """A table written before the ``job`` column existed still reads, and the next append
    rewrites its header so that every row has the column (empty for the old rows)."""
    old = results.COLUMNS[:-1]
    results_csv.write_text(",".join(old) + "\n" + ",".join(str(_row(32).get(c, "")) for c in old) + "\n")
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
    assert len(text) == 4  # one header only
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


def test_the_row_builder_types_every_column_and_fills_the_defaults():
    r = results.row(
        collective="allgather",
        algorithm="ring",
        launcher="srun",
        nprocs="4",
        bytes="32",
        avg_us="1.500",
        probe_us="",
    )
    assert list(r) == list(results.COLUMNS)
    assert (r["nprocs"], r["bytes"], r["avg_us"], r["probe_us"]) == (4, 32, 1.5, None)
    assert (r["requested"], r["forced"], r["evidence"]) == ("ring", "yes", "kit implementation")
    assert (r["repetition"], r["root"], r["datatype"], r["kit_version"]) == (0, 0, "char", mpilab.__version__)
    native = results.row(collective="bcast", algorithm="native", launcher="mpirun", nprocs=2, bytes=8)
    assert (native["forced"], native["evidence"]) == ("no", "library default")
    given = results.row(
        collective="bcast", algorithm="chain", launcher="osu-import", nprocs=2, bytes=8, forced="unverified"
    )
    assert (given["forced"], given["evidence"]) == ("unverified", None)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(speed=3), "unknown result column\\(s\\) 'speed'; valid: collective"),
        (dict(bytes=None), "a results row needs bytes"),
        (dict(nprocs="four"), "bad nprocs 'four'; valid: an integer"),
        (dict(avg_us="fast"), "bad avg_us 'fast'; valid: a number of microseconds"),
        (dict(forced="maybe"), "unknown forced value 'maybe'; valid: fallback, no, unverified, yes"),
    ],
)
def test_the_row_builder_refuses_bad_values(fields, message):
    base = dict(collective="allgather", algorithm="ring", launcher="mpirun", nprocs=2, bytes=8)
    with pytest.raises(UsageError, match=message):
        results.row(**{**base, **fields})


def test_rows_take_provenance_then_the_table_then_the_caller():
    meta = {
        "collective": "allgather",
        "algorithm": "native",
        "flavour": "openmpi",
        "nprocs": "2",
        "warmup": "10",
        "warmup_large": "2",
        "library": "Open MPI",
        "iterations": "100",
    }
    table = [
        {"bytes": 8192, "count": 8192, "iterations": 100, "avg_us": 1.0},
        {"bytes": 16384, "count": 16384, "iterations": 20, "avg_us": 2.0},
        {"bytes": 32, "algorithm": "ring", "nprocs": 3, "warmup": 7, "iterations": 5},
    ]
    out = results.rows(meta, table, launcher="mpirun", platform="local", repetition=2)
    assert [r["warmup"] for r in out] == [10, 2, 7]  # 8 KiB is small, 16 KiB large
    assert [r["algorithm"] for r in out] == ["native", "native", "ring"]
    assert [r["nprocs"] for r in out] == [2, 2, 3] and {r["repetition"] for r in out} == {2}
    assert [r["forced"] for r in out] == ["no", "no", "yes"]
    assert results.rows(meta, table[:1], launcher="x", algorithm="lib:ring")[0]["algorithm"] == "lib:ring"
    # counts the table does not print come from the block, by size
    meta.update(iterations_large="20")
    counts = results.rows(meta, [{"bytes": 32}, {"bytes": 1 << 20}], launcher="x")
    assert [(r["iterations"], r["warmup"]) for r in counts] == [(100, 10), (20, 2)]
