"""Token counters for a trimming budget, and the side-by-side count of bug 2.

Every counter here is what ``trim_messages`` accepts as ``token_counter``: a function
``list[BaseMessage] -> int`` that is additive over messages (so more messages never count fewer).

- :class:`ToyCounter`: the worked example's toy counts (by message id), else one token a word.
- :class:`Gpt2FallbackCounter`: what LangChain counts when a chat model that overrides no
  counting method (``ChatHuggingFace``) is passed as the counter: GPT-2 tokens of each message
  written as ``"Human: ..."``/``"AI: ..."`` (bug 2). It uses LangChain's own GPT-2 tokenizer
  function, so it needs no chat model and works under every model setting.
- :class:`ModelTokenCounter`: a model's own tokenizer over each message as its chat template
  renders it (the fix of bug 2); label it with the tokenizer it uses (SmolLM2, Qwen3, ...).
- :class:`CountTable`: messages counted by several counters side by side, a record that renders
  itself (text, HTML) with totals.

Not handled: the generation prompt (``<|im_start|>assistant``) that follows the last message,
tool messages, and ChatOpenAI's own counter (it downloads ``cl100k_base``; never used here).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, get_buffer_string

from course.records import Record
from course.tools.protocol import CHAT_ROLES

__all__ = [
    "CountTable",
    "Gpt2FallbackCounter",
    "MessageSize",
    "ModelTokenCounter",
    "TokenCounter",
    "ToyCounter",
    "as_counter",
    "count_each",
    "counter_name",
    "worked_example_counter",
]

TokenCounter = Callable[[list[BaseMessage]], int]


@dataclass
class ToyCounter:
    """Toy token counts: ``counts[message.id]`` if given, else one token per word."""

    counts: Mapping[str, int] = field(default_factory=dict)
    name: str = "toy"

    def count_one(self, message: BaseMessage) -> int:
        if message.id is not None and message.id in self.counts:
            return int(self.counts[message.id])
        return len(str(message.content).split())

    def __call__(self, messages: list[BaseMessage]) -> int:
        return sum(self.count_one(m) for m in messages)


def worked_example_counter() -> ToyCounter:
    """The toy counter of the worked example (10, 6, 5, 12, 20, 7, 9, 6)."""
    from course.trimming.examples import WORKED_EXAMPLE

    return ToyCounter({mid: n for mid, _, _, n in WORKED_EXAMPLE})


class Gpt2FallbackCounter:
    """LangChain's fallback count: GPT-2 tokens of ``get_buffer_string([message])``, summed.

    The same arithmetic as ``BaseLanguageModel.get_num_tokens_from_messages`` with LangChain's
    own ``get_tokenizer()`` (the GPT-2 tokenizer ``course prepare`` installs in the cache).
    """

    name = "GPT-2 fallback"

    def __init__(self) -> None:
        from langchain_core.language_models.base import get_tokenizer

        self._tokenizer = get_tokenizer()
        if not self._tokenizer.encode("Hello world"):
            raise RuntimeError(
                "the GPT-2 tokenizer LangChain loads encodes everything to [] (no GPT-2 files "
                "offline). Fix: run `python -m course prepare` once."
            )

    def count_one(self, message: BaseMessage) -> int:
        return len(self._tokenizer.encode(get_buffer_string([message])))

    def __call__(self, messages: list[BaseMessage]) -> int:
        return sum(self.count_one(m) for m in messages)


class ModelTokenCounter:
    """Tokens of each message as the model sees it: its chat template, its own tokenizer.

    A message costs the tokens of its rendered block (``<|im_start|>user\\n...<|im_end|>\\n``
    for SmolLM2 and Qwen). A non-system message is rendered after a one-word system anchor and
    the anchor's tokens subtracted, so no default system prompt sneaks into the count.
    """

    def __init__(self, tokenizer: Any | None = None, name: str | None = None) -> None:
        if tokenizer is None:  # the agent model's own (the served model's, when local)
            from course.models import agent_tokenizer

            tokenizer, label = agent_tokenizer()
            name = name or label
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                "this tokenizer has no chat template, so a message's tokens are not defined. "
                "Fix: use an instruct model's tokenizer (course.models.agent_tokenizer())."
            )
        self.tokenizer = tokenizer
        self.name = name or "model tokenizer"
        self._anchor = [{"role": "system", "content": "x"}]
        self._anchor_len = self._render_len(self._anchor)
        self._cache: dict[tuple[str, str], int] = {}

    def _render_len(self, dicts: list[dict]) -> int:
        text = self.tokenizer.apply_chat_template(dicts, tokenize=False,
                                                  add_generation_prompt=False)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def count_one(self, message: BaseMessage) -> int:
        role = CHAT_ROLES.get(message.type)  # chapter 01's table; no tool turns here
        if role is None or role == "tool":
            raise ValueError(f"cannot count a {message.type!r} message; only system/human/ai")
        key = (role, str(message.content))
        if key not in self._cache:
            this = {"role": role, "content": key[1]}
            if role == "system":
                self._cache[key] = self._render_len([this])
            else:
                self._cache[key] = self._render_len([*self._anchor, this]) - self._anchor_len
        return self._cache[key]

    def __call__(self, messages: list[BaseMessage]) -> int:
        return sum(self.count_one(m) for m in messages)


def as_counter(token_counter: Any) -> TokenCounter:
    """A ``list[BaseMessage] -> int`` function for any counter ``trim_messages`` accepts."""
    if hasattr(token_counter, "get_num_tokens_from_messages"):
        return token_counter.get_num_tokens_from_messages
    if callable(token_counter):
        return token_counter
    raise TypeError(
        f"token_counter must be a function list[BaseMessage] -> int or a LangChain chat "
        f"model, got {type(token_counter).__name__}"
    )


def count_each(messages: Sequence[BaseMessage], token_counter: Any) -> list[int]:
    """Tokens of each message alone, with ``token_counter``."""
    count = as_counter(token_counter)
    return [count([m]) for m in messages]


def counter_name(token_counter: Any) -> str:
    """A readable name: ``toy``, ``GPT-2 fallback (ChatHuggingFace)``, ``Qwen3 tokenizer``."""
    if hasattr(token_counter, "get_num_tokens_from_messages"):
        return f"GPT-2 fallback ({type(token_counter).__name__})"
    return getattr(token_counter, "name", getattr(token_counter, "__name__", "custom"))


@dataclass
class MessageSize(Record):
    """One message's size, measured here: its characters and its tokens by one counter.

    Displayed, one line (``its assistant message: 205 characters, 83 GPT-2 tokens
    (measured)``); its values: the name, the characters, the tokens and whose tokens they are."""

    name: str
    characters: int
    tokens: int
    unit: str

    @classmethod
    def of(cls, name: str, message: BaseMessage, token_counter: Any, unit: str) -> MessageSize:
        """``message`` measured: ``len(content)``, and ``token_counter`` over the message alone."""
        return cls(name, len(message.content), as_counter(token_counter)([message]), unit)

    def __str__(self) -> str:
        return (f"{self.name}: {self.characters} characters, {self.tokens} {self.unit} tokens "
                "(measured)")

    __repr__ = __str__


@dataclass
class CountTable(Record):
    """Messages counted by several counters, side by side (all counts measured here).

    ``columns`` maps a label to the per-message counts; ``text_of`` is what the GPT-2
    fallback tokenizes for each message (``"Human: ..."``). Its values (:meth:`record`): the
    rows (role, characters, the fallback's text, each count) and the totals.
    """

    messages: list[BaseMessage]
    columns: dict[str, list[int]]

    @classmethod
    def count(cls, messages: Sequence[BaseMessage], counters: Mapping[str, Any]) -> CountTable:
        messages = list(messages)
        return cls(messages, {label: count_each(messages, c) for label, c in counters.items()})

    @property
    def totals(self) -> dict[str, int]:
        return {label: sum(counts) for label, counts in self.columns.items()}

    def text_of(self, i: int) -> str:
        return get_buffer_string([self.messages[i]])

    def rows(self) -> list[dict[str, Any]]:
        """One dict per message: role, what the fallback counts, then each counter's count."""
        return [{"role": m.type, "fallback text": self.text_of(i),
                 **{label: counts[i] for label, counts in self.columns.items()}}
                for i, m in enumerate(self.messages)]

    def record(self) -> dict[str, Any]:
        return {"columns": dict(self.columns), "totals": self.totals,
                "contents": [str(m.content) for m in self.messages],
                "rows": self.rows()}

    def __str__(self) -> str:
        labels = list(self.columns)
        lines = [" | ".join(["role", "what the GPT-2 fallback counts", *labels])]
        for row in self.rows():
            shown = repr(" ".join(row["fallback text"].split()))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            lines.append(" | ".join([row["role"], shown, *(str(row[k]) for k in labels)]))
        lines.append(" | ".join(["total", "", *(str(v) for v in self.totals.values())]))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(k)}</th>" for k in self.columns)
        body = []
        for row in self.rows():
            text = html.escape(row["fallback text"][:160])
            cells = "".join(f"<td>{row[k]}</td>" for k in self.columns)
            body.append(f"<tr><td>{row['role']}</td><td><code>{text}</code></td>{cells}</tr>")
        totals = "".join(f"<td><b>{v}</b></td>" for v in self.totals.values())
        return (f"<table><tr><th>role</th><th>what the GPT-2 fallback counts</th>{head}</tr>"
                + "".join(body) + f"<tr><td>total</td><td></td>{totals}</tr></table>"
                "<p>all counts measured here</p>")
