"""Lab 6's graded cells, as the notebook sees them: the answers each hands in, the visible checks."""

from functools import partial

from mpilab.grade.checks import ccode, costs, prediction, segments
from mpilab.grade.labs import Cell, c_file_cell
from mpilab.grade.runner import Run
from mpilab.model import algorithms
from mpilab.simulate import routes

#: The five broadcasts students write: algorithm -> the C file handed in (their skeletons in the
#: algorithm registry).
C_FILES = {name: a.skeleton_file for name, a in algorithms.skeletons("bcast").items()}

#: The runs of the visible correctness checks: real Open MPI at P = 2, 3, 5 and 13 ranks dealt
#: over the two nodes of simulated THIN. Every kind of case (three datatypes, other roots, a
#: sub-communicator, and the pipeline's segment sizes) runs in each; the grader adds other
#: process counts and a larger simulated run.
VISIBLE_RUNS = ccode.runs_at("openmpi", (2, 3, 5)) + (Run("smpi", 13, "orfeo-thin", "node"),)

#: The segment-size sweep (part 4): the pipeline broadcasts SWEEP_BYTES at each P of SWEEP_P
#: with each of SEGSIZES on three simulated networks, one rank per core of THIN or per node of
#: a fat tree and a torus (the notebook builds the last two, whose names these are).
SWEEP_P = (8, 32)
SWEEP_BYTES = 1 << 20
SEGSIZES = (1024, 4096, 16384, 65536, 262144)
SWEEP_PLATFORMS = ("orfeo-thin", "fattree-4x8-2spines", "torus-4x8")

#: The crossover map (part 5): the grid predicted from the student's costs, then simulated.
P_MAP = (4, 8, 16, 32)
SIZES_MAP = (8, 64, 512, 4096, 32768, 262144, 1048576)
PREDICTED = tuple(C_FILES)

_COST_NOTE = (
    "Its value is checked by the grader after you hand in; the feedback then names a (p, n) where it differs."
)


def _cost(name):
    return Cell((name,), partial(costs.form_cases, name=name), _COST_NOTE)


def _c(algorithm):
    return c_file_cell(
        C_FILES[algorithm], lambda: ccode.visible_bcast(C_FILES[algorithm], algorithm, VISIBLE_RUNS)
    )


def k_simulated(k_opt, sweep):
    """The student's k* against the segment size that minimises the simulated time on THIN at
    the largest P of the sweep (α and β: the means over the pairs of ranks of that run)."""
    p = SWEEP_P[-1]
    ab = routes.alpha_beta("orfeo-thin", p).iloc[0]
    return segments.k_simulated_case(
        k_opt, sweep, "orfeo-thin", p, SWEEP_BYTES, ab["alpha_us"], ab["beta_us_per_byte"]
    )


def _k_visible(k_opt, sweep):
    out = segments.k_form_cases(k_opt)
    return out + [k_simulated(k_opt, sweep)] if all(c.passed for c in out) else out


def _best_visible(best_seg, sweep):
    return segments.best_segment_cases(best_seg, sweep, SWEEP_PLATFORMS, SWEEP_P)


CELLS = {
    "cost_linear": _cost("cost_linear"),
    "cost_chain": _cost("cost_chain"),
    "cost_pipeline": _cost("cost_pipeline"),
    "cost_binomial": _cost("cost_binomial"),
    "cost_scatter_allgather": _cost("cost_scatter_allgather"),
    **{f"{a}_correct": _c(a) for a in C_FILES},
    "best_seg_check": Cell(("best_seg", "sweep"), _best_visible),
    "k_opt_check": Cell(
        ("k_opt", "sweep"),
        _k_visible,
        "The grader also checks k* against its own derivation after you hand in.",
    ),
    "prediction_check": Cell(
        ("prediction", "made_at", "sim"),
        partial(prediction.prediction_cases, algorithms=PREDICTED, nprocs=P_MAP, sizes=SIZES_MAP),
    ),
}
