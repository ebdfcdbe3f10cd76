"""nbgrader as the course runs it: the course template in ``nbgrader/`` driven by nbgrader's own
command line (generate_assignment, autograde, export), every kernel in the course's sandbox and
every check cell guarded (``classroom.grading.execute``).

Two courses, three submissions each: full (right answers), untouched (the release), one wrong.

- A chapter as an instructor assigns it: ``03_agent_loop`` (six auto-graded checks, 10 points:
  the quiz and five exercises, and a written answer worth 3 that nbgrader leaves for manual
  grading). Its "one wrong" submission answers exercise 2 (the agent loop) with a loop fitted to
  the visible asserts only, which the hidden tests catch: 8 of 10.
- The fixture notebook ``tests/fixtures/source/practice.ipynb`` (three checks, 5 points, no
  model), with a second assignment nobody submits.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import RIGHT, WRONG_ANSWERS, fill

from nbharness import core_path, hand_in_quiz

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "source" / "practice.ipynb"
EXPECTED = {"full": 5.0, "untouched": 0.0, "one_wrong": 1.0}


CHAPTER = "03_agent_loop"
CHAPTER_EXPECTED = {"full": 10.0, "untouched": 0.0, "one_wrong": 8.0}
# Exercise 2 answered for the visible cases only: repeat detection on the call alone passes the
# stuck agent (its repeats return the same page); a hidden test (the same call, a new result each
# time) catches it.
FITTED_TO_THE_VISIBLE_ASSERT = """from course.loop.agent_loop import StopReason, call_and_observe, decide, start_messages
from course.tools.registry import as_registry


def agent_loop(task, model, tools, rules):
    registry = as_registry(tools)
    messages, steps, called = start_messages(task, registry), [], set()
    for _ in range(rules.max_steps):
        step = decide(model, task, messages, steps, registry)
        steps.append(step)
        if step.final_answer is not None:
            return steps, StopReason.FINAL_ANSWER
        if rules.token_budget is not None and step.total_tokens > rules.token_budget:
            return steps, StopReason.TOKEN_BUDGET
        call_and_observe(step, registry, messages)
        if step.call is not None and rules.repeat_detection:
            if step.call.key() in called:
                return steps, StopReason.REPEAT
            called.add(step.call.key())
    return steps, StopReason.MAX_STEPS"""


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "COURSE_TORCH_THREADS": "1"}  # kernels share 2 cores here
    done = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), *args], cwd=course,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("nbgrader-course")
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    (course / "source" / "practice").mkdir(parents=True)
    shutil.copy(SOURCE, course / "source" / "practice" / "practice.ipynb")
    _nbgrader(course, "generate_assignment", "practice", "--force")
    # A second assignment nobody submits: the export must not list it.
    (course / "source" / "unsubmitted").mkdir()
    shutil.copy(SOURCE, course / "source" / "unsubmitted" / "unsubmitted.ipynb")
    _nbgrader(course, "generate_assignment", "unsubmitted", "--force")
    release = nbformat.read(course / "release" / "practice" / "practice.ipynb", as_version=4)
    submissions = {"full": fill(nbformat.from_dict(release), dict(RIGHT)),
                   "untouched": nbformat.from_dict(release),
                   "one_wrong": fill(nbformat.from_dict(release), dict(WRONG_ANSWERS))}
    for student, nb in submissions.items():
        folder = course / "submitted" / student / "practice"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "practice.ipynb")
    autograde = _nbgrader(course, "autograde", "practice", "--force")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    return {"dir": course, "log": autograde.stderr}


def _solutions(instructor: nbformat.NotebookNode) -> dict[str, str]:
    """Each solution cell as a student who got it right would leave it (markers removed)."""
    return {c.id: "\n".join(line for line in c.source.splitlines() if "### " not in line)
            for c in instructor.cells
            if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")}


@pytest.fixture(scope="module")
def chapter_course(tmp_path_factory):
    """A course folder with chapter 03 assigned and three submissions autograded by nbgrader."""
    course = tmp_path_factory.mktemp("nbgrader-chapter")
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    (course / "source" / CHAPTER).mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / f"{CHAPTER}.ipynb", course / "source" / CHAPTER)
    _nbgrader(course, "generate_assignment", CHAPTER, "--force")
    release = nbformat.read(course / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    right = _solutions(nbformat.read(ROOT / "notebooks" / f"{CHAPTER}.ipynb", as_version=4))
    assert set(right) == {"ex1-solution", "ex2-solution", "ex3-solution",
                          "ex4-solution", "ex6-solution"}
    written = "The stop rule ends the run; the loop never asks whether it should."
    submissions = {"full": fill(nbformat.from_dict(release), {**right, "ex5-answer": written}),
                   "untouched": nbformat.from_dict(release),
                   "one_wrong": fill(nbformat.from_dict(release),
                                     {**right, "ex2-solution": FITTED_TO_THE_VISIBLE_ASSERT})}
    for student, nb in submissions.items():
        folder = course / "submitted" / student / CHAPTER
        folder.mkdir(parents=True)
        # Handed in without Going further (no grade id there; the chapter tests run it).
        nbformat.write(core_path(nb), folder / f"{CHAPTER}.ipynb")
        if student != "untouched":
            hand_in_quiz(CHAPTER, folder)  # the quiz clicked right in the widget
    _nbgrader(course, "autograde", CHAPTER, "--force")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    return course


def test_nbgrader_scores_a_chapter_as_assigned(chapter_course):
    with (chapter_course / "grades.csv").open() as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert {s: float(rows[s]["score"]) for s in CHAPTER_EXPECTED} == CHAPTER_EXPECTED
    assert {float(rows[s]["max_score"]) for s in CHAPTER_EXPECTED} == {13.0}  # 10 auto + 3 by hand
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{chapter_course / 'gradebook.db'}") as gb:
        wrong = {g.name: g.auto_score for g in
                 gb.find_submission_notebook(CHAPTER, CHAPTER, "one_wrong").grades}
        written = {s: gb.find_submission_notebook(CHAPTER, CHAPTER, s).needs_manual_grade
                   for s in CHAPTER_EXPECTED}
    assert wrong["ex2-check"] == 0 and wrong["ex1-check"] == 2 and wrong["ex4-check"] == 1
    assert wrong["quiz-check"] == 1 and wrong["ex6-check"] == 2
    # A written answer waits for the instructor in formgrader; an untouched one scores 0 at once.
    assert written == {"full": True, "untouched": False, "one_wrong": False}


def test_nbgrader_generates_a_release_without_solutions(course):
    release = (course["dir"] / "release" / "practice" / "practice.ipynb").read_text()
    assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release
    assert "raise NotImplementedError()" in release
    assert (course["dir"] / "gradebook.db").is_file()


def test_nbgrader_exports_the_expected_scores(course):
    with (course["dir"] / "grades.csv").open() as f:
        listed = list(csv.DictReader(f))
    rows = {row["student_id"]: row for row in listed}
    assert {s: float(rows[s]["score"]) for s in EXPECTED} == EXPECTED
    assert {float(rows[s]["max_score"]) for s in EXPECTED} == {5.0}
    # only what was submitted: no 0.0 row for the assignment nobody handed in
    assert sorted((r["assignment"], r["student_id"]) for r in listed) == sorted(
        ("practice", s) for s in EXPECTED)


def test_autograde_takes_an_untouched_check_cell_for_the_released_one(course):
    """nbgrader records a check cell before removing its hidden tests; the template's
    KeepReleasedCells keeps autograde from calling the released cell changed."""
    assert "checksum" not in course["log"], course["log"][-2000:]
    assert "Attribute" not in course["log"]


def test_autograde_runs_the_course_execute_step(course):
    """Each notebook was run by the course's Execute step (it records its run's time), and an
    untouched check cell, run and failed, scores 0 through nbgrader's own gradebook."""
    from nbgrader.api import Gradebook

    for student in EXPECTED:
        graded = course["dir"] / "autograded" / student / "practice" / "practice.ipynb"
        seconds = nbformat.read(graded, as_version=4).metadata["grading"]["seconds"]
        assert 0 < seconds < 600
    with Gradebook(f"sqlite:///{course['dir'] / 'gradebook.db'}") as gb:
        untouched = {g.name: g.auto_score for g in
                     gb.find_submission_notebook("practice", "practice", "untouched").grades
                     if g.cell_type == "code"}
    assert untouched == {"ex1-check": 0.0, "ex2-check": 0.0, "ex3-check": 0.0}
