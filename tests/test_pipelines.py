"""Pipeline vs agent: parsing the model's text, the figures, bad input (no generation here)."""

import pytest

from course.loop.agent_loop import LoopState
from course.loop.pipelines import (
    AGENT_INSTRUCTIONS,
    Attempt,
    ChatModelPolicy,
    PipelineVsAgent,
    compare_pipeline_and_agent,
    parse_department,
)


def test_parse_department():
    assert parse_department("Billing.") == "billing"
    assert parse_department("it is a shipping issue, not technical") == "shipping"
    assert parse_department("no idea") is None


class Recorded:
    """Stands in for a chat model in a parser test: returns given texts (not a lesson)."""

    def __init__(self, texts, usage=None):
        self.texts, self.usage = list(texts), usage

    def invoke(self, messages):
        from langchain_core.messages import AIMessage

        return AIMessage(self.texts.pop(0), usage_metadata=self.usage)


class WordTokenizer:
    """Counts words, so the test does not need a model's tokenizer."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return " ".join(m["content"] for m in messages)

    def encode(self, text, add_special_tokens=False):
        return text.split()


def policy_over(texts, usage=None):
    return ChatModelPolicy(Recorded(texts, usage), WordTokenizer(), "words (test)")


def state(messages=()):
    base = [{"role": "system", "content": "tools"}, {"role": "user", "content": "route it"}]
    return LoopState("route it", base + list(messages), None, 1, [], ("route_to",))


def test_policy_turns_text_into_decisions():
    policy = policy_over(["CALL route_to(department=billing)", "ANSWER: done", "I am not sure"])
    call = policy(state())
    assert call.call.name == "route_to" and call.call.arguments == {"department": "billing"}
    assert policy(state()).final_answer == "done"
    nothing = policy(state())
    assert nothing.call is None and nothing.final_answer is None
    assert policy.outputs == ["CALL route_to(department=billing)", "ANSWER: done", "I am not sure"]
    prompt_words = len(AGENT_INSTRUCTIONS.split()) + len("route it".split())  # system + task
    assert (call.input_tokens, call.output_tokens) == (prompt_words, 2)
    assert policy.token_unit == "words (test)"


def test_policy_uses_the_usage_a_server_reports():
    policy = policy_over(["ANSWER: done"], usage={"input_tokens": 41, "output_tokens": 3,
                                                  "total_tokens": 44})
    decision = policy(state())
    assert (decision.input_tokens, decision.output_tokens) == (41, 3)
    assert policy.token_unit == "tokens as the server reported them"


def test_policy_shows_observations_as_user_turns():
    policy = policy_over(["x"])
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
    comparison = PipelineVsAgent(attempts)
    agent = comparison.figures("agent")
    assert agent["distinct outcomes"] == 3 and agent["correct"] == 1
    assert agent["max model calls"] == 2 and agent["distinct trajectories"] == 3
    assert comparison.figures("pipeline")["distinct outcomes"] == 1
    assert "model calls per run = 1.7" in comparison.table()
    assert "<th>agent</th>" in comparison._repr_html_()
    measured = comparison.measured()
    assert measured.record()["figures"]["agent"]["distinct outcomes"] == 3
    assert measured.record()["figures"]["pipeline"]["model calls per run"] == 1
    assert "| who decided the steps |" in measured._repr_markdown_()


def test_compare_rejects_zero_runs():
    with pytest.raises(ValueError, match="runs"):
        compare_pipeline_and_agent(object(), chat=policy_over(["x"]), runs=0)


def test_batched_replies_without_a_kernel_pipeline_invoke_once_each():
    from course.loop.pipelines import batched_replies

    chat = Recorded(["first", "second"])
    assert batched_replies(chat, [[("user", "a")], [("user", "b")]]) == ["first", "second"]
    assert chat.texts == []
