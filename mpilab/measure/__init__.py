"""Measuring: launchers, the C drivers' contract, sweeps, forcing library algorithms, OSU import."""
