"""The ground floor: errors, paths, the results table, the MPI vocabulary, the environment probe."""
