"""Timing diagrams: the schedules' event model against mpilab.model.costs, real PMPI traces on Open MPI,
MPICH and SMPI, the SMPI run reproduced by the model, the drawing and the CLI."""

import collections
import subprocess
import sys

import numpy as np
import pytest

from mpilab.core.errors import ParseError, UsageError
from mpilab.measure import trace
from mpilab.model import algorithms, costs, schedules, timeline
from mpilab.simulate import clusters, platforms, routes

ALPHA, BETA, N = 2.0, 0.001, 1000
PS = (1, 2, 3, 4, 5, 6, 7, 8, 13, 16)


# --- the event model, no MPI --------------------------------------------------------------------


@pytest.mark.parametrize(
    "algo, coll, name",
    [
        ("ring", "allgather", "ring"),
        ("bruck", "allgather", "bruck"),
        ("pairwise", "allgather", "pairwise"),
        ("gather_bcast", "allgather", "gather_bcast"),
        ("binomial", "bcast", "binomial"),
    ],
)
@pytest.mark.parametrize("p", PS)
def test_model_total_is_the_cost_table(algo, coll, name, p):
    """One message in and one out at a time (ports=1): the α-β costs of mpilab.model.costs exactly."""
    tl = timeline.predict(algo, p, N, ALPHA, BETA)
    assert tl.total_us == pytest.approx(float(costs.evaluate(coll, name, p, N, ALPHA, BETA)), abs=1e-9)


def test_pairwise_folds_extra_ranks():
    """p = 5: fold (α+nβ), two doubling steps with a second exchange each, unfold (α+5nβ)."""
    a, b, n = ALPHA, BETA, N
    want = (a + n * b) + 2 * (a + n * b) + (a + 2 * n * b) + (a + n * b) + (a + 5 * n * b)
    assert timeline.predict("pairwise", 5, n, a, b).total_us == pytest.approx(want)


@pytest.mark.parametrize("p", (3, 8))
def test_unlimited_ports_overlap_the_roots_messages(p):
    """Without the one-port limit, gather_bcast is one gather and one broadcast message deep;
    with a shared port the latencies overlap but the bytes share the port's bandwidth."""
    tl = timeline.predict("gather_bcast", p, N, ALPHA, BETA, ports=None)
    assert tl.total_us == pytest.approx(2 * ALPHA + (p + 1) * N * BETA)
    tl = timeline.predict("gather_bcast", p, N, ALPHA, BETA, ports="shared")
    assert tl.total_us == pytest.approx(2 * ALPHA + (p * p - 1) * N * BETA)
    gather = tl.messages[(tl.messages["dst"] == 0) & (tl.messages["src"] != 0)]  # not the root's own
    assert gather["arrive_us"].max() - gather["arrive_us"].min() < 1e-9  # fair: ends at once


def test_shared_port_weights_and_caps():
    """Two messages out of one port: equal weights halve the bandwidth; a weight of 3 gets a
    quarter; a message capped by a slow route leaves the rest of the port to the other."""
    progs = [schedules.Program(r) for r in range(3)]
    a, b = progs[0].isend(1, 1000), progs[0].isend(2, 1000)
    progs[0].wait(a, b)
    progs[1].recv(0, 1000)
    progs[2].recv(0, 1000)

    def arrive(**kw):
        _, msgs = schedules.simulate(progs, 1.0, 0.001, ports="shared", **kw)
        return msgs.set_index("dst")["arrive_us"].round(9).to_dict()

    assert arrive() == {1: 3.0, 2: 3.0}  # 1 + 2000 B at 1 B/ns
    assert arrive(weight=lambda s, d: 3.0 if d == 2 else 1.0) == {1: round(1 + 1000 / 750, 9), 2: 3.0}
    _, msgs = schedules.simulate(
        progs, 1.0, lambda s, d: 0.004 if d == 2 else 0.001, ports="shared", port_beta=0.001
    )
    assert msgs.set_index("dst")["arrive_us"].round(9).to_dict() == {1: round(1 + 1000 / 750, 9), 2: 5.0}


def test_eager_sends_and_matching():
    """A blocking send waits for its receiver unless it is eager; head-to-head sends deadlock."""
    progs = [schedules.Program(0), schedules.Program(1)]
    progs[0].send(1, 100)
    progs[1].recv(0, 100)
    calls, msgs = schedules.simulate(progs, 1.0, 0.01, start_us=[0.0, 5.0])  # rank 1 starts at 5
    assert msgs.iloc[0]["start_us"] == 5.0 and msgs.iloc[0]["arrive_us"] == 7.0
    assert calls.loc[calls["rank"] == 0, "end_us"].item() == 7.0  # waited for rank 1
    calls, _ = schedules.simulate(progs, 1.0, 0.01, eager_bytes=1024, start_us=[0.0, 5.0])
    assert calls.loc[calls["rank"] == 0, "end_us"].item() == 0.0  # eager: gone at once
    dead = [schedules.Program(0), schedules.Program(1)]
    dead[0].send(1, 10)
    dead[0].recv(1, 10)
    dead[1].send(0, 10)
    dead[1].recv(0, 10)
    with pytest.raises(UsageError, match="deadlocks: rank 0 in Send"):
        schedules.simulate(dead, 1.0, 0.01)
    schedules.simulate(dead, 1.0, 0.01, eager_bytes=11)  # buffered: fine


def test_bad_model_arguments():
    with pytest.raises(UsageError, match="unknown algorithm with a schedule 'rign'; valid: "):
        timeline.predict("rign", 4, 8, 1, 1)
    with pytest.raises(UsageError, match="bad root 4; valid: 0..3"):
        timeline.predict("binomial", 4, 8, 1, 1, root=4)
    with pytest.raises(UsageError, match="bad ports 0"):
        timeline.predict("ring", 4, 8, 1, 1, ports=0)
    with pytest.raises(UsageError, match="bad alpha 'x'"):
        timeline.predict("ring", 4, 8, "x", 1)


def test_route_cost_is_the_thin_point_to_point_model():
    """The platform's core, socket and node routes give the calibrated one-way times (overheads
    and envelope included) and times per byte (mpilab.simulate.clusters)."""
    hosts = platforms.placement("orfeo-thin", 48, "core")
    fit = clusters.THIN_PINGPONG_FIT
    assert routes.route_cost("orfeo-thin", hosts[0], hosts[1]) == pytest.approx(fit["core"], rel=1e-6)
    assert routes.route_cost("orfeo-thin", hosts[0], hosts[12]) == pytest.approx(fit["socket"], rel=1e-6)
    assert routes.route_cost("orfeo-thin", hosts[0], hosts[24]) == pytest.approx(fit["node"], rel=1e-6)
    # SimGrid's sharing penalty: the links' latency + 8775 B / bandwidth of each of the 4 links
    # (2 ports, the socket's link and its memory)
    lat, beta = routes.link_cost("orfeo-thin", hosts[0], hosts[1])
    spec = platforms._spec("orfeo-thin")
    assert lat == pytest.approx(0.1, abs=1e-5)
    assert routes.route_weight("orfeo-thin", hosts[0], hosts[1]) == pytest.approx(
        lat + 8775 * (2 / spec.bw_port + 1 / spec.bw_socket + 1 / spec.bw_mem)
    )
    o = routes.overheads("orfeo-thin")
    core = clusters.cpu_overhead(*fit["core"], clusters.THIN_CPU_SHARE)
    assert o["o_send"] == o["o_recv"] == o["o_isend"] == pytest.approx(core)
    socket = clusters.cpu_overhead(
        *fit["socket"], clusters.THIN_CPU_SHARE
    )  # per class: the seed's socket row
    assert (
        o["classes"]["socket"] == pytest.approx((socket,) * 3)
        and o["classes"]["node"] == o["classes"]["core"]
    )
    assert o["eager_bytes"] == 4096


def test_overheads_in_the_event_model():
    """LogP's o: a root that posts p - 1 sends is busy o for each; each eager message costs its
    receiver o when it completes; messages from the eager limit on pay neither (as in SMPI)."""
    progs = algorithms.schedule("gather_bcast", 4, 8)
    calls, msgs = schedules.simulate(progs, 1.0, 0.0, ports=None, eager_bytes=1024, o_send=0.5, o_recv=0.25)
    root = calls[calls["rank"] == 0]
    isends = root[(root["call"] == "Isend") & (root["dst"] != 0)]
    assert list(np.diff(isends["end_us"])) == pytest.approx([0.5, 0.5])  # one o after the other
    # gather: the three others post at 0.5, arrive at 1.5; the root receives their 3 eager
    # messages (its own block is a local copy, no message) and pays 0.25 for each after they arrive
    waitall = root[root["call"] == "Waitall"].iloc[0]
    assert waitall["end_us"] == pytest.approx(1.5 + 3 * 0.25)
    big, _ = schedules.simulate(
        algorithms.schedule("binomial", 2, 2048), 1.0, 0.0, eager_bytes=1024, o_send=0.5, o_recv=0.25
    )
    assert big["end_us"].max() == pytest.approx(1.0)  # rendezvous: no overheads
    with pytest.raises(UsageError, match="bad o_recv -1"):
        schedules.simulate(progs, 1.0, 0.0, o_recv=-1)


# --- drawing ------------------------------------------------------------------------------------


def test_side_by_side_has_one_row_per_rank():
    import matplotlib

    matplotlib.use("Agg")
    pred = timeline.predict("binomial", 6, 4096, 1.0, 1e-3)
    other = timeline.predict("binomial", 6, 4096, 1.0, 1e-3, ports=None, eager_bytes=8192)
    fig, axes = timeline.plot_side_by_side(pred, other)
    assert len(axes) == 2
    for ax, tl in zip(axes, (pred, other)):
        assert list(ax.get_yticks()) == list(range(6))
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(6)]
        assert len(ax.texts) == len(tl.messages) == 5  # one arrow per message
        bars = sum(len(c.get_paths()) for c in ax.collections)
        assert bars == len(tl.calls)  # one bar per blocking call
    assert axes[0].get_xlim() == axes[1].get_xlim()
    assert axes[1].get_xlim()[1] >= max(pred.total_us, other.total_us)
    with pytest.raises(UsageError, match="have 6 and 4 ranks"):
        timeline.plot_side_by_side(pred, timeline.predict("ring", 4, 8, 1, 1))


# --- measured: real traces --------------------------------------------------------------------


def _message_set(tl):
    return collections.Counter(
        zip(tl.messages["src"], tl.messages["dst"], tl.messages["tag"], tl.messages["bytes"])
    )


def _assert_trace_is_the_schedule(measured, algo, p, nbytes):
    assert timeline.check_consistency(measured) == []
    assert measured.nprocs == p
    assert sorted(measured.calls["rank"].unique()) == list(range(p)) or p == 1
    # the C code sends exactly the messages of the Python schedule
    assert _message_set(measured) == _message_set(timeline.predict(algo, p, nbytes, 1.0, 1e-3))
    # every rank's calls are in order
    for _, g in measured.calls.groupby("rank"):
        assert (np.diff(g["start_us"]) >= 0).all() and (g["end_us"] >= g["start_us"]).all()


@pytest.mark.mpi
@pytest.mark.parametrize(
    "algo, p", [("ring", 4), ("gather_bcast", 4), ("pairwise", 3), ("bruck", 3), ("binomial", 4)]
)
def test_openmpi_trace(built_flavour, algo, p):
    """A real Open MPI run under the PMPI tracer: every send matched, the schedule's messages."""
    built_flavour("openmpi")
    measured = trace.run_traced(algo, p, 2048, flavour="openmpi", reps=2, timeout=120)
    _assert_trace_is_the_schedule(measured, algo, p, 2048)
    assert set(measured.meta["regions"]) == {1, 2} and len(measured.meta["rep_us"]) == 2
    assert all(e < 1000 for e in measured.meta["clock_error_us"].values())


@pytest.mark.mpi
def test_local_copies_are_copy_rows(built_flavour):
    """A local copy is a `copy` row on the rank itself, never a message: the ring copies each
    rank's block once; Bruck at P = 4 also places what its temporary buffer holds, and rank 1,
    whose last run of blocks wraps past block 3, copies more than the others."""
    built_flavour("openmpi")
    ring = trace.run_traced("ring", 4, 2048, flavour="openmpi", reps=1, timeout=120)
    copies = ring.calls[ring.calls["call"] == "copy"]
    assert sorted(copies["rank"]) == [0, 1, 2, 3]
    assert (copies["dst"] == copies["rank"]).all() and (copies["src"] == copies["rank"]).all()
    assert (copies["sbytes"] == 2048).all() and copies["tag"].isna().all()
    bruck = trace.run_traced("bruck", 4, 1024, flavour="openmpi", reps=1, timeout=120)
    for tl in (ring, bruck):
        sends = tl.calls[tl.calls["call"].isin(["Send", "Isend", "Sendrecv"])]
        assert (sends["dst"] != sends["rank"]).all()  # no message to oneself
    copied = bruck.calls[bruck.calls["call"] == "copy"].groupby("rank")["sbytes"].sum()
    # own block into the buffer, blocks 1.. of the buffer into place, own block from sendbuf
    assert copied.to_dict() == {0: 3 * 1024, 1: 5 * 1024, 2: 3 * 1024, 3: 3 * 1024}


@pytest.mark.mpi
def test_mpich_trace(built_flavour):
    built_flavour("mpich")
    measured = trace.run_traced("pairwise", 3, 1024, flavour="mpich", reps=1, timeout=120)
    _assert_trace_is_the_schedule(measured, "pairwise", 3, 1024)


@pytest.mark.smpi
@pytest.mark.parametrize("algo", list(algorithms.with_schedule()))
@pytest.mark.parametrize("p, nbytes", [(5, 4095), (8, 65536), (16, 8192), (32, 1024)])
def test_smpi_run_is_the_event_model(built_flavour, algo, p, nbytes):
    """SMPI's traced run is the model with SMPI's rules (shared ports, memories and cards, sends
    < 4 KiB eager and paying the overheads), the platform's per-pair α and β and the run's start
    times: every rank ends within 0.2 %."""
    built_flavour("smpi")
    pred, meas = trace.predicted_and_measured(
        algo, p, nbytes, flavour="smpi", platform="orfeo-thin", ports="shared", eager_bytes=4096, reps=1
    )
    _assert_trace_is_the_schedule(meas, algo, p, nbytes)
    np.testing.assert_allclose(pred.rank_end_us(), meas.rank_end_us(), rtol=2e-3, atol=0.01)


@pytest.mark.smpi
def test_smpi_gather_bcast_breaks_the_one_port_model(built_flavour):
    """On SMPI the root pays the overhead o for each message it posts and the root's messages
    share its port: the one-port model without eager sends (no overheads: every message is a
    rendezvous there) is far too low at 1 KiB; overlap without sharing the port, far too low at
    64 KiB."""
    built_flavour("smpi")
    pred, meas = trace.predicted_and_measured("gather_bcast", 8, 1024, flavour="smpi", reps=1)
    assert pred.total_us < 0.85 * meas.total_us
    pred, meas = trace.predicted_and_measured("gather_bcast", 8, 65536, flavour="smpi", ports=None, reps=1)
    assert pred.total_us < meas.total_us / 5


def test_read_trace_errors(tmp_path):
    with pytest.raises(ParseError, match="no trace.<rank>.csv files"):
        trace.read_trace(tmp_path)
    head = (
        "# labtrace 1\n# rank: {r}\n# nprocs: 2\n"
        "region,call,start,end,dst,sbytes,stag,src,rbytes,rtag,req,done\n"
    )
    (tmp_path / "trace.1.csv").write_text(head.format(r=1) + "1,Pcontrol,1.0,1.0,,,,,,,,\n")
    with pytest.raises(ParseError, match=r"no log for rank\(s\) \[0\] of 2"):
        trace.read_trace(tmp_path)
    (tmp_path / "trace.0.csv").write_text(
        head.format(r=0) + "1,Pcontrol,1.0,1.0,,,,,,,,\n1,Send,1.0,1.5,1,8,5,,,,,\n"
    )
    tl = trace.read_trace(tmp_path)
    assert timeline.check_consistency(tl) == [
        "a send of 8 B from rank 0 to rank 1 (tag 5) has no matching receive"
    ]
    with pytest.raises(UsageError, match="unknown trace region 7; valid: 1"):
        trace.read_trace(tmp_path, region=7)


@pytest.mark.smpi
@pytest.mark.parametrize(
    "args, message",
    [
        (["--algo", "native"], "'native' cannot be traced"),
        (["--algo", "rign"], "unknown allgather algorithm 'rign'"),
        (["--coll", "bcast", "--algo", "ring"], "unknown bcast algorithm 'ring'; valid: binomial"),
        (["--algo", "ring", "-b", "1Q"], "bad size '1Q'"),
        (["--algo", "ring", "--reps", "0"], "bad --reps '0'"),
    ],
)
def test_timeline_program_bad_usage(built_flavour, args, message, tmp_path):
    built_flavour("smpi")
    from mpilab.core.errors import LaunchError
    from mpilab.measure import launch, trace

    with pytest.raises(LaunchError) as exc:
        # the tracer still writes its (empty) logs at MPI_Finalize, in the working directory
        launch.get_launcher("smpi").run(trace.timeline_program("smpi"), args, 2, timeout=60, cwd=tmp_path)
    assert "exit code 2" in str(exc.value) and message in str(exc.value)


# --- the CLI ------------------------------------------------------------------------------------


def run_cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "mpilab.cli", "timeline", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.smpi
def test_cli_smpi(built_flavour, tmp_path):
    built_flavour("smpi")
    out = tmp_path / "ring.png"
    r = run_cli(
        "--algo",
        "ring",
        "--nprocs",
        "8",
        "--bytes",
        "64K",
        "--flavour",
        "smpi",
        "--platform",
        "orfeo-thin",
        "--trace-dir",
        str(tmp_path / "tr"),
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(out) and out.stat().st_size > 10000
    assert "routes of orfeo-thin" in r.stdout
    assert len(list((tmp_path / "tr").glob("trace.*.csv"))) == 8


@pytest.mark.mpi
def test_cli_openmpi_fits_a_pingpong(built_flavour, tmp_path):
    built_flavour("openmpi")
    out = tmp_path / "bin.png"
    r = run_cli("--algo", "binomial", "-n", "4", "-b", "16K", "--flavour", "openmpi", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "openmpi ping-pong fit" in r.stdout and out.exists()


def test_cli_help(capsys):
    from mpilab import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["timeline", "--help"])
    assert exc.value.code == 0 and "mpilab timeline" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--algo", "rign"], "unknown algorithm with a schedule 'rign'; valid: binomial, bruck"),
        (["--algo", "ring", "--nprocs", "0"], "bad nprocs '0'"),
        (["--algo", "ring", "--bytes", "12Q"], "bad size '12Q'"),
        (
            ["--algo", "ring", "--flavour", "openmpi", "--platform", "orfeo-thin"],
            "--platform 'orfeo-thin' only applies to --flavour smpi",
        ),
        (["--algo", "ring", "--ports", "0"], "bad ports '0'"),
        (["--algo", "ring", "--ports", "many"], "bad ports 'many'"),
        (["--algo", "ring", "--alpha", "1"], "give both alpha and beta"),
        (["--algo", "ring", "--flavour", "lam"], "invalid choice: 'lam'"),
    ],
)
def test_cli_bad_arguments(args, message, capsys):
    from mpilab import cli

    try:
        code = cli.main(["timeline", *args])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
