"""Looking up a decision table (the fastest algorithm per collective, message-size range and
process-count range, as seed 003 builds it) the way Open MPI reads a rules file.

Lab 5 asks students to build the table from their measurements; the functions that build it,
and the regret and ranking of lab 1 and 5, are the answer key's (``mpilab_key.decision``).
A table here is a DataFrame with the columns ``collective``, ``nprocs_min``, ``nprocs_max``,
``bytes_min``, ``bytes_max`` and ``algorithm``; :mod:`mpilab.measure.rules` reads Open MPI
rules files.
"""

from mpilab.core.errors import UsageError


def choose(table, collective, nprocs, nbytes):
    """Look up a decision table as Open MPI reads it from a rules file written from the table.

    The process-count range with the largest start not above ``nprocs`` (the first range for
    smaller P, as the file's first block starts at 1), then in that range the size range with
    the largest start not above ``nbytes`` (its first one for smaller sizes, as the file's first
    rule starts at 0).
    """
    t = table[table.collective == collective]
    if t.empty:
        raise UsageError(
            f"no rule for {collective}; the table has "
            f"{', '.join(sorted(table.collective.unique())) or 'no collective'}"
        )
    below = t[t.nprocs_min <= nprocs]
    start = below.nprocs_min.max() if not below.empty else t.nprocs_min.min()
    t = t[t.nprocs_min == start].sort_values("bytes_min")
    fits = t[t.bytes_min <= nbytes]
    return (fits if not fits.empty else t).iloc[-1 if not fits.empty else 0]["algorithm"]
