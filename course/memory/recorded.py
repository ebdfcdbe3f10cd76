"""The published Qwen2-0.5B-Instruct replies of the memory notebook, loaded from a recording.

The original notebook (HSE-LAMBDA, described by course note 000) ran its memory examples with
Qwen2-0.5B-Instruct, which cannot be loaded here. The replies its saved outputs show ship as data
in ``course/data/recordings/memory/qwen2_memory.json``, one line per text, quoted and labelled
``recorded``. A text a person typed into the source (the history's greeting, a hand-typed
``AIMessage``) says so in ``typed_by`` and is never shown as the model's. A line may instead
carry only a ``description`` where a source describes a reply without quoting it.
:meth:`RecordedConversation.beside` puts what the active model answers here (``measured``) next to
them, each row labelled, as a record a test can read.

The trimming app's saved state, as the original notebook read it back after its one turn (thread
``abc123``, language Spanish, the user's "Hi! I'm Bob." and an assistant message of 205
characters that starts with the whole rendered prompt), ships beside it in
``trimming_app_state.json`` and loads with :func:`original_trimming_state`, labelled recorded.

Not handled: running Qwen2 (it is not available offline), or judging whether a live reply is
right; the rows only put the two side by side.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from course.agents.traces import RECORDINGS_DIR
from course.records import Record

__all__ = ["QWEN2_MEMORY_FILE", "TRIMMING_APP_STATE_FILE", "RecordedConversation", "RecordedLine",
           "SideBySide", "StoredState", "original_trimming_state",
           "qwen2_memory"]

QWEN2_MEMORY_FILE = RECORDINGS_DIR / "memory" / "qwen2_memory.json"
TRIMMING_APP_STATE_FILE = RECORDINGS_DIR / "memory" / "trimming_app_state.json"
LABELS = ("recorded", "reconstructed")


@dataclass(frozen=True)
class RecordedLine:
    """One reply of the published run: the user's message, the reply (or its description)."""

    key: str
    cells: str
    thread: str | None
    user: str
    reply: str | None
    description: str | None
    label: str
    note: str = ""
    typed_by: str | None = None

    def author(self, model: str) -> str:
        """Who wrote the text: ``model``, or the person who typed it into the source."""
        return f"typed by {self.typed_by}" if self.typed_by else model

    @property
    def shown(self) -> str:
        """The reply as published, or ``<described: ...>`` when the source only described it."""
        return self.reply if self.reply is not None else f"<described: {self.description}>"


@dataclass
class SideBySide(Record):
    """Rows of (user message, live reply, published text), each with its label and author."""

    rows: list[tuple[RecordedLine, str | None]]
    live_label: str
    recorded_model: str

    def record(self) -> dict:
        return {"live_label": self.live_label, "recorded_model": self.recorded_model,
                "rows": [{"key": line.key, "user": line.user, "live": None if live is None else str(live),
                          "published": line.shown, "label": line.label,
                          "author": line.author(self.recorded_model)}
                         for line, live in self.rows]}

    def __str__(self) -> str:
        lines = []
        for line, live in self.rows:
            lines.append(f"user: {line.user}")
            if live is not None:
                lines.append(f"  [{self.live_label}] {' '.join(str(live).split())}")
            lines.append(f"  [{line.label}, {line.author(self.recorded_model)}] {line.shown}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        esc = html.escape
        head = (f"<tr><th>user</th><th>{esc(self.live_label)}</th>"
                f"<th>published (label, author)</th></tr>")
        body = "".join(
            f"<tr><td>{esc(line.user)}</td><td>{esc('' if live is None else str(live))}</td>"
            f"<td>{esc(line.shown)} <i>[{esc(line.label)}, "
            f"{esc(line.author(self.recorded_model))}]</i></td></tr>"
            for line, live in self.rows)
        return f"<table>{head}{body}</table>"


@dataclass
class RecordedConversation:
    """The published replies of one model, by key (``alone``, ``greeting``, ``pirate``, ...)."""

    model: str
    source: str
    lines: list[RecordedLine] = field(default_factory=list)

    @property
    def short_model(self) -> str:
        return self.model.split("/")[-1]

    def line(self, key: str) -> RecordedLine:
        for line in self.lines:
            if line.key == key:
                return line
        raise KeyError(f"no recorded line {key!r}; the recording has "
                       f"{[line.key for line in self.lines]}")

    def reply(self, key: str) -> str:
        """The published reply text of ``key`` (KeyError if the source only described it)."""
        line = self.line(key)
        if line.reply is None:
            raise KeyError(f"the source only describes the reply {key!r}: {line.description}")
        return line.reply

    def beside(self, live: dict[str, str | None], live_label: str) -> SideBySide:
        """Put live replies (by key) beside the published ones; ``live_label`` says what ran
        (``None`` for a published line with no live counterpart, such as a typed message)."""
        return SideBySide([(self.line(k), text) for k, text in live.items()], live_label,
                          self.short_model)

    def __str__(self) -> str:
        return "\n".join(
            f"[{line.label}, {line.author(self.short_model)}] cell {line.cells}: {line.user} -> "
            f"{line.shown}"
            for line in self.lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(
            f"<tr><td>{esc(line.label)}</td><td>{esc(line.cells)}</td><td>{esc(line.user)}</td>"
            f"<td>{esc(line.shown)}</td></tr>" for line in self.lines)
        return (f"<p>{esc(self.model)}: {esc(self.source)}</p><table><tr><th>label</th>"
                f"<th>cells</th><th>user</th><th>reply</th></tr>{rows}</table>")


def _load(path: Path) -> RecordedConversation:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        lines = [RecordedLine(**entry) for entry in data["lines"]]
        conversation = RecordedConversation(data["model"], data["source"], lines)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a recorded conversation ({err}). Fix: restore the file "
                         "from the repository.") from err
    for line in lines:
        if line.label not in LABELS:
            raise ValueError(f"{path}: line {line.key!r} has label {line.label!r}; expected one "
                             f"of {LABELS}")
        if (line.reply is None) == (line.description is None):
            raise ValueError(f"{path}: line {line.key!r} needs exactly one of reply or "
                             "description")
    return conversation


@cache
def qwen2_memory() -> RecordedConversation:
    """The published Qwen2-0.5B-Instruct replies of the memory notebook (loaded once)."""
    return _load(QWEN2_MEMORY_FILE)


@dataclass(frozen=True)
class StoredState(Record):
    """A conversation's saved state as a source published it: its thread, its ``language``
    field and its messages as ``(type, content)`` pairs (``"human"``, ``"ai"``)."""

    thread_id: str
    language: str
    messages: tuple[tuple[str, str], ...]
    model: str
    source: str
    label: str

    def __str__(self) -> str:
        lines = [f"[{self.label}, {self.model.split('/')[-1]}] thread {self.thread_id!r}, "
                 f"language {self.language!r}"]
        lines += [f"  {kind} ({len(content)} characters): {content!r}"
                  for kind, content in self.messages]
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # displayed, it reads as printed
        printer.text(str(self))


@cache
def original_trimming_state() -> StoredState:
    """The trimming app's state after its one turn, as the original notebook read it back."""
    data = json.loads(TRIMMING_APP_STATE_FILE.read_text(encoding="utf-8"))
    return StoredState(data["thread_id"], data["language"],
                       tuple((m["type"], m["content"]) for m in data["messages"]),
                       data["model"], data["source"], data["label"])
