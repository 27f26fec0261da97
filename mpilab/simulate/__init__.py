"""Simulated clusters: SimGrid platforms, each parameter with its source, and their calibration."""
