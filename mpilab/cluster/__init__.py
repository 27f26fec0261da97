"""Clusters: SLURM profiles, templates and collection; Apptainer images; ipyparallel engines."""
