"""Studies the labs run: the demo, reproduction, algorithm selection, plots, the seeds' numbers."""
