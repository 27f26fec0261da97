"""Lab 4's grading checks on right and wrong answers (schedules, model options on real SMPI
traces, the error table, a calibrated platform)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from mpilab.grade import grading
from mpilab.measure import trace
from mpilab.model import costs, p2p, schedules
from mpilab.simulate import calibration


def linear(p, n, root=0):
    progs = [schedules.Program(r) for r in range(p)]
    for r in range(p):
        if r == root:
            for dst in range(p):
                if dst != root:
                    progs[r].send(dst, n)
        else:
            progs[r].recv(root, n)
    return progs


def chain(p, n, root=0):
    progs = [schedules.Program(r) for r in range(p)]
    for r in range(p):
        v = (r - root) % p
        if v > 0:
            progs[r].recv((r - 1) % p, n)
        if v < p - 1:
            progs[r].send((r + 1) % p, n)
    return progs


def forwards_early(p, n, root=0):
    progs = [schedules.Program(r) for r in range(p)]
    for r in range(p):
        v = (r - root) % p
        if v < p - 1:
            progs[r].isend((r + 1) % p, n)
        if v > 0:
            progs[r].recv((r - 1) % p, n)
    return progs


def test_bcast_schedules_right():
    grading.check_bcast_schedule(linear, "basic_linear", hidden=True)
    grading.check_bcast_schedule(chain, "basic_linear", hidden=True)   # one chain: (p-1) hops too
    grading.check_bcast_schedule(lambda p, n, root: schedules.schedule("binomial", p, n, root),
                                 "binomial", hidden=True)


@pytest.mark.parametrize("build, message", [
    (lambda p, n, root: linear(p, n, root)[:-1] if p > 1 else linear(p, n, root),
     "p = 2, root = 0: return a list of 2 schedules.Program"),
    (lambda p, n, root: linear(p, n, root)[::-1], "list item 0 is the program of rank"),
    (lambda p, n, root: 1 / 0, "p = 1, root = 0: your function raised ZeroDivisionError"),
    (lambda p, n, root: schedules.schedule("binomial", p, n, root),
     "p = 5, root = 0: your schedule takes 7.5 us under the alpha-beta model (alpha = 1.5 us, "
     "beta = 0.001 us/B, n = 1000 B); the basic_linear broadcast takes 10 us"),
    (forwards_early, "p = 3, root = 0: rank 1 sends to rank 2 at 0 us, before it has the buffer"),
    (lambda p, n, root: [schedules.Program(r) for r in range(p)],
     "p = 2, root = 0: rank(s) [1] never receive the 1000-byte buffer"),
])
def test_bcast_schedules_wrong(build, message):
    with pytest.raises(AssertionError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        grading.check_bcast_schedule(build, "basic_linear")


def test_bcast_schedule_deadlock_and_hidden_roots():
    def root_zero_only(p, n, root=0):
        return linear(p, n, 0)
    grading.check_bcast_schedule(root_zero_only, "basic_linear")          # visible: root 0 only
    with pytest.raises(AssertionError, match="p = 4, root = 1: "):
        grading.check_bcast_schedule(root_zero_only, "basic_linear", hidden=True)

    def lost(p, n, root=0):
        progs = linear(p, n, root)
        if p > 2:
            progs[root].ops.pop()                                          # last rank waits forever
        return progs
    with pytest.raises(AssertionError, match=r"p = 3, root = 0: the schedule deadlocks: rank 2 in Recv"):
        grading.check_bcast_schedule(lost, "basic_linear")


def test_messages_from_rank0():
    grading.check_messages_from_rank0({"ring": 7, "pairwise": 3, "binomial": 3}, nprocs=8)
    grading.check_messages_from_rank0({"ring": 4, "pairwise": 5, "binomial": 3}, nprocs=5)
    with pytest.raises(AssertionError, match="ring: you counted 8, the diagram at P = 8 has 7 arrows"):
        grading.check_messages_from_rank0({"ring": 8, "pairwise": 3, "binomial": 3})
    with pytest.raises(AssertionError, match=r"keys \['binomial', 'pairwise', 'ring'\]"):
        grading.check_messages_from_rank0({"ring": 7})


@pytest.fixture(scope="module")
def smpi_traces(built_flavour):
    built_flavour("smpi")
    return [trace.run_traced(a, 8, b, flavour="smpi", platform="orfeo-thin", reps=1)
            for a in ("gather_bcast", "binomial") for b in (1024, 65536)]


@pytest.mark.smpi
def test_model_options(smpi_traces):
    grading.check_model_options(dict(ports="shared", eager_bytes=65536), smpi_traces, hidden=True)
    with pytest.raises(AssertionError, match=r"gather_bcast, P = 8, 1024 B: with \{'ports': 1\} the model ends"):
        grading.check_model_options(dict(ports=1), smpi_traces)
    with pytest.raises(AssertionError, match=r"gather_bcast, P = 8, 1024 B: with \{'ports': None, 'eager"):
        grading.check_model_options(dict(ports=None, eager_bytes=65536), smpi_traces)
    eager_40k = dict(ports="shared", eager_bytes=40000)
    grading.check_model_options(eager_40k, smpi_traces)                  # the visible runs pass ...
    with pytest.raises(AssertionError, match="binomial, P = 16, 65535 B"):  # ... the hidden do not
        grading.check_model_options(eager_40k, smpi_traces, hidden=True)
    with pytest.raises(AssertionError, match="give a dict with the keys ports and eager_bytes"):
        grading.check_model_options(dict(port=None), smpi_traces)
    with pytest.raises(AssertionError, match="bad ports 0"):
        grading.check_model_options(dict(ports=0), smpi_traces)
    with pytest.raises(AssertionError, match="no SMPI traces"):
        grading.check_model_options(dict(ports=None))


def _results():
    rows = []
    for algo in ("ring", "bruck", "gather_bcast"):
        for p in (2, 4, 8):
            for b in (1024, 65536):
                model = float(costs.evaluate("allgather", algo, p, b, 1.0, 1e-4))
                rows.append(dict(collective="allgather", algorithm=algo, nprocs=p, bytes=b,
                                 avg_us=model * (0.2 if algo == "gather_bcast" else 1.1)))
    return pd.DataFrame(rows)


def test_error_table():
    res = _results()
    errors = costs.compare_model(res, 1.0, 1e-4)
    grading.check_error_table(errors, "gather_bcast", res, 1.0, 1e-4)
    with pytest.raises(AssertionError, match="worst = 'ring', but the largest error in the table is 'gather_bcast'"):
        grading.check_error_table(errors, "ring", res, 1.0, 1e-4)
    with pytest.raises(AssertionError, match=r"with alpha = 2 us and beta = 0.0001 us/B it is"):
        grading.check_error_table(errors, "gather_bcast", res, 2.0, 1e-4)
    with pytest.raises(AssertionError, match="must be the DataFrame of costs.compare_model"):
        grading.check_error_table(None, "gather_bcast", res, 1.0, 1e-4)
    with pytest.raises(AssertionError, match=r"the table has the algorithms \['bruck', 'ring'\]"):
        grading.check_error_table(errors[errors["algorithm"] != "gather_bcast"], "ring", res, 1.0, 1e-4)


def test_calibrated_platform(tmp_path):
    sizes = [0] + [2 ** k for k in range(15)]
    rng = np.random.default_rng(4)
    pp = pd.DataFrame(dict(collective="pingpong", flavour="openmpi", platform="local", mapping="core",
                           bytes=sizes, avg_us=[0.3 + 2.5e-4 * b + rng.normal(0, 0.005) for b in sizes]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = calibration.calibrate(pp, base="orfeo-thin", path=tmp_path / "mine.xml")
        one = calibration.calibrate(
            {"core": tuple(p2p.fit(pp, segments=1).iloc[0][["intercept", "slope"]])},
            path=tmp_path / "one.xml")
    grading.check_calibrated_platform(mine, pp)
    grading.check_calibrated_platform(one, pp)
    with pytest.raises(AssertionError, match=r"core link costs 1.174 us \+ 0.0001 us/B; a fit of your ping-pong gives 0\.29"):
        grading.check_calibrated_platform("orfeo-thin", pp)
    with pytest.raises(AssertionError, match="cannot read the platform 'nosuch.xml'"):
        grading.check_calibrated_platform("nosuch.xml", pp)
