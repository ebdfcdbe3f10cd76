"""Chapter 03's exercise checks, run against right and wrong answers without executing the notebook.

Each check cell (instructor edition, hidden tests included) runs in grading mode with the names
the notebook defines before it and one candidate answer: the reference answer must pass;
constant and shortcut answers must fail.
"""

import re

import nbformat
import pytest

from classroom.grading.student import student_edition
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
from course.loop.scenarios import stuck_search_model
from course.tools.calls import ToolCall
from nbharness import NOTEBOOKS, Exercises, cell_sources

EXERCISES = Exercises("03_agent_loop.ipynb")
WEATHER = "What is the current weather in Paris?"
BOND = "Generate me a photo of the car that James Bond drove in the latest movie"


def student_loop():
    """The ``agent_loop`` of exercise 2's instructor solution, as a student would write it."""
    namespace: dict = {}
    exec(compile(cell_sources("03_agent_loop.ipynb")["ex2-solution"], "ex2-solution", "exec"),
         namespace)
    return namespace["agent_loop"]


@pytest.fixture
def names():
    # ``check``: the first check cell imports it for the later ones
    return {"run_loop": run_loop, "StopRules": StopRules, "stuck_search_model": stuck_search_model,
            "search_tools": make_tools(["web_search"]), "weather_task": WEATHER, "check": check,
            "bond_task": BOND, "IdealBondTrajectory": IdealBondTrajectory,
            "make_tools": make_tools, "StopReason": StopReason}


# The chapter's cases (bond-trajectory, stop-rules, plan-revision) and a few more: a step with
# neither call nor answer, an unknown tool, arguments the schema refuses. Costs and model errors
# are not the exercise's (run_loop alone has them).
CASES = {
    "bond": lambda: (BOND, IdealBondTrajectory(), make_tools(["web_search", "text_to_image"]), StopRules()),
    "conversion with verification": lambda: ("Convert 250 USD to EUR.", ConversionAgent(250, verify=True),
                                             [exchange_rate, reference_rate, multiply], StopRules()),
    "12 steps, repeats allowed": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                                          StopRules(max_steps=12, repeat_detection=False)),
    "max_steps=5": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                            StopRules(max_steps=5, repeat_detection=False)),
    "token budget 2000": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                                  StopRules(token_budget=2000, repeat_detection=False)),
    "repeat detection": lambda: (WEATHER, stuck_search_model(), make_tools(["web_search"]),
                                 StopRules(max_steps=12)),
    "no action, then unknown tool, then bad arguments": lambda: (WEATHER, ScriptedModel([
        StepDecision("thinking"), StepDecision("x", ToolCall("web_serch", {"query": "q"})),
        StepDecision("y", ToolCall("web_search", {"q": 3})), StepDecision("", final_answer="done")]),
        make_tools(["web_search"]), StopRules()),
}


@pytest.mark.parametrize("case", CASES)
def test_the_exercise_loop_and_run_loop_agree(case):
    """One truth: the loop built from the lesson's two halves takes run_loop's steps and stops."""
    mine, reason = student_loop()(*CASES[case]())
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


def _loop(repeat="call and result", budget="before the call", steps_offset=0):
    """An ``agent_loop`` with one mistake: the repeat key, where the budget is checked, the step count."""
    from course.loop.agent_loop import call_and_observe, decide, start_messages
    from course.tools.registry import as_registry

    def agent_loop(task, model, tools, rules):
        registry = as_registry(tools)
        messages, steps, seen = start_messages(task, registry), [], {}
        for _ in range(rules.max_steps + steps_offset):
            step = decide(model, task, messages, steps, registry)
            steps.append(step)
            if step.final_answer is not None:
                return steps, StopReason.FINAL_ANSWER
            over = rules.token_budget is not None and step.total_tokens > rules.token_budget
            if over and budget == "before the call":
                return steps, StopReason.TOKEN_BUDGET
            call_and_observe(step, registry, messages)
            if over and budget == "after the call":
                return steps, StopReason.TOKEN_BUDGET
            if step.call is not None and rules.repeat_detection and repeat != "never":
                key = step.call.key() if repeat != "result only" else "any"
                value = step.observation if repeat != "call only" else "seen"
                if seen.get(key) == value:
                    return steps, StopReason.REPEAT
                seen[key] = value
        return steps, StopReason.MAX_STEPS
    return agent_loop


WRONG = {
    1: [lambda steps: None, lambda steps: 3, lambda steps: len(steps) or None,
        lambda steps: next((i for i, (c, _) in enumerate(steps, 1)
                            if c in [x for x, _ in steps[: i - 1]]), None)],  # ignores the result
    2: [_loop(repeat="never"), _loop(repeat="call only"), _loop(repeat="result only"),
        _loop(budget="after the call"), _loop(budget="never"), _loop(steps_offset=1),
        _loop(steps_offset=-1)],
    3: [lambda registry, call, retries: registry.execute(call.name, call.arguments),  # no retry
        lambda registry, call, retries: next(r for r in [registry.execute(call.name, call.arguments)
                                                         for _ in range(retries + 1)]),  # always all
        lambda registry, call, retries: [registry.execute(call.name, call.arguments)
                                         for _ in range(retries + 2)][-1]],  # one too many, always
    4: [lambda messages: list(messages), lambda messages: messages[:2],
        lambda messages: messages[-2:]],
    6: [lambda steps: False, lambda steps: True, lambda steps: len(steps) >= 3,
        lambda steps: len(steps) >= 2 and steps[-1].observation == steps[-2].observation,  # two, not three
        lambda steps: len({str(s.call) for s in steps[-3:]}) == 1 and len(steps) >= 3],  # same call
}


def _retry_refusals_too(registry, call, retries):
    """Retries every failure, a refusal of the door included."""
    result = registry.execute(call.name, call.arguments)
    for _ in range(retries):
        if result.ok:
            break
        result = registry.execute(call.name, call.arguments)
    return result


WRONG[3].append(_retry_refusals_too)


def test_hints_say_what_came_back(names):
    verdict = EXERCISES.grade(1, names, lambda steps: None)
    assert "expected 3" in verdict.printed and "returned None" in verdict.printed, verdict
    verdict = EXERCISES.grade(6, names, lambda steps: False)
    assert "expected the run to stop with 'extra_rule' at step 3" in verdict.printed, verdict
    assert "it stopped with 'max_steps' at step 8" in verdict.printed, verdict
    verdict = EXERCISES.grade(2, names, _loop(steps_offset=-1))
    assert "max_steps=5: your loop stopped with 'max_steps' at step 4; expected 'max_steps' at " \
           "step 5" in verdict.printed, verdict
    verdict = EXERCISES.grade(3, names, WRONG[3][0])
    assert "expected 3 calls (1 + 2 retries); yours made 1" in verdict.printed, verdict


def test_a_loop_fitted_to_the_visible_asserts_fails_a_hidden_test(names):
    """The answer the nbgrader tests submit: repeat detection on the call alone passes the
    visible cases (the stuck agent's repeats return the same page) and fails the hidden polling
    job (the same call, a new result each time)."""
    from test_nbgrader_pipeline import FITTED_TO_THE_VISIBLE_ASSERT

    assert EXERCISES.grade(2, names, FITTED_TO_THE_VISIBLE_ASSERT).rejected
    visible = Exercises(EXERCISES.notebook)
    visible.cells = dict(visible.cells)
    visible.cells["ex2-check"] = re.sub(r"(?s)\n *### BEGIN HIDDEN TESTS.*### END HIDDEN TESTS", "",
                                        visible.cells["ex2-check"])
    assert visible.grade(2, names, FITTED_TO_THE_VISIBLE_ASSERT).passed


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


def test_the_untouched_stubs_are_not_yet_done(names):
    student = {c.id: c.source for c in student_edition(
        nbformat.read(NOTEBOOKS / EXERCISES.notebook, 4)).cells}
    for n in [1, 2, 3, 4, 6]:
        verdict = EXERCISES.grade(n, names, student[f"ex{n}-solution"], label="the stub")
        assert verdict.outcome == "not yet done", verdict
