"""The algorithm asked for, checked and scored, and hints that name the likely defect.

The case harnesses report, for every case, the library collectives the student's function
called and the messages it sent (``mpilab/data/grading/harness.h``). :class:`Observed` keeps
them while :func:`mpilab.grade.runner.run_cases` runs; then:

* :func:`algorithm_cases` turns them into the verdict's cases about the algorithm: a task
  built from point-to-point messages that calls a library collective scores nothing; messages
  that are exactly those of an algorithm the kit ships (its gather + broadcast, its pairwise)
  score nothing; any other messages than the asked algorithm's earn at most a third of the
  cell (a failed case weighing twice all the others: ``score = points × passed share / 3``),
  and the feedback says what the messages look like;
* :func:`hints` reads the pattern of the failures ("only char and double fail: is the datatype
  argument ignored?", "only the runs with P a power of two pass").

The schedules are the caller's (the answer key's records, :mod:`mpilab.model.algorithms`): on
the student's side there is nothing to compare with, and only the hints are given.
"""

from dataclasses import dataclass, field

from mpilab.grade import casedata
from mpilab.grade.cases import Case
from mpilab.grade.checks import shapes
from mpilab.model import algorithms

#: What the feedback calls each algorithm.
NAMES = {
    "ring": "a ring",
    "bruck": "Bruck's algorithm",
    "gather_bcast": "the kit's gather + broadcast",
    "pairwise": "the kit's pairwise exchange (recursive doubling)",
    "linear": "a linear broadcast",
    "chain": "a chain",
    "pipeline": "a pipeline",
    "binomial": "a binomial tree",
    "scatter_allgather": "a scatter + ring allgather",
    "reduce_scatter": "a recursive-halving reduce-scatter",
    "rabenseifner": "Rabenseifner's allreduce",
}
#: Library calls a point-to-point task may make while its function runs (they move no data).
HARMLESS = ("MPI_Barrier",)


def name_of(algorithm):
    return NAMES.get(algorithm, algorithm.replace("_", " "))


@dataclass
class Seen:
    """One case as the ranks handed it back: what the algorithm checks need of it."""

    run: object
    spec: object
    passed: bool
    #: per communicator of the case: {rank in it: [(peer, bytes)]}
    groups: list = field(default_factory=list)
    #: [(world rank, collective, size of its communicator)]
    collectives: list = field(default_factory=list)


class Observed:
    """A :func:`mpilab.grade.runner.run_cases` observer that keeps what each case did."""

    def __init__(self):
        self.items = []

    def __call__(self, run, result):
        groups, colls = [], []
        records = result.records or {}
        if records:
            for group in casedata.groups(result.spec.comm, run.nprocs):
                groups.append({records[w].rank: [(d, b) for d, b, _, _ in records[w].sends()] for w in group})
            for w, rec in sorted(records.items()):
                colls += [(w, name, size) for name, size in rec.collectives]
        self.items.append(Seen(run, result.spec, result.passed, groups, colls))


def library_calls(observed, harmless=HARMLESS):
    """``[(Seen, world rank, collective, communicator size)]`` of every library collective the
    function called (but ``harmless`` ones)."""
    return [(s, w, c, n) for s in observed.items for w, c, n in s.collectives if c not in harmless]


def unseen_data(observed, inbound):
    """The first passed case in which a rank ended with data that no message the harness saw
    could have brought it: ``(Seen, rank, bytes received, bytes needed)``, or None.

    ``inbound(spec, q, rank)`` is the least the collective must bring rank ``rank`` of a
    communicator of ``q`` ranks (an allgather: the other ranks' blocks)."""
    for s in observed.items:
        if not s.passed:
            continue
        for group in s.groups:
            q = len(group)
            got = {r: 0 for r in group}
            for sends in group.values():
                for d, b in sends:
                    if d in got:
                        got[d] += b
            for r in sorted(group):
                need = inbound(s.spec, q, r)
                if q > 1 and got[r] < need:
                    return s, r, got[r], need
    return None


def whole_collective(observed, call):
    """The first passed case in which ``call`` (the very collective a task implements) ran on the
    case's whole communicator and no rank called any collective on a smaller one: the library did
    all the work. ``(Seen, world rank)`` or None."""
    for s in observed.items:
        if not s.passed or not s.groups:
            continue
        q = max(len(g) for g in s.groups)
        if q < 2:
            continue
        whole = [w for w, c, n in s.collectives if c == call and n >= q]
        smaller = [w for w, c, n in s.collectives if n < q]
        if whole and not smaller:
            return s, whole[0]
    return None


def algorithm_cases(
    observed,
    collective,
    asked,
    weight,
    task,
    nbytes,
    options=lambda spec: {},
    inbound=None,
    point_to_point=True,
    schedules=None,
    root=lambda spec, q: spec.root,
    exact=True,
):
    """The verdict's cases about the algorithm (see the module's docstring).

    Parameters
    ----------
    observed : Observed
    collective, asked : str
        The registry's record of the algorithm asked for.
    weight : float
        The weight of all the other cases of the cell.
    task : str
        What the lab asks, for the sentence about a library collective.
    nbytes : callable
        ``nbytes(spec, q)``: the schedule's n of a case on ``q`` ranks (bytes per block, of the
        whole vector ...).
    options : callable
        ``options(spec)``: more keyword arguments of the schedule (the pipeline's segment size).
    inbound : callable, optional
        ``inbound(spec, q, rank)``: the bytes a rank must receive in messages (:func:`unseen_data`);
        a right result that came with less was made by something the harness does not see.
    schedules : dict, optional
        ``{name: schedule}`` of the algorithms to compare with (the asked one among them; a
        schedule may raise for a P it is not defined at, and those cases are not compared);
        default: the registry's records of ``collective`` that have a schedule here.
    root : callable
        ``root(spec, q)``: the root of a case on a communicator of ``q`` ranks.
    exact : bool
        Compare the sizes of the messages too (else only how many go to which peer).
    point_to_point : bool
        The task is built from point-to-point messages (no library collective at all); else it
        may call the library's collectives, but not hand the whole work to the one it implements
        (:func:`whole_collective`).

    Returns
    -------
    (str, list of Case)
        ``"library"`` or ``"kit"`` (the cell scores nothing: the list replaces its cases),
        ``"other"`` (a failed case to add: at most a third), ``"ok"`` (nothing to add), or
        ``"unknown"`` (no schedule here to compare with).
    """
    if not point_to_point:
        found = whole_collective(observed, f"MPI_{collective.capitalize()}")
        if found:
            seen, w = found
            return "library", [
                Case(
                    f"{asked}: the algorithm asked for",
                    False,
                    f"your function hands the whole {collective} to the library's "
                    f"MPI_{collective.capitalize()} on the whole communicator (rank {w}, "
                    f"{seen.run.label}, {seen.spec.name}), with no step of its own on "
                    f"a smaller one: {task}; this cell scores nothing",
                    weight=weight,
                )
            ]
    calls = library_calls(observed) if point_to_point else []
    if calls:
        seen, w, call, size = calls[0]
        ranks = f"on a communicator of {size} rank{'s' if size != 1 else ''}"
        return "library", [
            Case(
                f"{asked}: built from point-to-point messages",
                False,
                f"your function calls {call} ({ranks}, rank {w}, {seen.run.label}, {seen.spec.name}): "
                f"{task}; a library collective does the work, so this cell scores nothing",
                weight=weight,
            )
        ]
    unseen = unseen_data(observed, inbound) if inbound is not None else None
    if unseen:
        seen, r, got, need = unseen
        return "library", [
            Case(
                f"{asked}: built from point-to-point messages",
                False,
                f"rank {r} ended with the right data ({seen.run.label}, {seen.spec.name}) yet received "
                f"{got:,} of the {need:,} bytes it needs in the messages your function sent: the data "
                f"came another way (a library collective called through PMPI_ or dlsym?): {task}; "
                "this cell scores nothing",
                weight=weight,
            )
        ]
    records = {a.name: a for a in algorithms.of(collective)}
    if schedules is None:
        schedules = {n: a.schedule for n, a in records.items() if a.schedule is not None}
    if schedules.get(asked) is None:
        return "unknown", []
    cache = {}

    def expected(name, seen, q):
        spec = seen.spec
        n = nbytes(spec, q)
        key = (name, q, n, root(spec, q), tuple(sorted(options(spec).items())))
        if key not in cache:
            try:
                sched = schedules[name]
                cache[key] = shapes.expected_sends(sched, q, n, root(spec, q), **options(spec))
            except Exception:  # a schedule defined only for some P (powers of two): nothing to compare
                cache[key] = None
            if cache[key] and not _whole_elements(cache[key], getattr(spec, "size", 1)):
                # the schedule would split an element (1 int over 2 ranks): real code cannot, so
                # such a case says nothing about the algorithm
                cache[key] = None
        return cache[key]

    def fits(name, pairs):
        exp = [(g, expected(name, s, len(g))) for s, g in pairs]
        exp = [(g, e) for g, e in exp if e is not None]
        return bool(exp) and all(shapes.same_shape(g, e, len(g), exact=exact) for g, e in exp)

    checked = [
        (s, g)
        for s in observed.items
        if s.passed
        for g in s.groups
        if len(g) >= 2 and expected(asked, s, len(g))
    ]
    if not checked:
        return "unknown", []
    wrong = next(
        (
            (s, g)
            for s, g in checked
            if not shapes.same_shape(g, expected(asked, s, len(g)), len(g), exact=exact)
        ),
        None,
    )
    if wrong is None:
        return "ok", []
    others = [n for n in schedules if n != asked and fits(n, checked)]
    seen, group = wrong
    where = f"{seen.run.label}, {seen.spec.name}"
    kit = [n for n in others if n in records and records[n].side == "kit"]
    if kit:
        source = records[kit[0]].source or "c_reference"
        return "kit", [
            Case(
                f"{asked}: the algorithm asked for",
                False,
                f"your messages are exactly those of {name_of(kit[0])} ({source}), "
                f"not {name_of(asked)}: the kit's own algorithm handed in earns nothing",
                weight=weight,
            )
        ]
    looks = f"those of {name_of(others[0])}" if others else shapes.describe(group, len(group))
    diff = shapes.first_difference(group, expected(asked, seen, len(group)), name_of(asked))
    return "other", [
        Case(
            f"{asked}: the algorithm asked for",
            False,
            f"your messages are not {name_of(asked)}: {looks} ({where}; {diff}). A right result by "
            "another algorithm earns a third of the points",
            weight=2 * weight,
        )
    ]


def _whole_elements(sends, size):
    """Whether every message size in ``sends`` (``{rank: [(peer, bytes)]}``, as
    :func:`mpilab.grade.checks.shapes.expected_sends` gives) is a whole number of elements."""
    size = size or 1
    try:
        return all(b % size == 0 for msgs in sends.values() for _, b in msgs)
    except (AttributeError, TypeError, ValueError):
        return True


def _pow2(p):
    return p & (p - 1) == 0


def hints(observed):
    """Sentences on the pattern of the failures (empty when there is none to tell)."""
    items = observed.items
    if not items or all(s.passed for s in items):
        return []
    out = []
    by_type = {}
    for s in items:
        by_type.setdefault(s.spec.type, []).append(s.passed)
    bad_types = sorted(t for t, v in by_type.items() if not all(v))
    if "int" in by_type and all(by_type["int"]) and bad_types:
        out.append(
            f"only the {' and '.join(bad_types)} cases fail: is the datatype argument ignored "
            "(MPI_INT or sizeof(int) written where the datatype's size belongs)?"
        )
    by_kind = {}
    for s in items:
        by_kind.setdefault(s.spec.kind, []).append(s.passed)
    bad_kinds = [k for k, v in by_kind.items() if not all(v)]
    if bad_kinds == ["in-place"] and len(by_kind) > 1:
        out.append(
            "only the MPI_IN_PLACE cases fail: then sendbuf is not a buffer, and each rank's own "
            "data already is in its place of the result buffer"
        )
    if bad_kinds == ["sub-communicator"] and len(by_kind) > 1:
        out.append(
            "only the sub-communicator cases fail: is MPI_COMM_WORLD (or a world rank) used "
            "where comm and the rank in comm belong?"
        )
    by_p = {}
    for s in items:
        by_p.setdefault(s.run.nprocs, []).append(s.passed)
    ok_p = sorted(p for p, v in by_p.items() if all(v) and p > 1)
    bad_p = sorted(p for p, v in by_p.items() if not all(v))
    if ok_p and bad_p and all(_pow2(p) for p in ok_p) and not any(_pow2(p) for p in bad_p):
        out.append(
            f"only the runs with P a power of two pass ({', '.join(map(str, ok_p))}): does your code "
            f"assume P = 2^k? P = {', '.join(map(str, bad_p))} fail"
        )
    return out
