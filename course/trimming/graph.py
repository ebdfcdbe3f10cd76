"""The original notebook's trimming graph, run turn by turn, with and without its two bugs.

The trimming graph is the memory chapter's :func:`course.memory.chat_graph.build_chat_graph`
with the original trimmer (``ORIGINAL_SETTINGS``) as its ``transform``: it trims the SAVED
messages before the prompt template adds the system message, as published. :func:`run_turns`
asks one question per turn and keeps a :class:`TurnRecord` (what the model received, what was
stored, measured); :class:`Conversation` shows one run turn by turn, :class:`TurnRuns` lays
several runs side by side and plots the stored reply's growth, and :class:`RunsSummary` gives
one line per run. Each is a record: text for the student, its values for a machine
(:mod:`course.records`).

:func:`pipeline_chat_model` is the chat model the two bugs are about: ``ChatHuggingFace`` over
a transformers ``text-generation`` pipeline on the model loaded in the kernel (the probe model),
whatever the agent model is.

Not handled: the remedies (see :mod:`course.trimming.remedies`), streaming, tool messages.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from course.checkpoints import thread_config
from course.memory.chat_graph import (
    LANGUAGE_TEMPLATE,
    LanguageState,
    PromptRecorder,
    build_chat_graph,
)
from course.records import Record, json_safe
from course.trimming.counters import as_counter
from course.trimming.examples import ORIGINAL_BUDGET, ORIGINAL_SETTINGS, QUESTIONS

__all__ = [
    "Conversation",
    "RunsSummary",
    "TurnRecord",
    "TurnRuns",
    "build_trimming_graph",
    "converse",
    "pipeline_chat_model",
    "run_turns",
]


def pipeline_chat_model(*, return_full_text: bool, max_new_tokens: int):
    """``ChatHuggingFace`` over a greedy ``text-generation`` pipeline on the in-kernel model
    (:func:`course.models.probe_chat_model`).

    ``return_full_text=True`` is bug 1 (the original notebook never set it).
    """
    from course.models import probe_chat_model

    return probe_chat_model(return_full_text=return_full_text, max_new_tokens=max_new_tokens)


def make_trimmer(token_counter: Any, max_tokens: int = ORIGINAL_BUDGET
                 ) -> Callable[[list[BaseMessage]], list[BaseMessage]]:
    """The original notebook's trimmer (``ORIGINAL_SETTINGS``) as a graph ``transform``."""
    settings = dict(ORIGINAL_SETTINGS, max_tokens=max_tokens)

    def trim(saved: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(saved, token_counter=token_counter, **settings)

    return trim


def build_trimming_graph(chat_model: Any, token_counter: Any, *,
                         max_tokens: int | None = ORIGINAL_BUDGET,
                         system_template: str = LANGUAGE_TEMPLATE,
                         state_schema: type = LanguageState,
                         recorder: PromptRecorder | None = None, checkpointer: Any = None):
    """The original trimming graph: the language graph + the original trimmer on saved messages.

    ``max_tokens=None`` means no trimming (the memory chapter's language graph).
    """
    transform = None if max_tokens is None else make_trimmer(token_counter, max_tokens)
    return build_chat_graph(chat_model, system_template=system_template,
                            state_schema=state_schema, transform=transform,
                            checkpointer=checkpointer, recorder=recorder)


@dataclass
class TurnRecord:
    """One turn: what the model received, and the assistant message that was stored (measured).

    ``prompt_tokens`` counts the received messages with the run's model counter;
    ``prompt_text`` is the prompt as the model's chat template rendered it;
    ``reply_tokens`` counts the stored message with each counter (label -> tokens).
    """

    turn: int
    question: str
    received: list[tuple[str, str]]  # (type, content) of the messages the model got
    prompt_tokens: int
    name_in_prompt: bool
    reply: str
    reply_tokens: dict[str, int] = field(default_factory=dict)
    prompt_text: str = ""

    @property
    def received_roles(self) -> list[str]:
        return [t for t, _ in self.received]

    @property
    def reply_chars(self) -> int:
        return len(self.reply)

    def values(self) -> dict[str, Any]:
        """The turn's fields, JSON-safe, with ``reply_chars``: what a record says of it."""
        return {**json_safe(self), "reply_chars": self.reply_chars}

    def __str__(self) -> str:
        counts = ", ".join(f"{n} {label} tokens" for label, n in self.reply_tokens.items())
        return (f"turn {self.turn}: model got {len(self.received)} messages "
                f"{self.received_roles}, {self.prompt_tokens} tokens, name in prompt: "
                f"{'yes' if self.name_in_prompt else 'no'}; stored reply {self.reply_chars} "
                f"chars, {counts}")

    def details(self, width: int = 90) -> str:
        """The summary line, then each received message (content shortened to ``width``)."""
        lines = [str(self)]
        for kind, content in self.received:
            text = " ".join(content.split())
            text = text if len(text) <= width else text[: width - 3] + "..."
            lines.append(f"    {kind}: {text}")
        lines.append(f"    stored reply: {' '.join(self.reply.split())[:width]!r}")
        return "\n".join(lines)


def run_turns(app: Any, recorder: PromptRecorder, questions: Sequence[str], *, thread_id: str,
              prompt_counter: Any, reply_counters: Mapping[str, Any], name: str = "Bob",
              language: str = "English",
              state_for_turn: Callable[[int, str], dict] | None = None) -> list[TurnRecord]:
    """Ask ``questions`` one per turn on ``thread_id``; a :class:`TurnRecord` per turn.

    ``state_for_turn(turn, question)`` may add state fields to a turn's input (the facts remedy).
    """
    if not questions:
        raise ValueError("questions is empty: give the user's messages, one per turn")
    config = thread_config(thread_id)
    count_prompt = as_counter(prompt_counter)
    counters = {label: as_counter(c) for label, c in reply_counters.items()}
    records = []
    for turn, question in enumerate(questions, start=1):
        payload: dict[str, Any] = {"messages": [HumanMessage(question)]}
        if turn == 1:
            payload["language"] = language
        if state_for_turn is not None:
            payload.update(state_for_turn(turn, question))
        out = app.invoke(payload, config)
        stored = out["messages"][-1]
        call = recorder.last
        records.append(TurnRecord(
            turn=turn, question=question,
            received=[(m.type, str(m.content)) for m in call.messages],
            prompt_tokens=count_prompt(list(call.messages)),
            name_in_prompt=any(name in str(m.content) for m in call.messages),
            reply=str(stored.content),
            reply_tokens={label: c([AIMessage(str(stored.content))])
                          for label, c in counters.items()},
            prompt_text=call.prompt_text,
        ))
    return records


@dataclass
class TurnRuns(Record):
    """Several runs of the same questions, side by side per turn (all figures measured here).

    A run may stop before the others (a costly run asks fewer questions): its missing turns
    read "not run". ``label`` is the first line of the text and the HTML (the provenance:
    measured, and by which models); :meth:`summary` gives one line per run, ``str()`` every turn.
    Its values (:meth:`record`): the label and every run's turns.
    """

    runs: dict[str, list[TurnRecord]]
    label: str = "measured in this kernel"

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError("runs is empty: give {label: [TurnRecord, ...]}")

    def record(self) -> dict[str, Any]:
        return {"label": self.label,
                "runs": {label: [r.values() for r in records]
                         for label, records in self.runs.items()}}

    def turns(self) -> list[int]:
        """Every turn number that any run reached, in order."""
        return sorted({r.turn for records in self.runs.values() for r in records})

    def turn_record(self, label: str, turn: int) -> TurnRecord | None:
        """Run ``label``'s record of ``turn``, or None if that run did not reach it."""
        return next((r for r in self.runs[label] if r.turn == turn), None)

    def first_turn_without_name(self, label: str) -> int | None:
        return next((r.turn for r in self.runs[label] if not r.name_in_prompt), None)

    def brief(self, counter: str | None = None) -> RunsSummary:
        """:meth:`summary` as a record: one line per run, and the same figures as values."""
        return RunsSummary(self, counter)

    def summary(self, counter: str | None = None) -> str:
        """The label, then one line per run: the turns with the name in the prompt, how many
        messages the model received, the stored message's size (characters, ``counter``
        tokens: default the first counter)."""
        lines = [f"{self.label}; one line per run ({len(self.turns())} turns):"]
        for label, records in self.runs.items():
            if not records:
                lines.append(f"{label}: no turn run")
                continue
            counter_name = counter or next(iter(records[0].reply_tokens), None)

            def span(values: list[int]) -> str:
                return f"{min(values)}" if min(values) == max(values) else \
                    f"{min(values)}-{max(values)}"

            named = [r.turn for r in records if r.name_in_prompt]
            ran = "" if len(records) == len(self.turns()) else \
                f" (ran {len(records)} of {len(self.turns())} turns)"
            tokens = (f", {span([r.reply_tokens[counter_name] for r in records])} "
                      f"{counter_name} tokens" if counter_name else "")
            lines.append(f"{label}{ran}: name in prompt on turns {named}; received "
                         f"{span([len(r.received) for r in records])} messages; stored "
                         f"{span([r.reply_chars for r in records])} chars{tokens}")
        return "\n".join(lines)

    def _cell(self, r: TurnRecord | None) -> str:
        if r is None:
            return "not run"
        counts = ", ".join(f"{n} {label}" for label, n in r.reply_tokens.items())
        return (f"received {len(r.received)} messages, name in prompt: "
                f"{'yes' if r.name_in_prompt else 'no'}, stored {r.reply_chars} chars ({counts})")

    def __str__(self) -> str:
        lines = [f"{self.label}; per turn, the stored assistant message's size by each counter:"]
        for t in self.turns():
            for label in self.runs:
                lines.append(f"turn {t}, {label}: {self._cell(self.turn_record(label, t))}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(label)}</th>" for label in self.runs)
        body = "".join(
            f"<tr><td>{t}</td>"
            + "".join(f"<td>{html.escape(self._cell(self.turn_record(label, t)))}</td>"
                      for label in self.runs) + "</tr>"
            for t in self.turns())
        return (f"<p>{html.escape(self.label)}; token counts of the stored assistant message</p>"
                f"<table><tr><th>turn</th>{head}</tr>{body}</table>")

    def plot(self, counter: str | None = None):
        """Stored assistant message per turn: characters and tokens (``counter`` label)."""
        import matplotlib.pyplot as plt

        first = next(iter(self.runs.values()))
        counter = counter or next(iter(first[0].reply_tokens), None)
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
        for label, records in self.runs.items():
            turns = [r.turn for r in records]
            axes[0].plot(turns, [r.reply_chars for r in records], marker="o", label=label)
            if counter is not None:
                axes[1].plot(turns, [r.reply_tokens[counter] for r in records], marker="o",
                             label=label)
        for ax, what in zip(axes, ("characters", f"tokens ({counter})"), strict=True):
            ax.set_xlabel("turn")
            ax.set_ylabel(what)
            ax.set_title(f"stored assistant message, {what.split()[0]}")
            ax.set_xticks(self.turns())
            ax.legend(fontsize=8)
        fig.suptitle(self.label, fontsize=9)
        fig.tight_layout()
        return fig


@dataclass
class RunsSummary(Record):
    """One line per run of a :class:`TurnRuns` (its :meth:`TurnRuns.summary`); its values: per
    run, the turns run, the turns with the name in the prompt, and the least and most messages
    received, stored characters and stored ``counter`` tokens."""

    runs: TurnRuns
    counter: str | None = None

    def record(self) -> dict[str, Any]:
        values = {}
        for label, records in self.runs.runs.items():
            counter = self.counter or next(iter(records[0].reply_tokens), None) if records else None

            def span(numbers: list[int]) -> list[int]:
                return [min(numbers), max(numbers)] if numbers else []

            values[label] = {
                "turns": [r.turn for r in records],
                "name_in_prompt": [r.turn for r in records if r.name_in_prompt],
                "received": span([len(r.received) for r in records]),
                "stored_chars": span([r.reply_chars for r in records]),
                "stored_tokens": span([r.reply_tokens[counter] for r in records] if counter else []),
            }
        return {"label": self.runs.label, "counter": self.counter, "runs": values}

    def __str__(self) -> str:
        return self.runs.summary(self.counter)

    __repr__ = __str__


@dataclass
class Conversation(Record):
    """A graph run over the chapter's questions: the app (to read its state), the prompts the
    model received (``recorder``), and a :class:`TurnRecord` per turn. Displayed, it shows each
    turn: what the model received and what was stored; its values (:meth:`record`) are the
    label, the thread and the turns."""

    app: Any
    recorder: PromptRecorder
    turns: list[TurnRecord]
    thread_id: str
    label: str = ""

    def __str__(self) -> str:
        """``label`` (the provenance of the replies: measured, which model) first, then turns."""
        return "\n".join([self.label] * bool(self.label) + [t.details() for t in self.turns])

    def record(self) -> dict[str, Any]:
        return {"label": self.label, "thread_id": self.thread_id,
                "turns": [t.values() for t in self.turns]}

    __repr__ = __str__


def converse(chat_model: Any, token_counter: Any, *, thread_id: str, prompt_counter: Any,
             reply_counters: Mapping[str, Any], max_tokens: int | None = ORIGINAL_BUDGET,
             questions: Sequence[str] = QUESTIONS, build: Callable[..., Any] | None = None,
             state_for_turn: Callable[[int, str], dict] | None = None,
             label: str = "") -> Conversation:
    """Build a graph (default :func:`build_trimming_graph`; a remedy's builder works too) and run
    ``questions`` on ``thread_id``. ``token_counter`` is what the graph's trimmer counts with;
    ``prompt_counter`` and ``reply_counters`` measure what the model got and what was stored;
    ``label`` (e.g. ``"measured, SmolLM2-135M-Instruct (bundled)"``) heads the record's text."""
    recorder = PromptRecorder()
    build = build or build_trimming_graph
    app = build(chat_model, token_counter, max_tokens=max_tokens, recorder=recorder)
    turns = run_turns(app, recorder, questions, thread_id=thread_id,
                      prompt_counter=prompt_counter, reply_counters=reply_counters,
                      state_for_turn=state_for_turn)
    return Conversation(app, recorder, turns, thread_id, label)
