"""The smallest tool-calling LangGraph graph (agent -> tools -> agent), and its transcript.

:func:`react_graph` is stock LangGraph: a chat model with ``bind_tools``, the prebuilt
``ToolNode`` and the ``tools_condition`` edge. Chapter 01 runs it with tools from the registry's
door (:mod:`course.tools.for_libraries`) and with an MCP server's tools; :func:`transcript` is the
one way both print what the graph did, one line per message.

Not handled: parallel tool calls in one turn (``ToolNode`` runs them, the transcript shows them,
nothing here orders them), memory between invocations (no checkpointer: see chapter 04),
streaming, interrupts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

__all__ = ["react_graph", "transcript"]


def react_graph(tools: Sequence[Any], model: Any) -> Any:
    """A compiled graph: ``agent`` calls ``model.bind_tools(tools)``; ``tools`` runs the calls."""
    bound = model.bind_tools(list(tools))

    def agent(state: MessagesState) -> dict:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def transcript_values(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """What :func:`transcript` shows, as values: each message's type, text and tool calls."""
    return [{"type": m.type,
             "content": m.content if isinstance(m.content, str) else json.dumps(m.content, default=str),
             "calls": [{"name": c["name"], "args": c["args"]} for c in getattr(m, "tool_calls", None) or []]}
            for m in messages]


def transcript(messages: Sequence[Any], width: int = 160) -> str:
    """One line per message: its type, its text (cut at ``width``) and any tool calls it made."""
    lines = []
    for m in messages:
        text = m.content if isinstance(m.content, str) else json.dumps(m.content, default=str)
        line = f"{m.type:>5}: {text[:width]!r}"
        calls = getattr(m, "tool_calls", None)
        if calls:
            line += " calls " + "; ".join(
                f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in calls)
        lines.append(line)
    return "\n".join(lines)
