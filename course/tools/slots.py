"""Slot filling: a tool's arguments gathered over several turns, the call made only when valid.

:func:`slot_filling_graph` builds a LangGraph graph around ONE registered tool. Its state keeps
the partly filled arguments (``slots``) between turns (a checkpointer and a thread id carry them
from one ``invoke`` to the next). Each turn: ``extract`` merges what the user's message gives
into the slots; the registry's own check (:meth:`ToolRegistry.check`, the schema's required
fields and types) decides the route; ``ask`` replies with what is missing or wrong, ``call``
runs the tool through the door and replies with its result. The tool never runs on a call that
does not validate.

The extraction is pluggable. :func:`keyword_extractor` is a plain rule (``<slot> <value>``,
``<slot>: <value>``, an ``enum`` value named anywhere), *scripted*, not a model: the lesson here
is the state and the validation, which stay the same when a model extracts the values.

Not handled: correcting a slot already filled by an invalid value other than by restating it,
several tools, slots that are objects or arrays, extraction of values the user implies.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from jsonschema import Draft202012Validator
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from course.tools.registry import ToolRegistry, ToolResult

__all__ = ["invalid_slots", "keyword_extractor", "missing_slots", "slot_filling_graph"]

Extractor = Callable[[str, dict[str, Any]], dict[str, Any]]


class SlotState(TypedDict):
    """The conversation, the arguments gathered so far, and the tool's result once it ran."""

    messages: Annotated[list[AnyMessage], add_messages]
    slots: dict[str, Any]
    result: str


def keyword_extractor(text: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Values for the schema's properties found in ``text`` by a plain rule (see module)."""
    found: dict[str, Any] = {}
    for prop, schema in parameters.get("properties", {}).items():
        if "enum" in schema:
            for option in schema["enum"]:
                if re.search(rf"\b{re.escape(str(option))}\b", text, re.I):
                    found[prop] = option
            continue
        head, *rest = prop.split("_")
        words = head + "".join(rf"(?:[\s_]?{w})?" for w in rest)  # "order_id", "order id", "order"
        match = re.search(rf"\b{words}\b\s*(?:is|:|=)?\s*([\w.-]+)", text, re.I)
        if not match:
            continue
        value: Any = match.group(1)
        if schema.get("type") in ("number", "integer"):
            try:
                value = float(value) if schema["type"] == "number" else int(value)
            except ValueError:
                pass  # left as text: the schema check will name the problem
        found[prop] = value
    return found


def missing_slots(parameters: dict[str, Any], slots: dict[str, Any]) -> list[str]:
    """The schema's required properties that have no value yet, in schema order."""
    return [p for p in parameters.get("required", []) if p not in slots]


def invalid_slots(parameters: dict[str, Any], slots: dict[str, Any]) -> list[str]:
    """The filled properties whose value breaks that property's schema."""
    properties = parameters.get("properties", {})
    return [p for p, v in slots.items()
            if p in properties and not Draft202012Validator(properties[p]).is_valid(v)]


def _expected(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " or ".join(map(str, schema["enum"]))
    return schema.get("type", "a value")


def slot_filling_graph(registry: ToolRegistry, tool: str,
                       extract: Extractor = keyword_extractor) -> Any:
    """A compiled graph (in-memory checkpointer) that fills ``tool``'s arguments turn by turn."""
    parameters = registry.spec(tool).parameters

    def extract_node(state: SlotState) -> dict:
        text = str(state["messages"][-1].content)
        return {"slots": {**state.get("slots", {}), **extract(text, parameters)}}

    def route(state: SlotState) -> str:
        return "ask" if isinstance(registry.check(tool, state["slots"]), ToolResult) else "call"

    def ask(state: SlotState) -> dict:
        slots = state["slots"]
        parts = []
        if missing := missing_slots(parameters, slots):
            parts.append(f"To call {tool} I still need: {', '.join(missing)}.")
        if invalid := invalid_slots(parameters, slots):
            parts.append("These values do not fit: " + ", ".join(
                f"{p}={slots[p]!r} (expected {_expected(parameters['properties'][p])})"
                for p in invalid) + ".")
        if not parts:  # the schema refuses for another reason (extra keys, size): say it
            refusal = registry.check(tool, slots)
            if isinstance(refusal, ToolResult):
                parts.append(refusal.content)
        return {"messages": [AIMessage(" ".join(parts))]}

    def call(state: SlotState) -> dict:
        result = registry.execute(tool, state["slots"])
        return {"messages": [AIMessage(result.content)], "result": result.status}

    graph = StateGraph(SlotState)
    graph.add_node("extract", extract_node)
    graph.add_node("ask", ask)
    graph.add_node("call", call)
    graph.add_edge(START, "extract")
    graph.add_conditional_edges("extract", route, {"ask": "ask", "call": "call"})
    graph.add_edge("ask", END)
    graph.add_edge("call", END)
    return graph.compile(checkpointer=InMemorySaver())
