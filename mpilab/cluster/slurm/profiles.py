"""SLURM cluster profiles: one small TOML file per cluster under ``slurm_templates/profiles/``
(its partitions, the module lines of its MPI flavours, the ``srun --mpi`` plugin of each), and
SLURM's time limits. Everything a job asks for is checked against its partition here
(:func:`check_resources`) before anything is rendered or submitted.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from mpilab.core.errors import ParseError, UsageError, one_of
from mpilab.core.paths import repo_root
from mpilab.core.vocabulary import FLAVOURS, SRUN_MPI_PLUGINS


def templates_dir():
    """``slurm_templates/templates/`` of the checkout."""
    return repo_root() / "slurm_templates" / "templates"


def profiles_dir():
    """``slurm_templates/profiles/`` of the checkout (one TOML file per cluster)."""
    return repo_root() / "slurm_templates" / "profiles"


# --------------------------------------------------------------------------- time limits

_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time(text):
    """Parse a SLURM time limit into seconds.

    Accepts SLURM's formats: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.

    Parameters
    ----------
    text : str or int
        The time limit; an int is minutes, as for ``sbatch --time``.

    Returns
    -------
    int
        Seconds.

    Raises
    ------
    UsageError
        If ``text`` is not in one of those formats.
    """
    if isinstance(text, int):
        return text * 60
    s = str(text).strip()
    m = _TIME_RE.match(s)
    if not m:
        raise UsageError(f"bad time limit {text!r}; valid forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S")
    days, a, b, c = m.groups()
    if days is None:
        if b is None:
            secs = int(a) * 60  # M
        elif c is None:
            secs = int(a) * 60 + int(b)  # M:S
        else:
            secs = int(a) * 3600 + int(b) * 60 + int(c)  # H:M:S
    else:
        secs = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    return secs


def format_time(seconds):
    """Format seconds as SLURM's ``[D-]HH:MM:SS``."""
    days, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{h:02d}:{m:02d}:{s:02d}"


# --------------------------------------------------------------------------- profiles


@dataclass
class Partition:
    """One partition of a cluster profile."""

    name: str
    nodes: int
    sockets: int
    cores_per_socket: int
    memory: str
    max_time: int  # seconds

    @property
    def cores_per_node(self):
        return self.sockets * self.cores_per_socket


@dataclass
class Profile:
    """A cluster: its partitions and, per MPI flavour, module lines and ``srun --mpi`` plugin."""

    name: str
    path: Path
    description: str = ""
    login_host: str = ""
    account: str = ""
    qos: str = ""
    mpi: dict = field(default_factory=dict)
    partitions: dict = field(default_factory=dict)

    def partition(self, name):
        """The partition called ``name``; a UsageError listing the valid ones otherwise."""
        if name not in self.partitions:
            raise one_of(f"partition of profile {self.name!r}", name, self.partitions)
        return self.partitions[name]

    def mpi_for(self, flavour):
        """The ``[mpi.<flavour>]`` table; it must carry a ``modules`` line (possibly empty)."""
        with_modules = sorted(f for f, t in self.mpi.items() if "modules" in t)
        if flavour not in self.mpi or "modules" not in self.mpi[flavour]:
            raise UsageError(
                f"profile {self.name!r} ({self.path}) has no module line for flavour {flavour!r}: "
                f'add [mpi.{flavour}] with modules = ["..."] (an empty list when the MPI is on '
                f"PATH without modules); flavours with one: {', '.join(with_modules) or 'none'}"
            )
        return self.mpi[flavour]


def list_profiles():
    """Names of the shipped profiles (the stems of ``slurm_templates/profiles/*.toml``)."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def load_profile(name):
    """Load and check a profile by name (a shipped one) or by path to a TOML file.

    Parameters
    ----------
    name : str or path
        ``"orfeo"``, ``"local"``, ... or a path ending in ``.toml``.

    Returns
    -------
    Profile

    Raises
    ------
    UsageError
        Unknown profile (listing the valid ones) or a malformed file (naming file and field).
    """
    path = Path(name)
    if path.suffix != ".toml":
        path = profiles_dir() / f"{name}.toml"
        if not path.is_file():
            raise one_of("SLURM profile", str(name), list_profiles())
    elif not path.is_file():
        raise UsageError(f"SLURM profile file {str(path)!r} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ParseError(f"{path}: {e}") from None
    parts = {}
    for pname, p in data.get("partitions", {}).items():
        try:
            parts[pname] = Partition(
                pname,
                int(p["nodes"]),
                int(p["sockets"]),
                int(p["cores_per_socket"]),
                str(p.get("memory", "")),
                parse_time(p["max_time"]),
            )
        except KeyError as e:
            raise ParseError(
                f"{path}: partition {pname!r} lacks {e.args[0]!r}; needs nodes, "
                "sockets, cores_per_socket, max_time (memory optional)"
            ) from None
    if not parts:
        raise ParseError(f"{path}: no [partitions.<NAME>] table")
    for flavour, table in data.get("mpi", {}).items():
        if flavour not in FLAVOURS:
            raise ParseError(f"{path}: [mpi.{flavour}]: unknown flavour; valid: {', '.join(FLAVOURS)}")
        plugin = table.get("srun_mpi", "pmix")
        if plugin not in SRUN_MPI_PLUGINS:
            raise ParseError(
                f"{path}: [mpi.{flavour}] srun_mpi = {plugin!r}; valid: {', '.join(SRUN_MPI_PLUGINS)}"
            )
    return Profile(
        name=data.get("name", path.stem),
        path=path,
        description=data.get("description", ""),
        login_host=data.get("login_host", ""),
        account=data.get("account", ""),
        qos=data.get("qos", ""),
        mpi=data.get("mpi", {}),
        partitions=parts,
    )


def check_resources(profile, partition, nodes, ntasks, time_limit, ntasks_per_node=None):
    """Check a request against a partition before anything is submitted.

    Parameters
    ----------
    profile : Profile
    partition : Partition
    nodes : int
        Nodes requested.
    ntasks : int
        Tasks (MPI processes) the job needs at most.
    time_limit : str
        The job's ``--time``.
    ntasks_per_node : int, optional
        Tasks per node, when the template fixes it.

    Returns
    -------
    int
        The time limit in seconds.

    Raises
    ------
    UsageError
        Naming the bad value and what the partition allows.
    """
    where = f"partition {partition.name!r} of profile {profile.name!r}"
    if nodes < 1 or nodes > partition.nodes:
        raise UsageError(f"--nodes {nodes} is not available in {where}: valid 1..{partition.nodes}")
    if ntasks < 1:
        raise UsageError(f"{ntasks} tasks requested; need at least 1")
    have = nodes * partition.cores_per_node
    if ntasks > have:
        raise UsageError(
            f"{ntasks} tasks need more cores than the {have} of {nodes} node(s) of {where} "
            f"({partition.cores_per_node} cores per node, {partition.nodes} nodes): ask for "
            f"--nodes {-(-ntasks // partition.cores_per_node)} or fewer processes"
        )
    if ntasks_per_node is not None and ntasks_per_node > partition.cores_per_node:
        raise UsageError(
            f"--ntasks-per-node {ntasks_per_node} is more than the "
            f"{partition.cores_per_node} cores per node of {where}"
        )
    secs = parse_time(time_limit)
    if secs <= 0:
        raise UsageError(f"time limit {time_limit!r} must be positive")
    if secs > partition.max_time:
        raise UsageError(
            f"time limit {time_limit!r} ({format_time(secs)}) is above the "
            f"{format_time(partition.max_time)} limit of {where}"
        )
    return secs
