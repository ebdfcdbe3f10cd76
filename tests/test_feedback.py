"""Feedback a student keeps holds no hidden test, for every chapter.

One nbgrader course with every chapter assigned, one student's submission of each (the
instructor's answers, except chapter 03's exercise 2 fitted to the visible assert only, so a
hidden assert fails and its traceback would quote it): autograded once, chapter 03 with a run
and the others without one (``EXECUTED`` below), then

- nbgrader's own ``generate_feedback`` (the course template's chain, ``HideHiddenTests``
  included): no HTML page holds a line between the hidden-test markers of its chapter;
- the class grader's hand-back (``classroom.grading.feedback.without_hidden_tests``, what
  ``make grade --feedback`` writes, see tests/test_grading.py for the whole grader) applied to
  the same executed notebooks: none either, while the autograded notebooks themselves do.

Each submission leaves out the chapter's ``## Going further`` cells (after the exercises): they
carry no grade id and no hidden test, nbgrader tracks only cells with a grade id (a student may
delete the others), and they are the slow live runs (02's and 03's fine-tuned model, 04's live
team) that the chapter tests and the browser test already run.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import fill
from test_nbgrader_pipeline import FITTED_TO_THE_VISIBLE_ASSERT, _nbgrader, _solutions

from classroom.grading.feedback import leaked_hidden_tests, without_hidden_tests
from nbharness import core_path, hand_in_quiz

ROOT = Path(__file__).resolve().parents[1]
# The graded chapters: those with a quiz (an appendix without one has no graded cell).
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9A]*_*.ipynb")
                  if (ROOT / "notebooks" / f"quiz_{p.name[:2]}.json").exists())
STUDENT = "alice"


def _instructor(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The nbgrader course, every chapter assigned and submitted; a chapter is autograded when a
    test first asks for it (``graded``), so ``-k <chapter>`` grades that chapter alone."""
    import shutil

    course = tmp_path_factory.mktemp("nbgrader-feedback")
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    for chapter in CHAPTERS:
        (course / "source" / chapter).mkdir(parents=True)
        shutil.copy(ROOT / "notebooks" / f"{chapter}.ipynb", course / "source" / chapter)
        _nbgrader(course, "generate_assignment", chapter, "--force")
        release = nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)
        answers = _solutions(_instructor(chapter))
        if chapter == "03_agent_loop":
            answers["ex2-solution"] = FITTED_TO_THE_VISIBLE_ASSERT
        folder = course / "submitted" / STUDENT / chapter
        folder.mkdir(parents=True)
        nbformat.write(core_path(fill(release, answers)), folder / f"{chapter}.ipynb")
        hand_in_quiz(chapter, folder)
    return course


_GRADED: set[str] = set()
# The chapter whose autograde runs its kernel: a failed hidden test's traceback and the checks'
# printed verdicts exist only in a run. The others are autograded with nbgrader's own Execute
# preprocessor switched off (``--Execute.enabled=False``): what can leak there is the hidden
# tests' source, which nbgrader writes back into the cells with or without a run. Each chapter's
# run is its own test module's (and the class's grades are nbgrader's run of chapter 03 in
# tests/test_nbgrader_pipeline.py and tests/test_class_hub.py).
EXECUTED = ("03_agent_loop",)


def graded(course: Path, chapter: str) -> Path:
    """``course`` with ``chapter`` autograded and its feedback generated (once per module)."""
    if chapter not in _GRADED:
        run = () if chapter in EXECUTED else ("--Execute.enabled=False",)
        _nbgrader(course, "autograde", chapter, "--force", *run)
        _nbgrader(course, "generate_feedback", chapter, "--force")
        _GRADED.add(chapter)
    return course


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_nbgrader_feedback_holds_no_hidden_test(course, chapter):
    graded(course, chapter)
    pages = sorted((course / "feedback" / STUDENT / chapter).glob("*.html"))
    assert [p.name for p in pages] == [f"{chapter}.html"]
    assert leaked_hidden_tests(_instructor(chapter), course / "feedback" / STUDENT / chapter) == {}
    if chapter in EXECUTED:
        assert "[passed]" in pages[0].read_text()  # the check's verdict stays


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_hand_back_holds_no_hidden_test(course, chapter, tmp_path):
    graded(course, chapter)
    executed = course / "autograded" / STUDENT / chapter / f"{chapter}.ipynb"
    instructor = _instructor(chapter)
    assert leaked_hidden_tests(instructor, executed), "the graded notebook runs the hidden tests"
    nbformat.write(without_hidden_tests(nbformat.read(executed, as_version=4)),
                   tmp_path / executed.name)
    assert leaked_hidden_tests(instructor, tmp_path) == {}
    text = (tmp_path / executed.name).read_text()
    assert "### BEGIN HIDDEN TESTS" not in text
    assert "[passed]" in text or chapter not in EXECUTED


def test_a_failed_hidden_test_keeps_its_verdict_not_its_source(course):
    graded(course, "03_agent_loop")
    page = (course / "feedback" / STUDENT / "03_agent_loop" / "03_agent_loop.html").read_text()
    assert "[try again] Exercise 2: agent_loop" in page
    assert "CheckFailed" in page
