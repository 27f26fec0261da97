"""Cost table: lookups, domains, numeric evaluation, MAPE against data, the student-answer
checker, and agreement with the C headers and the registry (which write costs with N = p*n)."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sympy

from mpilab.core import paths
from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import COLLECTIVES
from mpilab.measure import libalgs
from mpilab.model import costs
from mpilab_key.costs import compare_model

p, n, a, b = costs.p, costs.n, costs.alpha, costs.beta
KIT = ("gather_bcast", "pairwise", "ring", "bruck")


def test_table_covers_kit_and_library():
    for algo in KIT:
        assert ("allgather", algo) in costs.table()
    for key in (("bcast", "binomial"), ("reduce", "rabenseifner"), ("allreduce", "ring")):
        assert key in costs.table()
    with pytest.raises(UsageError, match="rign.*ring"):
        costs.cost("allgather", "rign")


def test_library_entries_use_libalgs_names():
    """One naming: every library entry is an algorithm of mpilab.measure.libalgs for that collective."""
    for coll, name in costs.table():
        if coll == "allgather" and name in KIT:
            continue
        assert name in libalgs.names(coll), (coll, name)


def test_every_library_algorithm_has_a_cost_or_a_reason():
    """The other direction: a library algorithm added to mpilab.measure.libalgs needs a cost here (or
    a stated reason in NO_COST), or this fails."""
    for coll in COLLECTIVES:
        for name in libalgs.names(coll):
            if name == "default":
                continue
            assert ((coll, name) in costs.table()) != ((coll, name) in costs.no_cost()), (coll, name)


def test_segmented_ring_is_the_ring_for_one_phase():
    """Open MPI runs the plain ring below p*s bytes: the two costs agree there, and above it
    each extra phase costs (p - 1) more alpha."""
    ring = costs.evaluate("allreduce", "ring", 8, 4096, 2.0, 1e-3)
    assert costs.evaluate("allreduce", "segmented_ring", 8, 4096, 2.0, 1e-3, segment=8192) == pytest.approx(
        ring
    )
    four = costs.evaluate("allreduce", "segmented_ring", 8, 4 * 8 * 1024, 2.0, 1e-3, segment=1024)
    assert four - costs.evaluate("allreduce", "ring", 8, 4 * 8 * 1024, 2.0, 1e-3) == pytest.approx(
        3 * 7 * 2.0
    )


@pytest.mark.parametrize("coll, name", costs.names())
def test_header_form_is_the_same_cost(coll, name):
    """header_form prints the table's cost in the C headers' notation (N = p*n for allgather);
    read back with N = p*n (and log2), it is the same expression."""
    text, _, what = costs.header_form(coll, name).partition("    (")
    assert costs.entry(coll, name).domain in what
    back = text.replace("·", "*").replace("α", "alpha").replace("β", "beta").replace("^", "**")
    back = back.replace("log2(p)", "log(p, 2)")
    N = sympy.Symbol("N", positive=True)
    local = {
        **costs.SYMBOLS,
        "N": N,
        "Max": sympy.Max,
        "Min": sympy.Min,
        "ceiling": sympy.ceiling,
        "floor": sympy.floor,
        "log": sympy.log,
    }
    expr = sympy.sympify(back, locals=local)
    if coll == "allgather":
        expr = expr.subs(N, p * n)
    assert costs.check_expression(expr, coll, name).equal, (coll, name, text)


def test_costs_cli(capsys):
    from mpilab import cli

    assert cli.main(["costs", "--coll", "allgather"]) == 0
    out = capsys.readouterr().out
    assert "allgather ring" in out and "(p - 1)·α + N·(p - 1)/p·β" in out
    assert "bcast binomial" not in out
    assert cli.main(["costs", "--coll", "allreduce"]) == 0
    assert "allreduce smp" in capsys.readouterr().out
    assert (
        cli.main(
            ["costs", "--coll", "allgather", "--algo", "ring", "--check", "(p - 1)*alpha + (p - 1)*n*beta"]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("right: ")
    assert cli.main(["costs", "--coll", "allgather", "--algo", "ring", "--check", "p*alpha"]) == 1
    assert "differs at p = " in capsys.readouterr().out
    for args, msg in (
        (["--coll", "gather"], "unknown collective 'gather'; valid: allgather"),
        (["--coll", "bcast", "--algo", "rign"], "unknown bcast algorithm 'rign'"),
        (["--check", "p"], "--check needs --coll and --algo"),
    ):
        assert cli.main(["costs", *args]) == 2
        assert msg in capsys.readouterr().err, args


def test_every_entry_has_a_known_domain():
    for key, e in costs.table().items():
        assert e.domain in costs.DOMAINS, key
        assert e.expr.free_symbols <= set(costs.SYMBOLS.values()), key


def test_evaluate_numbers():
    # ring, p = 8, n = 1000 B, alpha = 2 us, beta = 0.001 us/B: 7 * (2 + 1) = 21 us
    assert costs.evaluate("allgather", "ring", 8, 1000, 2.0, 1e-3) == pytest.approx(21.0)
    # bruck, p = 5: ceil(log2 5) = 3 rounds
    assert costs.evaluate("allgather", "bruck", 5, 0, 1.0, 0.0) == pytest.approx(3.0)
    # ceil(log2 p) and floor(log2 p) stay right at large powers of two
    big = np.array([2.0**k for k in range(1, 31)])
    assert np.array_equal(costs.evaluate("allgather", "bruck", big, 0, 1.0, 0.0), np.arange(1, 31))
    # Open MPI's chain has 4 chains: p <= 5 is linear, p = 16 is 4 sends + 3 more hops
    chain = costs.evaluate("bcast", "chain", np.arange(1, 18), 0, 1.0, 0.0)
    assert list(chain[:5]) == [0, 1, 2, 3, 4] and chain[15] == 7
    # pipeline: a buffer smaller than a segment is one segment of n bytes
    assert costs.evaluate("bcast", "pipeline", 4, 100, 1.0, 0.01) == pytest.approx(3 * 2.0)


def test_domains_in_evaluate():
    # power-of-two-only entries without an exact form are NaN elsewhere
    v = costs.evaluate("allgather", "recursive_doubling", np.array([4, 5, 8]), 1, 1.0, 0.0)
    assert v[0] == 2 and math.isnan(v[1]) and v[2] == 3
    assert math.isnan(costs.evaluate("allgather", "two_proc", 3, 1, 1.0, 0.0))
    # pairwise has an exact cost for every p; it equals the power-of-two form on powers of two
    ps = np.arange(1, 65)
    exact = costs.evaluate("allgather", "pairwise", ps, 1000, 2.0, 1e-3)
    pow2 = ps[(ps & (ps - 1)) == 0]
    assert np.allclose(exact[pow2 - 1], np.log2(pow2) * 2.0 + (pow2 - 1) * 1.0)
    # Open MPI's recursive-doubling allreduce: floor(log2 p) + 2 steps when p is not 2^k
    assert list(costs.evaluate("allreduce", "recursive_doubling", np.arange(2, 10), 0, 1.0, 0.0)) == [
        1,
        3,
        2,
        4,
        4,
        4,
        3,
        5,
    ]


def pairwise_schedule_time(pv, nv, al, be):
    """Walk pairwise.c's schedule rank by rank: an exchange of x and y bytes between two ranks
    ready at t1 and t2 ends for both at max(t1, t2) + al + max(x, y) * be (sends complete on
    delivery). Returns the time the last rank finishes."""
    q = 1
    while 2 * q <= pv:
        q *= 2
    e = pv - q
    t = [0.0] * pv
    for r in range(q, pv):  # fold: r -> r - q, one block
        t[r - q] = t[r] = max(t[r], t[r - q]) + al + nv * be
    d = 1
    while d < q:
        new = t[:]
        for r in range(q):
            partner = r ^ d
            base, pbase = r & ~(d - 1), partner & ~(d - 1)
            start = max(t[r], t[partner]) + al + d * nv * be
            if e > 0:
                mine = min(max(e - base, 0), d)
                theirs = min(max(e - pbase, 0), d)
                start += al + max(mine, theirs) * nv * be
            new[r] = start
        t = new
        d *= 2
    for r in range(q, pv):  # unfold: the whole result back
        t[r] = max(t[r], t[r - q]) + al + pv * nv * be
    return max(t)


@pytest.mark.parametrize("pv", list(range(1, 41)) + [48, 63, 64, 65, 100])
def test_pairwise_exact_cost_is_the_schedule_of_pairwise_c(pv):
    for nv in (1, 1000):
        want = pairwise_schedule_time(pv, nv, 3.0, 1e-3)
        assert costs.evaluate("allgather", "pairwise", pv, nv, 3.0, 1e-3) == pytest.approx(want), pv


def test_compare_model_mape():
    df = pd.DataFrame(
        {
            "collective": "allgather",
            "algorithm": "ring",
            "nprocs": [4, 8],
            "bytes": [1000, 1000],
            "avg_us": [3 * 3.0, 7 * 3.3],
        }
    )
    out = compare_model(df, 2.0, 1e-3)
    assert out.loc[0, "mape"] == pytest.approx((0 + 100 * (7 * 3.3 - 21) / (7 * 3.3)) / 2)
    fig, axes = costs.plot_model(out)
    assert [a.get_title() for a in axes] == ["P = 4", "P = 8"]
    assert axes[0].get_xscale() == "log" and axes[0].get_xlabel() == "message size (bytes)"
    measured, model = axes[1].get_lines()
    assert list(measured.get_ydata()) == [7 * 3.3] and list(model.get_ydata()) == pytest.approx([7 * 3.0])


def test_compare_model_leaves_out_points_outside_the_domain():
    df = pd.DataFrame(
        {
            "collective": "allgather",
            "algorithm": "recursive_doubling",
            "nprocs": [4, 6, 8],
            "bytes": [0, 0, 0],
            "avg_us": [2.0, 9.0, 3.0],
        }
    )
    out = compare_model(df, 1.0, 0.0)
    assert out.loc[0, "points"] == 2 and out.loc[0, "mape"] == 0


def test_check_equivalent_forms():
    assert costs.check_expression("(p-1)*alpha + (p-1)*n*beta", "allgather", "ring").equal
    assert costs.check_expression((p - 1) * (a + n * b), "allgather", "ring").ok
    assert costs.check_expression("ceiling(log(p,2))*alpha + (p-1)*n*beta", "allgather", "bruck").equal


def test_pairwise_answer_for_powers_of_two_is_accepted():
    for answer in (
        "log(p,2)*alpha + (p-1)*n*beta",
        "log2(p)*alpha + (p-1)*n*beta",
        sympy.ceiling(sympy.log(p, 2)) * a + (p - 1) * n * b,
    ):
        assert costs.check_expression(answer, "allgather", "pairwise").equal, answer
    r = costs.check_expression("(p-1)*(alpha + n*beta)", "allgather", "pairwise")
    assert not r.equal
    assert "pairwise cost (for p power of two) differs at p = 4" in r.message
    # a cost right only for p = 2 is not enough for two_proc's neighbours, but is for two_proc
    assert costs.check_expression("(p-1)*(alpha + n*beta)", "allgather", "two_proc").equal
    assert all(pv == 2 for pv, _ in costs.check_points("p = 2"))
    assert len(costs.check_points("p = 2")) >= 4


def test_check_wrong_names_point_and_values():
    r = costs.check_expression("p*(alpha + n*beta)", "allgather", "ring")
    assert not r.equal
    assert "p = 1, n = 1" in r.message and "yours gives" in r.message and "expected" in r.message


def test_check_rejects_unknown_symbols_and_code():
    r = costs.check_expression("(p-1)*gamma", "allgather", "ring")
    assert not r.equal and "gamma" in r.message and "valid" in r.message
    r = costs.check_expression("__import__('os').system('true')", "allgather", "ring")
    assert not r.equal


# --- the allow-list parser: what students write is read, nothing else is --------------------------

k = sympy.Symbol("k", positive=True)
RING = (p - 1) * (a + n * b)


@pytest.mark.parametrize(
    "text, want",
    [
        ("(p-1)*(a + n*b)", RING),
        ("(p-1)(α+nβ)", RING),
        ("(p − 1)·α + (p − 1)·n·β", RING),
        ("(p-1)×alpha + (p-1)×n×beta", RING),
        ("p(α + nβ) - α - nβ", RING),
        ("2n", 2 * n),
        ("2 n beta", 2 * n * b),
        ("n/2β", n * b / 2),
        ("1/2 p", p / 2),
        ("p²α", p**2 * a),
        ("p**2*alpha", p**2 * a),
        ("p^2 α", p**2 * a),
        ("-p^2", -(p**2)),
        ("2^-1 α", a / 2),
        ("⌈log2 p⌉·α + (p−1)·n·β", sympy.ceiling(sympy.log(p, 2)) * a + (p - 1) * n * b),
        ("ceil(log2(p))*alpha + (p-1)*n*beta", sympy.ceiling(sympy.log(p, 2)) * a + (p - 1) * n * b),
        ("ceiling(log(p, 2))*alpha", sympy.ceiling(sympy.log(p, 2)) * a),
        ("ceil log2 p α", sympy.ceiling(sympy.log(p, 2)) * a),
        ("log(p)/log(2)*alpha", sympy.log(p, 2) * a),
        ("⌊log2 p⌋ a", sympy.floor(sympy.log(p, 2)) * a),
        ("sqrt((p - 2)*n*beta/alpha)", sympy.sqrt((p - 2) * n * b / a)),
        ("(p-1)*(alpha + min(n, s)*beta)", (p - 1) * (a + sympy.Min(n, costs.s) * b)),
        ("3 × (p − 1) ÷ 2 α", sympy.Rational(3, 2) * (p - 1) * a),
        ("1.5e3 α + .5β", 1500 * a + b / 2),
        (str(2 * (p - 1) * a + (p - 1) * (p + 1) * n * b), 2 * (p - 1) * a + (p - 1) * (p + 1) * n * b),
    ],
)
def test_the_forms_students_write_are_read(text, want):
    assert sympy.simplify(costs.parse(text) - want) == 0, text


def test_a_labs_own_symbol_is_read_when_the_lab_allows_it():
    """Lab 6's segmented pipeline written with k segments: (p + k - 2)(α + nβ/k)."""
    got = costs.parse("(p+k-2)(α+nβ/k)", {**costs.SYMBOLS, "k": k})
    assert sympy.simplify(got - (p + k - 2) * (a + n * b / k)) == 0
    with pytest.raises(UsageError, match="the name 'k' at character 4 is not allowed; valid: .*alpha"):
        costs.parse("(p+k-2)(α+nβ/k)")


@pytest.mark.parametrize(
    "text, named",
    [
        ("log2.__globals__['__builtins__']['exec']('import os')", "'.' at character 5"),
        ("__import__('os').system('true')", "'_' at character 1"),
        ("(lambda: 1)()", "the name 'lambda'"),
        ("p[0]", "'[' at character 2"),
        ("'p'", "a quote (')"),
        ("p; q", "';' at character 2"),
        ("exp(p)", "the name 'exp'"),
        ("p2", "the name 'p2'"),
        ("gamma*p", "the name 'gamma'"),
        ("9^9^9", "the exponent 387420489"),
        ("2^100000", "the exponent 100000"),
        ("1" * 50, "a number of 50 characters"),
        ("(" * 100 + "p" + ")" * 100, "nested deeper than"),
        ("log(p, 2, 3)", "takes 1 or 2 argument"),
        ("ceil", "ceil at character 1 has no argument"),
        ("(p - 1", "a ')' is missing"),
        ("p +", "ends where an operand should come"),
        ("", "is empty"),
        ("p" * 3000, "at most 2000"),
    ],
)
def test_anything_else_is_refused_naming_it(text, named):
    with pytest.raises(UsageError) as err:
        costs.parse(text)
    assert named in str(err.value), str(err.value)
    assert "valid" in str(err.value) or "at most" in str(err.value)


def test_the_parser_runs_nothing(tmp_path, monkeypatch):
    """The escape that parse_expr ran (code in the grader, as root) is text like any other."""
    monkeypatch.chdir(tmp_path)
    payload = "log2.__globals__['__builtins__']['exec'](\"open('ran', 'w')\", log2.__globals__)"
    for value in (payload, [payload], {"cost": payload}, (payload,)):
        with pytest.raises(UsageError):
            costs.expression(value)
        with pytest.raises(UsageError):
            costs.evaluate_expression(value, 4, 8, 1.0, 0.001)
        assert not costs.check_expression(value, "allgather", "ring").equal
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "value, message",
    [
        (["(p-1)*alpha"], "got a list: hand in one expression"),
        ({"ring": "(p-1)*alpha"}, "got a dict"),
        (True, "got a bool"),
        (None, "no answer yet"),
        (float("inf"), "not a finite number"),
        (sympy.Function("f")(p), "f is not allowed"),
        (sympy.sin(p) * a, "sin is not allowed"),
        (sympy.Symbol("gamma") * a, "unknown symbol(s) gamma"),
    ],
)
def test_only_text_numbers_and_allowed_sympy_become_expressions(value, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        costs.expression(value)


def test_numbers_and_sympy_answers_pass_through():
    assert costs.expression(3) == 3 and costs.expression(np.float64(0.5)) == sympy.Float(0.5)
    x = sympy.Symbol("p")  # no assumptions: replaced by the table's p
    assert costs.expression((x - 1) * sympy.Symbol("alpha")) == (p - 1) * a


def test_random_text_is_read_or_refused_never_crashes():
    """Token soup from everything the parser knows and some it does not: every outcome is an
    expression or a UsageError (no ZeroDivisionError, TypeError, RecursionError...)."""
    import random  # only this test draws random text

    tokens = ["p", "n", "α", "β", "s", "2", "0", "0.0", "1.5", "(", ")", "⌈", "⌉", "+", "-", "−", "*", "/"]
    tokens += ["^", "**", "log", "log2", "ceil", "min", ",", "²", " ", "1e5", "nβ", "x", ".", "'", "_"]
    rng = random.Random(27)
    read = 0
    for _ in range(5000):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 14)))
        try:
            costs.parse(text)
            read += 1
        except UsageError:
            pass
    assert read > 100  # the soup is not all refused


# --- the C headers and the registry state the same costs ----------------------------------------

N = sympy.Symbol("N", positive=True)  # the headers' n: bytes gathered on each process = p*n
_HEADER_SYMBOLS = {"p": p, "n": N, "alpha": a, "beta": b, **{x: sympy.Symbol(x) for x in "qeLf"}}


def header_expr(text):
    """Read a cost as the C headers write it (·, α, β, 'log2 p', implicit products), with the
    same allow-list parser as students' answers."""
    return costs.parse(text, _HEADER_SYMBOLS)


def cost_block(path):
    """The lines of the 'Cost:' field of an algorithm file's header, without ' * '."""
    lines, inside = [], False
    for line in Path(path).read_text().splitlines():
        body = line.lstrip(" /*").rstrip()
        if body.startswith("Cost:"):
            inside, body = True, body[len("Cost:") :]
        elif inside and re.match(r"[A-Z][a-z]+:", body):
            break
        if inside:
            lines.append(body.strip())
    return lines


KEY_FILES = sorted((paths.repo_root() / "solutions" / "c_reference" / "allgather").glob("*.c"))
STUDENT_FILES = sorted(f for f in (paths.c_reference_dir() / "allgather").glob("*.c") if f.stem != "common")


@pytest.mark.parametrize("path", KEY_FILES, ids=lambda f: f.stem)
def test_key_header_cost_is_the_table_cost(path):
    """The answer key's C solutions (ring, Bruck) state the cost the key's table grades."""
    block = cost_block(path)
    assert block, f"{path.name} has no 'Cost:' line"
    stated = header_expr(re.split(r"\s{2,}", block[0])[0])
    r = costs.check_expression(stated.subs(N, p * n), "allgather", path.stem)
    assert r.equal, f"{path.name}: {block[0]!r}: {r.message}"


@pytest.mark.parametrize("path", STUDENT_FILES, ids=lambda f: f.stem)
def test_student_reference_headers_leave_the_cost_to_the_lab(path):
    """Lab 2 asks for the costs of the reference algorithms: their headers send the reader to
    the lab, and no line of the header parses to the graded cost."""
    block = cost_block(path)
    assert block and "answer key" in " ".join(block), block
    for line in block:
        try:
            expr = header_expr(re.split(r"\s{2,}", line)[0])
        except UsageError:
            continue
        assert not costs.check_expression(expr.subs(N, p * n), "allgather", path.stem).equal, line
    assert KEY_FILES and {f.stem for f in KEY_FILES}.isdisjoint(f.stem for f in STUDENT_FILES)


def test_registry_carries_no_cost(built_flavour):
    """The C registry names and describes algorithms; their costs live in the answer key only."""
    reg = built_flavour("openmpi") / "registry.json"
    algos = json.loads(reg.read_text())["algorithms"]
    assert {a["name"] for a in algos} >= {"gather_bcast", "pairwise"}
    assert not [a["name"] for a in algos if "cost" in a]
