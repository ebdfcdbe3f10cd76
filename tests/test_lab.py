"""`make lab` serves the student edition, `make lab-instructor` the instructor edition.

Each test runs the Makefile's own target (its set-up is already done by `make test`; `-o` keeps
make from redoing it), with a token and without a browser, so what is tested is what the README
tells a student and an instructor to run. The student's folder is a temporary one
(`STUDENT_DIR=...`), and so are the instructor's course folder (`NBGRADER_COURSE=...`) and each
lab's state (`LAB_STATE=...`).
"""

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat

from classroom.grading import leaked_solution_lines
from live_models import free_port

ROOT = Path(__file__).resolve().parents[1]
SKIP_SETUP = ["-o", ".venv/.installed", "-o", ".venv/.assets-ready"]
INSTRUCTOR_PANELS = ["@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader"]


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


class MakeLab:
    """``make <target>`` serving JupyterLab on a free port with a token, stopped on exit."""

    def __init__(self, target: str, tmp_path: Path, **variables: str):
        self.port, self.token = free_port(), "course-test-token"
        args = f"--no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token={self.token}"
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
        self.log = tmp_path / f"{target}.log"
        variables.setdefault("NBGRADER_COURSE", str(tmp_path / "course"))  # instructor's folder
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
                time.sleep(0.5)

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


def test_make_lab_serves_the_student_edition_from_its_own_folder(tmp_path):
    student = tmp_path / "student"
    with MakeLab("lab", tmp_path, STUDENT_DIR=str(student)) as lab:
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


def test_make_lab_keeps_the_students_work(tmp_path):
    student = tmp_path / "student"
    with MakeLab("lab", tmp_path, STUDENT_DIR=str(student)):
        pass
    path = student / "03_agent_loop.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("my notes on stop rules"))
    nbformat.write(nb, path)
    with MakeLab("lab", tmp_path, STUDENT_DIR=str(student)) as lab:
        served = lab.notebook("03_agent_loop.ipynb")
        assert served.cells[-1].source == "my notes on stop rules"


def test_make_lab_instructor_serves_the_instructor_edition_with_its_panels(tmp_path):
    with MakeLab("lab-instructor", tmp_path) as lab:
        served = lab.notebook("00_start_here.ipynb")
        assert "### BEGIN SOLUTION" in "\n".join(c.source for c in served.cells)
        disabled = lab.page_config()["disabledExtensions"]
        assert "@jupyterlab/apputils-extension:announcements" in disabled
        assert not set(INSTRUCTOR_PANELS) & set(disabled)
