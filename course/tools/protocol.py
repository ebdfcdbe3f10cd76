"""The tool-calling protocol with a local model: prompt, parse, validate.

- :func:`tool_prompt_messages` puts the tool list (OpenAI-format JSON Schemas) into the
  conversation. If the model's chat template renders ``tools=`` itself, that is used; SmolLM2's
  template ignores ``tools=``, so the list goes into the system message, with the call format.
- :func:`parse_model_output` turns the model's text into a :class:`ParsedOutput`: a call
  (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` or a bare JSON object with
  ``name``) held as a :class:`~course.tools.calls.ToolCall`, plain text, or ``malformed`` (it
  tried to call and the JSON does not parse). :func:`json_calls` finds every such JSON call in
  a longer text (chapter 06 reads pages with it); both read a call the same way.
- :data:`CHAT_ROLES`: the chat-template role of each LangChain message type, for every chapter.
- :func:`validity` classifies a parsed call against the registry's door (known, allowed, valid
  arguments) without executing it; :func:`count_validity` counts N replies so (a
  :class:`ValidityCount`, a displayed record). The loop that executes calls is LangGraph's
  ``ToolNode`` (chapter 01) and :func:`course.loop.agent_loop.run_loop` (chapter 03).

Not handled: several calls in one reply (only the first is taken), streaming, nested JSON in
string values beyond what ``json.loads`` accepts, and any judgement of whether the answer is
right (that is the reader's job, and the lesson's).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from course.records import Record
from course.tools.calls import ToolCall
from course.tools.registry import ToolRegistry, ToolResult

__all__ = ["CALL_CLOSE", "CALL_OPEN", "CHAT_ROLES", "ParsedOutput", "ValidityCount", "call_text",
           "count_validity", "json_calls", "parse_model_output", "render_tool_prompt",
           "template_renders_tools", "tool_list_text", "tool_prompt_messages", "validity"]

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"

#: The chat-template role of each LangChain message type (``message.type``): the one table.
CHAT_ROLES: dict[str, str] = {"system": "system", "human": "user", "ai": "assistant",
                              "tool": "tool"}

TOOL_SYSTEM_TEMPLATE = (
    "You can call these tools:\n{tools}\n"
    "To call a tool, reply with exactly one line:\n"
    '<tool_call>{{"name": "TOOL_NAME", "arguments": {{...}}}}</tool_call>\n'
    "Otherwise answer in plain text."
)


def tool_list_text(schemas: list[dict[str, Any]]) -> str:
    """The tool list as the model reads it: one compact JSON function spec per line."""
    return "\n".join(json.dumps(s.get("function", s), ensure_ascii=False) for s in schemas)


def template_renders_tools(tokenizer: Any) -> bool:
    """True when the tokenizer's chat template uses the ``tools`` variable."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return "tools" in template


def tool_prompt_messages(
    messages: list[dict[str, Any]], schemas: list[dict[str, Any]], tokenizer: Any = None
) -> list[dict[str, Any]]:
    """``messages`` with the tool list placed where the model will see it.

    With a template that renders ``tools=``, the messages are returned unchanged (pass
    ``tools=schemas`` to the template). Otherwise a system message with the tool list and the
    call format is put first (an existing system message is kept after the tool list).
    """
    if tokenizer is not None and template_renders_tools(tokenizer):
        return list(messages)
    system = TOOL_SYSTEM_TEMPLATE.format(tools=tool_list_text(schemas))
    rest = list(messages)
    if rest and rest[0].get("role") == "system":
        system = system + "\n" + rest.pop(0)["content"]
    return [{"role": "system", "content": system}, *rest]


def render_tool_prompt(local: Any, messages: list[dict[str, Any]],
                       schemas: list[dict[str, Any]]) -> str:
    """The exact text the local model receives for ``messages`` with ``schemas`` as tools."""
    return local.render_chat(tool_prompt_messages(messages, schemas, local.tokenizer),
                             tools=schemas)


@dataclass
class ParsedOutput:
    """What the model's text means to the runtime: a call, plain text, or a malformed call."""

    kind: str  # "call" | "text" | "malformed"
    raw: str
    call: ToolCall | None = None  # the call, when kind == "call"
    error: str = ""
    tried: str = ""  # the tool name a malformed call gave, if it gave one

    @property
    def name(self) -> str:
        """The called tool's name ('' for text; a malformed call's name if it had one)."""
        return self.call.name if self.call is not None else self.tried

    @property
    def arguments(self) -> dict[str, Any]:
        """The call's arguments ({} unless the reply is a well-formed call)."""
        return self.call.arguments if self.call is not None else {}

    def __str__(self) -> str:
        if self.call is not None:
            return f"call {self.name}({json.dumps(self.arguments, ensure_ascii=False)})"
        if self.kind == "malformed":
            return f"malformed call: {self.error}"
        return f"text: {self.raw!r}"


class _NotACall(ValueError):
    """A JSON value that is not a well-formed call; ``name`` is the tool it named, if any."""

    def __init__(self, why: str, name: str = ""):
        super().__init__(why)
        self.name = name


def _as_call(value: Any) -> ToolCall:
    """The call a decoded JSON value holds (the first one of a list), or :class:`_NotACall`.

    ``{"name": str, "arguments": object}``; ``parameters`` or ``args`` may stand for
    ``arguments``, which may also be a JSON-encoded string (as some APIs send it).
    """
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise _NotACall("JSON has no string 'name' field")
    name = value["name"]
    arguments: object = next((value[k] for k in ("arguments", "parameters", "args") if k in value), {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise _NotACall("'arguments' is a string that is not JSON", name) from None
    if not isinstance(arguments, dict):
        raise _NotACall("'arguments' is not a JSON object", name)
    return ToolCall(name, arguments)


def parse_model_output(text: str, strict: bool = False) -> ParsedOutput:
    """Parse one reply into a call, plain text, or a malformed call (never raises).

    A reply is treated as an attempted call if it contains ``<tool_call>`` or starts with
    ``{``; then the first JSON value in it must be a call (see :func:`_as_call`). With
    ``strict=True`` the reply must START with ``<tool_call>`` or ``{`` (what the system prompt
    asks for); a call after some words of preamble is then plain text.
    """
    raw = text
    stripped = text.strip()
    if strict and not (stripped.startswith(CALL_OPEN) or stripped.startswith("{")):
        return ParsedOutput("text", raw)
    if CALL_OPEN not in stripped and not stripped.startswith("{"):
        return ParsedOutput("text", raw)
    body = stripped.split(CALL_OPEN, 1)[1] if CALL_OPEN in stripped else stripped
    body = body.split(CALL_CLOSE, 1)[0]
    start = body.find("{")
    try:
        if start < 0:
            raise ValueError("no JSON object found")
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError as err:
        return ParsedOutput("malformed", raw, error=f"not valid JSON ({err})")
    try:
        return ParsedOutput("call", raw, _as_call(value))
    except _NotACall as err:
        return ParsedOutput("malformed", raw, error=str(err), tried=err.name)


def json_calls(text: str) -> list[ToolCall]:
    """Every JSON object in ``text`` that names a call, read as :func:`parse_model_output` reads one.

    An object with a ``name`` whose arguments are not an object counts as a call with no
    arguments (the name is what a reader acts on). Other JSON and other text are skipped.
    """
    decoder, calls, start = json.JSONDecoder(), [], 0
    while (start := text.find("{", start)) != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start += 1
            continue
        try:
            calls.append(_as_call(value))
        except _NotACall as err:
            if err.name:
                calls.append(ToolCall(err.name))
        start = end
    return calls


def call_text(call: ToolCall) -> str:
    """The call in the text form the system prompt asks for: ``<tool_call>{...}</tool_call>``."""
    return CALL_OPEN + json.dumps(call.to_dict()) + CALL_CLOSE


def validity(parsed: ParsedOutput, registry: ToolRegistry) -> str:
    """Classify a generated call: ``"valid"``, ``"invalid: <why>"``, ``"malformed"``, ``"text"``.

    Valid means it parses AND passes the registry's checks (known, allowed, arguments match
    the schema); nothing is executed.
    """
    if parsed.kind != "call":
        return parsed.kind
    verdict = registry.check(parsed.name, parsed.arguments)
    return f"invalid: {verdict.status}" if isinstance(verdict, ToolResult) else "valid"


@dataclass
class ValidityCount(Record):
    """N generated replies of one mode (free or constrained), each classified by :func:`validity`.

    Displayed, it shows one line; its values (:meth:`record`) are ``n``, ``valid`` and the count
    of each verdict."""

    label: str
    verdicts: list[str]

    @property
    def n(self) -> int:
        return len(self.verdicts)

    @property
    def valid(self) -> int:
        return self.verdicts.count("valid")

    def __str__(self) -> str:
        rate = self.valid / self.n if self.n else 0.0
        return (f"{self.label}: {self.valid}/{self.n} valid = {rate:.0%}   "
                f"{dict(Counter(self.verdicts))}")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def record(self) -> dict[str, Any]:
        return {"label": self.label, "n": self.n, "valid": self.valid,
                "verdicts": dict(Counter(self.verdicts))}


def count_validity(label: str, replies: list[str], registry: ToolRegistry,
                   strict: bool = True) -> ValidityCount:
    """Classify each reply (parsed with ``strict``: a call must open the reply) against
    ``registry``, without executing anything."""
    return ValidityCount(label, [validity(parse_model_output(r, strict=strict), registry)
                                 for r in replies])
