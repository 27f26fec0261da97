"""The library-algorithm table: ids match the installed libraries, settings, clear errors."""

import re
import shutil
import subprocess

import pytest

from mpilab.core.errors import UsageError
from mpilab.core.vocabulary import COLLECTIVES, FLAVOURS
from mpilab.measure import libalgs


def test_default_forces_nothing():
    for flavour in FLAVOURS:
        s = libalgs.settings(flavour, "bcast", "default")
        assert not s.forcing and not s.env and not s.args


def test_openmpi_needs_dynamic_rules_and_id():
    s = libalgs.settings("openmpi", "bcast", "chain")
    assert s.env == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_bcast_algorithm": "2"}
    s = libalgs.settings("openmpi", "reduce", "pipeline")
    assert s.mca["coll_tuned_reduce_algorithm"] == "3"
    assert s.mca["coll_tuned_reduce_algorithm_segmentsize"] == "8192"


def test_mpich_sets_fallback_error():
    s = libalgs.settings("mpich", "allgather", "lib:ring")
    assert s.env == {
        "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM": "ring",
        "MPIR_CVAR_DEVICE_COLLECTIVES": "none",
        "MPIR_CVAR_COLLECTIVE_FALLBACK": "error",
    }


def test_smpi_cfg():
    assert libalgs.settings("smpi", "bcast", "basic_linear").args == ["--cfg=smpi/bcast:flattree"]


def test_not_available_message_names_alternatives():
    with pytest.raises(
        UsageError, match=r"'chain' is not available on mpich \(available on: openmpi, smpi\)"
    ) as e:
        libalgs.settings("mpich", "bcast", "chain")
    assert "binomial" in str(e.value)


@pytest.mark.parametrize(
    "args,bad",
    [
        (("ompi", "bcast", "chain"), "flavour 'ompi'"),
        (("smpi", "gather", "chain"), "collective 'gather'"),
        (("smpi", "bcast", "chian"), "algorithm 'chian'"),
    ],
)
def test_unknown_names(args, bad):
    with pytest.raises(UsageError, match=bad):
        libalgs.settings(*args)


@pytest.mark.skipif(not shutil.which("ompi_info"), reason="Open MPI absent")
def test_openmpi_ids_match_ompi_info():
    out = subprocess.run(
        ["ompi_info", "--param", "coll", "tuned", "--level", "9"], capture_output=True, text=True, check=True
    ).stdout
    for coll, algs in libalgs.TABLE.items():
        m = re.search(rf'"coll_tuned_{coll}_algorithm" .*?Valid values: ([^\n]*)', out, re.S)
        assert m, coll
        ids = dict((int(i), n) for i, n in re.findall(r'(\d+):"([^"]+)"', m.group(1)))
        for a in algs.values():
            if a.ompi_id not in (None, 0):
                lib = ids[a.ompi_id].replace("-", "_")
                name = a.name.removeprefix(libalgs.PREFIX)
                assert lib == name or (lib, name) in {("linear", "basic_linear")}, (coll, a.name, lib)


def test_library_names_never_collide_with_the_kits(built_flavour):
    """A library algorithm named like one of the kit's C algorithms (collbench's registry) of
    the same collective is spelled lib:NAME, so a results row says which code ran."""
    from mpilab.measure import collbench

    built_flavour("openmpi")
    for coll in COLLECTIVES:
        kit = set(collbench.algorithm_names("openmpi", coll))
        assert not kit & set(libalgs.names(coll)), coll
        for name in kit - {"native"}:
            if libalgs.PREFIX + name in libalgs.names(coll):
                with pytest.raises(UsageError, match=f"the library's is 'lib:{name}'"):
                    libalgs.lookup(coll, name)
    assert {"ring", "bruck"} <= set(collbench.algorithm_names("openmpi", "allgather"))
    assert libalgs.lookup("allgather", "lib:ring").ompi_id == 4
    assert libalgs.canonical("bcast", "lib:pipeline") == "pipeline"
    assert libalgs.canonical("allgather", "lib:ring") == "lib:ring"


def _cli(*args):
    import sys

    return subprocess.run(
        [sys.executable, "-m", "mpilab.cli", "libalgs", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_lists_and_shows():
    r = _cli("--coll", "bcast", "--flavour", "smpi")
    assert (
        r.returncode == 0
        and "flattree" in r.stdout
        and "kit:ompi_chain" in r.stdout
        and "knomial " not in r.stdout
    )
    r = _cli("--flavour", "mpich", "--show", "allgather", "lib:ring")
    assert "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM=ring" in r.stdout
    r = _cli("--flavour", "mpich", "--show", "bcast", "chain")
    assert r.returncode == 2 and "not available on mpich" in r.stderr
    r = _cli("--help")
    assert r.returncode == 0 and "lib:ring" in r.stdout
    r = _cli("--coll", "allgather")
    assert "lib:ring" in r.stdout and "lib:bruck" in r.stdout and "# lib:NAME" in r.stdout
    r = _cli("--flavour", "openmpi", "--show", "allgather", "ring")
    assert r.returncode == 2 and "the library's is 'lib:ring'" in r.stderr
    r = _cli("--flavour", "openmpi", "--show", "allgather", "lib:ring")
    assert "OMPI_MCA_coll_tuned_allgather_algorithm=4" in r.stdout
