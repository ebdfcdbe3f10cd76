"""The tool registry as the single door, refusal as a result, and a gateway on the same door.

API summary (stable; later chapters import it)::

    from course.tools.registry import ToolRegistry, ToolGateway, ToolError, ToolResult, AuditRecord

    registry = ToolRegistry()
    registry.register(get_weather)                      # schema from the typed function
    registry.register(delete_all, risk="critical")      # registered ...
    registry.register(debug_dump, allowed=False)        # ... registered but switched off
    registry.configure({"enabled": ["get_weather"]})    # permission from configuration
    registry.call("get_weather", city="Berlin")         # value, or raises ToolError (refusal)
    result = registry.execute("get_weather", {"city": "Berlin"})   # never raises: ToolResult
    result.ok, result.status, result.content            # content is the text for the model
    result.as_message()                                 # {"role": "tool", ...}
    registry.langchain_tools(executor=None)             # StructuredTools that use the door
    registry.smolagents_tools(executor=None)            # smolagents Tools that use the door

    gateway = ToolGateway(registry, grants={"agent:support": {"read", "write", "critical"}})
    gateway.execute("refund_order", {"order_id": "A1"}, subject="agent:support")
    gateway.pending                                     # ConfirmationRequest records
    gateway.approve(request_id, approver="human:dana")  # the runtime half of "confirm"
    ToolGateway(registry, grants, confirm=ask_human)    # or ask at once: ask_human(req) -> bool
    gateway.audit                                       # AuditLog of AuditRecord, one per decision

- :class:`ToolRegistry` resolves a name to a function AND checks an allowlist before anything
  runs. Registration and permission are separate: ``register`` records the tool; the allowlist
  (``allow``/``disallow``/``configure``) decides whether it may run. It is an allowlist, never a
  denylist: a name that is not on it is refused, whatever it is.
- Arguments are validated with ``jsonschema`` against the tool's JSON Schema (generated from the
  typed Python function by LangChain's ``convert_to_openai_tool``, or taken from a smolagents
  ``Tool``), with ``additionalProperties: false``, and against a size limit, BEFORE execution.
- :class:`ToolError` means "the tool refused" (tell the model, retry, fall back). Any other
  exception from a tool is a bug in our code: :meth:`ToolRegistry.call` lets it propagate;
  :meth:`ToolRegistry.execute` turns it into a result with ``status="bug"`` (so the agent loop
  does not crash) and keeps the exception in ``result.exception`` for whoever must fix it.
- Every refusal comes back as a string written for the model that names what was blocked
  (:data:`REFUSALS`). A tool that returns ``None`` is reported as "returned no data", never as
  silence.
- A tool that requires confirmation (default for ``risk="critical"``) is refused by the bare
  registry (``confirmation_unavailable``): only a gateway can hold it for a human.
- :class:`ToolGateway` adds a subject (who asks), a risk class per tool (``read`` / ``write`` /
  ``critical``), confirmation for critical calls (held as a pending request until a human
  approves or denies it) and an :class:`AuditRecord` for every decision.

Not handled: asynchronous tools, timeouts or rate limits, sandboxing of what a tool does once
it runs, authentication of the subject (the caller states it; the gateway trusts the caller),
persistence of the audit log beyond memory (``AuditLog.to_jsonl`` writes it out).
"""

from __future__ import annotations

import inspect
import itertools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

RiskClass = Literal["read", "write", "critical"]
RISK_CLASSES: tuple[str, ...] = ("read", "write", "critical")
DEFAULT_MAX_ARGUMENT_CHARS = 2000

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
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


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
    ) -> Any:
        """Record a tool; also usable as a decorator (``@registry.register(risk="write")``).

        ``schema`` (JSON Schema of the parameters) overrides the generated one. ``allowed``
        puts the tool on the allowlist at once (the note's API); configuration can change it.
        ``requires_confirmation`` defaults to True for ``risk="critical"``. Returns ``fn``.
        """
        if fn is None:
            return lambda f: self.register(
                f, name=name, description=description, schema=schema, risk=risk,
                allowed=allowed, requires_confirmation=requires_confirmation,
                max_argument_chars=max_argument_chars,
            )
        if risk not in RISK_CLASSES:
            raise ValueError(f"risk must be one of {RISK_CLASSES}, got {risk!r}")
        if not callable(fn):
            raise TypeError(f"register() needs a callable tool, got {type(fn).__name__}")
        if schema is None:
            auto_name, auto_description, parameters = schema_from_function(fn)
        else:
            auto_name = getattr(fn, "name", None) or getattr(fn, "__name__", "tool")
            auto_description = inspect.getdoc(fn) or ""
            parameters = {"type": "object", "additionalProperties": False, **schema}
        tool_name = name or auto_name
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
        registered is a configuration error and raises ``KeyError`` naming it.
        """
        if isinstance(config, (str, Path)):
            config = json.loads(Path(config).read_text(encoding="utf-8"))
        if "enabled" not in config:
            raise KeyError("tool configuration needs an 'enabled' list of tool names")
        enabled = list(config["enabled"])
        unknown = [n for n in enabled if n not in self._tools]
        if unknown:
            raise KeyError(f"configuration enables unregistered tool(s): {unknown}")
        self.allowlist = set(enabled)
        return set(self.allowlist)

    def is_allowed(self, name: str) -> bool:
        """True when ``name`` is registered and on the allowlist."""
        return name in self._tools and name in self.allowlist

    # -- lookup ------------------------------------------------------------------------
    def names(self) -> list[str]:
        """All registered tool names, allowed or not, sorted."""
        return sorted(self._tools)

    def allowed_names(self) -> list[str]:
        """The names the model may call, sorted."""
        return sorted(n for n in self._tools if n in self.allowlist)

    def spec(self, name: str) -> ToolSpec:
        """The registered :class:`ToolSpec` (``KeyError`` naming the tool if absent)."""
        if name not in self._tools:
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
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def langchain_tools(
        self,
        names: Iterable[str] | None = None,
        executor: Callable[[str, Any], ToolResult] | None = None,
    ) -> list[Any]:
        """The allowed tools as LangChain ``StructuredTool`` objects that go through this door.

        Each tool's function is ``executor(name, arguments).content`` (default
        :meth:`execute`; pass e.g. ``functools.partial(gateway.execute, subject="agent")``),
        so a LangGraph ``ToolNode`` gets the refusal text, never an exception.
        """
        from langchain_core.tools import StructuredTool

        run = executor or self.execute
        tools = []
        for schema in self.schemas(names):
            function = schema["function"]

            def call(_name: str = function["name"], **arguments: Any) -> str:
                return run(_name, arguments).content

            tools.append(StructuredTool(name=function["name"],
                                        description=function["description"],
                                        args_schema=function["parameters"], func=call))
        return tools

    def smolagents_tools(
        self,
        names: Iterable[str] | None = None,
        executor: Callable[[str, Any], ToolResult] | None = None,
    ) -> list[Any]:
        """The allowed tools as smolagents ``Tool`` objects that go through this door.

        ``forward(**kwargs)`` returns ``executor(name, kwargs).content`` (default
        :meth:`execute`), so an agent's code receives the refusal text as the tool's output.
        Optional arguments become ``nullable`` inputs; a ``None`` the agent passes for one is
        dropped before validation.
        """
        from smolagents import Tool

        run = executor or self.execute
        allowed_types = {"string", "integer", "number", "boolean", "array", "object"}
        tools = []
        for schema in self.schemas(names):
            function = schema["function"]
            params = function["parameters"]
            required = set(params.get("required", []))
            inputs = {}
            for arg, prop in params.get("properties", {}).items():
                kind = prop.get("type") if prop.get("type") in allowed_types else "any"
                entry = {"type": kind, "description": prop.get("description", arg)}
                if arg not in required:
                    entry["nullable"] = True
                inputs[arg] = entry

            class DoorTool(Tool):
                skip_forward_signature_validation = True

                def forward(self, *args: Any, **kwargs: Any) -> str:
                    kwargs = {**dict(zip(self.inputs, args, strict=False)), **kwargs}
                    kwargs = {k: v for k, v in kwargs.items() if v is not None}
                    return run(self.name, kwargs).content

            DoorTool.name = function["name"]
            DoorTool.description = function["description"] or function["name"]
            DoorTool.inputs = inputs
            DoorTool.output_type = "string"
            tools.append(DoorTool())
        return tools

    # -- the door ----------------------------------------------------------------------
    def check(self, name: str, arguments: Any) -> ToolSpec:
        """Everything that happens before execution; raises :class:`ToolError` on refusal."""
        if name not in self._tools:
            available = ", ".join(self.allowed_names()) or "(none)"
            raise ToolError(
                REFUSALS["unknown_tool"].format(tool=name, available=available),
                "unknown_tool", str(name))
        if name not in self.allowlist:
            raise ToolError(REFUSALS["not_allowed"].format(tool=name), "not_allowed", name)
        spec = self._tools[name]
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

    def execute(self, name: str, arguments: Any = None) -> ToolResult:
        """Run a call through the door and always return a :class:`ToolResult` (never raises).

        Refusals (including a :class:`ToolError` raised inside the tool) come back with their
        message for the model. A tool that requires confirmation is refused here (no human to
        ask); use :class:`ToolGateway` to hold it for approval. Another exception comes back with ``status="bug"``, the
        exception kept in ``result.exception``, so the caller can log it and fix the code.
        """
        arguments = {} if arguments is None else arguments
        args_record = dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}
        try:
            spec = self.check(name, arguments)
        except ToolError as err:
            return ToolResult(str(name), args_record, err.status, str(err), exception=err)
        if spec.requires_confirmation:  # the bare registry has no human to ask: refuse, loudly
            message = REFUSALS["confirmation_unavailable"].format(tool=name, risk=spec.risk)
            return ToolResult(name, args_record, "confirmation_unavailable", message)
        return self._run(spec, args_record)

    def _run(self, spec: ToolSpec, arguments: dict[str, Any]) -> ToolResult:
        try:
            value = spec.fn(**arguments)
        except ToolError as err:
            message = str(err)
            if spec.name not in message:
                message = REFUSALS["refused"].format(tool=spec.name, reason=message)
            return ToolResult(spec.name, arguments, err.status, message, exception=err)
        except Exception as err:  # a bug: reported as such, not disguised as a refusal
            error = f"{type(err).__name__}: {err}"
            return ToolResult(spec.name, arguments, "bug",
                              REFUSALS["bug"].format(tool=spec.name, error=error), exception=err)
        if value is None:
            return ToolResult(spec.name, arguments, "no_data",
                              REFUSALS["no_data"].format(tool=spec.name))
        return ToolResult(spec.name, arguments, "ok", _to_content(value), value=value)


# ---------------------------------------------------------------------------------------
# The gateway: subject, risk class, confirmation, audit
# ---------------------------------------------------------------------------------------
_request_ids = itertools.count(1)


@dataclass
class ConfirmationRequest:
    """A critical call held until a human approves or denies it."""

    request_id: str
    subject: str
    tool: str
    arguments: dict[str, Any]
    risk: str


@dataclass
class AuditRecord:
    """One decision of the gateway: who asked for what, and what happened."""

    seq: int
    subject: str
    tool: str
    risk: str
    arguments: dict[str, Any]
    decision: str  # allowed | refused | needs_confirmation | confirmed | denied
    status: str  # the ToolResult status ("ok", "not_allowed", ...)
    message: str
    approver: str = ""
    timestamp: float = 0.0

    def line(self) -> str:
        """One readable line for a table or a log."""
        who = f" by {self.approver}" if self.approver else ""
        return (f"#{self.seq} {self.subject:<16} {self.tool:<16} {self.risk:<8} "
                f"{self.decision + who:<24} {self.status}")


@dataclass
class AuditLog:
    """Every decision the gateway made, in order."""

    records: list[AuditRecord] = field(default_factory=list)

    def add(self, record: AuditRecord) -> None:
        self.records.append(record)

    def for_subject(self, subject: str) -> list[AuditRecord]:
        """The records of one subject."""
        return [r for r in self.records if r.subject == subject]

    def decisions(self) -> list[str]:
        """The decision of every record, in order (handy in tests)."""
        return [r.decision for r in self.records]

    def to_jsonl(self, path: str | Path) -> Path:
        """Write the log as JSON lines and return the path."""
        path = Path(path)
        path.write_text("".join(json.dumps(asdict(r), default=str) + "\n" for r in self.records),
                        encoding="utf-8")
        return path

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __str__(self) -> str:
        header = f"{'#':<3}{'subject':<17}{'tool':<17}{'risk':<9}{'decision':<25}status"
        return "\n".join([header] + [r.line() for r in self.records])

    def __repr__(self) -> str:
        return f"AuditLog({len(self.records)} records)\n{self}"


class ToolGateway:
    """The registry's door with a subject, risk classes, confirmation and an audit record.

    ``grants`` maps a subject to the risk classes it may use, e.g.
    ``{"agent:support": {"read", "write"}, "human:dana": {"read", "write", "critical"}}``;
    a subject not listed may use nothing. A tool that requires confirmation is not run by
    :meth:`execute`: it becomes a pending :class:`ConfirmationRequest` and the model gets a
    "needs confirmation" result; :meth:`approve` (a human) runs it, :meth:`deny` declines it.
    With ``confirm`` (a callable that shows the :class:`ConfirmationRequest` to a human, or a
    scripted stand-in, and returns True/False), :meth:`execute` asks at once and returns the
    approved call's result or the denial; the audit log then holds both decisions, and
    ``approver`` names who answered.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        grants: Mapping[str, Iterable[str]],
        confirm: Callable[[ConfirmationRequest], bool] | None = None,
        approver: str = "human",
    ):
        self.registry = registry
        self.confirm = confirm
        self.approver = approver
        self.grants = {subject: set(classes) for subject, classes in grants.items()}
        for subject, classes in self.grants.items():
            bad = classes - set(RISK_CLASSES)
            if bad:
                raise ValueError(f"grants for {subject!r} name unknown risk classes {sorted(bad)}")
        self.audit = AuditLog()
        self._pending: dict[str, ConfirmationRequest] = {}

    @property
    def pending(self) -> list[ConfirmationRequest]:
        """Confirmation requests waiting for a human."""
        return list(self._pending.values())

    def _record(self, subject: str, tool: str, risk: str, arguments: dict[str, Any],
                decision: str, result: ToolResult, approver: str = "") -> ToolResult:
        self.audit.add(AuditRecord(len(self.audit) + 1, subject, tool, risk, arguments,
                                   decision, result.status, result.content, approver,
                                   time.time()))
        return result

    def execute(self, name: str, arguments: Any = None, *, subject: str) -> ToolResult:
        """Check the door, the subject's grant and confirmation; run or refuse; audit it."""
        arguments = {} if arguments is None else arguments
        args_record = dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}
        try:
            spec = self.registry.check(name, arguments)
        except ToolError as err:
            risk = self.registry.spec(name).risk if name in self.registry else "?"
            result = ToolResult(str(name), args_record, err.status, str(err), exception=err)
            return self._record(subject, str(name), risk, args_record, "refused", result)
        if spec.risk not in self.grants.get(subject, set()):
            message = REFUSALS["subject_not_permitted"].format(
                subject=subject, risk=spec.risk, tool=name)
            result = ToolResult(name, args_record, "subject_not_permitted", message)
            return self._record(subject, name, spec.risk, args_record, "refused", result)
        if spec.requires_confirmation:
            request = ConfirmationRequest(f"c{next(_request_ids)}", subject, name,
                                          args_record, spec.risk)
            self._pending[request.request_id] = request
            message = REFUSALS["needs_confirmation"].format(
                tool=name, risk=spec.risk, request_id=request.request_id)
            result = ToolResult(name, args_record, "needs_confirmation", message)
            self._record(subject, name, spec.risk, args_record, "needs_confirmation", result)
            if self.confirm is None:
                return result
            if self.confirm(request):
                return self.approve(request.request_id, self.approver)
            return self.deny(request.request_id, self.approver)
        result = self.registry._run(spec, args_record)
        return self._record(subject, name, spec.risk, args_record, "allowed", result)

    def _take(self, request_id: str) -> ConfirmationRequest:
        if request_id not in self._pending:
            raise KeyError(f"no pending confirmation request {request_id!r}; "
                           f"pending: {sorted(self._pending)}")
        return self._pending.pop(request_id)

    def approve(self, request_id: str, approver: str) -> ToolResult:
        """A human approves a pending request: the call runs now, and is audited."""
        request = self._take(request_id)
        spec = self.registry.spec(request.tool)
        result = self.registry._run(spec, request.arguments)
        return self._record(request.subject, request.tool, request.risk, request.arguments,
                            "confirmed", result, approver)

    def deny(self, request_id: str, approver: str) -> ToolResult:
        """A human declines a pending request: the model is told it was declined."""
        request = self._take(request_id)
        message = REFUSALS["confirmation_denied"].format(
            approver=approver, request_id=request_id, tool=request.tool)
        result = ToolResult(request.tool, request.arguments, "confirmation_denied", message)
        return self._record(request.subject, request.tool, request.risk, request.arguments,
                            "denied", result, approver)
