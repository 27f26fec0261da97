"""A course through nbgrader's real exchange, with real Unix users on this machine.

``scripts/course-users.sh`` creates an instructor and two students (``mpilab-test-*``, removed at
the end) and an exchange (mode 1777); every step then runs as its user (``scripts/as-user.sh``):
the instructor generates and releases lab 2; student 1 fetches, pastes the cost answers in and
submits from the command line; student 2 fetches and submits from JupyterLab's Assignment List
in headless Chromium; the instructor collects, grades with ``scripts/grade.sh`` run as root (the
kit's trusted verdicts in the sandbox's namespaces; the files go back to the instructor) and
releases feedback; student 1 fetches it from the command line,
student 2 from the Assignment List. Screenshots: ``test-output/browser/exchange-*.png``.
"""

import html
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from course import released_notebook, strip_fences
from test_browser import CHROMIUM, _free_port, chromium_page, serving

ROOT = Path(__file__).resolve().parents[1]
COURSE = "mpilab-test"
TEACHER, S1, S2 = "mpilab-test-teacher", "mpilab-test-s1", "mpilab-test-s2"
#: The cost cells that the pasted ``costs`` answer earns, with their points (lab 2's rubric).
COST_CELLS = {"cost_gather_bcast": 1.0, "cost_pairwise": 1.0, "cost_ring": 1.0, "cost_bruck": 2.0}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="creates Unix users: needs root"),
    pytest.mark.skipif(
        shutil.which("useradd") is None or shutil.which("runuser") is None, reason="needs useradd and runuser"
    ),
]


def as_user(user, *cmd, stdin=None, timeout=900, check=True):
    """Run ``cmd`` as ``user`` in that user's home; return the completed process."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / "as-user.sh"), user, *cmd],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, f"{user}: {' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def home(user):
    import pwd

    return Path(pwd.getpwnam(user).pw_dir)


@pytest.fixture(scope="module")
def course():
    """The users, the exchange and the course root; everything removed afterwards."""
    exchange = Path(tempfile.mkdtemp(prefix="mpilab-exchange-")) / "exchange"
    exchange.parent.chmod(0o755)
    script = [str(ROOT / "scripts" / "course-users.sh")]
    args = [
        "--course",
        COURSE,
        "--exchange",
        str(exchange),
        "--instructor",
        TEACHER,
        "--students",
        f"{S1},{S2}",
    ]
    subprocess.run(script + ["remove", *args], capture_output=True, timeout=120)  # leftovers of a killed run
    setup = subprocess.run(script + ["setup", *args], capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stderr
    try:
        yield {"exchange": exchange, "root": home(TEACHER) / "mpilab-course"}
    finally:
        subprocess.run(script + ["remove", *args], capture_output=True, timeout=120)
        shutil.rmtree(exchange.parent, ignore_errors=True)


def test_setup_follows_nbgrader_and_hides_the_instructors_tools(course):
    assert os.stat(course["exchange"]).st_mode & 0o7777 == 0o1777
    for s in (S1, S2):
        assert os.stat(home(s)).st_mode & 0o777 == 0o700  # students cannot read each other's work
        listed = as_user(s, "jupyter", "server", "extension", "list")
        listing = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
        # the student's own config dir turns them off
        user_part = listing.split(f"Config dir: {home(s)}/.jupyter")[1].split("Config dir:")[0]
        for ext in ("formgrader", "course_list"):
            assert f"nbgrader.server_extensions.{ext} disabled" in user_part, listing
        labs = as_user(s, "jupyter", "labextension", "list")
        disabled = re.sub(r"\x1b\[[0-9;]*m", "", labs.stdout + labs.stderr).split("Disabled extensions:")[1]
        for ext in ("formgrader", "create-assignment", "course-list"):
            assert f"@jupyter/nbgrader:{ext}" in disabled
        assert "assignment-list" not in disabled


def _text(page):
    """The words of an HTML page, one space between them."""
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _paste_costs(notebook):
    """The fetched notebook with the source's ``costs`` answer pasted in, as a student would."""
    source = {
        c["metadata"]["nbgrader"]["grade_id"]: c
        for c in json.loads((ROOT / "solutions" / "lab2" / "lab2.ipynb").read_text())["cells"]
        if "nbgrader" in c["metadata"]
    }
    for cell in notebook["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "costs":
            cell["source"] = strip_fences("".join(source["costs"]["source"]))
            return notebook
    raise AssertionError("lab 2 has no 'costs' answer cell any more")


@pytest.fixture
def student_lab(course, tmp_path):
    """JupyterLab run by student 2 in their home: yields (base URL, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        str(ROOT / "scripts" / "as-user.sh"),
        S2,
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
    ]
    with serving(cmd, port, token, tmp_path / "jupyter.log", seconds=240) as url:
        yield url, token


def _assignment_list(page, url, token):
    """Open JupyterLab, then Nbgrader > Assignment List; return the menu's item texts."""
    page.goto(f"{url}/lab?token={token}")
    page.wait_for_selector(".lm-MenuBar-itemLabel", timeout=120_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    return items


def test_release_fetch_submit_grade_feedback(course, student_lab):
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/packages.txt)")
    start = time.monotonic()
    root = course["root"]
    out = ROOT / "test-output" / "browser"
    out.mkdir(parents=True, exist_ok=True)
    grade_sh = str(ROOT / "scripts" / "grade.sh")

    # the instructor releases lab 2 into the exchange
    as_user(
        TEACHER,
        "sh",
        "-c",
        f"cd {root} && nbgrader generate_assignment lab2 --create --force "
        "--log-level=WARN && nbgrader release_assignment lab2 --force",
    )
    assert (course["exchange"] / COURSE / "outbound" / "lab2" / "lab2.ipynb").is_file()

    # student 1, on the command line: fetch, answer the costs, submit
    as_user(S1, "nbgrader", "fetch_assignment", "lab2")
    fetched = json.loads((home(S1) / "lab2" / "lab2.ipynb").read_text())
    assert fetched["cells"] == released_notebook("lab2")["cells"]
    as_user(S1, "sh", "-c", "cat > lab2/lab2.ipynb", stdin=json.dumps(_paste_costs(fetched)))
    as_user(S1, "nbgrader", "submit", "lab2")

    # student 2, in JupyterLab's Assignment List: fetch and submit the untouched lab
    url, token = student_lab
    with sync_api.sync_playwright() as pw, chromium_page(pw, out / "exchange-submitted.png") as page:
        menu = _assignment_list(page, url, token)
        assert not any("Formgrader" in m or "Course List" in m for m in menu), menu
        released = page.locator("#released_assignments_list")
        sync_api.expect(released).to_contain_text("lab2", timeout=60_000)
        released.get_by_role("button", name="Fetch").click()
        fetched_list = page.locator("#fetched_assignments_list")
        sync_api.expect(fetched_list).to_contain_text("lab2", timeout=60_000)
        fetched_list.get_by_role("button", name="Submit").click()
        sync_api.expect(page.locator("#submitted_assignments_list")).to_contain_text("lab2", timeout=60_000)
    assert (home(S2) / "lab2" / "lab2.ipynb").is_file()
    inbound = sorted(p.name.split("+")[0] for p in (course["exchange"] / COURSE / "inbound").iterdir())
    assert inbound == [S1, S2]

    # the instructor collects and grades with the kit's grading
    as_user(TEACHER, "sh", "-c", f"cd {root} && nbgrader collect lab2")
    # as root (the sandbox's namespaces need it), as `sudo env COURSE=... scripts/grade.sh lab2`
    graded = subprocess.run(
        [grade_sh, "lab2"],
        env=dict(os.environ, COURSE=str(root), MPILAB_CELL_TIMEOUT="300"),
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert graded.returncode == 0, graded.stderr[-3000:]
    teacher = (os.stat(home(TEACHER)).st_uid, os.stat(home(TEACHER)).st_gid)
    for written in (
        root / "gradebook.db",
        root / "autograded" / S1 / "lab2" / "lab2.ipynb",
        root / "feedback" / S2 / "lab2" / "lab2.html",
    ):
        assert (os.stat(written).st_uid, os.stat(written).st_gid) == teacher, (
            f"{written} is not the instructor's"
        )
    (ROOT / "test-output").mkdir(exist_ok=True)
    (ROOT / "test-output" / "exchange-grade.txt").write_text(graded.stdout + graded.stderr)
    from mpilab.grade.gradebook import score_table

    table = score_table(root, "lab2")
    assert {k: float(table.loc[S1, k]) for k in COST_CELLS} == COST_CELLS, table.to_string()
    assert float(table.loc[S1, "total"]) == sum(COST_CELLS.values()), table.to_string()
    assert float(table.loc[S2, "total"]) == 0.0, table.to_string()

    as_user(TEACHER, "sh", "-c", f"cd {root} && nbgrader release_feedback lab2")

    # student 1 fetches the feedback from the command line
    as_user(S1, "nbgrader", "fetch_feedback", "lab2")
    (html1,) = (home(S1) / "lab2" / "feedback").glob("*/lab2.html")
    text1 = _text(html1.read_text())
    assert re.search(r"lab2 \(Score: 5\.0 / \d+\.0\)", text1), text1[:1000]
    assert "Grade cell: cost_bruck Score: 2.0 / 2.0" in text1
    assert "Grade cell: ring_correct Score: 0.0 / 3.0" in text1

    # student 2 fetches it from the Assignment List and reads it
    with sync_api.sync_playwright() as pw, chromium_page(pw, out / "exchange-feedback.png") as page:
        _assignment_list(page, url, token)
        submitted = page.locator("#submitted_assignments_list")
        sync_api.expect(submitted).to_contain_text("feedback available to fetch", timeout=60_000)
        submitted.get_by_role("button", name="Fetch Feedback").click()
        sync_api.expect(submitted).to_contain_text("view feedback", timeout=60_000)
        (html2,) = (home(S2) / "lab2" / "feedback").glob("*/lab2.html")
        page.goto(f"{url}/files/{urllib.parse.quote(html2.relative_to(home(S2)).as_posix())}?token={token}")
        body = " ".join(page.locator("body").inner_text().split())
    # the untouched lab: nothing earned, and the feedback says which case failed and why
    assert re.search(r"lab2 \(Score: 0\.0 / \d+\.0\)", body), body[:1000]
    assert "mpilab grader: 0 of 3 points" in body and "ring.c is the skeleton as released" in body, body[
        :3000
    ]
    print(f"end to end: {time.monotonic() - start:.0f} s")
