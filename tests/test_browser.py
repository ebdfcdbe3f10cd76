"""The front end, tested for real: JupyterLab on localhost, notebooks run in headless Chromium.

A JupyterLab server starts on a free localhost port with a random token, serving a temporary
copy of ``notebooks/`` (so autosave never writes outputs into the committed notebooks), with
the kernels a student's `make lab` has (forked from one pre-imported process,
classroom/kernels.py). Each notebook that holds a widget is opened in Debian's
``/usr/bin/chromium`` through Python Playwright, run with *Run > Run All Cells*, and each
widget is checked: it renders (its expected text is there, no "Error displaying widget", no
browser console errors) and it responds (the stepper's *next* button shows the next step; moving
the trimming budget changes the kept rows).

Everything fails loudly (a missing chapter, no chromium, no JupyterLab, a widget that does not
render). The fixture notebook ``tests/fixtures/widgets/widget_demo.ipynb`` checks the machinery
itself.

What a student and an instructor see first when `make lab` and `make lab-instructor` open the
browser is tested in tests/test_lab.py, with the labs that module starts.

Screenshots of each chapter widget go to a temporary folder, or to ``docs/screenshots/`` with
``COURSE_UPDATE_SCREENSHOTS=1`` (how the committed ones are made).

Needs: ``apt-get install -y chromium`` (Debian) and ``pip install playwright==1.65.2``; no
``playwright install`` (the system chromium is used).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from live_models import free_port
from nbharness import core_path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
FIXTURE = ROOT / "tests" / "fixtures" / "widgets" / "widget_demo.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
RUN_TIMEOUT_S = 900  # a chapter with live model runs, beside another test worker on 2 cores
# Console messages that are not errors of the workbook (none so far; add with a reason).
ALLOWED_CONSOLE_ERRORS: list[str] = []


@dataclass
class Widget:
    """One widget in one notebook, how to find it, what it must show, how it must respond."""

    name: str                    # screenshot file name
    find: str                    # text inside the widget's output that identifies it
    expect: list[str]            # regular expressions its text must match once rendered
    action: str | None = None    # "next" / "approve" (click that button) or "budget" (a slider)
    changed: str = ""            # regular expression the text must match after the action
    control: str = "budget"      # label of the slider the "budget" action moves
    kept_rows: bool = False      # the action must change how many table rows say "kept"


@dataclass
class Target:
    notebook: str                # file name in notebooks/ (or the fixture's path)
    shows: str                   # what it shows (named when the notebook is missing)
    widgets: list[Widget] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return FIXTURE if self.notebook == FIXTURE.name else NOTEBOOKS / self.notebook


TARGETS = [
    Target(FIXTURE.name, "this test's fixture", [
        Widget("fixture_stepper", "Step 1 of 3", [r"Step 1 of 3"], "next", r"Step 2 of 3"),
        Widget("fixture_trim", "kept 4 of 5", [r"kept 4 of 5 messages"], "budget",
               r"kept [0-35] of 5 messages", kept_rows=True),
    ]),
    Target("02_code_agent_runs.ipynb", "widgets/trace_stepper.py", [
        Widget("trace_stepper", "Step 1 of", [r"Step 1 of \d+", r"(?i)observation",
                                               r"(?i)tokens"], "next", r"Step 2 of \d+"),
    ]),
    Target("03_agent_loop.ipynb", "widgets/budget_explorer.py", [
        Widget("budgets", "max steps", [r"(?i)max steps", r"(?i)stop"], "budget", "",
               control="max steps"),
    ]),
    Target("06_guarded_agents.ipynb", "widgets/approval_panel.py", [
        Widget("approval", "Waiting for approval", [r"Waiting for approval", r"move_stock"],
               "approve", r"amend_declaration"),
    ]),
    Target("05_trimming.ipynb", "widgets/trim_explorer.py", [
        Widget("trim_explorer", "max_tokens", [r"max_tokens", r"strategy", r"\tkept\t",
                                                r"(?i)reason"], "budget", "",
               control="max_tokens", kept_rows=True),
    ]),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on localhost with a token, serving a copy of the notebooks."""
    if not CHROMIUM.exists():
        pytest.fail("the browser test needs Debian's chromium: apt-get install -y chromium")
    root = tmp_path_factory.mktemp("lab")
    served = root / "notebooks"
    shutil.copytree(NOTEBOOKS, served, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    # The chapters' Going further cells (after the exercises; no widget this test checks) are
    # the slow live runs, which the chapter tests and the Colab mirror run: left out here.
    for chapter in served.glob("[0-9A][0-9]_*.ipynb"):
        nbformat.write(core_path(nbformat.read(chapter, as_version=4)), chapter)
    shutil.copy(FIXTURE, served / FIXTURE.name)
    config = root / "config"
    (config / "labconfig").mkdir(parents=True)
    # No news pop-up: JupyterLab would ask to fetch announcements from the network.
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    # Render every cell (JupyterLab 4 otherwise renders only the cells in view).
    tracker = root / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_MODEL", "MPLBACKEND")}
    env.update({"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                # The chapters run at once, one kernel each, beside another test worker: one
                # torch thread per kernel, as in nbharness.kernel_env (2 cores in all).
                "COURSE_TORCH_THREADS": "1",
                # The kernels `make lab` gives a student (lab/kernels/python3): forked from one
                # process that imported the heavy libraries once, not imported again in each.
                "JUPYTER_PATH": os.pathsep.join(
                    [str(ROOT / "lab"), *filter(None, [os.environ.get("JUPYTER_PATH")])])})
    log = (root / "lab.log").open("w")
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "jupyter"), "lab", "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={served}", f"--LabApp.user_settings_dir={root / 'settings'}",
         f"--LabApp.workspaces_dir={root / 'workspaces'}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start: {(root / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield {"url": url, "token": token, "log": root / "lab.log"}
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
        log.close()



def _wait_for_kernel(lab: dict, notebook: str, timeout: float = 90) -> None:
    """Wait until the page's kernel is started, idle and connected (asked of the server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{lab['url']}/api/sessions?token={lab['token']}") as r:
            sessions = json.load(r)
        kernels = [s["kernel"] for s in sessions if s.get("path", "").endswith(notebook)]
        if kernels and kernels[0].get("execution_state") == "idle" \
                and kernels[0].get("connections", 0) >= 1:
            time.sleep(1.0)
            return
        time.sleep(0.5)
    pytest.fail(f"{notebook}: its kernel did not start and connect in {timeout:.0f} s")


def _prompts(page) -> list[str]:
    return [t.strip() for t in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]


def _start_run_all(page, name: str) -> None:
    """Run > Run All Cells, retried until cells are queued or running."""
    for _attempt in range(4):
        # A click before the kernel's connection is complete can be lost: retry until cells
        # are queued or running.
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.wait_for_timeout(300)
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        for _ in range(10):
            page.wait_for_timeout(500)
            if any(re.search(r"[*\d]", p) for p in _prompts(page)):
                break
        else:
            page.keyboard.press("Escape")
            continue
        break
    else:
        pytest.fail(f"{name}: Run All Cells did not start the cells: {_prompts(page)}")


def _wait_until_done(page, name: str, start: float) -> float:
    """Wait until no cell is queued or running; return the seconds since ``start``."""
    quiet = 0
    while quiet < 3:
        if time.monotonic() - start > RUN_TIMEOUT_S:
            pytest.fail(f"{name} still running after {RUN_TIMEOUT_S} s: prompts {_prompts(page)}")
        prompts = _prompts(page)
        busy = any("*" in p for p in prompts) or not any(re.search(r"\d", p) for p in prompts)
        quiet = 0 if busy else quiet + 1
        page.wait_for_timeout(1000)
    return time.monotonic() - start


def _widget_text(output) -> str:
    return output.inner_text()


@pytest.fixture(scope="module")
def started(lab, browser):
    """Every existing target notebook open in its own page, all running at once."""
    pages = {}
    for target in TARGETS:
        if not target.path.exists():
            continue
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        console: list[str] = []
        page.on("console", lambda m, c=console: c.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e, c=console: c.append(f"page error: {e}"))
        pages[target.notebook] = {"page": page, "console": console, "error": None}
        try:
            # A workspace of its own, reset: no tabs restored from an earlier page.
            workspace = re.sub(r"\W", "-", target.notebook)
            page.goto(f"{lab['url']}/lab/workspaces/{workspace}/tree/{target.notebook}"
                      f"?token={lab['token']}&reset")
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
            _wait_for_kernel(lab, target.notebook)
            pages[target.notebook]["start"] = time.monotonic()
            _start_run_all(page, target.notebook)
        except BaseException as err:  # reported by that notebook's test
            pages[target.notebook]["error"] = err
    yield pages
    for entry in pages.values():
        entry["page"].close()


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.notebook)
def test_widgets_render_and_respond_in_jupyterlab(target, started, shots, tmp_path,
                                                  record_property):
    assert target.path.exists(), f"{target.notebook} is missing (it shows {target.shows})"
    entry = started[target.notebook]
    if entry["error"] is not None:
        raise entry["error"]
    page, console = entry["page"], entry["console"]
    page.bring_to_front()
    seconds = _wait_until_done(page, target.notebook, entry["start"])
    record_property("run_seconds", round(seconds, 1))
    print(f"{target.notebook}: ran in the browser in {seconds:.1f} s")
    prompts = _prompts(page)
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), (
        f"{target.notebook}: not every cell ran (an error stops Run All): {prompts}")

    for widget in target.widgets:
        outputs = page.locator(".jp-OutputArea-output").filter(
            has=page.locator(".jupyter-widgets"))
        texts = outputs.all_inner_texts()
        found = [i for i, t in enumerate(texts) if widget.find in t]
        assert found, f"{target.notebook}: no widget output containing {widget.find!r}"
        if widget.action == "next":  # a stepper with a next step (a one-step live run has none)
            found = [i for i in found if outputs.nth(i).get_by_role(
                "button", name=re.compile(r"^next", re.I)).first.is_enabled()] or found
        output = outputs.nth(found[0])  # by position: its text changes below
        output.scroll_into_view_if_needed()
        text = _widget_text(output)
        for pattern in widget.expect:
            assert re.search(pattern, text), (target.notebook, widget.name, pattern, text)
        # The fixture's pictures are not the workbook's: they stay out of docs/.
        folder = shots if target.path != FIXTURE else tmp_path
        output.screenshot(path=str(folder / f"{widget.name}.png"))

        if widget.action == "next":
            button = output.get_by_role("button", name=re.compile(r"^next", re.I)).first
            button.click()
        elif widget.action == "approve":
            output.get_by_role("button", name="Approve", exact=True).first.click()
        elif widget.action == "budget":
            slider = output.locator(".widget-slider").filter(
                has_text=re.compile(widget.control, re.I)).first
            handle = slider.locator(".noUi-handle").first
            handle.focus()
            page.keyboard.press("Home")
            page.wait_for_timeout(700)
            if _widget_text(output) == text:
                page.keyboard.press("End")
        if widget.action:
            # Wait for the change the action must make (another part of the widget, such as a
            # plot, may redraw first).
            page.wait_for_function(
                "([el, before, pattern]) => el.innerText !== before"
                " && (!pattern || new RegExp(pattern).test(el.innerText))",
                arg=[output.element_handle(), text, widget.changed], timeout=20_000)
            after = _widget_text(output)
            if widget.changed:
                assert re.search(widget.changed, after), (widget.name, after)
            if widget.kept_rows:
                assert _kept_rows(after) != _kept_rows(text), (widget.name, text, after)
                print(f"{widget.name}: kept rows {_kept_rows(text)} -> {_kept_rows(after)}")
            print(f"{widget.name}: {_summary(text)!r} -> {_summary(after)!r}")

    body = page.locator("body").inner_text()
    assert "Error displaying widget" not in body
    assert "Loading widget..." not in body
    errors = [c for c in console if not any(a in c for a in ALLOWED_CONSOLE_ERRORS)]
    assert errors == [], f"{target.notebook}: browser console errors: {errors}"


def _kept_rows(text: str) -> int:
    """Table rows whose kept/dropped cell says kept (cells are tab-separated in innerText)."""
    return len(re.findall(r"\tkept(?=\t|\n|$)", text))


def _summary(text: str) -> str:
    for line in text.splitlines():
        if re.search(r"(?i)step \d+ of|kept|stop", line):
            return line.strip()[:100]
    return text.strip().splitlines()[0][:100] if text.strip() else ""
