"""mpilab.measure.collbench: the registry comes from the build's registry.json, read once per build.

(collbench's own command line and output are tested in tests/test_c_reference.py, which also
checks that registry.json is what ``collbench --list --json`` prints.)
"""

import json
import os

import pytest

from mpilab.core import paths
from mpilab.core.errors import ToolMissing, UsageError
from mpilab.measure import collbench


@pytest.fixture
def build(tmp_path, monkeypatch):
    """A build folder with a collbench that cannot run (not executable, not a program): whatever
    the registry says must come from registry.json."""
    prog = tmp_path / "build" / "openmpi" / "collbench"
    prog.parent.mkdir(parents=True)
    prog.write_text("not a program\n")
    monkeypatch.setattr(paths, "collbench_path", lambda flavour: prog)
    return prog.parent


def write_registry(build, names, mtime_ns):
    path = build / "registry.json"
    path.write_text(json.dumps({"collective": "allgather", "algorithms": [{"name": n} for n in names]}))
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_the_registry_is_read_from_registry_json_without_a_launch(build):
    write_registry(build, ["ring", "mine"], 10**18)
    assert collbench.registry("openmpi") == [{"name": "ring"}, {"name": "mine"}]
    assert collbench.algorithm_names("openmpi") == ["ring", "mine", "native"]
    assert collbench.registry("openmpi", "bcast") == []  # the others run native only


def test_it_is_read_once_per_build(build, monkeypatch):
    write_registry(build, ["ring"], 10**18)
    reads, read_text = [], collbench.Path.read_text
    monkeypatch.setattr(collbench.Path, "read_text", lambda self: reads.append(self) or read_text(self))
    collbench._read_registry.cache_clear()
    for _ in range(5):
        collbench.registry("openmpi")
    assert len(reads) == 1
    write_registry(build, ["ring", "bruck"], 2 * 10**18)  # a rebuild: read again
    collbench.registry("openmpi")
    assert len(reads) == 2


def test_a_rebuild_is_seen(build):
    write_registry(build, ["ring"], 10**18)
    assert collbench.algorithm_names("openmpi") == ["ring", "native"]
    write_registry(build, ["ring", "bruck"], 2 * 10**18)
    assert collbench.algorithm_names("openmpi") == ["ring", "bruck", "native"]


def test_a_build_without_registry_json_says_how_to_build_it(build):
    with pytest.raises(
        ToolMissing, match=r"registry.json is not built; run: make -C c_reference FLAVOUR=openmpi"
    ):
        collbench.registry("openmpi")


def test_an_unknown_collective_names_the_valid_ones(build):
    write_registry(build, ["ring"], 10**18)
    with pytest.raises(UsageError, match=r"unknown collective 'gather'; valid: allgather"):
        collbench.registry("openmpi", "gather")
