"""Pipeline vs agent: parsing the model's text, the figures, bad input (no generation here)."""

import pytest

from course.loop.agent_loop import LoopState
from course.loop.pipelines import Attempt, Comparison, LocalModelPolicy, compare, parse_department


def test_parse_department():
    assert parse_department("Billing.") == "billing"
    assert parse_department("it is a shipping issue, not technical") == "shipping"
    assert parse_department("no idea") is None


class Recorded:
    """Stands in for the local model in a parser test: returns given texts (not a lesson)."""

    name = "recorded texts"

    def __init__(self, texts):
        self.texts = list(texts)

    def generate(self, messages, max_new_tokens=16, **kw):
        return self.texts.pop(0)

    def render_chat(self, messages):
        return " ".join(m["content"] for m in messages)

    def count_tokens(self, text):
        return len(text.split())


def state(messages=()):
    base = [{"role": "system", "content": "tools"}, {"role": "user", "content": "route it"}]
    return LoopState("route it", base + list(messages), None, 1, [], ("route_to",))


def test_policy_turns_text_into_decisions():
    policy = LocalModelPolicy(Recorded(["CALL route_to(department=billing)", "ANSWER: done",
                                        "I am not sure"]))
    call = policy(state())
    assert call.call.name == "route_to" and call.call.arguments == {"department": "billing"}
    assert policy(state()).final_answer == "done"
    nothing = policy(state())
    assert nothing.call is None and nothing.final_answer is None
    assert policy.outputs == ["CALL route_to(department=billing)", "ANSWER: done", "I am not sure"]


def test_policy_shows_observations_as_user_turns():
    policy = LocalModelPolicy(Recorded(["x"]))
    chat = policy.chat(state([{"role": "tool", "content": "routed"}]))
    assert chat[0]["role"] == "system" and chat[-1] == {"role": "user",
                                                         "content": "Observation: routed"}


def test_comparison_figures_and_tables():
    attempts = {
        "pipeline": [Attempt("pipeline", "billing", 1, 70, 1, 0.5, ["billing"])] * 3,
        "agent": [Attempt("agent", "billing", 2, 300, 20, 3.0, ["a"]),
                  Attempt("agent", "not routed", 2, 310, 24, 3.2, ["b"]),
                  Attempt("agent", "shipping", 1, 150, 10, 1.5, ["c"])],
    }
    comparison = Comparison(attempts)
    agent = comparison.figures("agent")
    assert agent["distinct outcomes"] == 3 and agent["correct"] == 1
    assert agent["max model calls"] == 2 and agent["distinct trajectories"] == 3
    assert comparison.figures("pipeline")["distinct outcomes"] == 1
    assert "model calls per run" in comparison.table()
    note = comparison.note_table()
    assert "3 distinct outcome(s)" in note and "who decides the steps" in note


def test_compare_rejects_zero_runs():
    with pytest.raises(ValueError, match="runs"):
        compare(object(), runs=0)
