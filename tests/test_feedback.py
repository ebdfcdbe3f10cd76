"""Feedback a student keeps holds no hidden test, for every chapter.

One nbgrader course with every graded chapter but 03 assigned, one student's submission of each
(the instructor's answers), autograded without a run, then

- nbgrader's own ``generate_feedback`` (the course template's chain, ``HideHiddenTests``
  included): no HTML page holds a line between the hidden-test markers of its chapter;
- the class grader's hand-back (``classroom.grading.feedback.without_hidden_tests``, what
  ``make grade --feedback`` writes, see tests/test_grading.py for the whole grader) applied to
  the same autograded notebooks: none either, while the autograded notebooks themselves do.

Each nbgrader step runs once over every chapter (the assignment id ``*``). The chapters are
autograded with nbgrader's own Execute preprocessor switched off (``--Execute.enabled=False``):
what can leak there is the hidden tests' source, which nbgrader writes back into the cells with or
without a run, and each chapter's run is its own test module's. Chapter 03 is checked the same
way in tests/test_nbgrader_pipeline.py, whose course autogrades it with a run (a failed hidden
test's traceback and the checks' printed verdicts exist only in a run); the class's grades are
nbgrader's run of chapter 03 there and in tests/test_class_hub.py.

Each submission leaves out the chapter's ``## Going further`` cells (after the exercises): they
carry no grade id and no hidden test, nbgrader tracks only cells with a grade id (a student may
delete the others), and they are the slow live runs (02's and 03's fine-tuned model, 04's live
team) that the chapter tests and the browser test already run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import fill
from test_nbgrader_pipeline import CHAPTER as RUN_IN_THE_PIPELINE
from test_nbgrader_pipeline import _nbgrader, _solutions, assert_hand_back_holds_no_hidden_test

from classroom.grading.feedback import leaked_hidden_tests
from nbharness import core_path, hand_in_quiz

ROOT = Path(__file__).resolve().parents[1]
# The graded chapters (those with a quiz: an appendix without one has no graded cell), but the
# one tests/test_nbgrader_pipeline.py autogrades with a run.
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9A]*_*.ipynb")
                  if (ROOT / "notebooks" / f"quiz_{p.name[:2]}.json").exists()
                  and p.stem != RUN_IN_THE_PIPELINE)
STUDENT = "alice"


def _instructor(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The nbgrader course, every chapter assigned, submitted, autograded and its feedback
    generated."""
    course = tmp_path_factory.mktemp("nbgrader-feedback")
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    for chapter in CHAPTERS:
        (course / "source" / chapter).mkdir(parents=True)
        shutil.copy(ROOT / "notebooks" / f"{chapter}.ipynb", course / "source" / chapter)
    _nbgrader(course, "generate_assignment", "*", "--force")
    for chapter in CHAPTERS:
        release = nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)
        folder = course / "submitted" / STUDENT / chapter
        folder.mkdir(parents=True)
        answers = _solutions(_instructor(chapter))
        nbformat.write(core_path(fill(release, answers)), folder / f"{chapter}.ipynb")
        hand_in_quiz(chapter, folder)
    _nbgrader(course, "autograde", "*", "--force", "--Execute.enabled=False")
    _nbgrader(course, "generate_feedback", "*", "--force")
    return course


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_nbgrader_feedback_holds_no_hidden_test(course, chapter):
    feedback = course / "feedback" / STUDENT / chapter
    pages = sorted(feedback.glob("*.html"))
    assert [p.name for p in pages] == [f"{chapter}.html"]
    assert leaked_hidden_tests(_instructor(chapter), feedback) == {}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_hand_back_holds_no_hidden_test(course, chapter, tmp_path):
    executed = course / "autograded" / STUDENT / chapter / f"{chapter}.ipynb"
    assert_hand_back_holds_no_hidden_test(_instructor(chapter), executed, tmp_path)
