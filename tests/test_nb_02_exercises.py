"""Chapter 02's exercise checks, run against right and wrong answers without executing the notebook.

Each check cell (instructor edition, hidden tests included) is executed in grading mode with the
names the notebook defines (the replays of the shipped recordings) and one candidate answer.
The reference answer must pass; constant and keyword answers must fail.
"""

import re
from pathlib import Path

import nbformat
import pytest

from course.checks import CheckFailed
from nbharness import cell_sources

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "02_code_agent_runs.ipynb"


def cell(cell_id: str) -> str:
    return cell_sources(NOTEBOOK.name)[cell_id]


@pytest.fixture
def names(replays, monkeypatch):
    monkeypatch.setenv("COURSE_GRADING", "1")
    return {"weather": replays["weather_note"], "bond": replays["bond_note"],
            "debug": replays["debug_note"], "bond_72b": replays["bond_reference_72b"],
            "debug_72b": replays["debug_reference_72b"], "ideal": replays["bond_ideal_react"]}


def grade(names: dict, exercise: int, answer=None) -> None:
    """Run exercise ``exercise``'s check with the reference solution or ``answer``; raise on failure."""
    namespace = dict(names)
    for n in (1, 2, 3):  # the reference answers (and their imports)
        exec(cell(f"ex{n}-solution"), namespace)
    for earlier in range(1, exercise):  # earlier checks define helpers that later checks reuse
        exec(cell(f"ex{earlier}-check"), namespace)
    if answer is not None:
        function = re.search(r"^def (\w+)", cell(f"ex{exercise}-solution"), re.M).group(1)
        namespace[function] = answer
    exec(cell(f"ex{exercise}-check"), namespace)


@pytest.mark.parametrize("exercise", [1, 2, 3])
def test_reference_answers_pass(names, exercise):
    grade(names, exercise)


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
    with pytest.raises(CheckFailed):
        grade(names, exercise, wrong)


def test_the_written_question_is_manually_graded_with_a_rubric():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    answer = next(c for c in nb.cells if c.get("id") == "ex4-answer")
    meta = answer.metadata["nbgrader"]
    assert answer.cell_type == "markdown" and meta["grade"] and meta["solution"] and meta["points"] >= 1
    assert "**Model answer.**" in answer.source and "**Rubric (" in answer.source
