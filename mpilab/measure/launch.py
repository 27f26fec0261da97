"""One interface to start an MPI program: local Open MPI, MPICH (hydra), SimGrid's smpirun,
SLURM's srun, and Apptainer's hybrid model (``<launcher> apptainer exec IMAGE prog``).

>>> cmd = get_launcher("openmpi").command("./collbench", ["-m", "1K"], 2)
>>> cmd.argv[0]
'mpirun.openmpi'
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from mpilab.simulate import platforms
from mpilab.core.errors import LaunchError, one_of, ToolMissing, UsageError
from mpilab.core.vocabulary import (COMPILERS, LAUNCHERS, MAPPINGS, MPICH_PLACEMENT, OPENMPI_BIND,
    OPENMPI_ROOT_ENV, REAL_FLAVOURS, SRUN_CPU_BIND, SRUN_DISTRIBUTION, SRUN_MPI, SRUN_MPI_PLUGINS)



#: Environment for Open MPI inside a container (FACTS.md, "Apptainer and MPI").
CONTAINER_ENV = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


@dataclass
class Command:
    """A command line and the extra environment it needs (on top of ``os.environ``)."""

    argv: list
    env: dict = field(default_factory=dict)

    def __str__(self):
        pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (pre + " " if pre else "") + shlex.join(str(a) for a in self.argv)


def _check_nprocs(nprocs):
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise UsageError(f"bad number of processes {nprocs!r}; valid: an integer >= 1")


def _check_mapping(mapping):
    if mapping not in MAPPINGS:
        raise one_of("mapping", mapping, MAPPINGS)


def _tail(text, lines=15):
    text = text or ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_group(argv, env, timeout, cwd=None, shown=None):
    """Run ``argv`` in its own process group; kill the whole group on time-out or interrupt.

    Returns
    -------
    (subprocess.Popen, str, str)
        The finished process (any exit status) and its standard output and error.

    Raises
    ------
    LaunchError
        When ``timeout`` seconds pass; the message names the command (``shown``, default the
        argv) and the tail of its standard error.
    """
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as exc:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            shown = shown if shown is not None else " ".join(map(str, argv))
            raise LaunchError(f"timed out after {timeout} s: {shown}\nstderr tail:\n{_tail(err)}") from None
        raise
    return proc, out, err


class Launcher:
    """Base class: subclasses build the argv in :meth:`command`; :meth:`run` runs it."""

    name = "?"
    flavour = None
    platform = "local"

    def command(self, program, args=(), nprocs=1, mapping="core"):
        """Build the command that runs ``program args`` on ``nprocs`` processes.

        Parameters
        ----------
        program : str or Path
        args : sequence of str
        nprocs : int
        mapping : {"core", "socket", "node"}

        Returns
        -------
        Command
        """
        raise NotImplementedError

    def run(self, program, args=(), nprocs=1, mapping="core", timeout=None, cwd=None):
        """Run the program; return the :class:`subprocess.CompletedProcess` (text output).

        Raises
        ------
        LaunchError
            On a non-zero exit or when ``timeout`` seconds pass (the whole process group is
            killed); the message has the command, the exit code and the tail of stderr.
        ToolMissing
            When the launcher program is not installed.
        """
        cmd = self.command(program, args, nprocs, mapping)
        exe = cmd.argv[0]
        if shutil.which(exe) is None:
            raise ToolMissing(f"{exe!r} not found on PATH; `mpilab doctor` says how to install it")
        env = dict(os.environ)
        env.update(cmd.env)
        try:
            proc, out, err = run_group(cmd.argv, env, timeout, cwd=cwd, shown=cmd)
        finally:
            self._cleanup()
        if proc.returncode != 0:
            raise LaunchError(f"exit code {proc.returncode}: {cmd}\nstderr tail:\n{_tail(err)}")
        return subprocess.CompletedProcess(cmd.argv, proc.returncode, out, err)

    def _cleanup(self):
        pass

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} flavour={self.flavour} platform={self.platform}>"


class OpenMPILauncher(Launcher):
    """``mpirun.openmpi``; root and oversubscription handled for you."""

    name = "mpirun"
    flavour = "openmpi"

    def __init__(self, mpirun="mpirun.openmpi", cores=None, extra_args=(), bind=True):
        self.mpirun = mpirun
        self.cores = cores or os.cpu_count() or 1
        self.extra_args = list(extra_args)
        self.bind = bind

    def command(self, program, args=(), nprocs=1, mapping="core"):
        _check_nprocs(nprocs)
        _check_mapping(mapping)
        argv = [self.mpirun, "-n", str(nprocs)]
        over = nprocs > self.cores
        if over:
            argv.append("--oversubscribe")
        argv += ["--map-by", mapping]
        # binding ranks to cores makes no sense when there are more ranks than cores
        argv += ["--bind-to", "none" if over or not self.bind else OPENMPI_BIND[mapping]]
        argv += self.extra_args + [str(program), *map(str, args)]
        env = {}
        if os.geteuid() == 0:
            env = dict(OPENMPI_ROOT_ENV)
        return Command(argv, env)


class MPICHLauncher(Launcher):
    """``mpirun.mpich`` (hydra); ``-bind-to``/``-map-by`` for the mapping (node: ``-ppn 1``)."""

    name = "mpirun"
    flavour = "mpich"

    def __init__(self, mpirun="mpirun.mpich", extra_args=(), bind=True):
        self.mpirun = mpirun
        self.extra_args = list(extra_args)
        self.bind = bind

    def command(self, program, args=(), nprocs=1, mapping="core"):
        _check_nprocs(nprocs)
        _check_mapping(mapping)
        argv = [self.mpirun, "-n", str(nprocs)]
        if self.bind:
            argv += MPICH_PLACEMENT[mapping]
        argv += self.extra_args + [str(program), *map(str, args)]
        return Command(argv, {})


class SMPILauncher(Launcher):
    """SimGrid's ``smpirun`` on a platform file, with a hostfile written for the mapping."""

    name = "smpirun"
    flavour = "smpi"

    def __init__(self, platform="orfeo-thin", host_speed="1Gf", coll=None, cfg=(),
                 smpirun="smpirun", workdir=None):
        self.platform_arg = platform
        self.platform = Path(str(platform)).stem if str(platform).endswith(".xml") else str(platform)
        self.host_speed = host_speed
        self.coll = dict(coll or {})
        self.cfg = list(cfg)
        self.smpirun = smpirun
        self.workdir = workdir
        self._tmp = []

    def command(self, program, args=(), nprocs=1, mapping="core"):
        _check_nprocs(nprocs)
        _check_mapping(mapping)
        xml = platforms.platform_file(self.platform_arg)
        workdir = Path(self.workdir) if self.workdir else Path(tempfile.mkdtemp(prefix="mpilab-smpi-"))
        if not self.workdir:
            self._tmp.append(workdir)
        hostfile = platforms.write_hostfile(self.platform_arg, nprocs, mapping,
                                            workdir / f"hosts-{mapping}-{nprocs}.txt")
        argv = [self.smpirun, "-np", str(nprocs), "-platform", str(xml), "-hostfile", str(hostfile),
                f"--cfg=smpi/host-speed:{self.host_speed}",
                "--cfg=smpi/simulate-computation:no",
                "--cfg=smpi/display-timing:no"]
        argv += [f"--cfg=smpi/{c}:{n}" for c, n in sorted(self.coll.items())]
        argv += [c if c.startswith("--cfg=") else f"--cfg={c}" for c in self.cfg]
        argv += [str(program), *map(str, args)]
        return Command(argv, {})

    def _cleanup(self):
        while self._tmp:
            shutil.rmtree(self._tmp.pop(), ignore_errors=True)


class SrunLauncher(Launcher):
    """``srun --mpi=pmix|pmi2 -n N``: inside a SLURM allocation."""

    name = "srun"

    def __init__(self, flavour="openmpi", mpi=None, extra_args=(), platform="slurm"):
        if flavour not in REAL_FLAVOURS:
            raise one_of("flavour for srun", flavour, REAL_FLAVOURS)
        self.flavour = flavour
        self.mpi = mpi or SRUN_MPI[flavour]
        if self.mpi not in SRUN_MPI_PLUGINS:
            raise one_of("srun --mpi plugin", self.mpi, SRUN_MPI_PLUGINS)
        self.extra_args = list(extra_args)
        self.platform = platform

    def command(self, program, args=(), nprocs=1, mapping="core"):
        _check_nprocs(nprocs)
        _check_mapping(mapping)
        argv = ["srun", f"--mpi={self.mpi}", "-n", str(nprocs),
                f"--distribution={SRUN_DISTRIBUTION[mapping]}", f"--cpu-bind={SRUN_CPU_BIND[mapping]}"]
        argv += self.extra_args + [str(program), *map(str, args)]
        return Command(argv, {})


# ---- the hybrid model's version rule --------------------------------------------------------

_OMPI_RE = re.compile(r"\((?:Open MPI|OpenRTE)\)\s+v?(\d+)\.(\d+)(?:\.(\d+))?")


def ompi_version(text):
    """Parse an Open MPI version from ``mpirun --version`` output or a label value.

    Returns
    -------
    tuple of int or None
        ``(major, minor, patch)``; None if ``text`` is not an Open MPI version.
    """
    m = _OMPI_RE.search(text) or re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?\s*", text)
    if not m:
        return None
    return tuple(int(g or 0) for g in m.groups())


def host_image_mismatch(host_text, image_text):
    """Say why a host Open MPI cannot launch an image's Open MPI (hybrid model), or None.

    Parameters
    ----------
    host_text : str
        The host's ``mpirun --version`` output.
    image_text : str
        The image's ``org.mpilab.mpi.version`` label (e.g. ``4.1.4``) or its ``mpirun --version``.

    Returns
    -------
    str or None
        A warning naming both versions when the major versions differ.
    """
    host, image = ompi_version(host_text), ompi_version(image_text)
    if host is None or image is None:
        return None
    if host[0] != image[0]:
        return (f"host Open MPI {'.'.join(map(str, host))} and the image's Open MPI "
                f"{'.'.join(map(str, image))} differ in major version; the hybrid model "
                "(mpirun/srun outside, MPI inside) needs the same major version. Load a matching "
                "module on the host or use the bind model (containers/README.md).")
    return None


def warn_if_mismatch(image_text, mpirun="mpirun"):
    """Warn (``UserWarning``) before a launch if the host Open MPI's major version differs.

    Returns
    -------
    str or None
        The warning text, if any.
    """
    exe = shutil.which(mpirun)
    if exe is None:
        return None
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    host = proc.stdout + proc.stderr
    msg = host_image_mismatch(host, image_text)
    if msg:
        warnings.warn(msg, stacklevel=2)
    return msg


class ApptainerLauncher(Launcher):
    """The hybrid model: ``<inner launcher argv> apptainer exec [--bind ...] IMAGE program args``.

    Before the first :meth:`run` it compares the image's Open MPI (its label
    ``org.mpilab.mpi.version``, read with ``apptainer inspect --labels``) with the host's
    (``mpirun --version``) and warns, naming both, when the major versions differ: the hybrid
    model needs the same major version inside and outside (containers/README.md).
    ``check_mpi=False`` skips this.
    """

    name = "apptainer"

    def __init__(self, image, inner="openmpi", binds=(), apptainer="apptainer", check_mpi=True,
                 **inner_opts):
        if not image:
            raise UsageError("apptainer launcher needs image=PATH.sif")
        self.image = str(image)
        self.inner = inner if isinstance(inner, Launcher) else get_launcher(inner, **inner_opts)
        if isinstance(self.inner, (SMPILauncher, ApptainerLauncher)):
            raise UsageError(f"apptainer cannot wrap launcher {self.inner.name!r}; "
                             "valid: openmpi, mpich, srun")
        self.flavour = self.inner.flavour
        self.platform = self.inner.platform
        self.binds = list(binds)
        self.apptainer = apptainer
        self.check_mpi = check_mpi
        self._checked = False

    def image_labels(self):
        """The image's labels, from ``apptainer inspect --labels IMAGE`` (``key: value`` lines).

        Returns
        -------
        dict
            Empty when ``apptainer`` is missing or cannot read the image.
        """
        exe = shutil.which(self.apptainer)
        if exe is None:
            return {}
        try:
            proc = subprocess.run([exe, "inspect", "--labels", self.image], capture_output=True,
                                  text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return {}
        if proc.returncode != 0:
            return {}
        labels = {}
        for line in proc.stdout.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip():
                labels[key.strip()] = value.strip()
        return labels

    def host_mpi_warning(self):
        """Warn (``UserWarning``) if the host's and the image's Open MPI major versions differ.

        The host's version is that of the inner launcher's ``mpirun`` (``mpirun`` on PATH when
        the inner launcher is ``srun``). Images of the MPICH flavour are not checked.

        Returns
        -------
        str or None
            The warning, naming both versions, or None when they agree or one is unknown.
        """
        if self.inner.flavour != "openmpi":
            return None
        labels = self.image_labels()
        image_version = labels.get("org.mpilab.mpi.version")
        if not image_version or labels.get("org.mpilab.flavour", "openmpi") != "openmpi":
            return None
        mpirun = shutil.which(getattr(self.inner, "mpirun", "mpirun"))
        if mpirun is None:
            return None
        proc = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60)
        msg = host_image_mismatch(proc.stdout + proc.stderr, image_version)
        if msg:
            msg = f"{self.image}: {msg}"
            warnings.warn(msg, UserWarning, stacklevel=3)
        return msg

    def run(self, program, args=(), nprocs=1, mapping="core", timeout=None, cwd=None):
        if self.check_mpi and not self._checked:
            self._checked = True
            self.host_mpi_warning()
        return super().run(program, args, nprocs, mapping, timeout, cwd)

    def command(self, program, args=(), nprocs=1, mapping="core"):
        inner_args = [self.apptainer, "exec"]
        for b in self.binds:
            inner_args += ["--bind", str(b)]
        for k, v in sorted(CONTAINER_ENV.items()):
            inner_args += ["--env", f"{k}={v}"]
        inner_args += [self.image, str(program), *map(str, args)]
        inner = self.inner.command(inner_args[0], inner_args[1:], nprocs, mapping)
        env = dict(inner.env)
        env.update(CONTAINER_ENV)
        return Command(inner.argv, env)


def compile_c(sources, flavour="openmpi", output=None, flags=("-O2", "-std=c11"), timeout=120):
    """Compile C files into an MPI program for one flavour.

    Parameters
    ----------
    sources : str, Path or sequence of them
        The C files.
    flavour : {"openmpi", "mpich", "smpi"}
        Which MPI to compile for (:data:`COMPILERS`).
    output : str or Path, optional
        The executable (default: the first source's name with ``-<flavour>``, next to it).
    flags : sequence of str
        Compiler flags.
    timeout : float
        Seconds before the compiler is stopped.

    Returns
    -------
    Path
        The executable.

    Raises
    ------
    ToolMissing
        The flavour's compiler is not installed.
    LaunchError
        A source is missing or the compiler failed (its messages are in the error).

    Examples
    --------
    >>> exe = compile_c("hello.c", "smpi")                       # doctest: +SKIP
    >>> get_launcher("smpi").run(exe, nprocs=8).stdout           # doctest: +SKIP
    """
    if flavour not in COMPILERS:
        raise one_of("flavour", flavour, COMPILERS)
    sources = [Path(sources)] if isinstance(sources, (str, os.PathLike)) else [Path(s) for s in sources]
    if not sources:
        raise UsageError("compile_c needs at least one C file")
    for src in sources:
        if not src.is_file():
            raise LaunchError(f"C file {str(src)!r} not found (working directory {os.getcwd()})")
    cc = COMPILERS[flavour]
    if shutil.which(cc) is None:
        raise ToolMissing(f"{cc!r} not found on PATH; `mpilab doctor` says how to install it")
    output = Path(output) if output else sources[0].with_name(f"{sources[0].stem}-{flavour}")
    argv = [cc, *flags, *map(str, sources), "-o", str(output)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"the compiler took more than {timeout} s: {' '.join(argv)}") from None
    if proc.returncode != 0:
        raise LaunchError(f"compiling failed: {' '.join(argv)}\n{_tail(proc.stderr or proc.stdout, 30)}")
    return output.resolve()


_CLASSES = {"openmpi": OpenMPILauncher, "mpich": MPICHLauncher, "smpi": SMPILauncher,
            "srun": SrunLauncher, "apptainer": ApptainerLauncher}


def get_launcher(name, **opts):
    """Return the launcher called ``name`` (one of :data:`LAUNCHERS`), built with ``opts``.

    Parameters
    ----------
    name : {"openmpi", "mpich", "smpi", "srun", "apptainer"}
    **opts
        Passed to the launcher class, e.g. ``platform="orfeo-thin"`` for SMPI,
        ``image="kit.sif"`` for Apptainer.
    """
    if name not in _CLASSES:
        raise one_of("launcher", name, LAUNCHERS)
    return _CLASSES[name](**opts)
