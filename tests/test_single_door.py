"""Chapter 01's single door, kept by every later chapter: each tool an agent of chapters 02-06 runs
is run by the registry, and a LangGraph tool message carries the door's verdict.

The door's log here is every call the registry runs (``ToolRegistry.run``: what ``execute`` and
the gateway run once ``ToolRegistry.check`` let a call through). A run passes when the tools' own records of what they
did (the offline tools' ``calls``, the warehouse's writes, the injection lab's side effects)
match that log one for one: no tool ran beside the door.
"""

from collections import Counter

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from course.agents.live import LivePlan, run_live
from course.agents.offline_tools import make_tools
from course.agents.replay import ReplayModel, replay_run
from course.agents.traces import RECORDINGS_DIR, load_run
from course.checkpoints import thread_config
from course.guards.confirmation import ScriptedApprover, run_with_approver
from course.guards.injection import run_guarded, run_naive
from course.guards.injection_payloads import payloads
from course.guards.warehouse import build_warehouse_graph
from course.loop.agent_loop import IdealBondTrajectory, StepDecision, StopRules, run_loop
from course.loop.budget_graph import build_budget_graph, run_langgraph_with_budget
from course.loop.budget_guard import (
    budgeted_code_agent,
    run_smolagents_with_budget,
    scripted_code_model,
)
from course.tools.calls import ToolCall
from course.tools.examples import get_weather
from course.tools.for_libraries import langchain_tool, langchain_tools, tool_message
from course.tools.gateway import ToolGateway
from course.tools.registry import CheckedCall, ToolRegistry, ToolResult, ToolStatus

TASK = "What is the current weather in Paris?"


@pytest.fixture
def door(monkeypatch):
    """The names of the tools the registry runs, in order (a spy on ``ToolRegistry.run``)."""
    ran: list[str] = []
    run = ToolRegistry.run

    def spy(self, checked, **kwargs):
        if isinstance(checked, CheckedCall):  # a refusal from check is handed back, not run
            ran.append(checked.tool)
        return run(self, checked, **kwargs)

    monkeypatch.setattr(ToolRegistry, "run", spy)
    return ran


def _own_records(tools) -> list[str]:
    """What the offline tools say they ran (each keeps a ``calls`` log), in name order."""
    return sorted(tool.name for tool in tools for _ in tool.calls)


def _tool_node(tools, calls):
    """The tool messages a LangGraph ``ToolNode`` over ``tools`` appends for ``calls``."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    out = graph.compile().invoke({"messages": [AIMessage("", tool_calls=calls)]})
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


# ---------------------------------------------------------------- the verdict on the way back


def test_a_refused_call_reaches_the_tool_node_as_an_error_with_its_result():
    registry = ToolRegistry()
    registry.register(get_weather)
    by_id = _tool_node(langchain_tools(registry), [
        {"name": "get_weather", "args": {"city": 42}, "id": "bad"},
        {"name": "get_weather", "args": {"city": "Oslo"}, "id": "good"}])
    refused, ran = by_id["bad"], by_id["good"]
    assert refused.status == "error" and isinstance(refused.artifact, ToolResult)
    assert refused.artifact.status == ToolStatus.INVALID_ARGUMENTS and not refused.artifact.executed
    assert refused.content == refused.artifact.content and "NOT run" in refused.content
    assert ran.status == "success" and ran.artifact.status == ToolStatus.OK
    assert ran.content == ran.artifact.value == "Oslo: 3 °C, snow"


def test_a_gateway_refusal_and_a_held_call_are_errors_too():
    registry = ToolRegistry()
    registry.register(get_weather, name="cancel", risk="critical")
    registry.register(get_weather)
    gateway = ToolGateway(registry, {"agent": {"read", "critical"}})
    tools = langchain_tools(registry, executor=lambda name, args: gateway.execute(
        name, args, subject="agent"))
    held = _tool_node(tools, [{"name": "cancel", "args": {"city": "Oslo"}, "id": "held"}])["held"]
    assert held.status == "error" and held.artifact.status == ToolStatus.NEEDS_CONFIRMATION
    assert gateway.audit.decisions() == ["needs_confirmation"]


def test_a_result_survives_a_checkpoint_as_plain_data():
    result = ToolResult("t", {"a": 1}, ToolStatus.VETOED, "no")
    assert type(result.status) is str and result.status == ToolStatus.VETOED
    message = tool_message(result, "c1")
    assert message.status == "error" and message.name == "t"
    assert ToolResult.of(message.artifact) is result
    plain = {"tool": "t", "arguments": {"a": 1}, "status": "vetoed", "content": "no",
             "value": None, "exception": "ToolError('no')"}  # as a checkpoint gives it back
    assert ToolResult.of(plain).status == ToolStatus.VETOED and ToolResult.of(None) is None
    with pytest.raises(ValueError):
        ToolResult("t", {}, "done", "an unknown status is refused")


def test_the_gateway_checks_an_allowed_call_once(monkeypatch):
    checks = []
    check = ToolRegistry.check
    monkeypatch.setattr(ToolRegistry, "check", lambda self, *a: checks.append(a[0]) or check(self, *a))
    registry = ToolRegistry()
    registry.register(get_weather)
    result = ToolGateway(registry, {"agent": {"read"}}).execute(
        "get_weather", {"city": "Oslo"}, subject="agent")
    assert result.ok and checks == ["get_weather"]


# ---------------------------------------------------------------- chapter 02


@pytest.mark.parametrize("name", ["weather_note", "bond_note", "bond_ideal_react",
                                  "debug_note", "bond_reference_72b"])
def test_a_replayed_code_agent_runs_its_tools_through_the_door(door, name):
    replay = replay_run(load_run(RECORDINGS_DIR / f"{name}.json"), tokenizer=None, qwen=None)
    assert sorted(door) == _own_records(replay.tools.values())
    assert len(door) == {"weather_note": 2, "bond_note": 1, "bond_ideal_react": 2,
                         "debug_note": 0}.get(name, len(door))
    assert all(type(t).__name__ == "DoorTool" for n, t in replay.agent.tools.items()
               if n != "final_answer")


def test_a_live_code_agent_runs_its_tools_through_the_door(door):
    recording = load_run(RECORDINGS_DIR / "weather_note.json")
    live = run_live("weather", LivePlan(3, 64, "scripted for the test"),
                    model=ReplayModel(recording.model_outputs()))
    called = [c.name for s in live.trace.steps for c in s.tool_calls if c.name != "final_answer"]
    assert door == called == ["web_search", "web_search"]


# ---------------------------------------------------------------- chapter 03


def test_the_loop_runs_its_tools_through_the_door(door):
    tools = make_tools(["web_search", "text_to_image"])
    run = run_loop("Draw James Bond's car.", IdealBondTrajectory(), tools)
    assert door == [s.call.name for s in run.steps if s.call] == ["web_search", "text_to_image"]
    assert sorted(door) == _own_records(tools)


def test_the_budgeted_code_agent_runs_its_tools_through_the_door(door):
    tools = make_tools(["web_search"])
    step = 'Thought: search\n<code>\nprint(web_search(query="current weather in Paris"))\n</code>'
    agent, guard = budgeted_code_agent(tools, scripted_code_model([step], tokenizer=None),
                                       StopRules(max_steps=3, repeat_detection=False))
    run = run_smolagents_with_budget(agent, TASK, guard)
    assert door == _own_records(tools) == ["web_search"] * run.steps == ["web_search"] * 3


def test_the_budget_graph_runs_its_tools_through_the_door(door):
    tools = make_tools(["web_search"])
    decisions = [StepDecision(f"try {i}", ToolCall("web_search", {"query": f"Paris weather {i}"}))
                 for i in range(5)]
    graph = build_budget_graph(decisions, [langchain_tool(tools[0])])
    run = run_langgraph_with_budget(graph, TASK, token_budget=10**6, recursion_limit=7,
                                    thread_id="door")
    messages = [m for m in run.trace["messages"] if isinstance(m, ToolMessage)]
    assert door == _own_records(tools) == ["web_search"] * len(messages) and messages
    assert all(ToolResult.of(m.artifact).ok for m in messages)


# ---------------------------------------------------------------- chapter 06


def test_the_warehouse_writes_only_through_the_door(door):
    graph, warehouse = build_warehouse_graph()
    run_with_approver(graph, thread_config("door"), "Prepare order ORD-1.",
                      ScriptedApprover(default="approve"))
    writes = [name for name in door if name in {"move_stock", "book_transfer", "amend_declaration"}]
    assert writes == [name for name, _ in warehouse.executed] and writes


@pytest.mark.parametrize("runtime", [run_naive, run_guarded])
def test_every_injection_side_effect_went_through_the_door(door, runtime):
    for payload in payloads():
        door.clear()
        if runtime is run_guarded:
            outcome = runtime(payload, approver=ScriptedApprover(default="approve"))
        else:
            outcome = runtime(payload)
        ran = Counter(door)
        effects = Counter(e["tool"] for e in outcome.side_effects)
        reads = Counter(tool for tool, _, _ in payload.documents)
        assert all(ran[tool] >= count for tool, count in (effects + reads).items()), payload.name
        for tool in ("send_email", "post_message", "delete_file"):
            assert ran[tool] == effects[tool], payload.name
