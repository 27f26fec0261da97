"""JupyterLab in a real browser: start ``jupyter lab`` on the labs, open lab 0 in headless
Chromium (Debian's ``chromium``, driven by Playwright), run its first cells and read the page.

JupyterLab serves a copy of ``labs/`` (running lab 0 writes programs next to its hello.c and
autosaves the notebook; the repository's labs stay untouched). The screenshot is saved as
``test-output/browser/lab0.png``.
"""

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: The flags this sandbox needs: root (no sandbox), no GPU, and no background traffic to a
#: closed network (Chromium would retry it at every start).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/packages.txt)"),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(cmd, port, token, log_path, env=None, seconds=120):
    """Start ``cmd`` (a ``jupyter lab`` on ``port`` with ``token``), wait until it answers, yield
    its base URL; stop its process group at the end."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited: {Path(log_path).read_text()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer within {seconds} s")
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


@contextlib.contextmanager
def chromium_page(pw, screenshot, height=1000):
    """A page of headless Chromium; a screenshot of it is saved at the end, also of a failure."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    page = browser.new_page(viewport={"width": 1400, "height": height})
    try:
        yield page
    finally:
        Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=False)
        browser.close()


@pytest.fixture
def jupyter_lab(tmp_path):
    """A JupyterLab server on a copy of labs/: yields (base URL, token)."""
    labs = tmp_path / "labs"
    shutil.copytree(ROOT / "labs", labs)
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")
    env = dict(
        os.environ, PATH=f"{jupyter.parent}:{os.environ['PATH']}", JUPYTER_CONFIG_DIR=str(tmp_path / "cfg")
    )
    cmd = [
        str(jupyter),
        "lab",
        f"--notebook-dir={labs}",
        f"--port={port}",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
    ]
    with serving(cmd, port, token, tmp_path / "jupyter.log", env=env) as url:
        yield url, token


@contextlib.contextmanager
def notebook_page(jupyter_lab, notebook, screenshot, height=1000):
    """Headless Chromium on ``notebook`` (a path under the served labs/): yields (sync_api, page)
    once its cells are on the page; the screenshot ``test-output/browser/<screenshot>`` is saved
    at the end, also of a failure."""
    sync_api = pytest.importorskip("playwright.sync_api")
    url, token = jupyter_lab
    out = ROOT / "test-output" / "browser"
    out.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw, chromium_page(pw, out / screenshot, height) as page:
        page.goto(f"{url}/lab/tree/{notebook}?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
        yield sync_api, page


#: The status bar's kernel item once a kernel is connected and waiting ("Python 3 | Idle").
#: The toolbar's execution indicator says "idle" already before any kernel is there, so it is
#: not a sign that a cell can run.
KERNEL_IDLE = re.compile(r"\S \| Idle$")


def run_cell(sync_api, page, cell, seconds=120):
    """Run ``cell`` (a locator) with Shift+Enter once the kernel is idle, and wait until its
    prompt shows a number or ``*``. A keypress that did not queue the cell (the editor was not yet
    focused, or a kernel dialog took it) is retried; a dialog is closed first."""
    page.get_by_text(KERNEL_IDLE).first.wait_for(timeout=seconds * 1000)
    prompt = cell.locator(".jp-InputPrompt")
    deadline = time.monotonic() + seconds
    while True:
        dialog = page.locator(".jp-Dialog")
        if dialog.count():
            page.keyboard.press("Escape")
        cell.locator(".jp-InputArea-editor").click()  # edit mode in that cell
        page.keyboard.press("Shift+Enter")
        try:
            sync_api.expect(prompt).to_have_text(re.compile(r"\[[\d*]+\]"), timeout=10_000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def run_lab0_cells(url, token, screenshot):
    """Open lab 0 on the JupyterLab at ``url`` in headless Chromium, run its imports and the
    doctor's report, and return the report's text; the page is saved as
    ``test-output/browser/<screenshot>`` (also when it fails). tests/test_containers.py uses it
    for the JupyterLab an image serves."""
    with notebook_page((url, token), "lab0/lab0.ipynb", screenshot) as (sync_api, page):
        # the lab's title is on the page, rendered from Markdown
        page.get_by_role("heading", name="Lab 0 — getting started").first.wait_for(timeout=60_000)
        cells = page.locator(".jp-Notebook .jp-Cell")
        for i in (1, 3):  # the imports, then the doctor's report
            cell = cells.nth(i)
            run_cell(sync_api, page, cell)
            sync_api.expect(cell.locator(".jp-InputPrompt")).to_have_text(
                re.compile(r"\[\d+\]"), timeout=120_000
            )
        report = cells.nth(3).locator(".jp-OutputArea-output")
        sync_api.expect(report).to_contain_text("openmpi", timeout=30_000)
        text = report.inner_text()
        # the kit's JupyterLab settings (mpilab/data/jupyterlab/overrides.json): JupyterLab does
        # not ask about its news feed in front of the lab (it did, in a toast, by this point)
        assert not page.get_by_text("official Jupyter news").count(), "JupyterLab asks about its news feed"
    assert (ROOT / "test-output" / "browser" / screenshot).stat().st_size > 10_000
    return text


def test_lab0_runs_in_jupyterlab_in_chromium(jupyter_lab):
    text = run_lab0_cells(*jupyter_lab, "lab0.png")
    for line in ("openmpi    ok", "smpi       ok", "jupyter    ok"):
        assert line in text, f"{line!r} not in the doctor report the page shows:\n{text}"


#: The phase-diagram explorer's cell: two broadcasts whose crossover moves with α and β (the
#: student's own expressions: the kit's costs are not on the student's side).
EXPLORER_CELL = """from mpilab.studies.explorer import explorer
panel = explorer({"binomial": "ceiling(log(p, 2)) * (alpha + n * beta)",
                  "scatter_allgather": "(ceiling(log(p, 2)) + p - 1) * alpha + 2 * (p - 1) / p * n * beta"},
                 collective="bcast")
panel"""


def test_explorer_redraws_when_a_slider_moves(jupyter_lab, tmp_path):
    """The explorer panel in JupyterLab: drag the α slider, and the phase diagram changes."""
    import nbformat

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(EXPLORER_CELL)],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
        },
    )
    nbformat.write(nb, tmp_path / "labs" / "explorer.ipynb")
    with notebook_page(jupyter_lab, "explorer.ipynb", "explorer.png", height=1100) as (sync_api, page):
        cell = page.locator(".jp-Notebook .jp-Cell").first
        run_cell(sync_api, page, cell)
        image = cell.locator(".widget-output img")
        image.wait_for(timeout=120_000)
        before = image.get_attribute("src")
        label = cell.locator(".widget-readout").first  # the α slider's value
        alpha_before = label.inner_text()
        handle = cell.locator(".widget-hslider .noUi-handle").first
        box = handle.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + 250, box["y"] + box["height"] / 2, steps=10)
        page.mouse.up()
        sync_api.expect(label).not_to_have_text(alpha_before, timeout=30_000)
        page.wait_for_function(
            "([sel, old]) => { const i = document.querySelector(sel); "
            "return i && i.getAttribute('src') !== old; }",
            arg=[".widget-output img", before],
            timeout=60_000,
        )
        page.get_by_text(KERNEL_IDLE).first.wait_for(timeout=120_000)
        sync_api.expect(image).to_be_visible()  # the last drawing is there, no error
        after = image.get_attribute("src")
        alpha_after = label.inner_text()
        drawn = cell.locator(".widget-output").inner_text()
        page.wait_for_timeout(1500)  # let the PNG paint before the screenshot
    assert float(alpha_after) > float(alpha_before)
    assert "cannot draw" not in drawn
    assert before.startswith("data:image/png") and after.startswith("data:image/png") and after != before


#: The marker the unsaved-edit test types into ring.c's editor.
UNSAVED_EDIT = "/* an edit not yet saved */"


def node_builds_extensions():
    """Whether this machine can build the kit's JupyterLab extension, as scripts/setup.sh decides:
    npm, and a Node.js the builder runs on (^20.19 or >= 22.12)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return False
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    major, minor = (int(x) for x in version.lstrip("v").split(".")[:2])
    return (major == 20 and minor >= 19) or (major == 22 and minor >= 12) or major > 22


@pytest.mark.skipif(
    not node_builds_extensions(),
    reason="no npm, or Node.js older than 20.19: make setup cannot build the kit's JupyterLab extension",
)
def test_a_check_warns_when_the_c_file_has_unsaved_edits(jupyter_lab, tmp_path):
    """Lab 2 in JupyterLab: edit ring.c in the editor without saving and run the ring check. The
    check tests the file on disk; the kit's JupyterLab extension (labext/) says that the file has
    unsaved edits, and its button saves them. Screenshots: test-output/browser/unsaved-warning.png
    (the warning), unsaved-saved.png (after its button)."""
    extension = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "mpilab-saved-check"
    assert (extension / "package.json").is_file(), (
        f"{extension} is missing although npm is installed: see what `scripts/setup.sh labext` prints"
    )
    ring = tmp_path / "labs" / "lab2" / "ring.c"
    saved = ring.read_text()
    with notebook_page(jupyter_lab, "lab2/lab2.ipynb", "unsaved-saved.png") as (sync_api, page):
        notebook_tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="lab2.ipynb")
        # open ring.c from the file browser (it shows lab2/) and type into it without saving
        page.locator(".jp-DirListing-item", has_text="ring.c").first.dblclick()
        editor = page.locator(".jp-FileEditor .cm-content")
        editor.wait_for(timeout=60_000)
        editor.click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n" + UNSAVED_EDIT + "\n")
        sync_api.expect(
            page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-dirty", has_text="ring.c")
        ).to_be_visible(timeout=10_000)
        notebook_tab.click()
        cells = page.locator(".jp-Notebook .jp-Cell")
        run_cell(sync_api, page, cells.filter(has_text="labs.checker").first)
        check = cells.filter(has_text='check("ring_correct")').first
        # each cell run replaces the warning: this cell's is the one whose id was not on screen
        # before it ran (the one it replaces can linger a moment before its exit class comes)
        warnings = page.locator(".Toastify__toast:not([class*='exit'])", has_text="ring.c has unsaved edits")
        sync_api.expect(warnings).to_have_count(1, timeout=30_000)  # the first cell's warning
        before = page.eval_on_selector_all(".Toastify__toast", "ts => ts.map(t => t.id)")
        run_cell(sync_api, page, check)
        toast = warnings
        for old in before:
            toast = toast.and_(page.locator(f":not([id='{old}'])"))
        sync_api.expect(toast).to_be_visible(timeout=30_000)
        sync_api.expect(warnings).to_have_count(1, timeout=30_000)  # the earlier one went away
        warning = toast.inner_text()
        page.wait_for_timeout(1000)  # the toast slides in
        page.screenshot(path=str(ROOT / "test-output" / "browser" / "unsaved-warning.png"))
        # the check itself ran on the saved skeleton, and says which version it tested
        page.get_by_text(KERNEL_IDLE).first.wait_for(timeout=240_000)
        sync_api.expect(check.locator(".jp-OutputArea")).to_contain_text("as last saved", timeout=30_000)
        assert ring.read_text() == saved  # nothing saved the edit behind the student's back
        toast.get_by_role("button", name="Save ring.c").click()
        deadline = time.monotonic() + 30
        while UNSAVED_EDIT not in ring.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
    assert "this cell used the saved file, not your editor's" in warning and "Ctrl+S" in warning
    assert "…" not in warning, f"JupyterLab cut the warning short: {warning!r}"
    assert UNSAVED_EDIT in ring.read_text(), "the warning's Save button did not save ring.c"
