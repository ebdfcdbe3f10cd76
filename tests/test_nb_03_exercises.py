"""Chapter 03's exercise checks, run against right and wrong answers without executing the notebook.

Each check cell (instructor edition, hidden tests included) runs in grading mode with the names
the notebook defines before it and one candidate answer: the reference answer must pass;
constant and shortcut answers must fail.
"""

import nbformat
import pytest

from course.agents.offline_tools import make_tools
from course.checks import check
from course.loop.agent_loop import (
    IdealBondTrajectory,
    ScriptedModel,
    StepDecision,
    StopReason,
    StopRules,
    run_loop,
)
from course.loop.failures import ConversionAgent, exchange_rate, multiply, reference_rate
from course.loop.reliability import simulate_chain
from course.loop.scenarios import stuck_search_model
from course.tools.calls import ToolCall
from nbharness import NOTEBOOKS, Exercises, cell_sources

EXERCISES = Exercises("03_agent_loop.ipynb")
WEATHER = "What is the current weather in Paris?"
BOND = "Generate me a photo of the car that James Bond drove in the latest movie"


def cell_loop():
    """The ``agent_loop`` the notebook's ``agent-loop`` cell defines, as a student reads it."""
    namespace: dict = {}
    exec(compile(cell_sources("03_agent_loop.ipynb")["agent-loop"], "agent-loop", "exec"), namespace)
    return namespace["agent_loop"]


@pytest.fixture
def names():
    # ``check``: the first check cell imports it for the later ones
    return {"run_loop": run_loop, "StopRules": StopRules, "stuck_search_model": stuck_search_model,
            "search_tools": make_tools(["web_search"]), "simulate_chain": simulate_chain,
            "weather_task": WEATHER, "check": check, "agent_loop": cell_loop(), "bond_task": BOND,
            "IdealBondTrajectory": IdealBondTrajectory, "make_tools": make_tools,
            "StopReason": StopReason}


def _breaks_at_step_3(state):
    if state.step_number == 3:
        raise ValueError("could not parse the model's output")
    return StepDecision("search", ToolCall("web_search", {"query": f"paris weather {state.step_number}"}))


PRICES = dict(price_per_input_token=3e-6, price_per_output_token=1.5e-5)
# The chapter's cases (bond-trajectory, stop-rules, model-error, plan-revision) and a few more:
# a step with neither call nor answer, an unknown tool, arguments the schema refuses.
CASES = {
    "bond": lambda: (BOND, IdealBondTrajectory(), make_tools(["web_search", "text_to_image"]), StopRules()),
    "conversion with verification": lambda: ("Convert 250 USD to EUR.", ConversionAgent(250, verify=True),
                                             [exchange_rate, reference_rate, multiply], StopRules()),
    "model error": lambda: (WEATHER, _breaks_at_step_3, make_tools(["web_search"]), StopRules()),
    "12 steps, repeats allowed": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                                          StopRules(max_steps=12, repeat_detection=False)),
    "max_steps=5": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                            StopRules(max_steps=5, repeat_detection=False)),
    "token budget 2000": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                                  StopRules(token_budget=2000, repeat_detection=False)),
    "cost budget": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                            StopRules(cost_budget=0.004, repeat_detection=False, **PRICES)),
    "repeat detection": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                                 StopRules(max_steps=12)),
    "no action, then unknown tool, then bad arguments": lambda: (WEATHER, ScriptedModel([
        StepDecision("thinking"), StepDecision("x", ToolCall("web_serch", {"query": "q"})),
        StepDecision("y", ToolCall("web_search", {"q": 3})), StepDecision("", final_answer="done")]),
        make_tools(["web_search"]), StopRules()),
}


@pytest.mark.parametrize("case", CASES)
def test_the_cell_loop_and_run_loop_agree(case):
    """One truth: the loop a student reads takes the package's steps and stops for its reason."""
    mine, reason = cell_loop()(*CASES[case]())
    theirs = run_loop(*CASES[case]())
    fields = [(str(s.call), s.observation, s.final_answer, s.input_tokens, s.output_tokens,
               s.total_tokens) for s in theirs.steps]
    assert [(str(s.call), s.observation, s.final_answer, s.input_tokens, s.output_tokens,
             s.total_tokens) for s in mine] == fields
    assert reason == theirs.stop_reason and len(mine) == len(theirs.steps)


@pytest.mark.parametrize("exercise", [1, 2, 3, 4, 6])
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
    6: [lambda steps: False, lambda steps: True, lambda steps: len(steps) >= 3,
        lambda steps: len(steps) >= 2 and steps[-1].observation == steps[-2].observation,  # two, not three
        lambda steps: len({str(s.call) for s in steps[-3:]}) == 1 and len(steps) >= 3],  # same call
}


def test_hints_say_what_came_back(names):
    verdict = EXERCISES.grade(1, names, lambda steps: None)
    assert "expected 3" in verdict.printed and "returned None" in verdict.printed, verdict
    verdict = EXERCISES.grade(6, names, lambda steps: False)
    assert "expected agent_loop to stop with 'extra_rule' at step 3" in verdict.printed, verdict
    assert "it stopped with 'max_steps' at step 8" in verdict.printed, verdict


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
