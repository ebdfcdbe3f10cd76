"""The tool-calling protocol with a local model: prompt, parse, validate.

- :func:`tool_prompt_messages` puts the tool list (OpenAI-format JSON Schemas) into the
  conversation. If the model's chat template renders ``tools=`` itself, that is used; SmolLM2's
  template ignores ``tools=``, so the list goes into the system message, with the call format.
- :func:`parse_model_output` turns the model's text into a :class:`ParsedOutput`: a call
  (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` or a bare JSON object with
  ``name``), plain text, or ``malformed`` (it tried to call and the JSON does not parse).
- :func:`validity` classifies a parsed call against the registry's door (known, allowed, valid
  arguments) without executing it. The loop that executes calls is LangGraph's ``ToolNode``
  (chapter 01) and :func:`course.loop.agent_loop.run_loop` (chapter 03).

Not handled: several calls in one reply (only the first is taken), streaming, nested JSON in
string values beyond what ``json.loads`` accepts, and any judgement of whether the answer is
right (that is the reader's job, and the lesson's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from course.tools.registry import ToolError, ToolRegistry

__all__ = [
    "CALL_CLOSE", "CALL_OPEN", "TOOL_SYSTEM_TEMPLATE", "ParsedOutput", "parse_model_output",
    "render_tool_prompt", "template_renders_tools", "tool_list_text", "tool_prompt_messages",
    "validity",
]

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"

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
    """What the model's text means to the runtime."""

    kind: str  # "call" | "text" | "malformed"
    raw: str
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def __str__(self) -> str:
        if self.kind == "call":
            return f"call {self.name}({json.dumps(self.arguments, ensure_ascii=False)})"
        if self.kind == "malformed":
            return f"malformed call: {self.error}"
        return f"text: {self.raw!r}"


def _first_json_object(text: str) -> tuple[Any, str]:
    """Decode the first JSON value starting at the first '{' (or raise ValueError)."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object found")
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value, text[start:]


def parse_model_output(text: str, strict: bool = False) -> ParsedOutput:
    """Parse one reply into a call, plain text, or a malformed call (never raises).

    A reply is treated as an attempted call if it contains ``<tool_call>`` or starts with
    ``{``; then it must decode to ``{"name": str, "arguments": object}`` (``arguments`` may be
    a JSON-encoded string, as some APIs send it). With ``strict=True`` the reply must START
    with ``<tool_call>`` or ``{`` (what the system prompt asks for); a call after some words
    of preamble is then plain text.
    """
    raw = text
    stripped = text.strip()
    if strict and not (stripped.startswith(CALL_OPEN) or stripped.startswith("{")):
        return ParsedOutput("text", raw)
    if CALL_OPEN not in stripped and not stripped.startswith("{"):
        return ParsedOutput("text", raw)
    body = stripped.split(CALL_OPEN, 1)[1] if CALL_OPEN in stripped else stripped
    body = body.split(CALL_CLOSE, 1)[0]
    try:
        value, _ = _first_json_object(body)
    except ValueError as err:
        return ParsedOutput("malformed", raw, error=f"not valid JSON ({err})")
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return ParsedOutput("malformed", raw, error="JSON has no string 'name' field")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ParsedOutput("malformed", raw, name=value["name"],
                                error="'arguments' is a string that is not JSON")
    if not isinstance(arguments, dict):
        return ParsedOutput("malformed", raw, name=value["name"],
                            error="'arguments' is not a JSON object")
    return ParsedOutput("call", raw, name=value["name"], arguments=arguments)


def validity(parsed: ParsedOutput, registry: ToolRegistry) -> str:
    """Classify a generated call: ``"valid"``, ``"invalid: <why>"``, ``"malformed"``, ``"text"``.

    Valid means it parses AND passes the registry's checks (known, allowed, arguments match
    the schema); nothing is executed.
    """
    if parsed.kind != "call":
        return parsed.kind
    try:
        registry.check(parsed.name, parsed.arguments)
    except ToolError as err:
        return f"invalid: {err.status}"
    return "valid"
