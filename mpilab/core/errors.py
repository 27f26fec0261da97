"""The one exception family of mpilab.

Every message names the bad value and says what would be valid, e.g.
``unknown algorithm 'rign'; valid: bruck, gather_bcast, pairwise, ring, native``.
"""


class MpilabError(Exception):
    """Base class of every error mpilab raises on purpose."""


class UsageError(MpilabError, ValueError):
    """A bad argument: an unknown name, a value out of range, a malformed list."""


class LaunchError(MpilabError, RuntimeError):
    """A launched program failed, timed out, or could not be started."""


class ToolMissing(MpilabError, RuntimeError):
    """A program the kit needs (a flavour's MPI, smpirun, sbatch, ...) is not installed."""


class LeftOut(UserWarning):
    """A warning that some algorithms' measurements are missing (all of them, or at one P and
    size), with what a caller acts on: ``algorithms``, ``why`` in a few words, and where (``nprocs``,
    ``nbytes``; None when it is every point). Lab 6's compiled references take over exactly these
    algorithms (:func:`mpilab.grade.references.or_references`); the text is what the student reads.
    """

    def __init__(self, message, algorithms, why, nprocs=None, nbytes=None):
        super().__init__(message)
        self.algorithms = tuple(algorithms)
        self.why = why
        self.nprocs = nprocs
        self.nbytes = nbytes


class ParseError(MpilabError, ValueError):
    """A file or program output could not be parsed; the message names file and line."""


def one_of(kind, value, valid):
    """Build the standard message for a value that is not among ``valid``.

    >>> str(one_of("algorithm", "rign", ["ring", "bruck"]))
    "unknown algorithm 'rign'; valid: bruck, ring"
    """
    return UsageError(f"unknown {kind} {value!r}; valid: {', '.join(sorted(map(str, valid)))}")
