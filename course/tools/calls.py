"""A tool call as data: the one record every chapter uses for "this tool, these arguments".

Chapter 01 introduces it (the model emits ``{"name": ..., "arguments": {...}}``); chapter 02's
traces hold the calls found in a step's code, and chapter 03's loop holds the call a model
decided on. Nothing here executes a call: that is the registry's job
(:mod:`course.tools.registry`).
"""

from __future__ import annotations

import json
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

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.name}({args})"

    __repr__ = __str__
