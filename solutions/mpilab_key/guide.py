"""``make instructor-guide``: every solution notebook run end to end, and a guide page per lab.

For each lab it writes, under ``dist/instructor-guide/<lab>/``:

* ``<lab>.ipynb`` and ``<lab>.html``: the solution notebook executed on this machine, with its
  outputs (the C solutions in place of the skeletons);
* ``guide.md``: what students learn (the notebook's own opening and closing), a timing plan,
  every graded cell with its points, what the grader checks and its hidden cases (of every
  cell, C or not: :func:`hidden_cases`), the rubric of
  the cells graded by hand, the numbers the rubric quotes as measured on this run, and the
  common wrong answers with the feedback each gets from the trusted grader.

The per-lab facts (times, the numbers to quote, the wrong answers) are the ``GUIDE`` dict of the
lab's rubric module (:mod:`mpilab_key.rubrics`).

Usage: ``python -m mpilab_key.guide [--labs lab0,lab2] [--out dist/instructor-guide]``.
"""

import argparse
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from mpilab.core import paths
from mpilab.grade import judge
from mpilab.grade.answers import encode
from mpilab.grade.checks.costs import CostVerdict
from mpilab.model import costs
from mpilab_key import InNotebook

SOLUTIONS = Path(__file__).resolve().parents[1]
#: Where :func:`run_solution` puts the values of the guide's InNotebook expressions.
VALUES = "__values__"


def _cells(nb, kind=None):
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if (
            kind is None
            or (
                kind == "test" and cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")
            )
            or (kind == "manual" and meta.get("grade") and meta.get("solution"))
        ):
            yield cell, meta


def run_solution(lab, out, timeout=1800):
    """Execute ``solutions/<lab>`` with the C solutions in a scratch copy; return (notebook, seconds,
    namespace quotes)."""
    rubric = importlib.import_module(f"mpilab_key.rubrics.{lab}")
    quotes = getattr(rubric, "GUIDE", {}).get("quotes", {})
    with tempfile.TemporaryDirectory(prefix=f"mpilab-guide-{lab}-") as tmp:
        work = Path(tmp) / lab
        shutil.copytree(
            SOLUTIONS / lab, work, ignore=shutil.ignore_patterns("c_solutions", ".ipynb_checkpoints")
        )
        for c in (SOLUTIONS / lab / "c_solutions").glob("*.c"):
            shutil.copy(c, work / c.name)
        nb = nbformat.read(work / f"{lab}.ipynb", as_version=4)
        exprs = sorted(
            {
                v
                for tries in getattr(rubric, "GUIDE", {}).get("wrong", {}).values()
                for _, given in tries
                for v in given.values()
                if isinstance(v, InNotebook)
            }
        )
        probe = nbformat.v4.new_code_cell(
            "import json as _json\n"
            f"print('MPILAB-QUOTES ' + _json.dumps({{k: str(eval(v)) for k, v in {quotes!r}.items()}}))\n"
            "from mpilab.grade.answers import encode as _encode\n"
            f"print('MPILAB-VALUES ' + _json.dumps({{e: _encode(eval(e)) for e in {exprs!r}}}))"
        )
        nb.cells.append(probe)
        start = time.monotonic()
        NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(work)}}
        ).execute()
        elapsed = time.monotonic() - start
        text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
        nb.cells.pop()
        m = re.search(r"MPILAB-QUOTES (\{.*\})", text)
        measured = json.loads(m.group(1)) if m else {}
        m = re.search(r"MPILAB-VALUES (\{.*\})", text)
        measured[VALUES] = json.loads(m.group(1)) if m else {}
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / f"{lab}.ipynb")
    html, _ = HTMLExporter().from_notebook_node(nb)
    (out / f"{lab}.html").write_text(html)
    return nb, elapsed, measured


def wrong_answers(lab, values=None):
    """Each common wrong answer of the lab's GUIDE with the trusted grader's feedback.

    ``values`` maps each :class:`mpilab_key.InNotebook` expression to its value, encoded, as the
    executed solution notebook computed it (:func:`run_solution`).
    """
    values = values or {}
    rubric = importlib.import_module(f"mpilab_key.rubrics.{lab}")
    nb = nbformat.read(SOLUTIONS / lab / f"{lab}.ipynb", as_version=4)
    points = {meta["grade_id"]: meta.get("points", 0) for _, meta in _cells(nb, "test")}
    rows = []
    for gid, tries in getattr(rubric, "GUIDE", {}).get("wrong", {}).items():
        verdict = rubric.RUBRIC[gid]
        for label, given in tries:
            with tempfile.TemporaryDirectory(prefix="mpilab-guide-wrong-") as tmp:
                answers = {}
                for name, value in given.items():
                    if name.endswith(".c"):
                        shutil.copy(paths.repo_root() / value, Path(tmp) / name)
                    elif isinstance(value, InNotebook):
                        if value not in values:
                            raise RuntimeError(
                                f"{lab} {gid}: the solution notebook did not compute {value!r}"
                            )
                        answers[name] = values[value]
                    else:
                        answers[name] = encode(value)
                ctx = judge.Context(lab, Path(tmp), Path(tmp))
                v = judge.judge_cell(verdict, gid, {"points": points.get(gid, 1), "answers": answers}, ctx)
            rows.append((gid, label, v))
    return rows


def hidden_cases(lab, gid):
    """What the grader checks of cell ``gid`` that the notebook's visible check does not: the
    hidden runs of a C verdict, the points a cost is compared at, and for every other verdict the
    rubric's own words (its GUIDE's ``hidden``). Empty only where the rubric says nothing."""
    rubric = importlib.import_module(f"mpilab_key.rubrics.{lab}")
    verdict = rubric.RUBRIC.get(gid)
    out = [r.label for r in getattr(verdict, "runs", ()) if r.hidden]
    if isinstance(verdict, CostVerdict):
        pts = costs.check_points(verdict.domain)
        out.append("the value, α and β terms apart, at (p, n) = " + ", ".join(f"({p}, {n})" for p, n in pts))
    said = getattr(rubric, "GUIDE", {}).get("hidden", {}).get(gid)
    if said:
        out.append(said)
    return "; ".join(out)


def guide_page(lab, nb, elapsed, measured, wrong):
    rubric = importlib.import_module(f"mpilab_key.rubrics.{lab}")
    info = getattr(rubric, "GUIDE", {})
    md = [c for c, _ in _cells(nb) if c.cell_type == "markdown"]
    lines = [
        f"# Instructor's guide — {lab}",
        "",
        f"Generated by `make instructor-guide` on this machine; the solution notebook ran end to "
        f"end in {elapsed:.0f} s (executed copy: `{lab}.ipynb`, `{lab}.html`).",
        "",
        "## What students learn",
        "",
        md[0].source.strip() if md else "",
        "",
        md[-1].source.strip() if len(md) > 1 else "",
        "",
        "## Timing plan",
        "",
    ]
    lines.append(f"Total: {info.get('time', 'not estimated')}.")
    for section, t in info.get("sections", []):
        lines.append(f"- {section}: {t}")
    lines += [
        "",
        "## Graded cells",
        "",
        "| cell | points | what the grader checks | hidden cases |",
        "|---|---|---|---|",
    ]
    for cell, meta in _cells(nb, "test"):
        doc = re.match(r'\s*"""(.*?)"""', cell.source, flags=re.S)
        lines.append(
            f"| {meta['grade_id']} | {meta.get('points', 0)} | {doc.group(1) if doc else ''} | "
            f"{hidden_cases(lab, meta['grade_id'])} |"
        )
    lines += ["", "## Cells graded by hand, with their rubric", ""]
    for cell, meta in _cells(nb, "manual"):
        lines.append(f"- **{meta['grade_id']}** ({meta.get('points', 0)} points): {cell.source.strip()}")
    lines += ["", "## Numbers the rubric quotes, as measured on this run", ""]
    for name, value in measured.items():
        if name != VALUES:
            lines.append(f"- {name}: **{value}**")
    if not set(measured) - {VALUES}:
        lines.append("(none listed for this lab)")
    lines += ["", "## Common wrong answers and the feedback each gets", ""]
    for gid, label, v in wrong:
        lines += [f"### {gid}: {label}", "", "```", v.text(), "```", ""]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m mpilab_key.guide", description=__doc__.split("\n\n")[0])
    parser.add_argument("--labs", help="comma-separated labs (default: every lab with a rubric)")
    parser.add_argument("--out", default="dist/instructor-guide")
    args = parser.parse_args(argv)
    all_labs = sorted(p.name for p in SOLUTIONS.glob("lab*") if (p / f"{p.name}.ipynb").exists())
    labs = args.labs.split(",") if args.labs else all_labs
    bad = [lab for lab in labs if lab not in all_labs]
    if bad:
        print(f"instructor-guide: unknown lab {bad[0]!r}; valid: {', '.join(all_labs)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    index = ["# Instructor's guide", ""]
    for lab in labs:
        print(f"instructor-guide: {lab}: running the solution notebook ...", flush=True)
        nb, elapsed, measured = run_solution(lab, out / lab)
        page = guide_page(lab, nb, elapsed, measured, wrong_answers(lab, measured.get(VALUES)))
        (out / lab / "guide.md").write_text(page)
        index.append(f"- [{lab}]({lab}/guide.md): solution ran in {elapsed:.0f} s")
        print(f"instructor-guide: {lab}: {out / lab / 'guide.md'} ({elapsed:.0f} s)", flush=True)
    (out / "README.md").write_text("\n".join(index) + "\n")
    print(f"instructor-guide: {out / 'README.md'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
