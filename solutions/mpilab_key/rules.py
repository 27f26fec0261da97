"""The answer key's writer of Open MPI 4.1 dynamic rules files from a decision table (lab 5).

Lab 5 asks students to write their decision table as a rules file; writing it is the answer, so
the writer is on the instructor's side (the tests and the rubric use it). The format, the
reader and the lookup are :mod:`mpilab.measure.rules`.
"""

from mpilab.core.errors import UsageError
from mpilab.measure import libalgs
from mpilab.measure.rules import OMPI_COLL_IDS


def write_ompi_rules(table, path, segsizes=None, comments=False):
    """Write ``table`` (from :func:`mpilab_key.decision.decision_table`) as an Open MPI 4.1 dynamic rules
    file.

    Open MPI 4.1 compares an allgather's message size with the whole gathered buffer, so for
    allgather one communicator-size block is written per process count of the table (the first
    and last P of each range) with thresholds ``bytes × P``, exact at those P and scaled by the
    block's P in between.

    Parameters
    ----------
    table : pandas.DataFrame
    path : str or Path
    segsizes : dict or callable, optional
        ``{(collective, algorithm): bytes}`` overriding the segment sizes the kit forces on Open
        MPI (:attr:`mpilab.measure.libalgs.LibAlgorithm.ompi_segsize`), or a function of a table
        row giving its segment size (for a table measured on SMPI: the segments the row's
        messages were cut into there, :func:`mpilab.measure.libalgs.segment_size`). 0 = no segmentation.
    comments : bool
        Say what each number is after a ``#`` (Open MPI 4.1 skips a ``#`` to the end of its line).

    Raises
    ------
    UsageError
        An algorithm Open MPI does not have, a row of the kit's own C algorithms (``ring``,
        ``bruck``, ``native``...: Open MPI cannot run them; the library's are ``lib:ring``...),
        or a collective without coll/tuned rules.
    """
    segsizes = segsizes or {}
    lines = []

    def line(numbers, why):
        lines.append(f"{numbers:<16}  # {why}" if comments else numbers)

    colls = sorted(table["collective"].unique(), key=lambda c: OMPI_COLL_IDS.get(c, 99))
    line(f"{len(colls)}", "collectives in this file")
    for coll in colls:
        if coll not in OMPI_COLL_IDS:
            raise UsageError(
                f"no Open MPI rules for collective {coll!r}; valid: {', '.join(sorted(OMPI_COLL_IDS))}"
            )
        t = table[table.collective == coll]
        for name in t["algorithm"].unique():
            _refuse_kit_algorithm(coll, name)
        blocks = []  # (communicator size written, P the thresholds are scaled by, rules)
        for pmin in sorted(t["nprocs_min"].unique()):
            rules = t[t.nprocs_min == pmin].sort_values("bytes_min")
            pmax = int(rules["nprocs_max"].max())
            at = [int(pmin)] + ([pmax] if coll == "allgather" and pmax != pmin else [])
            blocks += [(p, p if coll == "allgather" else 1, rules) for p in at]
        line(f"{OMPI_COLL_IDS[coll]}", f"{coll}")
        line(f"{len(blocks)}", "communicator-size blocks")
        for i, (p, scale, rules) in enumerate(blocks):
            line(f"{1 if i == 0 else p}", f"from {1 if i == 0 else p} process{'' if i == 0 else 'es'} up")
            line(f"{len(rules)}", "message-size rules")
            for j, (_, r) in enumerate(rules.iterrows()):
                alg = libalgs.lookup(coll, r["algorithm"])
                if alg.ompi_id is None:
                    raise UsageError(
                        f"{coll} algorithm {r['algorithm']!r} is not available on "
                        f"openmpi; it cannot go into a rules file"
                    )
                seg = (
                    int(segsizes(r))
                    if callable(segsizes)
                    else segsizes.get((coll, alg.name), alg.ompi_segsize)
                )
                start = 0 if j == 0 else int(r["bytes_min"]) * scale
                line(
                    f"{start} {alg.ompi_id} 0 {seg}",
                    f"from {start} B: {alg.name}, " + (f"{seg}-byte segments" if seg else "unsegmented"),
                )
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def _refuse_kit_algorithm(coll, name):
    """Raise a UsageError for rows that are not Open MPI algorithms (the kit's C code)."""
    if libalgs.is_library(coll, name):
        return
    hint = (
        f"; the library's {name} is {libalgs.PREFIX + name!r}"
        if libalgs.PREFIX + name in libalgs.names(coll)
        else ""
    )
    what = (
        "the library's own choice, not an algorithm (use 'default' for Open MPI's fixed rules)"
        if name == "native"
        else "the kit's own C algorithm or unknown"
    )
    raise UsageError(
        f"{coll} algorithm {name!r} in the decision table is {what}: an Open MPI "
        f"rules file can only name Open MPI's algorithms{hint}; build the table "
        f"from library rows only, e.g. decision_table(df, algorithms=[...]) with "
        f"names from `mpilab libalgs --coll {coll}`"
    )
