"""mpilab — a teaching lab kit for MPI collective communication.

The package is the engine behind the ``mpilab`` command, the lab notebooks and
the grader: launchers for real and simulated MPI, sweeps that append to one
results table, plots, cost models and grading checks.
"""

__version__ = "0.1.0"
