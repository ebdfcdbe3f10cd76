"""The registry's tools as LangChain and smolagents tool objects, each going through the door.

Frameworks want their own tool objects: a LangGraph ``ToolNode`` takes LangChain
``StructuredTool``s, a smolagents agent takes ``smolagents.Tool``s. The adapters here build them
from a :class:`~course.tools.registry.ToolRegistry` so that every call still passes the one door
(allowlist, schema, refusal text) or whatever ``executor`` you give (e.g. a gateway's
``execute`` with a subject bound). A framework therefore receives refusal text as the tool's
output, never an exception. :func:`langchain_tool` is the short way for one function or one
smolagents tool (chapter 03's budget graph uses it).

Not handled: async tools, streaming tool output, LangChain's ``return_direct`` /
``response_format`` options, smolagents output types other than ``string``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.tools import StructuredTool

from course.tools.registry import ToolRegistry, ToolResult

__all__ = ["langchain_tool", "langchain_tools", "smolagents_tools"]

Executor = Callable[[str, Any], ToolResult]
_SMOLAGENTS_TYPES = {"string", "integer", "number", "boolean", "array", "object"}


def langchain_tools(registry: ToolRegistry, names: Iterable[str] | None = None,
                    executor: Executor | None = None) -> list[StructuredTool]:
    """The allowed tools (or the allowed ones among ``names``) as LangChain tools on the door.

    Each tool's function returns ``executor(name, arguments).content`` (default
    ``registry.execute``), so a ``ToolNode`` gets the refusal text, never an exception.
    """
    run = executor or registry.execute
    tools = []
    for schema in registry.schemas(names):
        function = schema["function"]

        def call(_name: str = function["name"], **arguments: Any) -> str:
            return run(_name, arguments).content

        tools.append(StructuredTool(name=function["name"], description=function["description"],
                                    args_schema=function["parameters"], func=call))
    return tools


def langchain_tool(tool: Any, registry: ToolRegistry | None = None, **register_options: Any
                   ) -> StructuredTool:
    """Register ``tool`` (a typed function or a smolagents ``Tool``) and return it for LangChain.

    ``registry`` defaults to a new one holding just this tool; ``register_options`` go to
    :meth:`ToolRegistry.register`. The returned tool calls through that registry's door.
    """
    registry = registry if registry is not None else ToolRegistry()
    before = set(registry.names())
    registry.register(tool, **register_options)
    (name,) = set(registry.names()) - before
    registry.allow(name)
    return langchain_tools(registry, [name])[0]


def smolagents_tools(registry: ToolRegistry, names: Iterable[str] | None = None,
                     executor: Executor | None = None) -> list[Any]:
    """The allowed tools as smolagents ``Tool`` objects whose ``forward`` goes through the door.

    Optional arguments become ``nullable`` inputs, and a ``None`` the agent passes for one is
    dropped before validation. Positional arguments map onto the inputs in order; more
    positional arguments than inputs come back as a refusal text naming them, never dropped.
    """
    from smolagents import Tool

    run = executor or registry.execute
    tools = []
    for schema in registry.schemas(names):
        function = schema["function"]
        params = function["parameters"]
        required = set(params.get("required", []))
        inputs = {}
        for arg, prop in params.get("properties", {}).items():
            kind = prop.get("type") if prop.get("type") in _SMOLAGENTS_TYPES else "any"
            entry = {"type": kind, "description": prop.get("description", arg)}
            if arg not in required:
                entry["nullable"] = True
            inputs[arg] = entry

        class DoorTool(Tool):
            skip_forward_signature_validation = True

            def forward(self, *args: Any, **kwargs: Any) -> str:
                if len(args) > len(self.inputs):
                    extra = ", ".join(repr(a)[:40] for a in args[len(self.inputs):])
                    return (f"Tool '{self.name}' takes at most {len(self.inputs)} positional "
                            f"argument(s) ({', '.join(self.inputs) or 'none'}); got extra "
                            f"{extra}, so it was NOT run. Call it with keyword arguments.")
                kwargs = {**dict(zip(self.inputs, args, strict=False)), **kwargs}
                kwargs = {k: v for k, v in kwargs.items() if v is not None}
                return run(self.name, kwargs).content

        DoorTool.name = function["name"]
        DoorTool.description = function["description"] or function["name"]
        DoorTool.inputs = inputs
        DoorTool.output_type = "string"
        tools.append(DoorTool())
    return tools
