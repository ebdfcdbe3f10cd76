"""`make lab` serves the student edition, `make lab-instructor` the instructor edition, and
Chromium opens what each one opens first.

Each lab is the Makefile's own target (its set-up is already done by `make test`; `-o` keeps
make from redoing it), with a token, so what is tested is what the README tells a student and an
instructor to run. The student's folder is a temporary one (`STUDENT_DIR=...`), and so are the
instructor's course folder (`NBGRADER_COURSE=...`) and each lab's state (`LAB_STATE=...`). One
student lab and one instructor lab serve this module's tests: what they serve is read through
Jupyter's REST API, and Debian's Chromium (Playwright, see tests/test_browser.py) opens the page
each server writes for the browser (``jpserver-file-to-run-*.html`` in its runtime folder): the
student sees the student edition of ``00_start_here`` (stubs, no solution, no hidden tests), no
news pop-up and no nbgrader instructor menu; the instructor sees the instructor edition and
nbgrader's menu. A second `make lab` on the student's folder shows that the student's work is
kept. Screenshots go to a temporary folder, or to ``docs/screenshots/`` with
``COURSE_UPDATE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from classroom.grading import leaked_solution_lines
from live_models import free_port

ROOT = Path(__file__).resolve().parents[1]
SKIP_SETUP = ["-o", ".venv/.installed", "-o", ".venv/.assets-ready"]
INSTRUCTOR_PANELS = ["@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader"]
NEWS_QUESTION = "Would you like to get notified"


def get(url: str):
    # 30 s: Formgrader's first answer runs alembic in a subprocess, over 10 s on a loaded machine
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


class MakeLab:
    """``make <target>`` serving JupyterLab on a free port with a token, stopped on exit."""

    def __init__(self, target: str, tmp_path: Path, **variables: str):
        self.port, self.token = free_port(), "course-test-token"
        self.variables = variables
        args = f"--no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token={self.token}"
        self.runtime = tmp_path / "runtime"
        env = {k: v for k, v in os.environ.items() if k not in ("COURSE_MODEL", "MPLBACKEND")}
        env["JUPYTER_RUNTIME_DIR"] = str(self.runtime)
        self.log = tmp_path / f"{target}.log"
        variables.setdefault("NBGRADER_COURSE", str(tmp_path / "course"))  # instructor's folder
        # The test's own user setting (the lab's state is in a temporary folder): render every
        # cell, so that a page's text holds the whole notebook, not only the cells in view.
        edition = "student" if target == "lab" else "instructor"
        tracker = (tmp_path / "lab-state" / edition / "user-settings" / "@jupyterlab"
                   / "notebook-extension")
        tracker.mkdir(parents=True, exist_ok=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        extra = [f"{k}={v}" for k, v in variables.items()]
        self.server = subprocess.Popen(
            ["make", "-s", *SKIP_SETUP, target, f"LAB_PORT={self.port}", f"LAB_ARGS={args}",
             f"LAB_STATE={tmp_path / 'lab-state'}", *extra],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self.log.open("w"),
            start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        deadline = time.time() + 90
        while True:
            try:
                self.get("/api/status")
                return self
            except OSError:
                if self.server.poll() is not None:
                    raise AssertionError(f"make exited: {self.log.read_text()[-2000:]}") from None
                assert time.time() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.2)

    def __exit__(self, *exc):
        os.killpg(self.server.pid, signal.SIGTERM)
        self.server.wait(timeout=30)

    def get(self, path: str):
        return get(f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}")

    def notebook(self, name: str) -> nbformat.NotebookNode:
        _status, body = self.get(f"/api/contents/{name}")
        model = json.loads(body)
        assert model["type"] == "notebook"
        return nbformat.from_dict(model["content"])

    def page_config(self) -> dict:
        """The page config JupyterLab sends the browser (what it enables and disables)."""
        status, body = self.get("/lab/tree/00_start_here.ipynb")
        assert status == 200 and "JupyterLab" in body
        found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)'
                          r"</script>", body, re.S)
        assert found, "no page config in the lab page"
        return json.loads(found.group(1))

    def default(self, plugin: str, key: str):
        """The default of one setting as this lab serves it (the lab's overrides applied)."""
        schema = json.loads(self.get(f"/lab/api/settings/{plugin}")[1])["schema"]
        return schema["properties"][key]["default"]

    def opened(self) -> str:
        """The URL of the page the server wrote for the browser (what `make lab` opens)."""
        pages = list(self.runtime.glob("jpserver-file-to-run-*-open.html"))
        assert pages, f"no page for the browser in {self.runtime}"
        return pages[0].as_uri()


@pytest.fixture(scope="module")
def student_lab(tmp_path_factory) -> Iterator[MakeLab]:
    """`make lab` with a new student folder (``lab.variables["STUDENT_DIR"]``)."""
    folder = tmp_path_factory.mktemp("student-lab")
    with MakeLab("lab", folder, STUDENT_DIR=str(folder / "student")) as lab:
        yield lab


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory) -> Iterator[MakeLab]:
    with MakeLab("lab-instructor", tmp_path_factory.mktemp("instructor-lab")) as lab:
        yield lab



def _first_page(browser, url: str, shot: Path) -> tuple[object, str]:
    """Open what ``make lab`` opens; return the page and the open notebook's full text."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector(".jp-DirListing-item", timeout=30_000)
    page.wait_for_timeout(2000)  # let a pop-up, if any, appear
    page.screenshot(path=str(shot))
    # The first exercise, as each edition shows it (a stub, or the solution).
    exercise = page.locator(".jp-CodeCell", has_text="def count_words").first
    exercise.scroll_into_view_if_needed()
    exercise.screenshot(path=str(shot.with_name(shot.stem.replace("first", "exercise") + ".png")))
    # textContent: every cell, also those JupyterLab does not paint while out of view.
    text = page.locator(".jp-NotebookPanel:visible .jp-Notebook").first.evaluate(
        "el => el.textContent")
    return page, text


def test_make_lab_serves_the_student_edition_from_its_own_folder(student_lab):
    lab, student = student_lab, Path(student_lab.variables["STUDENT_DIR"])
    served = lab.notebook("00_start_here.ipynb")
    assert served.cells[0].source.startswith("# Start here")
    instructor = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4)
    assert leaked_solution_lines(instructor, served) == []
    text = "\n".join(c.source for c in served.cells)
    assert "### BEGIN SOLUTION" not in text and "### BEGIN HIDDEN TESTS" not in text
    assert "raise NotImplementedError()" in text
    # Every chapter is there, generated on first use, into the student's folder.
    names = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert names <= {p.name for p in student.glob("*.ipynb")}
    listing = json.loads(lab.get("/api/contents/")[1])
    assert names <= {item["name"] for item in listing["content"]}

    config = lab.page_config()
    disabled = config["disabledExtensions"]
    assert "@jupyterlab/apputils-extension:announcements" in disabled  # no news pop-up
    assert set(INSTRUCTOR_PANELS) <= set(disabled)
    assert "@jupyter-widgets/jupyterlab-manager" in json.dumps(config["federated_extensions"])
    assert lab.default("@jupyterlab/apputils-extension:notification", "fetchNews") == "false"
    assert json.loads(lab.get("/api/kernelspecs")[1])["kernelspecs"].get("python3")


def test_make_lab_opens_the_student_edition_first(student_lab, browser, shots):
    page, text = _first_page(browser, student_lab.opened(), shots / "student_first.png")
    assert page.locator(".lm-TabBar-tab.lm-mod-current", has_text="00_start_here.ipynb").count()
    assert "Start here" in text
    assert "raise NotImplementedError()" in text          # the exercise is a stub
    assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    files = page.locator(".jp-DirListing-item").all_inner_texts()
    assert any("03_agent_loop.ipynb" in f for f in files), files  # the student's folder
    body = page.locator("body").inner_text()
    assert NEWS_QUESTION not in body
    menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
    assert "Nbgrader" not in menus, menus
    page.close()


def test_make_lab_keeps_the_students_work(student_lab, tmp_path):
    """The student's folder that `make lab` made: a note added there is still there when
    `make lab` starts again."""
    student = Path(student_lab.variables["STUDENT_DIR"])
    path = student / "03_agent_loop.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("my notes on stop rules"))
    nbformat.write(nb, path)
    with MakeLab("lab", tmp_path, STUDENT_DIR=str(student)) as lab:
        served = lab.notebook("03_agent_loop.ipynb")
        assert served.cells[-1].source == "my notes on stop rules"


def test_make_lab_instructor_serves_the_instructor_edition_with_its_panels(instructor_lab):
    served = instructor_lab.notebook("00_start_here.ipynb")
    assert "### BEGIN SOLUTION" in "\n".join(c.source for c in served.cells)
    disabled = instructor_lab.page_config()["disabledExtensions"]
    assert "@jupyterlab/apputils-extension:announcements" in disabled
    assert not set(INSTRUCTOR_PANELS) & set(disabled)


def test_the_instructor_edition_is_one_command_away(instructor_lab, browser, shots):
    page, text = _first_page(browser, instructor_lab.opened(), shots / "instructor_first.png")
    assert "### BEGIN SOLUTION" in text
    assert NEWS_QUESTION not in page.locator("body").inner_text()
    menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
    assert "Nbgrader" in menus, menus  # Formgrader and Create Assignment live there
    page.close()
