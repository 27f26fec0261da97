"""environment.yml (conda) asks for the same Python packages, at the same minimum versions, as
pyproject.toml (pip). conda itself is not run here (it is not on the test machines)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    out = {}
    for r in reqs:
        if ";" in r:  # environment markers (tomli on old Pythons) do not concern conda
            continue
        name, spec = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", r).groups()
        out[name.lower()] = spec.replace(" ", "")
    return out


def _conda():
    out = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^\s+-\s+([A-Za-z0-9_.-]+)\s*([<>=!][^#\s]*)?", line)
        if m:
            out[m.group(1).lower()] = m.group(2) or ""
    return out


def test_conda_environment_matches_pyproject():
    conda = _conda()
    for name, spec in _requirements().items():
        assert name in conda, f"{name} is in pyproject.toml but not in environment.yml"
        assert conda[name] == spec, f"{name}: environment.yml says {conda[name]!r}, pyproject {spec!r}"
