"""The budgets widget, driven in pure Python: moving a control changes the stop as the loop would."""

import pytest

from course.agents.offline_tools import make_tools
from course.loop.agent_loop import StopReason, run_loop
from course.loop.scenarios import stuck_search_model
from widgets.budget_explorer import BudgetExplorer

TASK = "What is the current weather in Paris?"


@pytest.fixture(scope="module")
def tools():
    return make_tools(["web_search"])


@pytest.fixture
def widget(tools):
    return BudgetExplorer(lambda limits: run_loop(TASK, stuck_search_model(), tools, limits),
                         max_steps=12)


def test_default_stops_on_repeat(widget):
    assert widget.run.stop_reason is StopReason.REPEAT and len(widget.run.steps) == 3
    assert "stops at step 3: repeat" in widget.view.value


def test_switching_repeat_detection_off_lets_it_run_to_the_answer(widget):
    widget.repeat_detection.value = False
    assert widget.run.stop_reason is StopReason.FINAL_ANSWER and len(widget.run.steps) == 9
    widget.max_steps.value = 5
    assert widget.run.stop_reason is StopReason.MAX_STEPS and len(widget.run.steps) == 5
    assert "stops at step 5: max_steps" in widget.view.value


def test_token_budget_slider_moves_the_stop_step(widget, tools):
    widget.repeat_detection.value = False
    full = run_loop(TASK, stuck_search_model(), tools, widget.limits())
    totals = [s.total_tokens for s in full.steps]
    widget.token_budget.value = (totals[3] // 100) * 100  # between steps 3 and 4 (a slider step)
    stop = next(i for i, t in enumerate(totals) if t > widget.token_budget.value) + 1
    assert widget.run.stop_reason is StopReason.TOKEN_BUDGET and len(widget.run.steps) == stop
    assert f"tokens spent {widget.run.total_tokens}" in widget.view.value
    widget.token_budget.value = 0  # off again
    assert widget.run.stop_reason is StopReason.FINAL_ANSWER


def test_cost_budget_slider(widget):
    widget.repeat_detection.value = False
    widget.cost_budget.value = 0.01
    assert widget.run.stop_reason is StopReason.COST_BUDGET
    assert widget.run.steps[-2].total_cost <= 0.01 < widget.run.total_cost


def test_the_widget_matches_the_loop_for_every_max_steps(widget, tools):
    widget.repeat_detection.value = False
    for n in range(1, 13):
        widget.max_steps.value = n
        expected = run_loop(TASK, stuck_search_model(), tools, widget.limits())
        assert (widget.run.stop_reason, len(widget.run.steps)) == (
            expected.stop_reason, len(expected.steps))


def test_box_and_bad_input(widget):
    import ipywidgets as w

    assert isinstance(widget, w.VBox) and len(widget.children) == 5 and "step" in widget.text()
    assert widget.view.value.startswith(widget.run._repr_html_())  # the record renders itself
    assert "word-and-punctuation count" in widget.view.value  # the token unit is named
    with pytest.raises(TypeError, match="run_with"):
        BudgetExplorer("not a function")
