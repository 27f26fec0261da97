"""tests/conftest.py: the launches that tell what a test needs (``make test-quick`` fails a test
that launches one of them without its marker)."""

from conftest import launched

from mpilab.core import paths


def test_the_programs_that_need_a_marker_are_found_in_any_command_line():
    assert launched(["mpirun.openmpi", "-n", "2", "a.out"]) == {"mpirun": "mpi"}
    assert launched(["sudo", "-u", "x", "sh", "-c", "smpirun -np 4 ./p && srun hostname"]) == {
        "smpirun": "mpi",
        "srun": "slurm",
    }
    assert launched("/usr/bin/apptainer exec img.sif true") == {"apptainer": "image"}
    assert launched(["python", "-m", "nbgrader", "autograde", "lab2"]) == {"nbgrader": "nbgrader"}


def test_a_program_of_the_c_build_is_an_mpi_launch():
    collbench = paths.collbench_path("openmpi")
    assert launched([collbench, "--list", "--json"]) == {"collbench": "mpi"}
    assert launched([str(paths.build_dir("smpi") / "check_allgather")]) == {"check_allgather": "mpi"}


def test_plain_python_and_shell_are_not_launches():
    assert launched(["python", "-c", "print('mpirunner')"]) == {}
    assert launched(["sh", "-c", "echo collbench"]) == {}
    assert launched(["git", "status"]) == {}
