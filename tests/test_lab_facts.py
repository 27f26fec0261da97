"""The labs say no false thing that issue 28 found in them, in any form a regenerated notebook,
a rubric or the package's help could bring back.

Each entry is a statement that is false, the source that says why, and a pattern that finds it
(case-insensitive, across line breaks). The texts searched: every lab's source notebook and its
released student version, the rubrics and the guide of the answer key, the README and docs/, the
graders' messages (mpilab/grade/labs/), and the package modules that describe the libraries'
algorithms or the models to students.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (what is false, why, pattern)
FALSE = [
    (
        "a segment size of 0 lets Open MPI choose",
        "0 means no segmentation (coll_tuned_bcast_decision.c's help text, COLL_BASE_COMPUTED_SEGCOUNT)",
        r"segment\s+size\s+of\s+0\s+(lets|means)\s+(open\s+mpi|the\s+library)\s+(choose|decide)"
        r"|0\s*(:|=|means)\s*the\s+library'?s\s+own\s+choice",
    ),
    (
        "Open MPI's default segments are 8 KiB",
        "coll_tuned_bcast_algorithm_segmentsize defaults to 0; 8 KiB is the kit's choice",
        r"open\s+mpi'?s\s+default\s+8\s*ki?b|default\s+8\s*ki?b\s+segments",
    ),
    (
        "a rules file allows no comments",
        "ompi_coll_base_file_getnext_long (coll_base_util.c) skips '#' to the end of the line",
        r"no\s+comments\s+are\s+allowed|would\s+take\s+digits\s+inside\s+a\s+comment",
    ),
    (
        "Open MPI and SimGrid run the same pipeline schedule",
        "SimGrid's ompi_pipeline picks 16/128 KiB segments itself (bcast-ompi-pipeline.cpp)",
        r"open\s+mpi\s+and\s+simgrid\s+both\s+run\s+with\s+the\s+same\s+schedule",
    ),
    (
        "SimGrid overlaps MPI_Ibcast like a network with offload",
        "SMPI's MPI_Ibcast is a flat broadcast with every request started at once (smpi_nbc_impl.cpp)",
        r"as\s+a\s+network\s+with\s+offload\s+would|simgrid\s+moves\s+messages\s+on\s+its\s+own",
    ),
    (
        "scatter + allgather wins for large messages, unqualified",
        "a well-segmented pipelined chain costs nβ + (p-2)α + 2√((p-2)αnβ) → nβ",
        r"scatter\s*\+\s*(ring\s+)?allgather\s+wins\s+for\s+large\s+messages|"
        r"scatter_allgather\s+wins\s+in\s+both\s+at\s+large\s+n",
    ),
    (
        "only eager messages pay a per-message overhead; rendezvous pays none",
        "SMPI charges o_isend to every MPI_Isend; a rendezvous adds an RTS/CTS round trip",
        r"only\s+eager\s+messages\s+pay|from\s+4\s*ki?b\s+on\s+the\s+sender\s+waits\s+for\s+its\s+receiver\s+and\s+pays\s+none",
    ),
    (
        "o is the overlap degree (it is also LogP's overhead)",
        "seed 004's o is a degree of overlap; LogP's and SMPI's o is the per-message overhead",
        r"the\s+\*?overlap\s+degree\*?\s+o\s+of",
    ),
    (
        "THIN's point-to-point order is core < node < socket with the slope doubled across nodes",
        "the kit's THIN gives socket α = node α = 1.81 µs, node β 12 % above socket β",
        r"core\s*<\s*node\s*<\s*socket\s+at\s+small\s+sizes\s+in\s+the\s+simulated|slope\s+doubled\s+across\s+nodes",
    ),
    (
        "ring_deadlock.c sends first",
        "tests/data/grading/ring_deadlock.c receives first with blocking MPI_Recv",
        r"every\s+rank\s+sends\s+first\s+with\s+blocking\s+mpi_send",
    ),
    (
        "seed 000's pipeline was slow because pipelining adds overhead",
        "it was forced with segment size 0: an unsegmented chain of p − 1 hops",
        r"suggesting\s+overheads\s+in\s+setting\s+up\s+and\s+managing\s+the\s+pipeline|"
        r"kit\s+forces\s+it\s+with\s+open\s+mpi'?s\s+default",
    ),
    (
        "Pearson's r over four load levels of one knob",
        "two monotone functions of one knob correlate by construction; seed 003 used 100 runs",
        r"across\s+the\s+rows\s+of\s+`?series`?\s+\(the\s+four\s+network\s+loads",
    ),
    (
        "a [min, max] of a few runs called a 95 % interval",
        "its coverage is 1 - 2^(1-n): 75 % for 3 runs (mpilab.model.stats.order_interval)",
        r"95\s*%\s*ci\)|95\s*%\s+confidence\s+interval\s+\(bootstrap\)",
    ),
    (
        "SMPI sweeps run SimGrid's own pipeline (16 or 128 KiB segments) and reduce chain (P/2 chains)",
        "issue 31: sweeps run the kit's clones kit:ompi_pipeline (8 KiB) and kit:ompi_chain (4 chains)",
        r"simgrid'?s\s+pipeline\s+wins?|simulated\s+one\s+is\s+simgrid'?s|segments\s+simgrid\s+cut|"
        r"simulated\s+reduce\s+`?chain`?\s+is\s+simgrid'?s",
    ),
    (
        "SimGrid chose/cut the segments of the simulated pipeline",
        "issue 31: SMPI runs kit:ompi_pipeline, given the kit's 8 KiB segments (libalgs.segment_size)",
        r"simgrid\s+(cut|sent)\s+(them|the\s+messages)|simgrid\s+chose\s+differently|"
        r"simgrid'?s\s+segment\s+size\b(?!s)|segment\s+size:\s+simgrid'?s",
    ),
]


def _notebook_text(path):
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])


def texts():
    """``{name: text}`` of everything a student or an instructor reads about these facts."""
    out = {}
    for nb in sorted((ROOT / "solutions").glob("lab*/lab*.ipynb")) + sorted(
        (ROOT / "labs").glob("lab*/lab*.ipynb")
    ):
        out[str(nb.relative_to(ROOT))] = _notebook_text(nb)
    for py in sorted((ROOT / "solutions" / "mpilab_key").rglob("*.py")):
        out[str(py.relative_to(ROOT))] = py.read_text()
    for path in (
        [ROOT / "README.md"]
        + sorted((ROOT / "docs").glob("*.md"))
        + sorted((ROOT / "mpilab" / "grade" / "labs").glob("*.py"))
    ):
        out[str(path.relative_to(ROOT))] = path.read_text()
    for rel in (
        "mpilab/model/schedules.py",
        "mpilab/measure/libalgs.py",
        "mpilab/measure/rules.py",
        "mpilab/measure/ompi_fixed.py",
        "mpilab/model/stats.py",
        "mpilab/studies/repro.py",
        "mpilab/cli/sweep.py",
        "mpilab/studies/load.py",
    ):
        out[rel] = (ROOT / rel).read_text()
    return out


def test_every_lab_is_read():
    names = texts()
    for lab in range(7):
        assert f"solutions/lab{lab}/lab{lab}.ipynb" in names and f"labs/lab{lab}/lab{lab}.ipynb" in names
        assert f"mpilab/grade/labs/lab{lab}.py" in names
    assert {"README.md", "docs/CALIBRATION.md", "mpilab/model/schedules.py"} <= set(names)


@pytest.mark.parametrize("false,why,pattern", FALSE, ids=[f[0] for f in FALSE])
def test_no_false_statement(false, why, pattern):
    found = [
        f"{name}: ...{m.group(0)}..."
        for name, text in texts().items()
        for m in re.finditer(pattern, text, flags=re.I | re.S)
        if "tests/" not in name
    ]
    assert not found, f"{false!r} is false ({why}); found in\n" + "\n".join(found)


def test_the_patterns_find_the_old_statements():
    """Each pattern finds the statement as the issue quoted it (so a pattern that cannot match
    anything does not pass for a check)."""
    quoted = [
        "a segment size of 0 lets Open MPI choose",
        "The kit forces it with Open MPI's default 8 KiB segments",
        "(This is the control file of the next section; no comments are allowed in a real file.)",
        "with the algorithms that Open MPI and SimGrid both run with\nthe same schedule",
        "SimGrid moves messages on its own, as a network with offload would",
        "why scatter + allgather wins for large messages (2·n·β instead of ⌈log₂ p⌉·n·β)",
        "Only eager messages pay the platform's per-message overheads",
        "the *overlap degree* o of the Beowulf study",
        "core < node < socket at small sizes in the simulated fit as in the report, "
        "slope doubled across nodes",
        "every rank sends first with blocking MPI_Send: a deadlock",
        "The kit forces it with Open MPI's default",
        "Pearson's\nr between `probe_us` and `maxrank_avg_us` for every algorithm and size across the "
        "rows of\n`series` (the four network loads at P = 48)",
        'measured.set_label(f"{algo} (simulated median, 95 % CI)")',
        "scatter + allgather and SimGrid's pipeline win large ones",
        "the simulated\none is SimGrid's (16 or 128 KiB segments)",
        "the segments SimGrid cut the messages of `quiet` into",
        "the simulated reduce `chain` is SimGrid's\n(P/2 chains, 64 KiB segments)",
        # lab 5's grader and rubric before the kit's clone was named
        "SimGrid cut them into 16384 or 131072-byte segments",
        "f\"SimGrid cut them into {' or '.join(map(str, used))}-byte segments\"",
        "SimGrid sent them whole (segment size 0)",
        "(one rule can cover process counts where SimGrid chose differently)",
        "the algorithm and SimGrid's segment size",
        "the rules file's pipeline rules (segment size: SimGrid's)",
    ]
    for text in quoted:
        assert any(re.search(p, text, flags=re.I | re.S) for _, _, p in FALSE), text
