"""The grader's launcher: a :class:`mpilab.measure.launch.Launcher` whose runs go through the sandbox.

A student's program that the grader or a lab times (lab 2's allgathers, lab 6's broadcasts) is
launched like every measuring program of the kit, ``mpilab.measure.driver.run(launcher, ...)``
then :func:`mpilab.core.results.rows`, with a :class:`SandboxLauncher`: the command is the
flavour's own launcher's (:func:`mpilab.measure.launch.get_launcher`: Open MPI's placement and
root settings, SMPI's platform and hostfile), and it runs in the program's scratch directory
under :func:`mpilab.grade.sandbox.run`'s limits instead of on the host. One road: the same
parser and the same row builder as a sweep, so a graded plot's rows carry provenance.
"""

import os
import subprocess

from mpilab.core.errors import LaunchError
from mpilab.grade import sandbox
from mpilab.measure import launch


class SandboxLauncher(launch.Launcher):
    """Run a program of the scratch directory ``work`` through the sandbox.

    Parameters
    ----------
    flavour : {"openmpi", "mpich", "smpi"}
    work : str
        The scratch directory that holds the program (it is the run's working directory; the
        programs are named relative to it).
    memory_mb : int
        Address-space limit of each process (of smpirun's one process under SMPI), MiB.
    env : dict, optional
        Environment of every run, on top of the launcher's own.
    **options
        For the inner launcher: ``platform``, ``cfg`` (SMPI).
    """

    def __init__(self, flavour, work, memory_mb, env=None, **options):
        if flavour == "smpi":
            options.setdefault("workdir", work)
        self.inner = launch.get_launcher(flavour, **options)
        self.work, self.memory_mb, self.env = work, memory_mb, dict(env or {})
        self.name, self.flavour, self.platform = self.inner.name, self.inner.flavour, self.inner.platform

    def command(self, program, args=(), nprocs=1, mapping="core"):
        """The inner launcher's command for ``program`` of the scratch directory."""
        path = os.path.join(self.work, os.path.basename(os.fspath(program)))
        return self.inner.command(path, args, nprocs, mapping)

    def run(self, program, args=(), nprocs=1, mapping="core", timeout=None, cwd=None, env=None, check=True):
        """Run under the sandbox (its own limits, and ``timeout`` seconds of wall time, 60 by
        default); the :class:`subprocess.CompletedProcess` of the run.

        Raises
        ------
        LaunchError
            With ``check``, when the run failed: a crash, a limit, the time limit, an error exit
            (what :meth:`mpilab.grade.outcome.SandboxResult.failure` says).
        """
        cmd = self.command(program, args, nprocs, mapping)
        res = sandbox.run(
            cmd.argv,
            cwd=cwd or self.work,
            timeout=timeout or 60.0,
            env={**self.env, **cmd.env, **(env or {})},
            memory_mb=self.memory_mb,
        )
        if check and not res.ok:
            raise LaunchError(f"{os.path.basename(os.fspath(program))} at P = {nprocs}: {res.failure()}")
        return subprocess.CompletedProcess(res.argv, res.returncode, res.stdout, res.stderr)
