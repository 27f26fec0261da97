"""JupyterLab in a real browser: start ``jupyter lab`` on the labs, open lab 0 in headless
Chromium (Debian's ``chromium``, driven by Playwright), run its first cells and read the page.

JupyterLab serves a copy of ``labs/`` (running lab 0 writes programs next to its hello.c and
autosaves the notebook; the repository's labs stay untouched). The screenshot is saved as
``test-output/browser/lab0.png``.
"""

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
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/packages.txt)")]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyter_lab(tmp_path):
    """A JupyterLab server on a copy of labs/: yields (base URL, token)."""
    labs = tmp_path / "labs"
    shutil.copytree(ROOT / "labs", labs)
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")
    log = open(tmp_path / "jupyter.log", "w")
    env = dict(os.environ, PATH=f"{jupyter.parent}:{os.environ['PATH']}", JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    proc = subprocess.Popen([str(jupyter), "lab", f"--notebook-dir={labs}", f"--port={port}", "--no-browser",
                             "--allow-root", "--ip=127.0.0.1", f"--IdentityProvider.token={token}"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited: {(tmp_path / 'jupyter.log').read_text()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail("jupyter lab did not answer within 60 s")
        yield url, token
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def run_lab0_cells(url, token, screenshot):
    """Open lab 0 on the JupyterLab at ``url`` in headless Chromium, run its imports and the
    doctor's report, and return the report's text; the page is saved as
    ``test-output/browser/<screenshot>`` (also when it fails). tests/test_containers.py uses it
    for the JupyterLab an image serves."""
    sync_api = pytest.importorskip("playwright.sync_api")
    out = ROOT / "test-output" / "browser"
    out.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/lab0/lab0.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            # the lab's title is on the page, rendered from Markdown
            page.get_by_role("heading", name="Lab 0 — getting started").first.wait_for(timeout=60_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
            cells = page.locator(".jp-Notebook .jp-Cell")
            for i in (1, 3):                # the imports, then the doctor's report
                cell = cells.nth(i)
                cell.locator(".jp-InputArea-editor").click()      # edit mode in that cell
                page.keyboard.press("Shift+Enter")
                sync_api.expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"),
                                                                              timeout=120_000)
            report = cells.nth(3).locator(".jp-OutputArea-output")
            sync_api.expect(report).to_contain_text("openmpi", timeout=30_000)
            text = report.inner_text()
        finally:
            page.screenshot(path=str(out / screenshot), full_page=False)   # also of a failure
            browser.close()
    assert (out / screenshot).stat().st_size > 10_000
    return text


def test_lab0_runs_in_jupyterlab_in_chromium(jupyter_lab):
    url, token = jupyter_lab
    text = run_lab0_cells(url, token, "lab0.png")
    for line in ("openmpi    ok", "smpi       ok", "jupyter    ok"):
        assert line in text, f"{line!r} not in the doctor report the page shows:\n{text}"
