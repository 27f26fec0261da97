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


#: A time or a range of times, in the wordings the labs use: "45 min", "about 1 h", "20 to 30 min",
#: "30–45 min", "45 min to 1 h", "1 to 1.5 h", "45 minutes to an hour".
_NUM = r"(\d+(?:\.\d+)?|\ban?)"
_UNIT = r"(hours?|h|minutes?|min)\b"
DURATION = re.compile(rf"{_NUM}\s*(?:{_UNIT})?\s*(?:–|-|to)\s*{_NUM}\s*{_UNIT}|{_NUM}\s*{_UNIT}")


def _h(number, unit):
    return (1.0 if number in ("a", "an") else float(number)) * (1 / 60 if unit.startswith("m") else 1.0)


def durations(text):
    """Every time or range of times in ``text``, in order, as (low, high) hours."""
    return [d for _, d in _durations_at(text)]


def _durations_at(text, offset=0):
    out = []
    for m in DURATION.finditer(text):
        lo, lo_unit, hi, hi_unit, one, one_unit = m.groups()
        span = (_h(lo, lo_unit or hi_unit), _h(hi, hi_unit)) if one is None else (_h(one, one_unit),) * 2
        out.append((offset + m.start(), span))
    return out


def _clauses(text, offset=0):
    """(start, clause) of each sentence or ';'-clause of ``text``."""
    starts = [0] + [m.end() for m in re.finditer(r"(?<=\.)\s+(?=[A-Z*(`\0])|;\s*", text)]
    return [(offset + a, text[a:b]) for a, b in zip(starts, starts[1:] + [len(text)])]


def student_times(text):
    """The student's times in ``text``, in order: the durations of every sentence, ';'-clause or
    parenthesis that does not speak of the machine (those give how long the notebook's own runs
    take). A parenthesis is judged on its own words, the clause around it on the rest."""
    parens = list(re.finditer(r"\([^()]*\)", text))
    masked = re.sub(r"\([^()]*\)", lambda m: "\0" * len(m.group(0)), text)
    pieces = _clauses(masked) + [c for m in parens for c in _clauses(m.group(0), m.start())]
    found = [d for start, c in pieces if "machine" not in c for d in _durations_at(c, start)]
    return [span for _, span in sorted(found)]


def time_paragraph(lab):
    """The paragraph of the notebook's first cell that opens with **Time."""
    first = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())["cells"][0]
    (para,) = [p for p in "".join(first["source"]).split("\n\n") if p.startswith("**Time")]
    return para


def sections(lab):
    """The guide's time per section, each written as exactly one time or range."""
    out = []
    for name, t in importlib.import_module(f"mpilab_key.rubrics.{lab}").GUIDE["sections"]:
        m = DURATION.fullmatch(t.removeprefix("about ").strip())
        assert m, f"{lab} {name!r}: {t!r} is not one time or range"
        out += durations(t)
    return out


def total_of(parts):
    return tuple(round(sum(p[i] for p in parts), 6) for i in (0, 1))


def within(total, parts):
    lo, hi = total_of(parts)
    return total[0] - 1e-9 <= lo <= hi <= total[1] + 1e-9


def _hm(span):
    return " to ".join(f"{h:.2f} h" for h in span)


def split_problems(para, guide_time, guide_sections):
    """What is inconsistent between a lab's Time paragraph, its guide's time and its guide's
    sections (empty when nothing)."""
    out = []
    said = student_times(para)
    total, split = said[0], said[1:]
    if not guide_sections:
        out.append("the guide gives no time per section")
    elif not within(total, guide_sections):
        out.append(f"the guide's sections sum to {_hm(total_of(guide_sections))}, outside {_hm(total)}")
    if split and split != guide_sections:
        out.append(f"the notebook's split {split} is not the guide's sections {guide_sections}")
    if split and not within(total, split):
        out.append(f"the notebook's split sums to {_hm(total_of(split))}, outside {_hm(total)}")
    guide_split = student_times(guide_time)[1:]
    if guide_split and guide_split != guide_sections:
        out.append(f"the guide's time text splits {guide_split}, its sections {guide_sections}")
    if any(lo > hi for lo, hi in said + guide_sections):
        out.append("a range runs backwards")
    return out


@pytest.mark.parametrize("lab", LABS)
def test_the_sections_add_up_to_the_total(lab):
    """The times of the sections, as the notebook's opening gives them (where it does) and as the
    guide gives them, are the same and sum, low ends and high ends, into the lab's total."""
    para = time_paragraph(lab)
    assert student_times(para)[0] == notebook(lab)
    problems = split_problems(
        para, importlib.import_module(f"mpilab_key.rubrics.{lab}").GUIDE["time"], sections(lab)
    )
    assert not problems, f"{lab}: " + "; ".join(problems)


def test_the_split_parser_reads_each_wording_and_skips_run_times():
    assert durations("45 min to 1 h, 20 to 30\nmin, 30–45 min, about 1 h, 1 to 1.5 h, an hour") == [
        (0.75, 1.0),
        (1 / 3, 0.5),
        (0.5, 0.75),
        (1.0, 1.0),
        (1.0, 1.5),
        (1.0, 1.0),
    ]
    assert durations("sections 1–3 (the design), a 2-core machine, P = 2..48, 1 MiB") == []
    para = (
        "**Time: 4 to 5 hours** for a student. Our estimate: 1 to 2 h for section 1, and 3 h for "
        "the rest. The runs take 6 to 8 minutes on this 2-core machine; the sweeps about 2 minutes."
    )
    # the machine's sentence is left out, a ';'-clause after it is not
    assert student_times(para) == [(4.0, 5.0), (1.0, 2.0), (3.0, 3.0), (2 / 60, 2 / 60)]
    # a parenthesis is judged on its own: a run time in it is left out, a student's time is not
    assert student_times("4 to 5 h: 1 h of reading (the runs took 8 minutes on a busy machine), 3 h") == [
        (4.0, 5.0),
        (1.0, 1.0),
        (3.0, 3.0),
    ]
    assert student_times("4 to 5 h on this machine: the table (1 to 1.5 h), the rest") == [(1.0, 1.5)]


def test_the_split_check_fails_the_old_openings():
    """Lab 1's and lab 4's openings and guides as they were before the times were made one set:
    their splits summed past their totals and disagreed with the guide's sections."""
    lab1 = (
        "**Time: 3.5 to 4.5 hours** for a typical MSc student. That is our estimate, not a measurement\n"
        "of students: about 1.5 h to read sections 1–3 and the report's design, 30 min for the sweeps\n"
        "(you write two loops; the runs themselves take 2 to 4 minutes here), 1 to 1.5 h for the plot,\n"
        "the fits (you choose breakpoints and fit one line per segment) and the ranking, 30 min for the\n"
        "point-to-point model, and 45 min to 1 h for the two written answers. Run the notebook top to\n"
        "bottom first: with the reduced design below the whole notebook, simulations and real runs, took\n"
        "8 minutes (484 s) on this 2-core machine while other jobs kept it busy (load average about 20)."
    )
    lab1_guide = (
        "3.5 to 4.5 hours for a typical MSc student: about 1.5 h of reading (Open MPI's forcing, the "
        "report, the design), 1 h for the sweeps, plots and fits (the notebook's runs took 8 minutes "
        "on a busy 2-core machine), 30 min for the ranking and the ping-pong, and 1 h for the two "
        "written answers"
    )
    lab1_sections = [(0.75,) * 2, (0.5,) * 2, (0.5,) * 2, (0.75, 1.0), (0.5,) * 2, (1 / 3,) * 2, (0.75, 1.0)]
    problems = split_problems(lab1, lab1_guide, lab1_sections)
    # 1.5 h + 30 min + 1-1.5 h + 30 min + 45 min-1 h, and the run time "2 to 4 minutes here"
    assert any("the notebook's split sums to 4.28 h to 5.07 h, outside 3.50 h" in p for p in problems), (
        problems
    )
    assert any("is not the guide's sections" in p for p in problems), problems
    assert any("the guide's time text splits" in p for p in problems), problems
    assert any("the guide's sections sum to 4.08 h to 4.58 h, outside" in p for p in problems), problems
    lab4 = (
        "**Time: 4 to 5 hours** for a typical MSc student. That is our estimate, not a measurement of\n"
        "students: about 1 h to read the event model and the first diagrams, 30–45 min for the linear\n"
        "broadcast and its cost, 20 min to read the measured diagrams, 45 min to 1 h to find the model's\n"
        "options by trial, 45 min for the model errors, 30 min for the calibration, and about 1 h for the\n"
        "four written answers. The notebook's own runs (simulations, traces and a real ping-pong) take\n"
        "2 to 4 minutes on this 2-core machine."
    )
    lab4_sections = [(1.0, 1.25), (0.75,) * 2, (0.75, 1.0), (0.75,) * 2, (0.5,) * 2, (0.75, 1.0)]
    assert any("sums to 4.83 h to 5.33 h" in p for p in split_problems(lab4, "4 to 5 hours", lab4_sections))
    # the sections as they are now pass with the openings as they are now
    for lab in ("lab1", "lab4", "lab5"):
        assert student_times(time_paragraph(lab))[1:] == sections(lab)
