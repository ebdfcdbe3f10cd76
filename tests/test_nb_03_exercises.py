"""Chapter 03's exercise checks, run against right and wrong answers without executing the notebook.

Each check cell (instructor edition, hidden tests included) runs in grading mode with the names
the notebook defines before it and one candidate answer: the reference answer must pass;
constant and shortcut answers must fail.
"""

import nbformat
import pytest

from course.agents.offline_tools import make_tools
from course.checks import check
from course.loop.agent_loop import StopRules, run_loop
from course.loop.reliability import simulate_chain
from course.loop.scenarios import stuck_search_model
from nbharness import NOTEBOOKS, Exercises

EXERCISES = Exercises("03_agent_loop.ipynb")


@pytest.fixture
def names():
    # ``check``: the first check cell imports it for the later ones
    return {"run_loop": run_loop, "StopRules": StopRules, "stuck_search_model": stuck_search_model,
            "search_tools": make_tools(["web_search"]), "simulate_chain": simulate_chain,
            "weather_task": "What is the current weather in Paris?", "check": check}


@pytest.mark.parametrize("exercise", [1, 2, 3, 4])
def test_reference_answers_pass(names, exercise):
    verdict = EXERCISES.grade(exercise, names)
    assert verdict.passed, verdict


WRONG = {
    1: [lambda steps: None, lambda steps: 3, lambda steps: len(steps) or None,
        lambda steps: next((i for i, (c, _) in enumerate(steps, 1)
                            if c in [x for x, _ in steps[: i - 1]]), None)],  # ignores the result
    2: [lambda n: 0, lambda n: 5000, lambda n: n * 500, lambda n: None],
    3: [lambda p, n, r: p ** n, lambda p, n, r: 0.6, lambda p, n, r: min(1.0, p ** n * (1 + r)),
        lambda p, n, r: 1 - (1 - p ** n) ** (r + 1)],  # retries the whole run, not a step
    4: [lambda messages: list(messages), lambda messages: messages[:2],
        lambda messages: messages[-2:]],
}


@pytest.mark.parametrize("exercise, wrong", [(n, f) for n, fs in WRONG.items() for f in fs])
def test_constant_and_shortcut_answers_fail(names, exercise, wrong):
    verdict = EXERCISES.grade(exercise, names, wrong)
    assert verdict.rejected, verdict  # by the check's assertion: a check that crashes fails here


def test_the_written_question_is_manually_graded_with_a_rubric():
    nb = nbformat.read(NOTEBOOKS / EXERCISES.notebook, as_version=4)
    answer = next(c for c in nb.cells if c.get("id") == "ex5-answer")
    meta = answer.metadata["nbgrader"]
    assert answer.cell_type == "markdown" and meta["grade"] and meta["solution"] and meta["points"] >= 1
    assert "**Model answer.**" in answer.source and "**Rubric (" in answer.source
