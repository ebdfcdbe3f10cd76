"""A class on JupyterHub, end to end in a browser: what ``make class`` starts.

``classroom/hub.py`` sets up a class on loopback: three local Unix accounts with a unique
prefix (an instructor and two students, removed afterwards), nbgrader's exchange (root's, mode
1777), chapter ``03_agent_loop`` generated and released by the instructor (``00_start_here``
generated only), and JupyterHub with PAM logins and npm's configurable-http-proxy. Then, in
Debian's ``/usr/bin/chromium`` (Playwright, as tests/test_browser.py):

1. each student logs in, opens *Nbgrader > Assignment List*, clicks *Fetch*, opens the notebook
   from the list (their answers are written into the fetched file first: alice the
   instructor's solutions, bob exercise 2 fitted to the visible assert only, which a hidden
   test catches; each keeps the exercises and the cells they read, as a student may) and clicks
   *Submit*;
2. the instructor's Formgrader: *Collect*, *Autograde* each submission, the written answer
   graded by hand on the submission's page, *Generate Feedback* and *Release Feedback*;
3. each student clicks *Fetch Feedback*.

Checked by value: the gradebook's scores (read from the chapter's points: alice every check
and the written answer's full marks, bob all but exercise 2, and 1 by hand), the export (one row
per submission, none for the chapter nobody was given), what each student can read on disk
(not the other's home or submission, not the exchange's inbound, not the instructor's source),
and that no line between ``BEGIN HIDDEN TESTS`` and ``END HIDDEN TESTS`` is in anything a
student has (the fetched notebook, the feedback HTML), nor a solution in what they fetched.

Screenshots go to a temporary folder, or to ``docs/screenshots/hub-*.png`` with
``COURSE_UPDATE_SCREENSHOTS=1``. Needs root (accounts are created), chromium and
``make class-proxy``; skipped, saying so, when not root.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import fill
from test_browser import CHROMIUM
from test_nbgrader_pipeline import (
    FITTED_TO_THE_VISIBLE_ASSERT,
    _solutions,
    exercises_and_what_they_read,
)

import classroom.hub as class_hub
from classroom.grading import leaked_solution_lines
from classroom.grading.feedback import leaked_hidden_tests
from nbharness import core_path, hand_in_quiz

ROOT = Path(__file__).resolve().parents[1]

CHAPTER = class_hub.CHAPTER
INSTRUCTOR_NB = nbformat.read(ROOT / "notebooks" / f"{CHAPTER}.ipynb", as_version=4)
WRITTEN = {"alice": "The stop rule ends the run; the loop never asks whether it should stop.",
           "bob": "It stops."}
# The chapter's points, read from it: the checks (autograded) and the written answer (by hand).
POINTS = {c.id: float(c.metadata.nbgrader["points"]) for c in INSTRUCTOR_NB.cells
          if c.metadata.get("nbgrader", {}).get("grade")}
WRITTEN_ID = next(c.id for c in INSTRUCTOR_NB.cells if c.cell_type == "markdown"
                  and c.id in POINTS)
MAX = sum(POINTS.values())
AUTO_MAX = MAX - POINTS[WRITTEN_ID]
MANUAL = {"alice": POINTS[WRITTEN_ID], "bob": 1.0}  # the instructor's hand grade
AUTO = {"alice": AUTO_MAX, "bob": AUTO_MAX - POINTS["ex2-check"]}  # bob's exercise 2 fails
COMMENT = {"alice": "Right: recorded and derived told apart.",
           "bob": "Say which figures are recorded and which derived."}
SLOW_S = 600_000                         # ms: a login spawns a server, autograde runs a kernel
TIMES: dict[str, float] = {}             # each step's wall time (printed at the end)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The class, set up and its hub started; the accounts and the class folder removed after."""
    if os.geteuid() != 0:
        pytest.skip("the class test creates Unix accounts: it runs as root (make test does in CI)")
    if not CHROMIUM.exists():
        pytest.fail("the class test needs Debian's chromium: apt-get install -y chromium")
    # Every user reads the class folder: not under pytest's own (mode 0700) temporary folder.
    base = Path(tempfile.mkdtemp(prefix="class-hub-", dir="/tmp"))
    base.chmod(0o755)
    cls = class_hub.ClassHub(state=base / "state", prefix=f"t{secrets.token_hex(3)}-",
                             port=class_hub.free_port(), extra_env={"COURSE_TORCH_THREADS": "1"})
    log_path = tmp_path_factory.mktemp("hub-log") / "jupyterhub.log"
    server = None
    try:
        with log_path.open("w") as log:
            start = time.monotonic()
            class_hub.set_up(cls)
            TIMES["set up (accounts, config, generate and release)"] = time.monotonic() - start
            for user in cls.users:  # the test's own setting: render every cell of a notebook
                _user_setting(cls, user)
            start = time.monotonic()
            server = class_hub.start_hub(cls, log)
            TIMES["hub started"] = time.monotonic() - start
            yield cls
    finally:
        if server is not None:
            class_hub.stop_hub(server)
        class_hub.remove_accounts(cls.users, archive=None)
        shutil.rmtree(base, ignore_errors=True)
        print(f"\nhub log: {log_path}")
        for step, seconds in TIMES.items():
            print(f"  {seconds:6.1f} s  {step}")


def _user_setting(cls: class_hub.ClassHub, user: str) -> None:
    tracker = (cls.home(user) / ".jupyter" / "lab" / "user-settings" / "@jupyterlab"
               / "notebook-extension")
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    subprocess.run(["chown", "-R", f"{user}:{user}", str(cls.home(user) / ".jupyter")],
                   check=True, timeout=30)


@pytest.fixture(scope="module")
def pages(hub, browser):
    """Each user logged in (their own browser context), the three servers spawned at once."""
    opened = {}
    start = time.monotonic()
    for user in hub.users:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{hub.url}/hub/login")
        page.fill("#username_input", user)
        page.fill("#password_input", hub.passwords[user])
        page.click("#login_submit", no_wait_after=True)
        opened[user] = page
    for page in opened.values():
        page.wait_for_selector(".jp-LabShell", timeout=SLOW_S)
    TIMES["three logins, their servers spawned"] = time.monotonic() - start
    yield opened
    for page in opened.values():
        page.context.close()


def _name(hub, user: str) -> str:
    return user.removeprefix(hub.prefix)


def _assignment_list(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
    page.get_by_role("menuitem", name="Assignment List").click()
    page.wait_for_selector("#released_assignments_list")


def _as(hub, user: str, code: str) -> dict:
    """Run ``code`` (Python printing JSON) as ``user``; its JSON."""
    done = class_hub.as_user(user, [str(hub.python), "-c", code], hub, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


# ----------------------------------------------------------------------------- the steps

def test_students_fetch_open_and_submit_in_their_assignment_list(hub, pages, shots):
    start = time.monotonic()
    for student in hub.students:
        page, name = pages[student], _name(hub, student)
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        assert "Nbgrader" in menus, menus
        _assignment_list(page)
        released = page.locator("#released_assignments_list .list_item", has_text=CHAPTER)
        released.get_by_role("button", name="Fetch").click()
        fetched = page.locator("#fetched_assignments_list > .list_item", has_text=CHAPTER)
        fetched.wait_for()
        # The student's work: written into the fetched notebook, as their own file.
        path = hub.home(student) / CHAPTER / f"{CHAPTER}.ipynb"
        release = nbformat.read(path, as_version=4)
        assert leaked_hidden_tests(INSTRUCTOR_NB, path) == {}
        assert leaked_solution_lines(INSTRUCTOR_NB, release) == []
        answers = {**_solutions(INSTRUCTOR_NB), WRITTEN_ID: WRITTEN[name]}
        if name == "bob":
            answers["ex2-solution"] = FITTED_TO_THE_VISIBLE_ASSERT
        # Handed in without Going further, which holds no graded cell (the chapter tests run it),
        # and without the demonstrations the exercises do not read: the whole chapter's run in
        # the sandbox is tests/test_nbgrader_pipeline.py's.
        nbformat.write(exercises_and_what_they_read(core_path(fill(release, answers))), path)
        shutil.chown(path, student, student)
        hand_in_quiz(CHAPTER, path.parent, owner=student)  # the quiz clicked in the widget
        # Open it from the list: the student's edition with their answer.
        fetched.locator("a.assignment-notebooks-link").click()
        fetched.locator(".nested_list_item a", has_text=CHAPTER).click()
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
        page.wait_for_function("(text) => document.querySelector('.jp-NotebookPanel:not(.lm-mod-"
                               "hidden) .jp-Notebook').textContent.includes(text)",
                               arg=WRITTEN[name])
        text = page.locator(".jp-NotebookPanel:visible .jp-Notebook").first.evaluate(
            "el => el.textContent")
        assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
        page.locator(".lm-TabBar-tab", has_text="Assignments").click()
        fetched.get_by_role("button", name="Submit").click()
        submitted = page.locator("#submitted_assignments_list > .list_item", has_text=CHAPTER)
        submitted.wait_for()
        assert submitted.get_by_role("button", name="Fetch Feedback").count() == 1
        if name == "alice":
            page.screenshot(path=str(shots / "hub-student-assignments.png"))
    TIMES["two students: fetch, open, submit"] = time.monotonic() - start
    inbound = hub.exchange / class_hub.COURSE_ID / "inbound"
    assert sorted(p.name.split("+")[0] for p in inbound.iterdir()) == sorted(hub.students)


def _formgrader(page, hub, path: str) -> None:
    page.goto(f"{hub.url}/user/{hub.instructor}/formgrader/{path}", timeout=SLOW_S)
    page.wait_for_selector("#main-table tr")


def _wait_row(page, text: str, done: str) -> None:
    """Wait until the #main-table row holding ``text`` matches the regular expression ``done``."""
    page.wait_for_function(
        "([text, done]) => [...document.querySelectorAll('#main-table tr')].some("
        "r => r.innerText.includes(text) && new RegExp(done).test(r.innerText))",
        arg=[text, done], timeout=SLOW_S)


def _ok(page) -> str:
    """The Formgrader's result dialog: its text, closed with OK."""
    dialog = page.locator(".modal-dialog", has_text=re.compile("Success|Error"))
    dialog.wait_for(timeout=SLOW_S)
    text = dialog.inner_text()
    dialog.get_by_role("button", name="OK").click()
    dialog.wait_for(state="hidden")
    return text


def test_the_instructor_collects_autogrades_grades_and_releases_feedback(hub, pages, shots):
    page = pages[hub.instructor]
    start = time.monotonic()
    _formgrader(page, hub, "manage_assignments")
    row = page.locator("#main-table tr", has_text=CHAPTER)
    row.locator("td.collect a").click()
    assert "Successfully collected" in _ok(page)
    _wait_row(page, CHAPTER, r"\t2\t")  # two submissions
    TIMES["collect"] = time.monotonic() - start

    _formgrader(page, hub, f"manage_submissions/{CHAPTER}")
    for student in hub.students:
        start = time.monotonic()
        page.locator("#main-table tr", has_text=student).locator("td.autograde a").click()
        # Formgrader autogrades in the instructor's server, which answers again when done.
        assert "Success" in _ok(page)
        _wait_row(page, student, r"needs manual grading|graded")
        TIMES[f"autograde {_name(hub, student)}"] = time.monotonic() - start
    page.screenshot(path=str(shots / "hub-formgrader-submissions.png"))

    start = time.monotonic()
    for student in hub.students:
        _manual_grade(page, hub, student, MANUAL[_name(hub, student)], shots)
    TIMES["written answers graded by hand"] = time.monotonic() - start

    start = time.monotonic()
    _formgrader(page, hub, "manage_assignments")
    row = page.locator("#main-table tr", has_text=CHAPTER)
    row.locator("td.generate-feedback a").click()
    assert "Successfully generated feedback" in _ok(page)
    row.locator("td.release-feedback a").click()
    assert "Successfully released feedback" in _ok(page)
    TIMES["feedback generated and released"] = time.monotonic() - start
    page.screenshot(path=str(shots / "hub-formgrader-assignments.png"))


def _manual_grade(page, hub, student: str, points: float, shots: Path) -> None:
    """Manual Grading > chapter > notebook > the student's submission: the written answer's
    score and a comment, saved when the field is left (waited for in the gradebook)."""
    _formgrader(page, hub, f"gradebook/{CHAPTER}/{CHAPTER}")
    # The class list names each student (classroom/hub.py adds them to the gradebook).
    shown = f"Student, {_name(hub, student).title()}"
    href = page.locator("#main-table a.name-shown", has_text=shown).get_attribute("href")
    page.goto(f"{hub.url}{href}")
    # The page binds its fields once the grades and comments have loaded: a change before is lost.
    page.wait_for_load_state("networkidle")
    answer = page.locator(".nbgrader_cell", has=page.locator(f"input#{WRITTEN_ID}"))
    assert WRITTEN[_name(hub, student)] in answer.inner_text()
    page.locator(f"input#{WRITTEN_ID}").fill(f"{points:g}")
    page.locator(f"input#{WRITTEN_ID}").press("Tab")
    comment = page.locator(f"#{WRITTEN_ID}-comment")
    comment.fill(COMMENT[_name(hub, student)])
    comment.press("Tab")
    deadline = time.monotonic() + 30
    while (_gradebook(hub)[student][WRITTEN_ID],
           _gradebook(hub, comments=True)[student][WRITTEN_ID]) != (
               points, COMMENT[_name(hub, student)]):
        assert time.monotonic() < deadline, f"{student}: the hand grade was not saved"
        time.sleep(0.5)
    if _name(hub, student) == "bob":
        page.screenshot(path=str(shots / "hub-formgrader-manual-grade.png"))


def _gradebook(hub, comments: bool = False) -> dict[str, dict]:
    """From the gradebook, each student's score per grade cell of the chapter and ``total``
    (or, with ``comments``, the instructor's comment per cell)."""
    from nbgrader.api import Gradebook

    found: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gb:
        for submission in gb.assignment_submissions(CHAPTER):
            notebook = gb.find_submission_notebook(CHAPTER, CHAPTER, submission.student.id)
            if comments:
                found[submission.student.id] = {c.name: c.comment for c in notebook.comments}
                continue
            cells = {g.name: g.manual_score if g.manual_score is not None else g.auto_score
                     for g in notebook.grades}
            found[submission.student.id] = {**cells, "total": submission.score}
    return found


# ----------------------------------------------------------------------------- the students again

def test_each_student_fetches_their_feedback_without_hidden_tests(hub, pages, shots):
    start = time.monotonic()
    for student in hub.students:
        page, name = pages[student], _name(hub, student)
        page.bring_to_front()
        page.reload()
        page.wait_for_selector(".jp-LabShell")
        _assignment_list(page)
        submitted = page.locator("#submitted_assignments_list > .list_item", has_text=CHAPTER)
        submitted.get_by_role("button", name="Fetch Feedback").click()
        submitted.locator("a", has_text="view feedback").first.wait_for()
        if name == "bob":
            page.screenshot(path=str(shots / "hub-student-feedback.png"))
        feedback = hub.home(student) / CHAPTER / "feedback"
        pages_ = sorted(feedback.rglob("*.html"))
        assert [p.name for p in pages_] == [f"{CHAPTER}.html"], pages_
        text = pages_[0].read_text()
        assert leaked_hidden_tests(INSTRUCTOR_NB, hub.home(student) / CHAPTER) == {}
        assert COMMENT[name] in text                      # the instructor's comment
        total = AUTO[name] + MANUAL[name]
        scores = re.findall(r"Score: ([\d.]+) / ([\d.]+)", text)
        assert scores and tuple(map(float, scores[0])) == (total, MAX), (name, scores[:3])
        if name == "bob":
            assert "[try again] Exercise 2: agent_loop" in text
        assert pages_[0].stat().st_uid == hub.home(student).stat().st_uid  # their own copy
        # Byte for byte the page generate_feedback wrote: what tests/test_feedback.py (and
        # tests/test_nbgrader_pipeline.py, for this chapter run) checks is what a student fetches.
        generated = hub.course / "feedback" / student / CHAPTER / f"{CHAPTER}.html"
        assert pages_[0].read_bytes() == generated.read_bytes()
    TIMES["two students: fetch feedback"] = time.monotonic() - start


# ----------------------------------------------------------------------------- on disk

READ_PROBE = """
import json, os, sys
def can(path):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, 'rb').read(1)
        return True
    except OSError:
        return False
print(json.dumps({p: can(p) for p in sys.argv[1:]}))
"""


def test_a_student_reads_neither_the_other_nor_the_instructor(hub, pages):
    alice, bob = hub.students
    course, inbound = hub.course, hub.exchange / class_hub.COURSE_ID / "inbound"
    mine = hub.home(bob) / CHAPTER / f"{CHAPTER}.ipynb"
    theirs = hub.home(alice) / CHAPTER / f"{CHAPTER}.ipynb"
    # nbgrader's inbound is write-only for students: a submission's folder (named by student,
    # time and 12 random characters) cannot be found by another student, who cannot list it.
    paths = [mine, theirs, hub.home(alice), inbound, course,
             course / "source" / CHAPTER / f"{CHAPTER}.ipynb", course / "gradebook.db",
             course / "autograded" / alice, hub.exchange / class_hub.COURSE_ID / "feedback",
             hub.exchange / class_hub.COURSE_ID / "outbound" / CHAPTER / f"{CHAPTER}.ipynb"]
    done = class_hub.as_user(bob, [str(hub.python), "-c", READ_PROBE, *map(str, paths)], hub,
                             timeout=60)
    assert done.returncode == 0, done.stderr
    readable = {Path(p): ok for p, ok in json.loads(done.stdout).items()}
    assert readable == {p: p in (mine, paths[-1]) for p in paths}, readable
    # What the exchange gives every student holds no solution and no hidden test.
    released = nbformat.read(paths[-1], as_version=4)
    assert leaked_solution_lines(INSTRUCTOR_NB, released) == []
    assert leaked_hidden_tests(INSTRUCTOR_NB, paths[-1]) == {}
    # Nothing a student has, under their home, holds a hidden test (notebooks, HTML, any file).
    for student in hub.students:
        found = leaked_hidden_tests(INSTRUCTOR_NB, hub.home(student))
        assert found == {}, found


def test_the_gradebook_and_the_export_hold_what_was_submitted(hub, pages):
    scores = _gradebook(hub)
    alice, bob = hub.students
    assert {s: v["total"] for s, v in scores.items()} == {
        alice: AUTO["alice"] + MANUAL["alice"], bob: AUTO["bob"] + MANUAL["bob"]}
    assert scores[bob]["ex2-check"] == 0 and scores[alice]["ex2-check"] == POINTS["ex2-check"]
    done = class_hub.as_user(hub.instructor, [str(hub.python.parent / "nbgrader"), "export",
                                              "--to", "grades.csv"], hub, cwd=hub.course)
    assert done.returncode == 0, done.stderr[-2000:]
    with (hub.course / "grades.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["assignment"], r["student_id"], float(r["score"]), float(r["max_score"]))
            for r in rows] == [(CHAPTER, alice, AUTO["alice"] + MANUAL["alice"], MAX),
                               (CHAPTER, bob, AUTO["bob"] + MANUAL["bob"], MAX)]
    # 00_start_here is in the gradebook (generated, never released): no row for it.
    with sqlite3.connect(hub.course / "gradebook.db") as db:
        names = {n for (n,) in db.execute("select name from assignment")}
    assert names == {CHAPTER, "00_start_here"}


def test_formgrader_totals_span_the_gradebook_and_each_chapter_shows_its_own(hub, pages, shots):
    """Manage Students: a student's total is over every assignment in the gradebook (nbgrader's
    Student.max_score sums them all: here the released chapter and 00_start_here, generated
    only); the student's own page shows each chapter out of its own points."""
    page, alice = pages[hub.instructor], hub.students[0]
    gradebook_max = MAX + sum(
        float(c.metadata.nbgrader["points"]) for c in nbformat.read(
            ROOT / "notebooks" / "00_start_here.ipynb", as_version=4).cells
        if c.metadata.get("nbgrader", {}).get("grade"))
    total = AUTO["alice"] + MANUAL["alice"]
    _formgrader(page, hub, "manage_students")
    _wait_row(page, alice, rf"\t{total:g} / {gradebook_max:g}\t")
    assert "Alice" in page.locator("#main-table tr", has_text=alice).inner_text()
    page.screenshot(path=str(shots / "hub-formgrader-students.png"))
    _formgrader(page, hub, f"manage_students/{alice}")
    _wait_row(page, CHAPTER, rf"{total:g} / {MAX:g}")


# ----------------------------------------------------------------------------- set-up errors

def test_a_folder_other_users_cannot_enter_is_named():
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # /tmp: open to every user
        Path(folder).chmod(0o755)
        private = Path(folder) / "private"
        (private / "class").mkdir(parents=True)
        private.chmod(0o700)
        assert class_hub.blocked_for_others(private / "class") == private
        private.chmod(0o755)
        (private / "class").chmod(0o755)
        assert class_hub.blocked_for_others(private / "class") is None


def test_existing_accounts_are_refused_before_anything_is_made():
    with pytest.raises(class_hub.ClassSetupError, match=r"root exist already\. Fix: --prefix"):
        class_hub.create_accounts(["root"])


def test_ports_are_below_the_range_the_system_hands_out():
    taken: set[int] = set()
    ports = [class_hub.free_port(taken) for _ in range(5)]
    assert len(set(ports)) == 5 and all(20000 <= p < 32000 for p in ports)


def test_the_class_model_server_is_set_once_for_every_user(tmp_path):
    """COURSE_MODEL given to make class reaches every user's server (c.Spawner.environment)."""
    from types import SimpleNamespace

    from traitlets.config.loader import PyFileConfigLoader

    if not class_hub.PROXY.exists():
        pytest.skip("make class-proxy installs the proxy the hub configuration names")
    cls = class_hub.ClassHub(state=tmp_path, prefix="cfg-", model="http://gpu-box:8000/v1")
    (tmp_path / "jupyterhub_config.py").write_text(class_hub.hub_config(cls))
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(tmp_path)).load_config()
    environment = config.Spawner.environment
    for user in cls.users:
        spawner = SimpleNamespace(user=SimpleNamespace(name=user))
        values = {k: v(spawner) if callable(v) else v for k, v in environment.items()}
        assert values["COURSE_MODEL"] == "http://gpu-box:8000/v1"
        role = "instructor" if user == cls.instructor else "student"
        assert values["JUPYTER_CONFIG_PATH"] == str(tmp_path / f"jupyter-{role}")
    assert config.Authenticator.allowed_users == set(cls.users)
