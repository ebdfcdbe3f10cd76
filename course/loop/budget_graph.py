"""Stop rules in LangGraph: ``recursion_limit`` bounds super-steps; a budget lives in the state.

``config={"recursion_limit": N}`` bounds the number of super-steps (an agent step plus a tool
step is two); exceeding it raises ``GraphRecursionError``, which
:func:`run_langgraph_with_budget` catches before reading the last checkpoint back, so the trace
survives. A token budget lives in the graph state (``tokens_used`` with an adding reducer) and a
conditional edge routes to a stop node when it is spent. The tool node is LangGraph's
``ToolNode`` over tools made by chapter 01's registry adapter
(:func:`course.tools.for_libraries.langchain_tool`).

The policy is *scripted* (named so in every output): the lesson is the runtime. Not handled:
real models (see chapter 01's ``react_graph``), streaming, budgets in money.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, UsageMetadata
from langgraph.checkpoint.memory import MemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from course.agents.traces import content_text
from course.checkpoints import thread_config
from course.loop.agent_loop import (
    APPROXIMATE_UNIT,
    StepDecision,
    StopReason,
    approximate_token_count,
)
from course.loop.budget_guard import LibraryRun

__all__ = ["build_budget_graph", "loop_diagram", "run_langgraph_with_budget"]


class BudgetState(TypedDict, total=False):
    """Graph state: messages appended, tokens added up, the budget and the stop reason kept."""

    messages: Annotated[list, operator.add]
    tokens_used: Annotated[int, operator.add]
    token_budget: int
    stop_reason: str


def build_budget_graph(decisions: Sequence[StepDecision], tools: Sequence[Any],
                       count_tokens: Callable[[str], int] = approximate_token_count,
                       token_unit: str = APPROXIMATE_UNIT):
    """A LangGraph agent (agent node, ``ToolNode``, budget stop node) over a scripted policy.

    The scripted policy returns ``decisions`` in order (then repeats the last); each becomes an
    ``AIMessage`` with ``tool_calls`` and ``usage_metadata``. Compiled with ``MemorySaver`` so
    the state can be read back after a ``GraphRecursionError``.
    """
    if not decisions:
        raise ValueError("build_budget_graph needs at least one StepDecision.")

    def agent(state: BudgetState) -> dict:
        done = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        decision = decisions[min(done, len(decisions) - 1)]
        seen = "\n".join(content_text(m.content) for m in state["messages"])
        tokens_in, tokens_out = count_tokens(seen), count_tokens(decision.text())
        calls = [] if decision.call is None else [decision.call.for_langchain(f"call_{done + 1}")]
        message = AIMessage(
            content=decision.final_answer if decision.final_answer is not None else decision.thought,
            tool_calls=calls,
            usage_metadata={"input_tokens": tokens_in, "output_tokens": tokens_out,
                            "total_tokens": tokens_in + tokens_out})
        update: dict[str, Any] = {"messages": [message], "tokens_used": tokens_in + tokens_out}
        if not calls:
            update["stop_reason"] = str(StopReason.FINAL_ANSWER)
        return update

    def route(state: BudgetState) -> str:
        if state.get("stop_reason"):
            return END
        if state["tokens_used"] > state["token_budget"]:
            return "budget_stop"
        return "tools"

    def budget_stop(state: BudgetState) -> dict:
        return {"stop_reason": str(StopReason.TOKEN_BUDGET)}

    graph = StateGraph(BudgetState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_node("budget_stop", budget_stop)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", "budget_stop", END])
    graph.add_edge("tools", "agent")
    graph.add_edge("budget_stop", END)
    app = graph.compile(checkpointer=MemorySaver())
    # read by run_langgraph_with_budget: an attribute of ours, which langgraph's class does not declare
    app.token_unit = token_unit  # type: ignore[attr-defined]
    return app


def run_langgraph_with_budget(graph: Any, task: str, token_budget: int, recursion_limit: int,
                              thread_id: str = "budget-demo") -> LibraryRun:
    """Invoke the graph with a token budget in state and a ``recursion_limit``; keep the trace."""
    config = {**thread_config(thread_id), "recursion_limit": recursion_limit}
    start = {"messages": [HumanMessage(task)], "tokens_used": 0, "token_budget": token_budget,
             "stop_reason": ""}
    try:
        graph.invoke(start, config)
        hit_limit = False
    except GraphRecursionError:
        hit_limit = True
    values = graph.get_state(config).values  # the checkpoint survives the exception
    rows: list[dict[str, Any]] = []
    total = 0
    for message in values["messages"]:
        if isinstance(message, AIMessage):
            usage: UsageMetadata | dict[str, int] = message.usage_metadata or {}
            total += usage.get("total_tokens", 0)
            action = (", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
                      or f"final answer: {message.content}")
            rows.append({"step": len(rows) + 1, "action": action[:70],
                         "input_tokens": usage.get("input_tokens", 0),
                         "output_tokens": usage.get("output_tokens", 0), "total_tokens": total})
    if hit_limit:
        reason, detail = "recursion_limit", f"GraphRecursionError at recursion_limit={recursion_limit}"
    elif values.get("stop_reason") == str(StopReason.TOKEN_BUDGET):
        reason = StopReason.TOKEN_BUDGET
        detail = f"{values['tokens_used']} tokens > budget {token_budget} (budget in state)"
    else:
        reason, detail = StopReason.FINAL_ANSWER, "the model answered without a tool call"
    final = values["messages"][-1].content if reason == StopReason.FINAL_ANSWER else None
    return LibraryRun("LangGraph StateGraph", "scripted policy", reason, detail, rows, final, values,
                      getattr(graph, "token_unit", "tokens"))


class _LoopFigure(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def _nothing(state: _LoopFigure) -> dict:
    return {}


def _end(state: _LoopFigure) -> str:
    return END


def loop_diagram():
    """The agent loop of note 000 as a compiled graph (decide -> call -> observe, and the stops).

    Its nodes do nothing: it exists to be drawn (:func:`course.drawing.show_graph`), so that the
    figure comes from a graph, like every other figure of a graph in the workbook.
    """
    graph = StateGraph(_LoopFigure)
    for name in ("model decides", "runtime calls the tool", "observation appended",
                 "stop rules checked"):
        graph.add_node(name, _nothing)
    graph.add_edge(START, "model decides")
    graph.add_conditional_edges("model decides", _end,
                                {"final answer": END, "tool call": "stop rules checked"})
    graph.add_conditional_edges("stop rules checked", _end,
                                {"budget spent / max steps / repeat": END,
                                 "continue": "runtime calls the tool"})
    graph.add_edge("runtime calls the tool", "observation appended")
    graph.add_edge("observation appended", "model decides")
    return graph.compile()
