"""A tool call as data: the one record every chapter uses for "this tool, these arguments".

Chapter 01 introduces it (the model emits ``{"name": ..., "arguments": {...}}``, which
:func:`course.tools.protocol.parse_model_output` reads into a ``ToolCall``); chapter 02's traces
hold the calls found in a step's code, chapter 03's loop holds the call a model decided on, and
chapter 06's injection lab holds the calls a reader found in a page. LangChain and LangGraph
keep calls as dicts (``{"name", "args", "id", "type"}``, in ``AIMessage.tool_calls`` and in
graph state); :meth:`ToolCall.for_langchain` and :meth:`ToolCall.from_langchain` are the one
translation. Nothing here executes a call: that is the registry's job
(:mod:`course.tools.registry`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall"]


@dataclass(frozen=True)
class ToolCall:
    """A structured call: a tool name and its literal arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """A canonical text of the call; two calls are "the same" when their keys are equal."""
        return f"{self.name}({json.dumps(self.arguments, sort_keys=True, default=str)})"

    def to_dict(self) -> dict[str, Any]:
        """The call as the model writes it: ``{"name": ..., "arguments": {...}}``."""
        return {"name": self.name, "arguments": dict(self.arguments)}

    def for_langchain(self, call_id: str) -> dict[str, Any]:
        """The call as LangChain's ``AIMessage.tool_calls`` holds it."""
        return {"name": self.name, "args": dict(self.arguments), "id": call_id,
                "type": "tool_call"}

    @classmethod
    def from_langchain(cls, call: Mapping[str, Any]) -> ToolCall:
        """The record of a LangChain tool call (a dict with ``name`` and ``args``)."""
        return cls(call["name"], dict(call.get("args") or {}))

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.name}({args})"

    __repr__ = __str__
