"""One set of times: the README's table, each lab's opening and the instructor's guide (the
rubric's GUIDE) give every lab the same estimate of a student's time."""

import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABS = [f"lab{i}" for i in range(7)]
NUMBER = r"(\d+(?:\.\d+)?)"


def hours(text):
    """The (low, high) hours of the first range in ``text``: "3.5–4.5 h", "4 to 5 hours",
    "45 min–1 h", "45 minutes to an hour", "45 minutes to 1 hour"."""
    t = text.replace("an hour", "1 hour")
    m = re.search(NUMBER + r"\s*(min\w*|h\w*)?\s*(?:–|-|to)\s*" + NUMBER + r"\s*(min\w*|h\w*)", t)
    assert m, text
    lo, lo_unit, hi, hi_unit = m.groups()
    lo_unit = lo_unit or hi_unit
    scale = {"m": 1 / 60, "h": 1.0}
    return float(lo) * scale[lo_unit[0]], float(hi) * scale[hi_unit[0]]


def readme():
    rows = re.findall(
        r"^\| `(lab\d)` [^|]*\|[^|]*\|[^|]*\| ([^|]+) \|", (ROOT / "README.md").read_text(), re.M
    )
    return {lab: hours(t) for lab, t in rows}


def notebook(lab):
    first = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())["cells"][0]
    m = re.search(r"\*\*Time:?\*\*:?\s*([^\n]*)|\*\*Time: ([^*]+)\*\*", "".join(first["source"]))
    assert m, f"{lab} opens without its time"
    return hours(m.group(1) or m.group(2))


def guide(lab):
    return hours(importlib.import_module(f"mpilab_key.rubrics.{lab}").GUIDE["time"])


@pytest.mark.parametrize("lab", LABS)
def test_one_time_per_lab(lab):
    assert readme()[lab] == notebook(lab) == guide(lab), (readme()[lab], notebook(lab), guide(lab))


def test_the_parser_reads_each_wording():
    assert hours("45 min–1 h") == hours("45 minutes to an hour") == (0.75, 1.0)
    assert hours("3.5 to 4.5 hours") == hours("3.5–4.5 h") == (3.5, 4.5)
