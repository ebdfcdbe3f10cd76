"""The tool registry: the single door every tool call goes through, and refusal as a result.

Chapter 01 writes the door in a few lines (:mod:`course.tools.door`, where :class:`ToolError`
lives); this is the same door with more checks, which the later chapters use.

:class:`ToolRegistry` resolves a name to a function AND checks an allowlist before anything
runs. Registration and permission are separate: ``register`` records a tool (``allowed=False``
records it switched off); the allowlist (``allow`` / ``disallow`` / ``configure``) decides whether
it may run, so configuration can switch a tool on without touching its code. It is an allowlist,
never a denylist: a name that is not on it is refused, whatever it is.

A call goes through the door in two steps. ``check(name, arguments)`` is everything before
execution: the allowlist, and the arguments validated with ``jsonschema`` against the tool's
JSON Schema (generated from the typed Python function by LangChain's ``convert_to_openai_tool``,
or taken from a smolagents ``Tool``; ``additionalProperties: false`` added) and against a size
limit. It returns a :class:`CheckedCall`, or the refusal as a :class:`ToolResult`; it never
raises. ``run(checked)`` executes what passed and returns its :class:`ToolResult`: the value;
``status="refused"`` when the tool raised :class:`ToolError` (the tool refused); ``status="bug"``,
the exception kept, when it raised anything else. A caller can add checks of its own between the
two steps (the gateway, :mod:`course.tools.gateway`); ``execute`` is check-then-run for the
callers that add nothing. Every refusal is a text written for the model that names what was
blocked (:data:`REFUSALS`); a tool that returns ``None`` is reported as "returned no data", never
as silence. A tool that requires confirmation is refused by ``run`` unless the caller passes
``confirmed_by``, who confirmed it: only a caller that asked a human (the gateway) does.

A tool runs inline, in the caller's thread. A tool registered with ``timeout=`` runs in a worker
thread that the caller waits for at most that long; past it the model is told the outcome is
unknown, and the tool keeps running in the background (Python cannot stop a thread).

Not handled here: who is asking and risk grants, holding a call for a human and the audit log
(:mod:`course.tools.gateway`); LangChain / smolagents objects (:mod:`course.tools.for_libraries`);
asynchronous tools; sandboxing what a tool does once it runs; stopping a tool that overran.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from course.tools.door import ToolError

__all__ = ["REFUSALS", "RISK_CLASSES", "CheckedCall", "Overran", "ToolError", "ToolRegistry",
           "ToolResult", "ToolSpec", "ToolStatus", "as_registry", "call_within"]

RISK_CLASSES: tuple[str, ...] = ("read", "write", "critical")
DEFAULT_MAX_ARGUMENT_CHARS = 2000
_MAX_DEPTH = 64  # deeper arguments are refused before jsonschema (which recurses) sees them

class ToolStatus(StrEnum):
    """How a call ended: the one vocabulary of tool outcomes, from the registry to the audit.

    ``OK`` and ``NO_DATA``: the tool ran and returned. ``REFUSED``: the tool itself refused (it
    raised :class:`ToolError`). ``BUG``: it raised anything else. ``TIMEOUT``: it did not finish
    in time (it may still complete). Every other status is a refusal of the door or the gateway,
    before the tool's code ran (:attr:`executed` is False).
    """

    OK = "ok"
    NO_DATA = "no_data"
    UNKNOWN_TOOL = "unknown_tool"
    NOT_ALLOWED = "not_allowed"
    INVALID_ARGUMENTS = "invalid_arguments"
    OVERSIZED_ARGUMENTS = "oversized_arguments"
    REFUSED = "refused"
    BUG = "bug"
    TIMEOUT = "timeout"
    VETOED = "vetoed"
    SUBJECT_NOT_PERMITTED = "subject_not_permitted"
    NEEDS_CONFIRMATION = "needs_confirmation"
    CONFIRMATION_UNAVAILABLE = "confirmation_unavailable"
    CONFIRMATION_DENIED = "confirmation_denied"

    @property
    def ok(self) -> bool:
        """The tool ran and returned normally."""
        return self in (ToolStatus.OK, ToolStatus.NO_DATA)

    @property
    def executed(self) -> bool:
        """The tool's code ran (whatever came of it): not refused before it was called."""
        return self in (ToolStatus.OK, ToolStatus.NO_DATA, ToolStatus.REFUSED, ToolStatus.BUG,
                        ToolStatus.TIMEOUT)


#: The refusal texts, one per outcome. Written for the model: each names what was blocked and
#: what the model should do next. ``{tool}`` and the other fields are filled in per call.
REFUSALS: dict[ToolStatus, str] = {
    ToolStatus.UNKNOWN_TOOL: (
        "Tool '{tool}' does not exist. Available tools: {available}. "
        "Do not invent tools; use one of these or answer without a tool."
    ),
    ToolStatus.NOT_ALLOWED: (
        "Tool '{tool}' is not allowed in this session, so it was NOT run. "
        "Tell the user that '{tool}' is unavailable; do not claim it ran."
    ),
    ToolStatus.INVALID_ARGUMENTS: (
        "Invalid arguments for tool '{tool}', so it was NOT run: {problems}. "
        "Fix the arguments to match the schema and call it again."
    ),
    ToolStatus.OVERSIZED_ARGUMENTS: (
        "Arguments for tool '{tool}' are too large ({size} characters, limit {limit}), "
        "so it was NOT run. Send shorter arguments."
    ),
    ToolStatus.REFUSED: "Tool '{tool}' refused the request: {reason}",
    ToolStatus.BUG: (
        "Tool '{tool}' failed with an internal error ({error}); this is a bug on our side, "
        "not your fault. Tell the user the action could not be completed."
    ),
    ToolStatus.NO_DATA: "Tool '{tool}' completed and returned no data.",
    ToolStatus.TIMEOUT: (
        "Tool '{tool}' did not finish within {timeout} s, so its outcome is UNKNOWN: it may "
        "still complete. Tell the user the result is not known yet; do not claim it succeeded."
    ),
    ToolStatus.VETOED: (
        "Policy '{policy}' forbids this call to '{tool}', so it was NOT run: {reason}. "
        "Tell the user why; do not retry the same call."
    ),
    ToolStatus.SUBJECT_NOT_PERMITTED: (
        "Subject '{subject}' may not use {risk} tools, so '{tool}' was NOT run. "
        "Tell the user this action needs someone with {risk} permission."
    ),
    ToolStatus.NEEDS_CONFIRMATION: (
        "Tool '{tool}' is {risk} and needs confirmation by a human before it runs. "
        "It was NOT run yet; confirmation request {request_id} is waiting. "
        "Tell the user the action is waiting for approval; do not say it is done."
    ),
    ToolStatus.CONFIRMATION_UNAVAILABLE: (
        "Tool '{tool}' is {risk} and needs confirmation by a human, but nobody can confirm "
        "in this session, so it was NOT run. Tell the user the action needs an approver."
    ),
    ToolStatus.CONFIRMATION_DENIED: (
        "A human ({approver}) denied confirmation request {request_id} for tool '{tool}', "
        "so it was NOT run. Tell the user the action was declined."
    ),
}


@dataclass
class ToolSpec:
    """One registered tool: the function, its JSON Schema, its risk class and, when it declared
    one, its ``timeout`` (seconds; ``None``: it runs inline, in the caller's thread)."""

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

    ``status`` is a :class:`ToolStatus` (kept as its plain text value, so that a result in a
    LangGraph checkpoint stays plain data); ``content`` is what the model reads. The LangChain
    tools of :mod:`course.tools.for_libraries` put the whole result in the tool message.
    """

    tool: str
    arguments: dict[str, Any]
    status: str
    content: str
    value: Any = None
    exception: BaseException | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.status = ToolStatus(self.status).value  # an unknown status is a bug: it raises

    @property
    def ok(self) -> bool:
        """True when the tool ran and returned normally."""
        return ToolStatus(self.status).ok

    @property
    def executed(self) -> bool:
        """True when the tool's code ran: the door or the gateway did not refuse the call first."""
        return ToolStatus(self.status).executed

    @property
    def is_bug(self) -> bool:
        """True when the tool raised something other than :class:`ToolError`."""
        return self.status == ToolStatus.BUG

    @classmethod
    def of(cls, artifact: Any) -> ToolResult | None:
        """The result a LangChain ``ToolMessage`` carries as its artifact, or ``None``.

        After a LangGraph checkpoint the artifact comes back as a plain dict of the fields (the
        exception, if any, as its text); this gives the result back either way.
        """
        if isinstance(artifact, cls):
            return artifact
        if isinstance(artifact, Mapping) and {"tool", "status", "content"} <= set(artifact):
            return cls(artifact["tool"], dict(artifact.get("arguments") or {}),
                       artifact["status"], artifact["content"], artifact.get("value"))
        return None

    def as_message(self, tool_call_id: str | None = None) -> dict[str, Any]:
        """The result as a tool-role chat message, ready to append to the conversation."""
        message: dict[str, Any] = {"role": "tool", "name": self.tool, "content": self.content}
        if tool_call_id is not None:
            message["tool_call_id"] = tool_call_id
        return message

    def __str__(self) -> str:
        return self.content


@dataclass(frozen=True)
class CheckedCall:
    """A call the door's check let through: the tool and the arguments as read, ready to run.

    :meth:`ToolRegistry.run` executes exactly these arguments, so what the door checked is what
    runs (a caller's mapping is read once, into a plain dict).
    """

    spec: ToolSpec
    arguments: dict[str, Any]

    @property
    def tool(self) -> str:
        """The tool's registered name."""
        return self.spec.name


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


def _huge_integer(value: Any, limit: int = _MAX_DEPTH) -> str | None:
    """Where ``value`` holds an integer with more digits than Python turns into text
    (``sys.get_int_max_str_digits()``): its path (``'amount'``, ``'items/0'``), else None."""
    digits = sys.get_int_max_str_digits()
    if not digits:
        return None
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 10 ** digits:
            return where or "(the arguments)"
        if depth < limit and isinstance(item, Mapping):
            stack.extend((v, f"{where}/{k}" if where else str(k), depth + 1)
                         for k, v in item.items())
        elif depth < limit and isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}/{i}" if where else str(i), depth + 1)
                         for i, v in enumerate(item))
    return None


def _read_arguments(name: Any, arguments: Any) -> tuple[Any, ToolResult | None]:
    """The arguments read once into a plain dict (what the door checks is what runs), or the
    refusal when reading them raises (a mapping whose iteration fails)."""
    if arguments is None or not isinstance(arguments, Mapping):
        return ({} if arguments is None else arguments), None
    try:
        return dict(arguments), None
    except Exception as err:  # a hostile or broken mapping: refused, never raised
        tool = name if isinstance(name, str) else repr(name)[:80]
        try:
            why = f"{type(err).__name__}: {err}"[:200]
        except Exception:  # an exception whose __str__ raises
            why = type(err).__name__
        problems = (f"the arguments could not be read ({why}); send them as a plain JSON "
                    "object of names and values")
        return {}, ToolResult(tool, {"_raw": type(arguments).__name__},
                              ToolStatus.INVALID_ARGUMENTS,
                              REFUSALS[ToolStatus.INVALID_ARGUMENTS].format(
                                  tool=tool, problems=problems))


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
        ``requires_confirmation`` defaults to True for ``risk="critical"``. Without ``timeout``
        the tool runs inline, in the caller's thread; with it (seconds) the tool runs in a worker
        thread and :meth:`run` waits at most that long. Returns ``fn``. A name must be an ASCII
        Python identifier (what every framework's tool needs; a letter from another alphabet,
        such as a Cyrillic ``е`` in ``gеt_weather``, could pass for a registered tool's), so a
        lambda needs ``name=...``; a name equal to a registered one but for case is refused too.
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
        auto_name: object  # a callable's ``name`` may be anything: checked below
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
        if not tool_name.isascii():
            letter = next(c for c in tool_name if not c.isascii())
            raise ValueError(
                f"tool name {tool_name!r} is not an ASCII identifier ({letter!r} is U+"
                f"{ord(letter):04X}; a letter from another alphabet can look like a Latin one); "
                "fix: register(fn, name='an_ascii_name')")
        twin = next((n for n in self._tools if n.lower() == tool_name.lower()), None)
        if twin is not None:
            case = "" if twin == tool_name else f" ({tool_name!r} differs from it only in case)"
            raise ValueError(f"a tool named {twin!r} is already registered{case}; "
                             "fix: register(fn, name='another_name')")
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
            path = Path(config)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise FileNotFoundError(
                    f"cannot read the tool configuration {path} ({type(err).__name__}: "
                    f"{getattr(err, 'strerror', None) or err}); fix: give configure() the path "
                    'of a JSON file such as {"enabled": ["get_weather"]}') from err
            try:
                config = json.loads(text)
            except ValueError as err:
                raise ValueError(
                    f"the tool configuration {path} is not JSON ({err}); fix: write it as "
                    '{"enabled": ["get_weather"]}') from err
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
    def names(self, *, sort: bool = True) -> list[str]:
        """All registered tool names, allowed or not, sorted (``sort=False``: as registered)."""
        return sorted(self._tools) if sort else list(self._tools)

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
    def check(self, name: Any, arguments: Any = None) -> CheckedCall | ToolResult:
        """Everything that happens before execution: the call, checked, or its refusal.

        Returns a :class:`CheckedCall` for :meth:`run`, or a :class:`ToolResult` whose text
        tells the model what was refused (an unknown or switched-off tool, arguments that are
        unreadable, too deep, too large or against the schema). Never raises, whatever the
        caller passes.
        """
        arguments, unreadable = _read_arguments(name, arguments)
        if unreadable is not None:
            return unreadable
        tool = name if isinstance(name, str) else repr(name)[:80]
        record = _arguments_record(arguments)
        try:
            refusal = self._refusal(name, arguments)
        except Exception as err:  # a validator failure on a hostile schema/argument: a bug
            return _bug(tool, record, err)
        if refusal is not None:
            status, message = refusal
            return ToolResult(tool, record, status, message)
        return CheckedCall(self._tools[name], record)

    def _refusal(self, name: Any, arguments: Any) -> tuple[ToolStatus, str] | None:
        """Why the door refuses this call (its status and its text for the model), or None."""
        if not isinstance(name, str) or name not in self._tools:
            available = ", ".join(self.allowed_names()) or "(none)"
            shown = name if isinstance(name, str) else repr(name)[:80]
            return ToolStatus.UNKNOWN_TOOL, REFUSALS[ToolStatus.UNKNOWN_TOOL].format(
                tool=shown, available=available)
        if name not in self.allowlist:
            return ToolStatus.NOT_ALLOWED, REFUSALS[ToolStatus.NOT_ALLOWED].format(tool=name)
        spec = self._tools[name]
        problems: list[str] = []
        if _depth(arguments) > _MAX_DEPTH:
            problems = [f"arguments nested deeper than {_MAX_DEPTH} levels"]
        elif (huge := _huge_integer(arguments)) is not None:
            problems = [f"'{huge}' is an integer of more than {sys.get_int_max_str_digits()} "
                        "digits, Python's limit for an integer as text "
                        "(sys.get_int_max_str_digits()); send a smaller number, or the digits as "
                        "a string"]
        elif (size := len(_to_content(arguments))) > spec.max_argument_chars:
            return ToolStatus.OVERSIZED_ARGUMENTS, REFUSALS[ToolStatus.OVERSIZED_ARGUMENTS].format(
                tool=name, size=size, limit=spec.max_argument_chars)
        else:
            problems = _argument_problems(spec.parameters, arguments)
        if problems:
            return ToolStatus.INVALID_ARGUMENTS, REFUSALS[ToolStatus.INVALID_ARGUMENTS].format(
                tool=name, problems="; ".join(problems))
        return None

    def run(self, checked: CheckedCall | ToolResult, *, confirmed_by: str = "") -> ToolResult:
        """Execute a call :meth:`check` let through; every outcome becomes a :class:`ToolResult`.

        A refusal from :meth:`check` is returned as it is, so ``run(check(name, arguments))``
        is one call through the door. A tool that requires confirmation runs only with
        ``confirmed_by`` (who confirmed it); a tool registered with ``timeout`` is waited for at
        most that long, every other tool runs inline.
        """
        if isinstance(checked, ToolResult):
            return checked
        spec, arguments = checked.spec, checked.arguments
        if spec.requires_confirmation and not confirmed_by:
            message = REFUSALS[ToolStatus.CONFIRMATION_UNAVAILABLE].format(
                tool=spec.name, risk=spec.risk)
            return ToolResult(spec.name, arguments, ToolStatus.CONFIRMATION_UNAVAILABLE, message)
        if spec.timeout is None:
            return _run(spec, arguments)
        return _run_within(spec.timeout, spec, arguments)

    def execute(self, name: Any, arguments: Any = None) -> ToolResult:
        """:meth:`check`, then :meth:`run`: a call through the door that always returns a result.

        The one shortcut, for the callers that add nothing between the two steps (the agent
        loops, the LangChain and smolagents tools, a lesson's cell); a caller that adds checks of
        its own (the gateway) calls the two steps itself. Never raises: a refusal, a tool's own
        :class:`ToolError` and a bug (``status="bug"``, the exception in ``result.exception``)
        all come back as results. A tool that requires confirmation is refused, since nobody was
        asked.
        """
        return self.run(self.check(name, arguments))


def as_registry(tools: Any) -> ToolRegistry:
    """The tools behind the single door: a :class:`ToolRegistry` as given, or a new one with
    every callable (typed function or smolagents ``Tool``) registered and allowed.

    ``tools`` is a registry, a list of tools, or ``{name: tool}`` (the key is the name the model
    calls). Chapters 02 and 03 give their agents tools this way.
    """
    if isinstance(tools, ToolRegistry):
        return tools
    registry = ToolRegistry()
    if isinstance(tools, Mapping):
        for name, tool in tools.items():
            registry.register(tool, name=name)
    else:
        for tool in tools:
            registry.register(tool)
    return registry


def _arguments_record(arguments: Any) -> dict[str, Any]:
    """The arguments as the result records them (a non-object is kept under ``_raw``)."""
    arguments = {} if arguments is None else arguments
    return dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}


def _bug(tool: str, arguments: dict[str, Any], err: BaseException) -> ToolResult:
    try:
        error = f"{type(err).__name__}: {err}"
    except Exception:  # an exception whose __str__ raises
        error = type(err).__name__
    return ToolResult(tool, arguments, ToolStatus.BUG,
                      REFUSALS[ToolStatus.BUG].format(tool=tool, error=error), exception=err)


def _run(spec: ToolSpec, arguments: dict[str, Any]) -> ToolResult:
    """Run a checked call; every outcome (a value, a refusal, any exception) becomes a result."""
    try:
        value = spec.fn(**arguments)
        if value is None:
            return ToolResult(spec.name, arguments, ToolStatus.NO_DATA,
                              REFUSALS[ToolStatus.NO_DATA].format(tool=spec.name))
        return ToolResult(spec.name, arguments, ToolStatus.OK, _to_content(value), value=value)
    except ToolError as err:
        message = str(err)
        if spec.name not in message:
            message = REFUSALS[ToolStatus.REFUSED].format(tool=spec.name, reason=message)
        return ToolResult(spec.name, arguments, err.status, message, exception=err)
    except KeyboardInterrupt:  # the person at the keyboard stops the cell: let it through
        raise
    except BaseException as err:  # a bug (SystemExit too): reported as such, never a refusal
        return _bug(spec.name, arguments, err)


class Overran(Exception):
    """A call run with :func:`call_within` did not answer within its deadline."""


def call_within(seconds: float, fn: Callable[..., Any], *args: Any, thread_name: str) -> Any:
    """``fn(*args)`` in a worker thread named ``thread_name`` (it sees the caller's context variables),
    waited for at most ``seconds``: its value, its exception re-raised, or :class:`Overran`. The
    thread, a daemon, is left to finish in the background (Python cannot stop a thread) and never
    holds the process open. The one deadline of the door: a tool's ``timeout`` here, a policy's
    and a confirmation's in the gateway."""
    box: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()

    def work() -> None:
        try:
            box.append((True, context.run(fn, *args)))
        except BaseException as err:  # handed to the caller, who decides
            box.append((False, err))

    worker = threading.Thread(target=work, name=thread_name, daemon=True)
    worker.start()
    worker.join(seconds)
    if not box:
        raise Overran(f"no answer within {seconds:g} s")
    ok, value = box[0]
    if ok:
        return value
    raise value


def _run_within(timeout: float, spec: ToolSpec, arguments: dict[str, Any]) -> ToolResult:
    """:func:`_run` under :func:`call_within`; past ``timeout`` the result says the outcome is
    unknown."""
    try:
        return call_within(timeout, _run, spec, arguments, thread_name=f"tool-{spec.name}")
    except Overran:
        return ToolResult(spec.name, arguments, ToolStatus.TIMEOUT,
                          REFUSALS[ToolStatus.TIMEOUT].format(tool=spec.name, timeout=timeout))
