"""The tool registry: the single door every tool call goes through, and refusal as a result.

:class:`ToolRegistry` resolves a name to a function AND checks an allowlist before anything
runs. Registration and permission are separate: ``register`` records a tool (``allowed=False``
records it switched off); the allowlist (``allow`` / ``disallow`` / ``configure``) decides whether
it may run, so configuration can switch a tool on without touching its code. It is an allowlist,
never a denylist: a name that is not on it is refused, whatever it is.

Arguments are validated with ``jsonschema`` against the tool's JSON Schema (generated from the
typed Python function by LangChain's ``convert_to_openai_tool``, or taken from a smolagents
``Tool``; ``additionalProperties: false`` added) and against a size limit, BEFORE execution.
:class:`ToolError` means "the tool refused"; any other exception from a tool is a bug in our code:
``call`` lets it propagate, ``execute`` (what loops use) returns it as ``status="bug"`` with the
exception kept. ``execute`` never raises, whatever the caller passes. Every refusal is a text
written for the model that names what was blocked (:data:`REFUSALS`); a tool that returns ``None``
is reported as "returned no data", never as silence. A tool that requires confirmation is refused
by the bare registry: only a caller that asked a human (the gateway,
:mod:`course.tools.gateway`) passes ``confirmed_by``.

Not handled here: who is asking and risk grants, holding a call for a human and the audit log
(:mod:`course.tools.gateway`); LangChain / smolagents objects (:mod:`course.tools.adapters`);
asynchronous tools; sandboxing what a tool does once it runs. A per-tool ``timeout`` stops the
*caller's* wait, not the tool: a thread that overran keeps running in the background, and the
model is told the outcome is unknown.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_ARGUMENT_CHARS", "REFUSALS", "RISK_CLASSES", "RiskClass", "ToolError",
    "ToolRegistry", "ToolResult", "ToolSpec", "schema_from_function",
]

RiskClass = Literal["read", "write", "critical"]
RISK_CLASSES: tuple[str, ...] = ("read", "write", "critical")
DEFAULT_MAX_ARGUMENT_CHARS = 2000
_MAX_DEPTH = 64  # deeper arguments are refused before jsonschema (which recurses) sees them

#: The refusal texts, one per outcome. Written for the model: each names what was blocked and
#: what the model should do next. ``{tool}`` and the other fields are filled in per call.
REFUSALS: dict[str, str] = {
    "unknown_tool": (
        "Tool '{tool}' does not exist. Available tools: {available}. "
        "Do not invent tools; use one of these or answer without a tool."
    ),
    "not_allowed": (
        "Tool '{tool}' is not allowed in this session, so it was NOT run. "
        "Tell the user that '{tool}' is unavailable; do not claim it ran."
    ),
    "invalid_arguments": (
        "Invalid arguments for tool '{tool}', so it was NOT run: {problems}. "
        "Fix the arguments to match the schema and call it again."
    ),
    "oversized_arguments": (
        "Arguments for tool '{tool}' are too large ({size} characters, limit {limit}), "
        "so it was NOT run. Send shorter arguments."
    ),
    "refused": "Tool '{tool}' refused the request: {reason}",
    "bug": (
        "Tool '{tool}' failed with an internal error ({error}); this is a bug on our side, "
        "not your fault. Tell the user the action could not be completed."
    ),
    "no_data": "Tool '{tool}' completed and returned no data.",
    "timeout": (
        "Tool '{tool}' did not finish within {timeout} s, so its outcome is UNKNOWN: it may "
        "still complete. Tell the user the result is not known yet; do not claim it succeeded."
    ),
    "vetoed": (
        "Policy '{policy}' forbids this call to '{tool}', so it was NOT run: {reason}. "
        "Tell the user why; do not retry the same call."
    ),
    "subject_not_permitted": (
        "Subject '{subject}' may not use {risk} tools, so '{tool}' was NOT run. "
        "Tell the user this action needs someone with {risk} permission."
    ),
    "needs_confirmation": (
        "Tool '{tool}' is {risk} and needs confirmation by a human before it runs. "
        "It was NOT run yet; confirmation request {request_id} is waiting. "
        "Tell the user the action is waiting for approval; do not say it is done."
    ),
    "confirmation_unavailable": (
        "Tool '{tool}' is {risk} and needs confirmation by a human, but nobody can confirm "
        "in this session, so it was NOT run. Tell the user the action needs an approver."
    ),
    "confirmation_denied": (
        "A human ({approver}) denied confirmation request {request_id} for tool '{tool}', "
        "so it was NOT run. Tell the user the action was declined."
    ),
}


class ToolError(Exception):
    """The tool (or the door in front of it) refused: a result for the model, not a bug.

    ``status`` says which refusal it is (a key of :data:`REFUSALS`); ``str(error)`` is the
    message written for the model.
    """

    def __init__(self, message: str, status: str = "refused", tool: str = ""):
        super().__init__(message)
        self.status = status
        self.tool = tool


@dataclass
class ToolSpec:
    """One registered tool: the function, its JSON Schema and its risk class."""

    name: str
    fn: Callable[..., Any]
    description: str
    parameters: dict[str, Any]
    risk: str = "read"
    requires_confirmation: bool = False
    max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS
    timeout: float | None = None

    def openai_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI / chat-template format: ``{"type": "function", ...}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class ToolResult:
    """The one outcome of a call: always a value, even when the call was refused.

    ``status`` is ``"ok"`` or a key of :data:`REFUSALS`; ``content`` is what the model reads.
    """

    tool: str
    arguments: dict[str, Any]
    status: str
    content: str
    value: Any = None
    exception: BaseException | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """True when the tool ran and returned normally."""
        return self.status in ("ok", "no_data")

    @property
    def is_bug(self) -> bool:
        """True when the tool raised something other than :class:`ToolError`."""
        return self.status == "bug"

    def as_message(self, tool_call_id: str | None = None) -> dict[str, Any]:
        """The result as a tool-role chat message, ready to append to the conversation."""
        message: dict[str, Any] = {"role": "tool", "name": self.tool, "content": self.content}
        if tool_call_id is not None:
            message["tool_call_id"] = tool_call_id
        return message

    def __str__(self) -> str:
        return self.content


def _to_content(value: Any) -> str:
    """The text the model reads for a value (JSON when it can be, else ``str``)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _depth(value: Any, limit: int = _MAX_DEPTH) -> int:
    """Nesting depth of a JSON-like value, counted without recursion (stops past ``limit``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def schema_from_function(fn: Callable[..., Any]) -> tuple[str, str, dict[str, Any]]:
    """Name, description and a strict JSON Schema for a typed, documented Python function.

    The schema is LangChain's ``convert_to_openai_tool`` output, with ``additionalProperties:
    false`` added so that unexpected arguments are rejected. A smolagents ``Tool`` is accepted
    too (its ``inputs`` become the properties; ``nullable`` inputs are optional).
    """
    if hasattr(fn, "inputs") and hasattr(fn, "name") and hasattr(fn, "forward"):
        return _schema_from_smolagents_tool(fn)
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        spec = convert_to_openai_tool(fn)["function"]
    except Exception as err:  # langchain raises ValueError / TypeError for undocumented fns
        raise TypeError(
            f"cannot build a JSON Schema for {fn!r} ({err}). Fix: give it type hints and a "
            "docstring with an 'Args:' section, or pass schema=... to register()."
        ) from err
    parameters = dict(spec.get("parameters") or {"type": "object", "properties": {}})
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    parameters["additionalProperties"] = False
    return spec["name"], spec.get("description", ""), parameters


def _schema_from_smolagents_tool(tool: Any) -> tuple[str, str, dict[str, Any]]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, meta in tool.inputs.items():
        prop = {k: v for k, v in meta.items() if k not in ("nullable",)}
        if prop.get("type") == "any":
            prop.pop("type")
        properties[arg] = prop
        if not meta.get("nullable"):
            required.append(arg)
    parameters = {"type": "object", "properties": properties, "required": required,
                  "additionalProperties": False}
    return tool.name, tool.description, parameters


def _argument_problems(parameters: dict[str, Any], arguments: Any) -> list[str]:
    """Every way ``arguments`` breaks the schema, each as a short phrase that names the field."""
    from jsonschema import Draft202012Validator

    if not isinstance(arguments, Mapping):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    validator = Draft202012Validator(parameters)
    problems = []
    for error in sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.path)
        if error.validator == "required":
            problems.append(f"missing required argument {error.message.split()[0]}")
        elif error.validator == "additionalProperties":
            extra = sorted(set(arguments) - set(parameters.get("properties", {})))
            problems.append("unexpected argument(s) " + ", ".join(repr(e) for e in extra))
        else:
            problems.append(f"'{where}': {error.message}" if where else error.message)
    return problems


class ToolRegistry:
    """Name -> function resolution plus an allowlist check before execution: the single door.

    Registering a tool does not by itself decide whether it may run; the allowlist does, and it
    can be changed by configuration (:meth:`configure`) without touching the tool's code.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self.allowlist: set[str] = set()

    # -- registration -------------------------------------------------------------------
    def register(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        risk: str = "read",
        allowed: bool = True,
        requires_confirmation: bool | None = None,
        max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
        timeout: float | None = None,
    ) -> Any:
        """Record a tool; also usable as a decorator (``@registry.register(risk="write")``).

        ``schema`` (JSON Schema of the parameters) overrides the generated one. ``allowed=False``
        records the tool switched off (configuration can enable it later).
        ``requires_confirmation`` defaults to True for ``risk="critical"``. ``timeout`` (seconds)
        bounds how long :meth:`execute` waits for the tool. Returns ``fn``. A name must be a
        Python identifier (what every adapter needs), so a lambda needs ``name=...``.
        """
        if fn is None:
            return lambda f: self.register(
                f, name=name, description=description, schema=schema, risk=risk,
                allowed=allowed, requires_confirmation=requires_confirmation,
                max_argument_chars=max_argument_chars, timeout=timeout,
            )
        if risk not in RISK_CLASSES:
            raise ValueError(f"risk must be one of {RISK_CLASSES}, got {risk!r}")
        if not callable(fn):
            raise TypeError(f"register() needs a callable tool, got {type(fn).__name__}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"a tool name must be a string, got {type(name).__name__} {name!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if schema is None:
            auto_name, auto_description, parameters = schema_from_function(fn)
        else:
            auto_name = getattr(fn, "name", None) or getattr(fn, "__name__", "tool")
            auto_description = inspect.getdoc(fn) or ""
            parameters = {"type": "object", "additionalProperties": False, **schema}
        tool_name = name or auto_name
        if not isinstance(tool_name, str) or not tool_name.isidentifier():
            raise ValueError(f"tool name {tool_name!r} is not a Python identifier; "
                             "fix: register(fn, name='a_name')")
        if tool_name in self._tools:
            raise ValueError(f"a tool named {tool_name!r} is already registered")
        self._tools[tool_name] = ToolSpec(
            name=tool_name,
            fn=fn,
            description=description if description is not None else auto_description,
            parameters=parameters,
            risk=risk,
            requires_confirmation=(risk == "critical") if requires_confirmation is None
            else requires_confirmation,
            max_argument_chars=max_argument_chars,
            timeout=timeout,
        )
        if allowed:
            self.allowlist.add(tool_name)
        return fn

    # -- permission ---------------------------------------------------------------------
    def allow(self, *names: str) -> None:
        """Put registered tools on the allowlist (unknown names raise ``KeyError``)."""
        for tool_name in names:
            self.spec(tool_name)
            self.allowlist.add(tool_name)

    def disallow(self, *names: str) -> None:
        """Take tools off the allowlist; they stay registered."""
        for tool_name in names:
            self.allowlist.discard(tool_name)

    def configure(self, config: Mapping[str, Any] | str | Path) -> set[str]:
        """Replace the allowlist from configuration: ``{"enabled": [names]}`` or a JSON file.

        Only the listed tools may run afterwards (allowlist, never denylist). A name that is not
        registered raises ``KeyError`` naming it; ``enabled`` that is not a list of names (a
        single string, say) raises ``TypeError``: nothing changes on a bad configuration.
        """
        if isinstance(config, (str, Path)):
            config = json.loads(Path(config).read_text(encoding="utf-8"))
        if not isinstance(config, Mapping) or "enabled" not in config:
            raise KeyError("tool configuration needs an 'enabled' list of tool names")
        enabled = config["enabled"]
        if not isinstance(enabled, (list, tuple)) or not all(isinstance(n, str) for n in enabled):
            raise TypeError(f"'enabled' must be a list of tool names, got {enabled!r}; "
                            'fix: {"enabled": ["get_weather"]}')
        unknown = [n for n in enabled if n not in self._tools]
        if unknown:
            raise KeyError(f"configuration enables unregistered tool(s): {unknown}")
        self.allowlist = set(enabled)
        return set(self.allowlist)

    def is_allowed(self, name: Any) -> bool:
        """True when ``name`` is registered and on the allowlist."""
        return isinstance(name, str) and name in self._tools and name in self.allowlist

    # -- lookup ------------------------------------------------------------------------
    def names(self) -> list[str]:
        """All registered tool names, allowed or not, sorted."""
        return sorted(self._tools)

    def allowed_names(self) -> list[str]:
        """The names the model may call, sorted."""
        return sorted(n for n in self._tools if n in self.allowlist)

    def spec(self, name: str) -> ToolSpec:
        """The registered :class:`ToolSpec` (``KeyError`` naming the tool if absent)."""
        if not isinstance(name, str) or name not in self._tools:
            raise KeyError(f"no tool named {name!r} is registered")
        return self._tools[name]

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI-format schemas of the allowed tools (what the model is shown).

        A disabled tool is never listed: the model cannot see it, and the door refuses it anyway.
        """
        chosen = self.allowed_names() if names is None else [
            n for n in names if self.is_allowed(n)]
        return [self._tools[n].openai_schema() for n in chosen]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    # -- the door ----------------------------------------------------------------------
    def check(self, name: Any, arguments: Any) -> ToolSpec:
        """Everything that happens before execution; raises :class:`ToolError` on refusal."""
        if not isinstance(name, str) or name not in self._tools:
            available = ", ".join(self.allowed_names()) or "(none)"
            shown = name if isinstance(name, str) else repr(name)[:80]
            raise ToolError(
                REFUSALS["unknown_tool"].format(tool=shown, available=available),
                "unknown_tool", shown)
        if name not in self.allowlist:
            raise ToolError(REFUSALS["not_allowed"].format(tool=name), "not_allowed", name)
        spec = self._tools[name]
        if _depth(arguments) > _MAX_DEPTH:
            raise ToolError(REFUSALS["invalid_arguments"].format(
                tool=name, problems=f"arguments nested deeper than {_MAX_DEPTH} levels"),
                "invalid_arguments", name)
        size = len(_to_content(arguments))
        if size > spec.max_argument_chars:
            raise ToolError(REFUSALS["oversized_arguments"].format(
                tool=name, size=size, limit=spec.max_argument_chars), "oversized_arguments", name)
        problems = _argument_problems(spec.parameters, arguments)
        if problems:
            raise ToolError(REFUSALS["invalid_arguments"].format(
                tool=name, problems="; ".join(problems)), "invalid_arguments", name)
        return spec

    def call(self, name: str, **arguments: Any) -> Any:
        """Check, then run the tool and return its value.

        Raises :class:`ToolError` for refusals; any other exception from the tool is a bug and
        propagates unchanged.
        """
        spec = self.check(name, arguments)
        if spec.requires_confirmation:
            raise ToolError(REFUSALS["confirmation_unavailable"].format(
                tool=name, risk=spec.risk), "confirmation_unavailable", name)
        return spec.fn(**arguments)

    def execute(self, name: Any, arguments: Any = None, *, confirmed_by: str = "") -> ToolResult:
        """Run a call through the door and always return a :class:`ToolResult` (never raises).

        Refusals (including a :class:`ToolError` raised inside the tool) come back with their
        message for the model; any other exception (``SystemExit`` included) comes back as
        ``status="bug"`` with the exception in ``result.exception``. A tool that requires
        confirmation runs only with ``confirmed_by`` (who confirmed it: the gateway passes the
        human's name after asking); without it the bare registry refuses, since nobody was asked.
        """
        arguments = {} if arguments is None else arguments
        args_record = dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}
        tool = name if isinstance(name, str) else repr(name)[:80]
        try:
            spec = self.check(name, arguments)
        except ToolError as err:
            return ToolResult(err.tool or tool, args_record, err.status, str(err), exception=err)
        except Exception as err:  # a validator failure on a hostile schema/argument: a bug
            return _bug(tool, args_record, err)
        if spec.requires_confirmation and not confirmed_by:
            message = REFUSALS["confirmation_unavailable"].format(tool=name, risk=spec.risk)
            return ToolResult(name, args_record, "confirmation_unavailable", message)
        if spec.timeout is None:
            return _run(spec, args_record)
        box: list[ToolResult] = []
        worker = threading.Thread(target=lambda: box.append(_run(spec, args_record)),
                                  name=f"tool-{spec.name}", daemon=True)
        worker.start()
        worker.join(spec.timeout)
        if not box:
            return ToolResult(spec.name, args_record, "timeout",
                              REFUSALS["timeout"].format(tool=spec.name, timeout=spec.timeout))
        return box[0]


def _bug(tool: str, arguments: dict[str, Any], err: BaseException) -> ToolResult:
    try:
        error = f"{type(err).__name__}: {err}"
    except Exception:  # an exception whose __str__ raises
        error = type(err).__name__
    return ToolResult(tool, arguments, "bug", REFUSALS["bug"].format(tool=tool, error=error),
                      exception=err)


def _run(spec: ToolSpec, arguments: dict[str, Any]) -> ToolResult:
    """Run a checked call; every outcome (a value, a refusal, any exception) becomes a result."""
    try:
        value = spec.fn(**arguments)
        if value is None:
            return ToolResult(spec.name, arguments, "no_data",
                              REFUSALS["no_data"].format(tool=spec.name))
        return ToolResult(spec.name, arguments, "ok", _to_content(value), value=value)
    except ToolError as err:
        message = str(err)
        if spec.name not in message:
            message = REFUSALS["refused"].format(tool=spec.name, reason=message)
        return ToolResult(spec.name, arguments, err.status, message, exception=err)
    except KeyboardInterrupt:  # the person at the keyboard stops the cell: let it through
        raise
    except BaseException as err:  # a bug (SystemExit too): reported as such, never a refusal
        return _bug(spec.name, arguments, err)
