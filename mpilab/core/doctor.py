"""``mpilab doctor``: which MPI flavours, simulators, schedulers and tools are here, their
versions, whether c_reference is built, and how to get what is missing."""

import os
import re
import shutil
import sys

from mpilab.core import paths, process
from mpilab.core.errors import ToolMissing
from mpilab.core.vocabulary import FLAVOURS

#: name -> (programs that must all exist, version command, how to get it)
TOOLS = {
    "openmpi": (
        ("mpicc.openmpi", "mpirun.openmpi"),
        ["mpirun.openmpi", "--version"],
        "apt-get install openmpi-bin libopenmpi-dev",
    ),
    "mpich": (
        ("mpicc.mpich", "mpirun.mpich"),
        ["mpirun.mpich", "--version"],
        "apt-get install mpich libmpich-dev",
    ),
    "smpi": (("smpicc", "smpirun"), ["smpirun", "--version"], "apt-get install libsimgrid-dev simgrid"),
    "slurm": (("sbatch", "srun"), ["srun", "--version"], "apt-get install slurm-wlm munge"),
    "apptainer": (
        ("apptainer",),
        ["apptainer", "--version"],
        "not packaged for Debian bookworm: install the release .deb from "
        "github.com/apptainer/apptainer/releases",
    ),
    "jupyter": (("jupyter",), ["jupyter", "lab", "--version"], "pip install -e '.[lab]'"),
    "chromium": (("chromium",), ["chromium", "--version"], "apt-get install chromium"),
}
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[a-z]\d*)?")


def _which(prog):
    """``prog`` on PATH, or next to this Python (a notebook kernel of the kit's .venv is started
    without the .venv's bin/ on its PATH)."""
    return shutil.which(prog) or shutil.which(prog, path=os.path.dirname(sys.executable))


def _version(cmd):
    cmd = [_which(cmd[0]) or cmd[0], *cmd[1:]]
    try:
        p = process.run(cmd, timeout=30)
    except ToolMissing:
        return None
    if p.timed_out:
        return None
    m = _VERSION.search(p.stdout + p.stderr)
    return m.group(0) if m else None


def check():
    """Probe every tool; return a list of dicts (name, present, version, missing, how, built)."""
    report = []
    for name, (progs, vcmd, how) in TOOLS.items():
        missing = [p for p in progs if _which(p) is None]
        item = {
            "name": name,
            "present": not missing,
            "programs": list(progs),
            "missing": missing,
            "version": _version(vcmd) if not missing else None,
            "how": how,
        }
        if name in FLAVOURS:
            built = paths.collbench_path(name).exists()
            item["built"] = built
            item["build_how"] = f"make -C c_reference FLAVOUR={name}"
        report.append(item)
    return report


def format_report(report):
    """The human-readable report, one line per tool plus a hint for each missing thing."""
    lines = []
    for it in report:
        state = (
            f"ok  {it['version'] or '(version unknown)'}"
            if it["present"]
            else f"MISSING {', '.join(it['missing'])}"
        )
        line = f"{it['name']:<10} {state}"
        if "built" in it:
            line += "; c_reference built" if it["built"] else "; c_reference NOT built"
        lines.append(line)
        if not it["present"]:
            lines.append(f"{'':<10} get it: {it['how']}")
        elif it.get("built") is False:
            lines.append(f"{'':<10} build it: {it['build_how']}")
    return "\n".join(lines)
