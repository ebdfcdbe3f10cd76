"""The registry's tools as LangChain and smolagents tool objects, each going through the door.

Frameworks want their own tool objects: a LangGraph ``ToolNode`` takes LangChain
tools (``BaseTool``), a smolagents agent takes ``smolagents.Tool``s. The functions here build them
from a :class:`~course.tools.registry.ToolRegistry` so that every call still passes the one door
(allowlist, schema, refusal text) or whatever ``executor`` you give (e.g. a gateway's
``execute`` with a subject bound). A framework therefore receives refusal text as the tool's
output, never an exception, and the door's verdict travels with it:

- a LangChain tool answers a model's tool call with the ``ToolMessage`` built from the door's
  :class:`~course.tools.registry.ToolResult` (:func:`tool_message`): the model reads its
  ``content``, its ``artifact`` is the result, and its ``status`` is ``"error"`` when the call did
  not succeed (a refusal, a bug, a timeout), so code after the graph (a ``ToolNode``'s caller)
  reads the verdict, not the wording of the refusal;
- a smolagents tool returns the refusal text to the agent's code, and a bug (the tool raised)
  raises the tool's own exception again, so smolagents reports it as that step's error, as it
  does for any tool. A registered smolagents ``Tool`` keeps its inputs, output type and
  description, so the agent's prompt is the same as with the raw tool.

:func:`langchain_tool` is the short way for one function or one smolagents tool (chapter 03's
budget graph uses it); :func:`smolagents_door` does the same for a list of tools (chapters 02
and 03 give their code agents tools this way).

Not handled: async tools, streaming tool output, LangChain's ``return_direct``, smolagents
output types other than the tool's own (or ``string`` for a plain function).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from course.tools.registry import ToolRegistry, ToolResult, ToolStatus, as_registry

__all__ = ["langchain_tool", "langchain_tools", "smolagents_door", "smolagents_tools",
           "tool_message"]

Executor = Callable[[str, Any], ToolResult]
_SMOLAGENTS_TYPES = {"string", "integer", "number", "boolean", "array", "object"}


def _message_status(result: ToolResult) -> Literal["success", "error"]:
    """A ``ToolMessage`` status for a result: ``success`` only when the tool ran and returned."""
    return "success" if result.ok else "error"


def tool_message(result: ToolResult, tool_call_id: str, name: str | None = None) -> ToolMessage:
    """The ``ToolMessage`` for a call's result, as a ``ToolNode`` appends one for these tools.

    The model reads ``content``; ``artifact`` is the result; ``status`` is ``"error"`` unless the
    call succeeded. For a graph node that runs calls itself (chapter 06's approval graph).
    """
    return ToolMessage(result.content, tool_call_id=tool_call_id, name=name or result.tool,
                       artifact=result, status=_message_status(result))


class _LangChainDoorTool(BaseTool):
    """A registry tool as a LangChain tool: a model's tool call gets the ``ToolMessage`` built
    from the door's result (:func:`tool_message`), so the message carries the verdict as made.

    LangChain hands a tool's ``_run`` only the arguments; the call's id, which the message needs,
    is passed on by ``_to_args_and_kwargs`` (the step LangChain's own single-input ``Tool``
    overrides). Invoked with plain arguments (no tool call, no id), it returns the text.
    """

    door: Executor

    def _to_args_and_kwargs(self, tool_input: str | dict[str, Any], tool_call_id: str | None
                            ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        _, arguments = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return (), {"arguments": arguments, "tool_call_id": tool_call_id}

    def _run(self, arguments: dict[str, Any], tool_call_id: str | None) -> ToolMessage | str:
        result = self.door(self.name, arguments)
        if tool_call_id is None:
            return result.content
        return tool_message(result, tool_call_id, self.name)


def langchain_tools(registry: ToolRegistry, names: Iterable[str] | None = None,
                    executor: Executor | None = None) -> list[BaseTool]:
    """The allowed tools (or the allowed ones among ``names``) as LangChain tools on the door.

    Each call goes through ``executor(name, arguments)`` (default ``registry.execute``); a
    model's tool call (what a ``ToolNode`` makes) gets the :func:`tool_message` of the result:
    the content the model reads (the refusal text, never an exception), the result as its
    artifact, ``status="error"`` unless the call succeeded.
    """
    door = executor or registry.execute
    return [_LangChainDoorTool(name=schema["function"]["name"],
                               description=schema["function"]["description"],
                               args_schema=schema["function"]["parameters"], door=door)
            for schema in registry.schemas(names)]


def langchain_tool(tool: Any, registry: ToolRegistry | None = None, **register_options: Any
                   ) -> BaseTool:
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


def smolagents_door(tools: Any, executor: Executor | None = None) -> list[Any]:
    """``tools`` (a registry, a list of tools or ``{name: tool}``) as smolagents tools on the door.

    The tools are registered in a registry (:func:`~course.tools.registry.as_registry`) and
    handed out by :func:`smolagents_tools`, so a ``CodeAgent`` given them calls every tool
    through the door (or through ``executor``, e.g. a gateway's ``execute``). A list keeps its
    order (the order the agent's prompt lists the tools in).
    """
    registry = as_registry(tools)
    names = None if isinstance(tools, ToolRegistry) else registry.names(sort=False)
    return smolagents_tools(registry, names, executor=executor)


def _inputs(spec: Any, parameters: dict[str, Any]) -> dict[str, Any]:
    """smolagents ``inputs`` for a tool: a smolagents tool's own, else built from its schema."""
    own = getattr(spec.fn, "inputs", None)
    if isinstance(own, dict) and hasattr(spec.fn, "forward"):
        return dict(own)
    required = set(parameters.get("required", []))
    inputs = {}
    for arg, prop in parameters.get("properties", {}).items():
        kind = prop.get("type") if prop.get("type") in _SMOLAGENTS_TYPES else "any"
        entry = {"type": kind, "description": prop.get("description", arg)}
        if arg not in required:
            entry["nullable"] = True
        inputs[arg] = entry
    return inputs


def smolagents_tools(registry: ToolRegistry, names: Iterable[str] | None = None,
                     executor: Executor | None = None) -> list[Any]:
    """The allowed tools as smolagents ``Tool`` objects whose ``forward`` goes through the door.

    Optional arguments become ``nullable`` inputs, and a ``None`` the agent passes for one is
    dropped before validation. Positional arguments map onto the inputs in order; more
    positional arguments than inputs come back as a refusal text naming them, never dropped.
    A call that succeeds returns the tool's value (an image stays an image); a refusal returns
    its text; a bug raises the tool's exception for smolagents to report.
    """
    from smolagents import Tool

    run = executor or registry.execute
    tools = []
    for schema in registry.schemas(names):
        function = schema["function"]
        spec = registry.spec(function["name"])

        class DoorTool(Tool):
            skip_forward_signature_validation = True

            def forward(self, *args: Any, **kwargs: Any) -> Any:
                if len(args) > len(self.inputs):
                    extra = ", ".join(repr(a)[:40] for a in args[len(self.inputs):])
                    return (f"Tool '{self.name}' takes at most {len(self.inputs)} positional "
                            f"argument(s) ({', '.join(self.inputs) or 'none'}); got extra "
                            f"{extra}, so it was NOT run. Call it with keyword arguments.")
                kwargs = {**dict(zip(self.inputs, args, strict=False)), **kwargs}
                kwargs = {k: v for k, v in kwargs.items() if v is not None}
                result = run(self.name, kwargs)
                if result.status == ToolStatus.BUG and isinstance(result.exception, Exception):
                    raise result.exception
                if result.status == ToolStatus.OK and self.output_type != "string":
                    return result.value
                return result.content

        DoorTool.name = function["name"]
        DoorTool.description = function["description"] or function["name"]
        DoorTool.inputs = _inputs(spec, function["parameters"])
        DoorTool.output_type = getattr(spec.fn, "output_type", None) or "string"
        output_schema = getattr(spec.fn, "output_schema", None)
        if output_schema is not None:
            DoorTool.output_schema = output_schema
        tools.append(DoorTool())
    return tools
