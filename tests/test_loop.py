"""The teaching agent loop: stop rules, budgets, validation, and properties over arbitrary models."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.loop.agent_loop import (
    LoopState,
    ScriptedModel,
    StepDecision,
    StopReason,
    StopRules,
    approximate_token_count,
    as_registry,
    run_loop,
)
from course.tools.calls import ToolCall


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def flaky(n: int) -> str:
    """Fail on odd numbers."""
    if n % 2:
        raise RuntimeError(f"odd input {n}")
    return f"ok {n}"


TOOLS = [echo, flaky]


def call(name, **arguments):
    return StepDecision(thought=f"use {name}", call=ToolCall(name, arguments))


# ---------------------------------------------------------------- each stop rule, by example


def test_final_answer_stops_and_keeps_the_trace():
    model = ScriptedModel([call("echo", text="hi"), StepDecision("done", final_answer="hi")])
    run = run_loop("say hi", model, TOOLS)
    assert run.stop_reason is StopReason.FINAL_ANSWER
    assert run.final_answer == "hi"
    assert [s.observation for s in run.steps] == ["hi", None]
    assert run.messages[-2] == {"role": "tool", "content": "hi", "origin": "runtime", "step": 1}
    assert "scripted" in run.model_name


def test_max_steps_stops_a_model_that_never_answers():
    model = ScriptedModel([call("echo", text=str(i)) for i in range(20)])
    run = run_loop("count", model, TOOLS, StopRules(max_steps=4))
    assert run.stop_reason is StopReason.MAX_STEPS
    assert len(run.steps) == 4 and run.final_answer is None


def test_repeat_detection_stops_the_same_call_with_the_same_result():
    run = run_loop("loop", ScriptedModel([call("echo", text="x")]), TOOLS, StopRules(max_steps=10))
    assert run.stop_reason is StopReason.REPEAT and len(run.steps) == 2
    off = run_loop("loop", ScriptedModel([call("echo", text="x")]), TOOLS,
                   StopRules(max_steps=10, repeat_detection=False))
    assert off.stop_reason is StopReason.MAX_STEPS and len(off.steps) == 10


def test_same_call_with_a_different_result_is_not_a_repeat():
    counter = iter(range(100))

    def clock() -> str:
        """Tick."""
        return str(next(counter))

    run = run_loop("tick", ScriptedModel([StepDecision(call=ToolCall("clock"))]), [clock],
                   StopRules(max_steps=5))
    assert run.stop_reason is StopReason.MAX_STEPS


def test_token_budget_stops_before_executing_and_overshoots_by_at_most_one_step():
    model = ScriptedModel([call("echo", text=str(i)) for i in range(50)])
    run = run_loop("spend", model, TOOLS, StopRules(max_steps=50, token_budget=300))
    assert run.stop_reason is StopReason.TOKEN_BUDGET
    last = run.steps[-1]
    assert run.total_tokens > 300 and run.total_tokens - last.tokens <= 300
    assert not last.executed and last.observation is None
    assert "300" in run.stop_detail


def test_cost_budget_uses_input_and_output_prices():
    model = ScriptedModel([call("echo", text=str(i)) for i in range(50)])
    limits = StopRules(max_steps=50, cost_budget=0.01, price_per_input_token=1e-5,
                    price_per_output_token=1e-4)
    run = run_loop("spend", model, TOOLS, limits)
    assert run.stop_reason is StopReason.COST_BUDGET
    expected = run.input_tokens * 1e-5 + run.output_tokens * 1e-4
    assert run.total_cost == pytest.approx(expected)


def test_model_error_keeps_the_trace():
    def broken(state: LoopState) -> StepDecision:
        if state.step_number == 3:
            raise ValueError("cannot parse the model output")
        return call("echo", text=str(state.step_number))

    run = run_loop("x", broken, TOOLS)
    assert run.stop_reason is StopReason.MODEL_ERROR
    assert len(run.steps) == 3 and run.steps[-1].error
    assert "cannot parse" in run.steps[-1].note


def test_model_returning_garbage_is_a_model_error():
    run = run_loop("x", lambda state: "final answer: 4", TOOLS)
    assert run.stop_reason is StopReason.MODEL_ERROR and "not a StepDecision" in run.steps[0].note


# ---------------------------------------------------------------- call -> observe


def test_schema_validation_returns_errors_to_the_model():
    model = ScriptedModel([call("flaky", n="two"), call("nope", x=1), call("echo", text="a", b=2),
                           StepDecision(final_answer="gave up")])
    run = run_loop("x", model, TOOLS)
    obs = [s.observation for s in run.steps[:3]]
    assert obs[0].startswith("Invalid arguments for tool 'flaky', so it was NOT run")
    assert "'nope' does not exist" in obs[1] and "echo, flaky" in obs[1]
    assert "unexpected argument(s) 'b'" in obs[2]
    assert [s.status for s in run.steps[:3]] == ["invalid_arguments", "unknown_tool",
                                                 "invalid_arguments"]
    assert not any(s.executed for s in run.steps)


def test_a_tool_that_raises_becomes_an_error_observation():
    run = run_loop("x", ScriptedModel([call("flaky", n=3), StepDecision(final_answer="no")]), TOOLS)
    assert run.steps[0].error and run.steps[0].executed
    assert "RuntimeError: odd input 3" in run.steps[0].observation
    assert run.steps[0].status == "bug"
    assert run.stop_reason is StopReason.FINAL_ANSWER


def test_no_action_and_no_answer_is_told_to_the_model():
    run = run_loop("x", ScriptedModel([StepDecision("hmm"), StepDecision(final_answer="ok")]), TOOLS)
    assert run.steps[0].error and "no tool call" in run.steps[0].observation


def test_plan_is_revised_on_an_observation():
    def planner(state: LoopState) -> StepDecision:
        if state.step_number == 1:
            return StepDecision("first try", ToolCall("flaky", {"n": 1}), plan=("run flaky(1)", "answer"))
        if "Error" in (state.last_observation or ""):
            return StepDecision("it failed: revise", ToolCall("flaky", {"n": 2}),
                            plan=("run flaky(2) instead", "answer"))
        return StepDecision("done", final_answer=state.last_observation)

    run = run_loop("x", planner, TOOLS, plan=("guess",))
    assert run.plan_history == [("guess",), ("run flaky(1)", "answer"),
                                ("run flaky(2) instead", "answer")]
    assert run.final_answer == "ok 2"


def test_context_grows_every_step_and_compaction_reduces_it():
    model = ScriptedModel([call("echo", text="word " * 30)] * 5 + [StepDecision(final_answer="x")])
    full = run_loop("x", model, TOOLS, StopRules(repeat_detection=False))
    grows = [s.input_tokens for s in full.steps]
    assert grows == sorted(grows) and grows[-1] > grows[0]

    def keep_last_two(messages):
        return messages[:2] + messages[2:][-2:]

    compact = run_loop("x", model, TOOLS, StopRules(repeat_detection=False), compact=keep_last_two)
    assert compact.input_tokens < full.input_tokens
    assert len(compact.messages) == len(full.messages)  # the trace keeps everything


def test_recorded_token_counts_are_used_when_given():
    model = ScriptedModel([StepDecision(call=ToolCall("echo", {"text": "a"}), input_tokens=2083,
                                    output_tokens=50), StepDecision(final_answer="b", input_tokens=4100,
                                                                output_tokens=70)])
    run = run_loop("x", model, TOOLS)
    assert run.input_tokens == 2083 + 4100 and run.total_tokens == 2083 + 4100 + 120


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, words", [
    ({"max_steps": 0}, "max_steps"), ({"token_budget": -1}, "token_budget"),
    ({"cost_budget": -0.5}, "cost_budget"), ({"price_per_input_token": -1}, "prices"),
])
def test_bad_limits_are_rejected_with_a_clear_message(kwargs, words):
    with pytest.raises(ValueError, match=words):
        StopRules(**kwargs)


def test_bad_task_and_empty_script_are_rejected():
    with pytest.raises(ValueError, match="task"):
        run_loop("  ", ScriptedModel([StepDecision(final_answer="x")]))
    with pytest.raises(ValueError, match="at least one"):
        ScriptedModel([])


def test_the_tool_list_is_in_the_system_prompt_and_a_registry_is_accepted():
    registry = as_registry(TOOLS)
    registry.disallow("flaky")
    run = run_loop("x", ScriptedModel([call("flaky", n=2), StepDecision(final_answer="no")]), registry)
    assert "echo" in run.messages[0]["content"] and "flaky" not in run.messages[0]["content"]
    assert run.steps[0].status == "not_allowed" and not run.steps[0].executed


def test_approximate_token_count():
    assert approximate_token_count("Hello, world!") == 4
    assert approximate_token_count("") == 0


# ---------------------------------------------------------------- properties (hypothesis)

arguments = st.one_of(
    st.fixed_dictionaries({"text": st.sampled_from(["a", "b", "a long text " * 5])}),
    st.fixed_dictionaries({"n": st.integers(0, 3)}),
    st.dictionaries(st.sampled_from(["text", "n", "zzz"]), st.integers(0, 2), max_size=2),
)
decisions = st.one_of(
    st.builds(lambda name, args, thought: StepDecision(thought, ToolCall(name, args)),
              st.sampled_from(["echo", "flaky", "missing"]), arguments, st.text(max_size=30)),
    st.builds(lambda a: StepDecision("done", final_answer=a), st.text(max_size=20)),
    st.builds(lambda t: StepDecision(t), st.text(max_size=20)),  # neither a call nor an answer
    st.just("raise"),
)
limits = st.builds(
    StopRules,
    max_steps=st.integers(1, 12),
    token_budget=st.none() | st.integers(0, 1500),
    cost_budget=st.none() | st.floats(0, 0.05),
    price_per_input_token=st.sampled_from([0.0, 1e-5, 3e-4]),
    price_per_output_token=st.sampled_from([0.0, 1e-4, 1e-3]),
    repeat_detection=st.booleans(),
)


class ArbitraryModel:
    name = "scripted: arbitrary behaviour"

    def __init__(self, script):
        self.script = script

    def __call__(self, state):
        item = self.script[(state.step_number - 1) % len(self.script)]
        if item == "raise":
            raise RuntimeError("model failure")
        return item


@settings(max_examples=300, deadline=None)
@given(script=st.lists(decisions, min_size=1, max_size=8), limits=limits)
def test_loop_always_stops_within_limits_with_a_recorded_reason(script, limits):
    run = run_loop("arbitrary task", ArbitraryModel(script), TOOLS, limits)
    # always stops within max steps, with exactly one recorded reason
    assert 1 <= len(run.steps) <= limits.max_steps
    assert isinstance(run.stop_reason, StopReason) and run.stop_detail
    # budgets: never more than one step over
    before_last = run.steps[-1].total_tokens - run.steps[-1].tokens
    if limits.token_budget is not None:
        assert before_last <= limits.token_budget
        if run.stop_reason is not StopReason.TOKEN_BUDGET:
            assert (run.total_tokens <= limits.token_budget
                    or run.stop_reason in (StopReason.FINAL_ANSWER, StopReason.COST_BUDGET))
    if limits.cost_budget is not None:
        last_cost = limits.cost(run.steps[-1].input_tokens, run.steps[-1].output_tokens)
        assert run.total_cost - last_cost <= limits.cost_budget + 1e-12
    # the reason agrees with the trace
    last = run.steps[-1]
    if run.stop_reason is StopReason.FINAL_ANSWER:
        assert last.final_answer is not None
    if run.stop_reason is StopReason.MAX_STEPS:
        assert len(run.steps) == limits.max_steps and last.final_answer is None
    if run.stop_reason is StopReason.REPEAT:
        assert limits.repeat_detection
        earlier = [s for s in run.steps[:-1] if s.call and s.call.key() == last.call.key()]
        assert any(s.observation == last.observation for s in earlier)
    if run.stop_reason in (StopReason.TOKEN_BUDGET, StopReason.COST_BUDGET):
        assert not last.executed
    if run.stop_reason is StopReason.MODEL_ERROR:
        assert last.error
    # cumulative totals are monotone and consistent
    totals = [s.total_tokens for s in run.steps]
    assert totals == sorted(totals) and run.total_tokens == run.input_tokens + run.output_tokens


@settings(max_examples=100, deadline=None)
@given(script=st.lists(decisions.filter(lambda d: d != "raise" and d.final_answer is None),
                       min_size=1, max_size=5),
       max_steps=st.integers(1, 10))
def test_a_model_that_never_answers_is_stopped_by_max_steps_or_repeat(script, max_steps):
    run = run_loop("never answers", ArbitraryModel(script), TOOLS, StopRules(max_steps=max_steps))
    assert run.stop_reason in (StopReason.MAX_STEPS, StopReason.REPEAT)
    assert len(run.steps) <= max_steps
