"""The stop rules in the real libraries: smolagents step callback, LangGraph recursion/budget."""

import pytest

from course.agents.offline_tools import make_tools
from course.agents.traces import Run, TraceStep
from course.loop.agent_loop import StepDecision, StopReason, StopRules, run_loop
from course.loop.budget_graph import build_budget_graph, run_langgraph_with_budget
from course.loop.budget_guard import (
    BudgetGuard,
    budgeted_code_agent,
    run_smolagents_with_budget,
    scripted_code_model,
)
from course.loop.scenarios import recorded_tools, replay_recorded_run, stuck_search_model
from course.tools.calls import ToolCall
from course.tools.for_libraries import langchain_tool

TASK = "What is the current weather in Paris?"


@pytest.fixture(scope="module")
def search():
    return make_tools(["web_search"])


def code(query):
    return f'Thought: search\n<code>\nprint(web_search(query="{query}"))\n</code>'


def smol_run(search, outputs, limits):
    agent, guard = budgeted_code_agent(search, scripted_code_model(outputs, tokenizer=None), limits)
    return run_smolagents_with_budget(agent, TASK, guard), agent


# ---------------------------------------------------------------- smolagents


def test_smolagents_repeat_detection_interrupts_and_keeps_the_trace(search):
    run, _agent = smol_run(search, [code("current weather in Paris")], StopRules(max_steps=8))
    assert run.stop_reason is StopReason.REPEAT and run.steps == 2
    assert len(run.trace.steps) == 2  # the agent's memory survived the interruption
    assert "scripted" in run.model_name


def test_smolagents_token_budget(search):
    outputs = [code(f"weather Paris {i}") for i in range(10)]
    agent, guard = budgeted_code_agent(search, scripted_code_model(outputs), StopRules(
        max_steps=8, token_budget=5000))
    run = run_smolagents_with_budget(agent, TASK, guard)
    assert run.stop_reason is StopReason.TOKEN_BUDGET
    tokens = [r["total_tokens"] for r in run.rows]
    assert tokens[-1] > 5000 and (len(tokens) == 1 or tokens[-2] <= 5000)
    inputs = [r["input_tokens"] for r in run.rows]
    assert inputs == sorted(inputs) and inputs[0] > 500  # measured prompts, growing


def test_smolagents_cost_budget(search):
    outputs = [code(f"weather Paris {i}") for i in range(10)]
    agent, guard = budgeted_code_agent(search, scripted_code_model(outputs), StopRules(
        max_steps=8, cost_budget=0.01, price_per_input_token=3e-6, price_per_output_token=1.5e-5))
    run = run_smolagents_with_budget(agent, TASK, guard)
    assert run.stop_reason is StopReason.COST_BUDGET and guard.total_cost > 0.01


def test_smolagents_max_steps_without_repeats(search):
    outputs = [code(f"weather Paris {i}") for i in range(10)]
    run, _agent = smol_run(search, outputs, StopRules(max_steps=3, repeat_detection=False))
    assert run.stop_reason is StopReason.MAX_STEPS and run.steps == 3


def test_smolagents_final_answer(search):
    outputs = [code("weather Paris"), 'Thought: done\n<code>\nfinal_answer("13-16 C")\n</code>']
    run, _agent = smol_run(search, outputs, StopRules(max_steps=5))
    assert run.stop_reason is StopReason.FINAL_ANSWER and run.final_answer == "13-16 C"


def test_guard_ignores_other_steps_and_rejects_nothing_silently():
    guard = BudgetGuard(StopRules())
    guard(object())  # not an ActionStep: ignored
    assert guard.reason is None and guard.rows == []
    with pytest.raises(ValueError, match="at least one output"):
        scripted_code_model([])


# ---------------------------------------------------------------- LangGraph


@pytest.fixture(scope="module")
def lc_search(search):
    return langchain_tool(search[0])


def searches(n):
    return [StepDecision(f"try {i}", ToolCall("web_search", {"query": f"weather Paris {i}"}))
            for i in range(n)]


def test_langgraph_recursion_limit_keeps_the_checkpoint(lc_search):
    graph = build_budget_graph(searches(30), [lc_search])
    run = run_langgraph_with_budget(graph, TASK, token_budget=10**6, recursion_limit=9)
    assert run.stop_reason == "recursion_limit" and run.steps == 5
    assert "Search Results" in run.trace["messages"][2].content  # ToolNode ran the real tool


def test_langgraph_budget_in_state(lc_search):
    graph = build_budget_graph(searches(30), [lc_search])
    run = run_langgraph_with_budget(graph, TASK, token_budget=1000, recursion_limit=100)
    assert run.stop_reason is StopReason.TOKEN_BUDGET
    assert run.trace["tokens_used"] > 1000 and run.trace["stop_reason"] == "token_budget"
    assert run.rows[-2]["total_tokens"] <= 1000


def test_langgraph_final_answer(lc_search):
    graph = build_budget_graph([*searches(1), StepDecision("ok", final_answer="13 C")], [lc_search])
    run = run_langgraph_with_budget(graph, TASK, token_budget=10**6, recursion_limit=50)
    assert run.stop_reason is StopReason.FINAL_ANSWER and run.final_answer == "13 C"


def test_langgraph_needs_a_script():
    with pytest.raises(ValueError):
        build_budget_graph([], [])


# ---------------------------------------------------------------- runs to apply limits to


def test_stuck_search_model_stops_by_each_rule(search):
    def stop(limits):
        return run_loop(TASK, stuck_search_model(), search, limits)

    assert stop(StopRules(max_steps=12)).stop_reason is StopReason.REPEAT
    assert len(stop(StopRules(max_steps=12)).steps) == 3
    assert stop(StopRules(max_steps=12, repeat_detection=False)).stop_reason is StopReason.FINAL_ANSWER
    assert stop(StopRules(max_steps=4, repeat_detection=False)).stop_reason is StopReason.MAX_STEPS
    assert stop(StopRules(token_budget=300)).stop_reason is StopReason.TOKEN_BUDGET


def recorded_weather():
    return Run(TASK, "Qwen3-4B", [
        TraceStep(1, "s", "", [ToolCall("web_search", {"query": "a"})], "obs1",
             input_tokens=2083, output_tokens=60),
        TraceStep(2, "s", "", [ToolCall("web_search", {"query": "b"})], "obs2",
             input_tokens=3345, output_tokens=80),
        TraceStep(3, "s", "", [ToolCall("final_answer", {"_0": "x"})], "", input_tokens=4100,
             output_tokens=85, is_final_answer=True)], final_answer="Clear sky", source="recorded")


def test_replay_of_a_recorded_run_uses_its_tokens_and_observations():
    run = replay_recorded_run(recorded_weather(), StopRules())
    assert run.stop_reason is StopReason.FINAL_ANSWER and run.input_tokens == 9528
    assert [s.observation for s in run.steps[:2]] == ["obs1", "obs2"]
    assert "[recorded]" in run.model_name
    cut = replay_recorded_run(recorded_weather(), StopRules(token_budget=5000))
    assert cut.stop_reason is StopReason.TOKEN_BUDGET and len(cut.steps) == 2


def test_recorded_tools_and_empty_runs():
    registry = recorded_tools(recorded_weather())
    assert registry.names() == ["web_search"]
    with pytest.raises(ValueError, match="no steps"):
        replay_recorded_run(Run(TASK, "m", []), StopRules())


def test_graphs_are_drawn_offline_from_get_graph(lc_search):
    from course.drawing import show_graph
    from course.loop.budget_graph import loop_diagram

    drawing = show_graph(build_budget_graph(searches(1), [lc_search]), "budget graph")
    assert set(drawing.nodes) == {"__start__", "agent", "tools", "budget_stop", "__end__"}
    assert ("tools", "agent", False) in drawing.edges and ("agent", "budget_stop", True) in drawing.edges
    bundle = drawing._repr_mimebundle_()
    assert bundle["image/png"].startswith(b"\x89PNG") and "graph TD" in bundle["text/vnd.mermaid"]
    assert bundle["text/markdown"].startswith("```mermaid")
    loop = show_graph(loop_diagram())
    assert ("observation appended", "model decides", False) in loop.edges
    assert ("stop rules checked", "__end__", True) in loop.edges
