"""Chapter 02's exercise checks, run against right and wrong answers without executing the notebook.

Each check cell (instructor edition, hidden tests included) is executed in grading mode with the
names the notebook defines (the replays of the shipped recordings) and one candidate answer.
The reference answer must pass; constant and keyword answers must fail.
"""

import re

import nbformat
import pytest

from nbharness import NOTEBOOKS, Exercises

EXERCISES = Exercises("02_code_agent_runs.ipynb")


@pytest.fixture
def names(replays):
    return {"weather": replays["weather_note"], "bond": replays["bond_note"],
            "debug": replays["debug_note"], "bond_72b": replays["bond_reference_72b"],
            "debug_72b": replays["debug_reference_72b"], "ideal": replays["bond_ideal_react"]}


def grade(names: dict, exercise: int, answer=None):
    """Exercise ``exercise``'s verdict on the reference solution or ``answer``."""
    # earlier checks define helpers (``searches``) and imports that later checks reuse
    before = [f"ex{earlier}-{cell}" for earlier in range(1, exercise) for cell in ("solution", "check")]
    return EXERCISES.grade(exercise, names, answer, before=before)


@pytest.mark.parametrize("exercise", [1, 2, 3])
def test_reference_answers_pass(names, exercise):
    verdict = grade(names, exercise)
    assert verdict.passed, verdict


WRONG = {
    1: [lambda run: [], lambda run: ["21"],
        lambda run: re.findall(r"\d+(?:\.\d+)?", str(run.final_answer or "")),  # ignores observations
        lambda run: [n for n in re.findall(r"\d+(?:\.\d+)?", str(run.final_answer or ""))
                     if n not in " ".join(s.observation for s in run.steps)]],  # reads the answering step
    2: [lambda run: None, lambda run: 3, lambda run: 2,
        lambda run: next((s.number for s in run.steps if len(s.tool_calls) > 1), None),
        lambda run: next((b.number for a, b in zip(run.steps, run.steps[1:], strict=False)
                          if [c.arguments for c in a.tool_calls] == [c.arguments for c in b.tool_calls]
                          and a.tool_calls), None)],  # exact match only, neighbours only
    3: [lambda run: True, lambda run: False,
        lambda run: "web_search" in run.tool_names_called(),  # counts the answering step
        lambda run: any(s.tool_calls for s in run.steps if not s.is_final_answer)],  # any tool
}


@pytest.mark.parametrize("exercise, wrong", [(n, f) for n, fs in WRONG.items() for f in fs])
def test_constant_and_shortcut_answers_fail(names, exercise, wrong):
    verdict = grade(names, exercise, wrong)
    assert verdict.rejected, verdict


def test_the_written_question_is_manually_graded_with_a_rubric():
    nb = nbformat.read(NOTEBOOKS / EXERCISES.notebook, as_version=4)
    answer = next(c for c in nb.cells if c.get("id") == "ex4-answer")
    meta = answer.metadata["nbgrader"]
    assert answer.cell_type == "markdown" and meta["grade"] and meta["solution"] and meta["points"] >= 1
    assert "**Model answer.**" in answer.source and "**Rubric (" in answer.source
