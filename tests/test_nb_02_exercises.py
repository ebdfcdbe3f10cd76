"""Chapter 02's exercise checks, run against right and wrong answers without executing the notebook.

Each check cell (instructor edition, hidden tests included) is executed in grading mode with the
names the notebook defines (the replays of the shipped recordings) and one candidate answer.
The reference answer must pass; constant and keyword answers must fail.
"""

import linecache
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


def _as_kernel_source(label: str, source: str) -> None:
    """Keep ``source`` where ``inspect.getsource`` finds it, as IPython does for a cell:
    smolagents' ``@tool`` reads the function's source."""
    linecache.cache[label] = (len(source), None, source.splitlines(True), label)


def grade(names: dict, exercise: int, answer=None):
    """Exercise ``exercise``'s verdict on the reference solution or ``answer``."""
    _as_kernel_source("ex3-solution", EXERCISES.cells["ex3-solution"])
    if isinstance(answer, str):
        _as_kernel_source("<answer>", answer)
    # earlier checks define helpers (``searches``) and imports that later checks reuse
    before = [f"ex{earlier}-{cell}" for earlier in range(1, exercise) for cell in ("solution", "check")]
    return EXERCISES.grade(exercise, names, answer, before=before)


@pytest.mark.parametrize("exercise", [1, 2, 3, 4])
def test_reference_answers_pass(names, exercise):
    """The instructor's solutions pass (exercise 3 is graded by a CodeAgent that runs the tool)."""
    verdict = grade(names, exercise)
    assert verdict.passed, verdict


def _json_parser(cut=True, wrap_errors=True, check_arguments=True, as_dict=False):
    """A JSON-action parser with one thing a student may get wrong switched off."""
    import json

    from course.agents.dummy_agent import STOP, Action, ActionParseError, FinalAnswer

    def parse(text):
        text = text.split(STOP, 1)[0] if cut else text
        action = re.search(r"^\s*Action:\s*(.*)$", text, re.M)
        final = re.search(r"^\s*Final Answer:\s*(.*)", text, re.M | re.S)
        if final and (not action or final.start() < action.start()):
            return FinalAnswer(final.group(1).strip())
        if not action:
            raise ActionParseError("no action")
        try:
            call = json.loads(action.group(1))
        except json.JSONDecodeError as err:
            if not wrap_errors:
                raise
            raise ActionParseError("not JSON") from err
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ActionParseError("no name")
        if check_arguments and not isinstance(call.get("arguments"), dict):
            raise ActionParseError("bad arguments")
        if as_dict:
            return call
        return Action(call["name"], (), call.get("arguments") or {})

    return parse


def test_the_json_parser_is_not_the_lessons_parser():
    """Exercise 1 varies the lesson's parser (JSON, not a Python call): copying it fails."""
    from course.agents.dummy_agent import parse_reply

    verdict = grade({}, 1, parse_reply)
    assert verdict.rejected and "expected Action(name='get_weather'" in verdict.printed, verdict


WRONG = {
    1: [lambda text: None, _json_parser(cut=False), _json_parser(wrap_errors=False),
        _json_parser(check_arguments=False), _json_parser(as_dict=True)],
    2: [lambda run: [], lambda run: ["21"],
        lambda run: re.findall(r"\d+(?:\.\d+)?", str(run.final_answer or "")),  # ignores observations
        lambda run: [n for n in re.findall(r"\d+(?:\.\d+)?", str(run.final_answer or ""))
                     if n not in " ".join(s.observation for s in run.steps)]],  # reads the answering step
    4: [lambda run: True, lambda run: False,
        lambda run: "web_search" in run.tool_names_called(),  # counts the answering step
        lambda run: any(s.tool_calls for s in run.steps if not s.is_final_answer)],  # any tool
}


@pytest.mark.parametrize("exercise, wrong", [(n, f) for n, fs in WRONG.items() for f in fs])
def test_constant_and_shortcut_answers_fail(names, exercise, wrong):
    verdict = grade(names, exercise, wrong)
    assert verdict.rejected, verdict


TOOL_HEAD = ("from smolagents import Tool, tool\n\ndef make_convert_temperature() -> Tool:\n"
             "    @tool\n    def convert_temperature(celsius: float) -> {returns}:\n")
DOC = ('        """Convert Celsius to Fahrenheit; returns degrees Fahrenheit.\n\n        Args:\n'
       '            celsius: the temperature in degrees Celsius.\n        """\n')
RETURN = "    return convert_temperature\n"
WRONG_TOOLS = {  # what a student may write instead, and the hint that must come back
    "a plain function": ("def make_convert_temperature():\n"
                         "    def convert_temperature(celsius: float) -> float:\n"
                         "        return round(celsius * 9 / 5 + 32, 1)\n" + RETURN,
                         "expected a smolagents Tool"),
    "no rounding to one decimal but to an int": (
        TOOL_HEAD.format(returns="float") + DOC + "        return round(celsius * 9 / 5 + 32)\n"
        + RETURN, "expected 69.8, got 70"),
    "the formula without + 32": (TOOL_HEAD.format(returns="float") + DOC
                                 + "        return round(celsius * 9 / 5, 1)\n" + RETURN,
                                 "expected 69.8, got 37.8"),
    "a string returned": (TOOL_HEAD.format(returns="str") + DOC
                          + "        return f'{round(celsius * 9 / 5 + 32, 1)} °F'\n" + RETURN,
                          "got '69.8 °F'"),
    "a description that does not say what comes back": (
        TOOL_HEAD.format(returns="float") + '        """Temperature helper.\n\n        Args:\n'
        '            celsius: the temperature.\n        """\n'
        "        return round(celsius * 9 / 5 + 32, 1)\n" + RETURN,
        "should say it returns Fahrenheit"),
}


@pytest.mark.parametrize("case", WRONG_TOOLS)
def test_wrong_tools_fail_with_a_hint_that_says_what_came_back(names, case):
    source, hint = WRONG_TOOLS[case]
    verdict = grade(names, 3, source)
    assert verdict.rejected and hint in verdict.printed, verdict


def test_the_written_question_is_manually_graded_with_a_rubric():
    nb = nbformat.read(NOTEBOOKS / EXERCISES.notebook, as_version=4)
    answer = next(c for c in nb.cells if c.get("id") == "ex5-answer")
    meta = answer.metadata["nbgrader"]
    assert answer.cell_type == "markdown" and meta["grade"] and meta["solution"] and meta["points"] >= 1
    assert "**Model answer.**" in answer.source and "**Rubric (" in answer.source


def _stub(n: int) -> str:
    """Exercise ``n``'s solution cell as the student edition releases it."""
    return re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "raise NotImplementedError()",
                  EXERCISES.cells[f"ex{n}-solution"], flags=re.S)


@pytest.mark.parametrize("exercise", [1, 2, 3, 4])
def test_the_untouched_stub_is_not_yet_done(names, exercise):
    verdict = grade(names, exercise, _stub(exercise))
    assert verdict.outcome == "not yet done", verdict
