"""Grading: the sandbox for untrusted code, the checks, nbgrader's execute step, LMS collection."""
