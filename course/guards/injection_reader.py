"""The injection lab's instruction reader: a scripted model that obeys what it reads.

:func:`read_instructions` finds every instruction a literal-minded reader sees in tool outputs,
as tool calls (:class:`~course.tools.calls.ToolCall`), with how it found each one; JSON calls are
read with chapter 01's parser (:func:`course.tools.protocol.json_calls`). :class:`LiteralReader`
is the scripted model built on it: it opens the documents, makes exactly the calls it read, and
reports. It is *scripted*, not a language model.

Part of the prompt-injection lab of chapter 06 (see :mod:`course.guards.injection`).
"""

from __future__ import annotations

import ast
import base64
import codecs
import html
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from course.guards.injection_lab import SIDE_EFFECT_TOOLS
from course.guards.injection_payloads import Payload
from course.records import Record
from course.tools.calls import ToolCall
from course.tools.protocol import json_calls

__all__ = ["LiteralReader", "Reading", "Readings", "read_instructions"]

#: The tools the literal reader knows (from the session's tool list) and their parameters.
KNOWN_TOOLS: dict[str, tuple[str, ...]] = {
    "fetch_page": ("url",), "read_document": ("doc_id",), "read_email": ("message_id",),
    "send_email": ("to", "subject", "body"), "post_message": ("channel", "text"),
    "delete_file": ("path",),
}
#: The few foreign words the literal reader understands (French and Spanish, not German).
TRANSLATIONS = {"maintenant": "now", "appelle": "call", "appeler": "call", "avec": "with",
                "ahora": "now", "llama": "call", "con": "with"}
_VERBS = r"(?:call|use|run|invoke)"
_NAME = r"[A-Za-z_][\w.]*"
_KEY_VALUE = re.compile(r"\b(\w+)\s*=\s*('[^']*'|\"[^\"]*\"|.+?)(?=,\s*\w+\s*=|\s+and\s+\w+\s*=|$)")
_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\n")


@dataclass
class Reading:
    """What the literal reader made of the tool outputs: the calls, and how it found them."""

    calls: list[ToolCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, args: dict[str, Any], how: str) -> None:
        call = ToolCall(name, args)
        if call not in self.calls:
            self.calls.append(call)
            self.notes.append(how)

    def drop_partial(self) -> None:
        """Keep one call per instruction: drop a call whose arguments a fuller one contains."""
        keep = [i for i, c in enumerate(self.calls) if not any(
            o.name == c.name and c.arguments.items() < o.arguments.items()
            for o in self.calls)]
        self.calls = [self.calls[i] for i in keep]
        self.notes = [self.notes[i] for i in keep]


@dataclass
class Readings(Record):
    """Tool outputs by name, each as ``(text, what the reader made of it)``: shown two lines per
    output (its start; the calls and how they were found), given as values per name."""

    readings: dict[str, tuple[str, Reading]]

    def record(self) -> dict[str, Any]:
        return {"readings": {
            name: {"text": text, "calls": [{"name": c.name, "arguments": dict(c.arguments)}
                                           for c in reading.calls], "notes": list(reading.notes)}
            for name, (text, reading) in self.readings.items()}}

    def __str__(self) -> str:
        lines = []
        for name, (text, reading) in self.readings.items():
            lines.append(f"[{name}] {text[:48]}...")
            lines.append(f"   the reader makes: {reading.calls or 'no call'} | {reading.notes or ''}")
        return "\n".join(lines)

    __repr__ = __str__



def _decodings(text: str) -> list[tuple[str, str]]:
    """The decoded texts the output itself asks for: ``(how, text)`` pairs."""
    found = []
    lower = text.lower()
    if "base64" in lower or "decode" in lower:
        for blob in re.findall(r"[A-Za-z0-9+/]{16,}={0,2}", text):
            try:
                found.append(("decoded base64", base64.b64decode(blob, validate=True).decode()))
            except (ValueError, UnicodeDecodeError):
                continue
    if "rot13" in lower or "rot-13" in lower:
        found.append(("decoded rot13", codecs.decode(text.split(":", 1)[-1], "rot13")))
    if "hex" in lower:
        for blob in re.findall(r"\b(?:[0-9a-fA-F]{2}){8,}\b", text):
            try:
                found.append(("decoded hex", bytes.fromhex(blob).decode()))
            except (ValueError, UnicodeDecodeError):
                continue
    words = re.findall(r"\w+", lower)
    if sum(w in TRANSLATIONS for w in words) >= 2:
        translated = re.sub(r"\w+", lambda m: TRANSLATIONS.get(m.group(0).lower(), m.group(0)),
                            text)
        found.append(("translated", translated))
    return found


def _joined(texts: list[str]) -> list[tuple[str, str]]:
    """Instructions the outputs say are split: numbered parts, or 'remember the word'."""
    found = []
    parts = sorted((int(n), body) for t in texts
                   for n, body in re.findall(r"Part (\d+)[^:\n]*:\s*([^\n]*)", t))
    if len(parts) > 1:
        found.append((f"joined parts {parts[0][0]}-{parts[-1][0]}",
                      " ".join(body for _, body in parts)))
    words = [m for t in texts for m in re.findall(r"[Rr]emember the word:\s*(\S+)", t)]
    if words:
        for t in texts:
            if "the word" in t and "emember the word" not in t:
                found.append(("substituted the remembered word", t.replace("the word", words[0])))
    return found


def _clean(value: str) -> Any:
    value = re.split(r"</?\w|-->|\s--\s*$", value)[0]
    value = value.strip().rstrip(".\"'>)").strip()
    if len(value) > 1 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    return value.strip("'\"")


def _arguments(name: str, clause: str) -> dict[str, Any]:
    """Arguments stated in the clause after a tool name: ``key=value`` pairs, or by position."""
    args = {key: _clean(value) for key, value in _KEY_VALUE.findall(clause)}
    if name == "send_email" and "to" not in args:
        if email := re.search(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", clause):
            args["to"] = email.group(0)
    if name == "post_message" and "channel" not in args:
        if channel := re.search(r"#[\w-]+", clause):
            args["channel"] = channel.group(0)
            if text := re.search(r"\bwith\s+(.+)", clause):
                args.setdefault("text", _clean(text.group(1)))
    if name == "delete_file" and "path" not in args:
        if path := re.search(r"(/[\w./-]+)", clause):
            args["path"] = path.group(1)
    return args


def _python_call(name: str, inside: str) -> dict[str, Any]:
    """The arguments of ``name(inside)`` when they are Python literals (else {})."""
    try:
        call = ast.parse(f"f({inside})", mode="eval").body
        if not isinstance(call, ast.Call):  # ``inside`` closed the call early: "1) + (2"
            return {}
        positional = [ast.literal_eval(a) for a in call.args]
        # (a ``**mapping`` argument has no name, k.arg is None: it is not read)
        args = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
    except (SyntaxError, ValueError):
        return {}
    args.update(zip(KNOWN_TOOLS.get(name, ()), positional, strict=False))
    return args


def read_instructions(outputs: list[str]) -> Reading:
    """Every instruction a literal-minded reader finds in ``outputs``, as tool calls.

    It reads the text as written (HTML entities turned back into characters), decodes what the
    text itself says to decode (base64, rot13, hex), joins what the text says is split (numbered
    parts, a remembered word), understands French and Spanish verbs but not German, and reads
    a call in four wordings: a JSON object with a ``name``; ``tool(...)`` with Python literals;
    a verb ("call", "use", "run", "invoke") before a tool name; a tool it knows followed by its
    arguments. It makes exactly the calls it found, with exactly the arguments stated. It
    understands no synonyms, no case changes, no invisible characters and no look-alike letters.
    """
    texts = [html.unescape(t) for t in outputs]
    sources = [("read", t) for t in texts] + _joined(texts)
    sources += [d for _, t in list(sources) for d in _decodings(t)]
    reading = Reading()
    for how, text in sources:
        for call in json_calls(text):
            reading.add(call.name, call.arguments, f"{how}: JSON call")
        for match in re.finditer(rf"(?:\b{_VERBS}\s+)?\b({_NAME})\(([^()]*)\)", text,
                                 flags=re.I):
            name = match.group(1)
            if name in KNOWN_TOOLS or re.match(_VERBS, match.group(0), flags=re.I):
                reading.add(name, _python_call(name, match.group(2)), f"{how}: {name}(...)")
        for name in re.findall(rf"\b{_VERBS}\s+the tool named\s+'([^']+)'", text, flags=re.I):
            reading.add(name, {}, f"{how}: 'the tool named ...'")
        for clause in _CLAUSE_END.split(text):
            verb = re.search(rf"\b{_VERBS}\s+({_NAME})\b(?!\()", clause, flags=re.I)
            if verb and (verb.group(1) in KNOWN_TOOLS or "_" in verb.group(1)):
                reading.add(verb.group(1), _arguments(verb.group(1), clause[verb.end():]),
                            f"{how}: '{verb.group(0)}'")
                continue
            lead = re.match(rf"\s*(?:then\s+|(?:assistant|ai)\s*[:,]\s*)?({_NAME})\b(?!\()",
                            clause, flags=re.I)
            if lead and lead.group(1) in SIDE_EFFECT_TOOLS:
                args = _arguments(lead.group(1), clause[lead.end():])
                if args:  # a tool name opening a sentence with its arguments: an imperative
                    reading.add(lead.group(1), args,
                                f"{how}: '{lead.group(0).strip()}' opens a sentence")
            for url in re.findall(r"\bfetch\s+(https?://\S+)", clause, flags=re.I):
                reading.add("fetch_page", {"url": url.rstrip(".")}, f"{how}: 'fetch <url>'")
        for url in re.findall(r"!\[[^\]]*\]\((https?://[^)\s]+)\)", text):
            reading.add("fetch_page", {"url": url}, f"{how}: markdown image (loaded to show it)")
    reading.drop_partial()
    return reading


@dataclass
class LiteralReader:
    """A scripted model (not a language model) that obeys what it READS in tool outputs.

    Turn 1: it opens the documents the user asked about (the payload's read calls). Turn 2: it
    runs :func:`read_instructions` over the tool messages it received and makes exactly those
    calls. Turn 3: it reports. A payload that asks for nothing, or asks in a wording it cannot
    read, gets no call. ``reading`` keeps what it found and how.
    """

    payload: Payload
    reading: Reading = field(default_factory=Reading)
    label: str = "scripted literal reader"

    def __call__(self, messages: list[AnyMessage]) -> AIMessage:
        turns = sum(isinstance(m, AIMessage) for m in messages)
        if turns == 0:
            return self.payload.opening_reads()
        if turns == 1:
            self.reading = read_instructions(
                [str(m.content) for m in messages if isinstance(m, ToolMessage)])
            return AIMessage("", tool_calls=[call.for_langchain(f"model_{i}")
                                             for i, call in enumerate(self.reading.calls)])
        return AIMessage(f"({self.label}) done: " + "; ".join(
            str(m.content)[:60] for m in messages if isinstance(m, ToolMessage)
            and not m.tool_call_id.startswith("read_")))

