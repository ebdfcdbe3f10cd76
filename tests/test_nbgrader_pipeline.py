"""nbgrader as the course runs it: the course template in ``nbgrader/`` driven by nbgrader's own
command line (generate_assignment, autograde, export), started as the class grader starts it
(``classroom.grading.nbgrader_cli``), every kernel in the course's sandbox and every check cell
guarded (``classroom.grading.execute``).

One course, two assignments handed in, three submissions each: full (right answers), untouched (the
release), one wrong; nbgrader runs each step once over the whole course.

- A chapter as an instructor assigns it: ``03_agent_loop`` (six auto-graded checks, 10 points:
  the quiz and five exercises, and a written answer worth 3 that nbgrader leaves for manual
  grading). The full submission is the whole chapter up to its exercises, which runs in the
  sandbox without an error or a warning. The other two hand in the exercises with the cells
  they read (``exercises_and_what_they_read``: the model's demonstrations left out, as a student
  may, since nbgrader grades the cells with a grade id): one answers nothing, and "one wrong" answers
  exercise 2 (the agent loop) with a loop fitted to the visible asserts only, which the hidden
  tests catch: 8 of 10. Its feedback is checked here as tests/test_feedback.py checks every other
  chapter's (no hidden test in what a student keeps), since this is the course whose autograde
  runs the chapter: a failed hidden test's traceback and the checks' printed verdicts exist only
  in a run.
- The fixture notebook ``tests/fixtures/source/practice.ipynb`` (three checks, 5 points, no
  model), with a second assignment nobody submits.
"""

from __future__ import annotations

import ast
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import RIGHT, WRONG_ANSWERS, fill

from classroom.grading.feedback import leaked_hidden_tests, without_hidden_tests
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


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "COURSE_TORCH_THREADS": "1"}  # kernels share 2 cores here
    done = subprocess.run([sys.executable, "-m", "classroom.grading.nbgrader_cli", *args],
                          cwd=course, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done


def _solutions(instructor: nbformat.NotebookNode) -> dict[str, str]:
    """Each solution cell as a student who got it right would leave it (markers removed)."""
    return {c.id: "\n".join(line for line in c.source.splitlines() if "### " not in line)
            for c in instructor.cells
            if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")}


def _top_level_names(source: str) -> set[str]:
    """The names a cell's code binds at the top level (assigned, imported, defined), not those
    local to its functions."""
    bound: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            bound.update(n.id for n in ast.walk(node)
                         if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    return bound


def exercises_and_what_they_read(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with, of its code cells, only those nbgrader tracks (the quiz, the answers and the
    checks) and the earlier cells that bind a name a kept cell reads (and not itself). A
    submission a student may make: nbgrader grades the cells with a grade id. Names are read from
    the code, so a name a cell binds only when it runs (``globals()[...]``) is not seen: a check
    that needs one fails, and its score says so."""
    needed: set[str] = set()
    kept = []
    for cell in reversed(nb.cells):
        if cell.cell_type != "code":
            kept.append(cell)
            continue
        bound = _top_level_names(cell.source)
        if "nbgrader" in cell.metadata or bound & needed:
            kept.append(cell)
            needed |= {n.id for n in ast.walk(ast.parse(cell.source))
                       if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound
    nb.cells = kept[::-1]
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """One course folder, every step one nbgrader run over every assignment (the assignment id
    ``*``): the practice notebook, a second assignment nobody submits (the export must not list
    it) and chapter 03, three submissions of each autograded, exported, and the chapter's
    feedback generated."""
    course = tmp_path_factory.mktemp("nbgrader-course")
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    for assignment in ("practice", "unsubmitted"):
        (course / "source" / assignment).mkdir(parents=True)
        shutil.copy(SOURCE, course / "source" / assignment / f"{assignment}.ipynb")
    (course / "source" / CHAPTER).mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / f"{CHAPTER}.ipynb", course / "source" / CHAPTER)
    _nbgrader(course, "generate_assignment", "*", "--force")
    release = nbformat.read(course / "release" / "practice" / "practice.ipynb", as_version=4)
    submissions = {"full": fill(nbformat.from_dict(release), dict(RIGHT)),
                   "untouched": nbformat.from_dict(release),
                   "one_wrong": fill(nbformat.from_dict(release), dict(WRONG_ANSWERS))}
    for student, nb in submissions.items():
        folder = course / "submitted" / student / "practice"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "practice.ipynb")
    _hand_in_the_chapter(course)
    autograde = _nbgrader(course, "autograde", "*", "--force")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    _nbgrader(course, "generate_feedback", CHAPTER, "--force")
    return {"dir": course, "log": autograde.stderr}


def _hand_in_the_chapter(course: Path) -> None:
    """Chapter 03's three submissions, from its release in ``course``."""
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
        # Handed in without Going further (no grade id there; the chapter tests run it), and
        # but for the full one, without the demonstrations the exercises do not read.
        handed_in = core_path(nb) if student == "full" else exercises_and_what_they_read(core_path(nb))
        nbformat.write(handed_in, folder / f"{CHAPTER}.ipynb")
        if student != "untouched":
            hand_in_quiz(CHAPTER, folder)  # the quiz clicked right in the widget


@pytest.fixture(scope="module")
def chapter_course(course) -> Path:
    """The course folder, read for chapter 03."""
    return course["dir"]


def _rows(course: Path, assignment: str) -> dict[str, dict[str, str]]:
    """The export's rows of ``assignment``, by student."""
    with (course / "grades.csv").open() as f:
        return {row["student_id"]: row for row in csv.DictReader(f)
                if row["assignment"] == assignment}


def test_nbgrader_scores_a_chapter_as_assigned(chapter_course):
    rows = _rows(chapter_course, CHAPTER)
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


def test_the_whole_chapter_runs_in_the_sandbox_and_the_others_hand_in_less(chapter_course):
    """The full submission ran every cell of the chapter up to its exercises in the sandbox
    (the model's demonstrations included) without an error or a warning; the two others ran
    fewer cells."""
    ran = {}
    for student in CHAPTER_EXPECTED:
        graded = chapter_course / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb"
        ran[student] = [c for c in nbformat.read(graded, as_version=4).cells
                        if c.cell_type == "code"]
    released = nbformat.read(chapter_course / "release" / CHAPTER / f"{CHAPTER}.ipynb",
                             as_version=4)
    assert [c.id for c in ran["full"]] == [c.id for c in core_path(released).cells
                                           if c.cell_type == "code"]
    assert all(c.execution_count for c in ran["full"] if c.source.strip())
    errors = {c.id: o.ename for c in ran["full"] for o in c.outputs if o.output_type == "error"}
    assert errors == {}
    # Nothing on stderr either: the sandbox's /tmp, where the kernel's IPython and matplotlib
    # keep their folders, is the kernel's to write (else matplotlib warns in the feedback).
    stderr = {c.id: o.text[:200] for c in ran["full"] for o in c.outputs
              if o.output_type == "stream" and o.name == "stderr"}
    assert stderr == {}
    assert max(len(ran["untouched"]), len(ran["one_wrong"])) < len(ran["full"])


def test_nbgrader_generates_a_release_without_solutions(course):
    release = (course["dir"] / "release" / "practice" / "practice.ipynb").read_text()
    assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release
    assert "raise NotImplementedError()" in release
    assert (course["dir"] / "gradebook.db").is_file()


def test_the_gradebook_holds_the_migration_head_alembic_gives(course, monkeypatch):
    """The gradebook ``nbgrader_cli`` created records the head nbgrader's own ``alembic heads``
    process prints, which ``nbgrader db upgrade`` starts from."""
    import sqlite3

    from nbgrader.api import get_alembic_version

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with sqlite3.connect(course["dir"] / "gradebook.db") as db:
        recorded = db.execute("select version_num from alembic_version").fetchall()
    assert recorded == [(get_alembic_version(),)]


def test_nbgrader_exports_the_expected_scores(course):
    with (course["dir"] / "grades.csv").open() as f:
        listed = list(csv.DictReader(f))
    rows = _rows(course["dir"], "practice")
    assert {s: float(rows[s]["score"]) for s in EXPECTED} == EXPECTED
    assert {float(rows[s]["max_score"]) for s in EXPECTED} == {5.0}
    # only what was submitted: no 0.0 row for the assignment nobody handed in
    assert sorted((r["assignment"], r["student_id"]) for r in listed) == sorted(
        [("practice", s) for s in EXPECTED] + [(CHAPTER, s) for s in CHAPTER_EXPECTED])


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


# ----------------------------------------------------------------------------- chapter 03's feedback


def assert_hand_back_holds_no_hidden_test(instructor: nbformat.NotebookNode, executed: Path,
                                          folder: Path) -> str:
    """The autograded notebook ``executed`` holds hidden tests; the class grader's hand-back of
    it (``without_hidden_tests``, what ``make grade --feedback`` writes), written into
    ``folder``, holds none. Its text."""
    assert leaked_hidden_tests(instructor, executed), "the graded notebook runs the hidden tests"
    nbformat.write(without_hidden_tests(nbformat.read(executed, as_version=4)),
                   folder / executed.name)
    assert leaked_hidden_tests(instructor, folder) == {}
    text = (folder / executed.name).read_text()
    assert "### BEGIN HIDDEN TESTS" not in text
    return text


def _chapter_feedback(course: Path) -> Path:
    """one_wrong's feedback folder for the chapter (what nbgrader's ``generate_feedback`` wrote)."""
    return course / "feedback" / "one_wrong" / CHAPTER


def test_nbgrader_feedback_of_a_run_holds_no_hidden_test(chapter_course):
    """nbgrader's own ``generate_feedback`` (the course template's chain, ``HideHiddenTests``
    included) after a run: no line between the hidden-test markers, each check's verdict kept."""
    instructor = nbformat.read(ROOT / "notebooks" / f"{CHAPTER}.ipynb", as_version=4)
    pages = sorted(_chapter_feedback(chapter_course).glob("*.html"))
    assert [p.name for p in pages] == [f"{CHAPTER}.html"]
    assert leaked_hidden_tests(instructor, _chapter_feedback(chapter_course)) == {}
    assert "[passed]" in pages[0].read_text()  # the check's verdict stays


def test_a_failed_hidden_test_keeps_its_verdict_not_its_source(chapter_course):
    page = (_chapter_feedback(chapter_course) / f"{CHAPTER}.html").read_text()
    assert "[try again] Exercise 2: agent_loop" in page
    assert "CheckFailed" in page


def test_hand_back_of_a_run_holds_no_hidden_test(chapter_course, tmp_path):
    instructor = nbformat.read(ROOT / "notebooks" / f"{CHAPTER}.ipynb", as_version=4)
    executed = chapter_course / "autograded" / "one_wrong" / CHAPTER / f"{CHAPTER}.ipynb"
    assert "[passed]" in assert_hand_back_holds_no_hidden_test(instructor, executed, tmp_path)
