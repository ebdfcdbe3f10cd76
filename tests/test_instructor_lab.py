"""`make lab-instructor`: Formgrader works and nothing is written into the repository.

The Makefile's own target is started (as tests/test_lab.py does; the course folder is a
temporary one, ``NBGRADER_COURSE=...``) and Formgrader's API is asked for what its pages show:
the students (*Manage Students*, an HTTP 500 ``FileNotFoundError: 'alembic'`` before, with a
``gradebook.db`` written into the repository root), the assignments (every chapter, from the
course folder's ``source/``) and a chapter's submissions.
"""

from __future__ import annotations

import json
import subprocess

from test_lab import ROOT, MakeLab

FORMGRADER_PAGES = ["/formgrader/api/students", "/formgrader/api/assignments",
                    "/formgrader/api/submissions/03_agent_loop", "/formgrader/api/status"]


def _new_files() -> set[str]:
    """Untracked files (ignored ones too) of the repository, as git lists them."""
    done = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return {line[3:] for line in done.stdout.splitlines() if line[:2] in ("??", "!!")}


def test_formgrader_answers_in_the_instructor_lab_and_writes_nothing_here(tmp_path):
    course = tmp_path / "course"
    before = _new_files()
    with MakeLab("lab-instructor", tmp_path, NBGRADER_COURSE=str(course)) as lab:
        answers = {page: lab.get(page) for page in FORMGRADER_PAGES}
        served = lab.notebook("00_start_here.ipynb")  # the instructor edition, linked
        assert "### BEGIN SOLUTION" in "\n".join(c.source for c in served.cells)
    assert {page: status for page, (status, _) in answers.items()} == dict.fromkeys(
        FORMGRADER_PAGES, 200), lab.log.read_text()[-3000:]
    assert json.loads(answers["/formgrader/api/students"][1]) == []
    chapters = {p.stem for p in (ROOT / "notebooks").glob("[0-9A]*_*.ipynb")}
    assert {a["name"] for a in json.loads(answers["/formgrader/api/assignments"][1])} == chapters
    assert (course / "gradebook.db").is_file()  # where nbgrader_config.py says
    assert (course / "source" / "03_agent_loop" / "03_agent_loop.ipynb").resolve() == (
        ROOT / "notebooks" / "03_agent_loop.ipynb")
    written = {f for f in _new_files() - before
               if "__pycache__" not in f and not f.startswith((".pytest_cache", "build/"))}
    assert written == set(), written
    assert not (ROOT / "gradebook.db").exists()


def test_every_lab_starts_the_same_way():
    """lab, lab-instructor and nbgrader-formgrader: one recipe (settings, token, LAB_ARGS)."""
    def commands(target: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-o", ".venv/.installed", "-o", ".venv/.assets-ready", target,
             "LAB_TOKEN=t0k3n", "LAB_ARGS=--no-browser", "STUDENT_DIR=/tmp/s",
             "NBGRADER_COURSE=/tmp/c"], cwd=ROOT, capture_output=True, text=True, check=True)
        return next(line for line in done.stdout.splitlines() if "jupyter lab" in line)

    lines = {target: commands(target) for target in ("lab", "lab-instructor", "nbgrader-formgrader")}
    assert lines["nbgrader-formgrader"] == lines["lab-instructor"]
    for edition, line in (("student", lines["lab"]), ("instructor", lines["lab-instructor"])):
        assert f"--LabApp.app_settings_dir={ROOT}/lab/{edition}" in line
        assert "--IdentityProvider.token=t0k3n --no-browser" in line
        assert f"PATH={ROOT}/.venv/bin:" in line
