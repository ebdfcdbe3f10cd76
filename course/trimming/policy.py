"""Trimming a conversation to a token budget, explained message by message; the two bugs.

The kept set always comes from LangChain's own ``trim_messages``. Beside it,
:func:`trim_and_explain` walks the same four rules by hand and gives every message a
:class:`TrimDecision` (kept or dropped, and why); if the walk and ``trim_messages`` ever
disagree it raises instead of showing a wrong explanation. The four rules:

1. keep the newest messages (walk back from the newest one);
2. always keep the system instruction and count it in the budget (``include_system=True``);
3. never cut a message (``allow_partial=False``);
4. start the kept history on a user turn (``start_on="human"``).

Token counters (each is what ``trim_messages`` accepts as ``token_counter``):

- :class:`ToyCounter`: the worked example's toy counts (by message id), one token per word
  for messages without a toy count;
- the GPT-2 fallback: pass a LangChain chat model itself (``course.models.chat_model()``);
  LangChain then counts GPT-2 tokens of ``"Human: ..."``/``"AI: ..."`` strings (bug 2);
- :class:`ModelTokenCounter`: the model's own tokenizer over each message as the chat template
  renders it (the fix of bug 2).

The trimming graph of the original notebook is the memory chapter's
:func:`course.memory.chat_graph.build_chat_graph` with a trimmer as its ``transform`` (it trims the saved
messages BEFORE the prompt template adds the system message, as published).

What this module does not handle: ``allow_partial=True`` (rule 3 forbids it), ``end_on``,
tool messages, multimodal content, and counters that are not monotone (more messages must
never count fewer tokens). The model tokenizer counter does not count the generation prompt
(``<|im_start|>assistant``) that follows the last message.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    get_buffer_string,
    trim_messages,
)

from course.checkpoints import thread_config
from course.memory.chat_graph import (
    LANGUAGE_TEMPLATE,
    LanguageState,
    PromptRecorder,
    build_chat_graph,
)

TokenCounter = Callable[[list[BaseMessage]], int]

FOUR_RULES = (
    "1. keep the newest messages",
    "2. always keep the system instruction and count it in the budget",
    "3. never cut a message",
    "4. start the kept history on a user turn",
)

# --- the worked example of the note (toy token counts) ---------------------------------------

#: (id, role, text, toy tokens). The note gives the counts and the texts of user 1 and user 4;
#: the other texts are reconstructed (only their toy counts matter).
WORKED_EXAMPLE: tuple[tuple[str, str, str, int], ...] = (
    ("system", "system", "You are a helpful assistant.", 10),
    ("user-1", "human", "My name is Ana.", 6),
    ("assistant-1", "ai", "Nice to meet you, Ana!", 5),
    ("user-2", "human", "Can you suggest a day trip from Lisbon by train?", 12),
    ("assistant-2", "ai", "Sintra: palaces and gardens, forty minutes from Rossio.", 20),
    ("user-3", "human", "Is it busy on Sundays?", 7),
    ("assistant-3", "ai", "Yes, go early in the morning.", 9),
    ("user-4", "human", "What's my name?", 6),
)
WORKED_BUDGET = 52

#: The original notebook's 11-message example and its trimmer settings.
ELEVEN = (
    ("system", "You're a good assistant."), ("human", "Hi! I'm Bob."), ("ai", "Hi!"),
    ("human", "I like vanilla ice cream."), ("ai", "Nice."), ("human", "What's 2 + 2?"),
    ("ai", "4."), ("human", "Thanks!"), ("ai", "No problem!"), ("human", "Having fun?"),
    ("ai", "Yes!"),
)
ORIGINAL_SETTINGS: dict[str, Any] = {
    "max_tokens": 45, "strategy": "last", "include_system": True, "allow_partial": False,
    "start_on": "human",
}

#: The system instruction of the original trimming graph (``{language}`` from the state).

_MESSAGE_TYPES = {"system": SystemMessage, "human": HumanMessage, "ai": AIMessage}
_ROLE_ALIASES = {"system": "system", "human": "human", "user": "human", "ai": "ai",
                 "assistant": "ai"}


def make_messages(pairs: Sequence[tuple[str, str]], prefix: str = "m") -> list[BaseMessage]:
    """LangChain messages from ``(role, text)`` pairs, with ids ``m0, m1, ...``.

    Roles: ``system``, ``human``/``user``, ``ai``/``assistant``.
    """
    out: list[BaseMessage] = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"message {i} must be a (role, text) pair, got {pair!r}")
        role, text = pair
        kind = _ROLE_ALIASES.get(str(role).strip().lower())
        if kind is None:
            raise ValueError(
                f"message {i} has role {role!r}; use one of system, human/user, ai/assistant"
            )
        out.append(_MESSAGE_TYPES[kind](content=str(text), id=f"{prefix}{i}"))
    return out


def parse_conversation(text: str) -> list[BaseMessage]:
    """Messages from lines ``role: text`` (blank lines ignored), e.g. typed in the widget."""
    pairs = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        role, sep, content = line.partition(":")
        if not sep:
            raise ValueError(
                f"line {n} ({line!r}) has no 'role:' prefix; write e.g. 'user: Hi! I'm Bob.'"
            )
        pairs.append((role.strip(), content.strip()))
    if not pairs:
        raise ValueError("no messages: write one per line, e.g. 'user: Hi! I'm Bob.'")
    return make_messages(pairs)


def worked_example_messages() -> list[BaseMessage]:
    """The note's worked example: system + 7 messages, ids ``system``, ``user-1``, ..."""
    return [_MESSAGE_TYPES[role](content=text, id=mid) for mid, role, text, _ in WORKED_EXAMPLE]


def eleven_messages() -> list[BaseMessage]:
    """The original notebook's 11 messages (system + 5 human/AI exchanges)."""
    return make_messages(ELEVEN)


# --- token counters ---------------------------------------------------------------------------

@dataclass
class ToyCounter:
    """Toy token counts: ``counts[message.id]`` if given, else one token per word.

    A callable ``list[BaseMessage] -> int``, which ``trim_messages`` accepts as its counter.
    """

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
    return ToyCounter({mid: n for mid, _, _, n in WORKED_EXAMPLE})


_ROLE_FOR_TEMPLATE = {"system": "system", "human": "user", "ai": "assistant"}


class ModelTokenCounter:
    """Tokens of each message as the model sees it: its chat template, its own tokenizer.

    A message costs the tokens of its rendered block (``<|im_start|>user\\n...<|im_end|>\\n``
    for SmolLM2). The count of a list is the sum over its messages, so it is additive and
    monotone, as ``trim_messages`` assumes; the generation prompt is not included.
    """

    name = "model tokenizer"

    def __init__(self, tokenizer: Any | None = None) -> None:
        if tokenizer is None:
            from course.models import load_local_model

            tokenizer = load_local_model().tokenizer
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                "this tokenizer has no chat template, so a message's tokens are not defined. "
                "Fix: use an instruct model's tokenizer (course.models.load_local_model())."
            )
        self.tokenizer = tokenizer
        self._anchor = [{"role": "system", "content": "x"}]
        self._anchor_len = self._render_len(self._anchor)
        self._cache: dict[tuple[str, str], int] = {}

    def _render_len(self, dicts: list[dict]) -> int:
        text = self.tokenizer.apply_chat_template(dicts, tokenize=False,
                                                  add_generation_prompt=False)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def count_one(self, message: BaseMessage) -> int:
        role = _ROLE_FOR_TEMPLATE.get(message.type)
        if role is None:
            raise ValueError(f"cannot count a {message.type!r} message; only system/human/ai")
        key = (role, str(message.content))
        if key not in self._cache:
            this = {"role": role, "content": key[1]}
            if role == "system":
                self._cache[key] = self._render_len([this])
            else:  # after a system anchor, so no default system prompt is injected
                self._cache[key] = self._render_len([*self._anchor, this]) - self._anchor_len
        return self._cache[key]

    def __call__(self, messages: list[BaseMessage]) -> int:
        return sum(self.count_one(m) for m in messages)


def as_counter(token_counter: Any) -> TokenCounter:
    """A ``list[BaseMessage] -> int`` function for any counter ``trim_messages`` accepts here."""
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
    """A readable name: ``toy``, ``GPT-2 fallback (ChatHuggingFace)``, ``model tokenizer``."""
    if hasattr(token_counter, "get_num_tokens_from_messages"):
        return f"GPT-2 fallback ({type(token_counter).__name__})"
    return getattr(token_counter, "name", getattr(token_counter, "__name__", "custom"))


# --- one decision per message -----------------------------------------------------------------

REASON_SYSTEM = "system kept (rule 2: always kept, counted in the budget)"
REASON_FITS = "kept: fits the budget"
REASON_OVER = "over budget"
REASON_OLDER = "over budget (older than a message that did not fit; rule 1)"
REASON_LATER = "over budget (newer than a message that did not fit)"


@dataclass(frozen=True)
class TrimDecision:
    """What happened to one message: kept or dropped, and the reason (one of the rules)."""

    index: int
    role: str
    content: str
    tokens: int
    kept: bool
    reason: str

    def __repr__(self) -> str:
        mark = "kept" if self.kept else "DROP"
        return f"{self.index:>2} {self.role:>6} {self.tokens:>4} {mark}  {self.reason}"


@dataclass
class TrimReport:
    """``trim_messages``' result beside the per-message explanation."""

    messages: list[BaseMessage]
    kept: list[BaseMessage]
    decisions: list[TrimDecision]
    max_tokens: int
    kept_tokens: int
    total_tokens: int
    settings: dict[str, Any]
    counter: str

    @property
    def kept_indices(self) -> list[int]:
        return [d.index for d in self.decisions if d.kept]

    @property
    def kept_contents(self) -> list[str]:
        return [str(m.content) for m in self.kept]

    def summary(self) -> str:
        return (f"kept {len(self.kept)} of {len(self.messages)} messages, {self.kept_tokens} "
                f"tokens of a budget of {self.max_tokens} (all: {self.total_tokens}; "
                f"counter: {self.counter})")

    def table(self, width: int = 48) -> str:
        lines = [f"{'#':>2} {'role':>6} {'tok':>4} kept  reason / message"]
        for d in self.decisions:
            text = " ".join(d.content.split())
            text = text if len(text) <= width else text[: width - 3] + "..."
            mark = "yes " if d.kept else "no  "
            lines.append(f"{d.index:>2} {d.role:>6} {d.tokens:>4} {mark}  {d.reason}\n"
                         f"{'':>19}{text!r}")
        lines.append(self.summary())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        rows = []
        for d in self.decisions:
            style = "" if d.kept else " style='color:#888'"
            rows.append(
                f"<tr{style}><td>{d.index}</td><td>{d.role}</td>"
                f"<td>{html.escape(d.content[:120])}</td><td>{d.tokens}</td>"
                f"<td>{'kept' if d.kept else 'dropped'}</td><td>{html.escape(d.reason)}</td></tr>"
            )
        return ("<table><tr><th>#</th><th>role</th><th>message</th><th>tokens</th>"
                "<th>kept?</th><th>reason</th></tr>" + "".join(rows) + "</table>"
                f"<p>{html.escape(self.summary())}</p>")


def _start_ok(message: BaseMessage, start_on: str | None) -> bool:
    return start_on is None or message.type == start_on


def _turn_name(message: BaseMessage) -> str:
    return {"ai": "an assistant", "system": "a system", "human": "a user"}.get(
        message.type, f"a {message.type}")


def _explain(messages: list[BaseMessage], max_tokens: int, count: TokenCounter, strategy: str,
             include_system: bool, start_on: str | None) -> list[tuple[bool, str]]:
    """(kept, reason) per message, by walking the four rules (not by calling trim_messages)."""
    n = len(messages)
    verdict: list[tuple[bool, str] | None] = [None] * n
    if strategy == "first":
        used: list[BaseMessage] = []
        stopped = False
        for i, m in enumerate(messages):
            if stopped:
                verdict[i] = (False, REASON_LATER)
            elif count([*used, m]) <= max_tokens:
                used.append(m)
                verdict[i] = (True, REASON_FITS)
            else:
                verdict[i] = (False, f"{REASON_OVER}: would make {count([*used, m])} > "
                                     f"{max_tokens}")
                stopped = True
        return verdict  # type: ignore[return-value]
    start = 0
    budget = max_tokens
    if include_system and messages and isinstance(messages[0], SystemMessage):
        verdict[0] = (True, REASON_SYSTEM)
        start = 1
        budget = max(0, max_tokens - count([messages[0]]))
    tail: list[int] = []
    for i in range(n - 1, start - 1, -1):
        candidate = [messages[j] for j in [i, *tail]]
        if count(candidate) <= budget:
            tail.insert(0, i)
            continue
        verdict[i] = (False, f"{REASON_OVER}: would make {count(candidate)} > {budget}"
                             + (" left after the system message" if start else ""))
        for j in range(start, i):
            verdict[j] = (False, REASON_OLDER)
        break
    while tail and not _start_ok(messages[tail[0]], start_on):  # rule 4
        first = tail.pop(0)
        verdict[first] = (False, f"would start on {_turn_name(messages[first])} turn "
                                 f"(rule 4, start_on={start_on!r})")
    for i in tail:
        verdict[i] = (True, REASON_FITS)
    return verdict  # type: ignore[return-value]


def trim_and_explain(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: Literal["last", "first"] = "last",
    include_system: bool = False,
    start_on: str | None = None,
) -> TrimReport:
    """Trim with LangChain's ``trim_messages`` (``allow_partial=False``) and explain each message.

    The kept messages are exactly what ``trim_messages`` returns; the explanation is computed
    beside it and must agree, or a ``RuntimeError`` says where they differ.
    """
    messages = list(messages)
    if not messages:
        raise ValueError("no messages to trim: give at least one message")
    if not all(isinstance(m, BaseMessage) for m in messages):
        raise TypeError("messages must be LangChain messages; build them with make_messages()")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValueError(f"max_tokens must be a whole number >= 0, got {max_tokens!r}")
    if strategy not in ("last", "first"):
        raise ValueError(f"strategy must be 'last' or 'first', got {strategy!r}")
    if strategy == "first" and (include_system or start_on):
        raise ValueError(
            "include_system and start_on only apply to strategy='last' (trim_messages refuses "
            "them with 'first'). Fix: set include_system=False and start_on=None."
        )
    settings = {"max_tokens": max_tokens, "strategy": strategy, "include_system": include_system,
                "allow_partial": False, "start_on": start_on}
    count = as_counter(token_counter)  # a clear error for a bad counter, before LangChain's
    kept = trim_messages(messages, token_counter=token_counter, **settings)
    explained = _explain(messages, max_tokens, count, strategy, include_system, start_on)
    kept_ids = {id(m) for m in kept}
    actual = [id(m) in kept_ids for m in messages]
    if actual != [k for k, _ in explained]:
        raise RuntimeError(
            "the rule walk disagrees with trim_messages: trim_messages kept "
            f"{[i for i, k in enumerate(actual) if k]}, the walk "
            f"{[i for i, (k, _) in enumerate(explained) if k]} (is the counter monotone?)"
        )
    originals = [m for m, is_kept in zip(messages, actual, strict=True) if is_kept]
    if any(str(k.content) != str(m.content) for k, m in zip(kept, originals, strict=True)):
        raise RuntimeError("a kept message was cut, which rule 3 forbids")
    tokens = count_each(messages, count)
    decisions = [TrimDecision(i, m.type, str(m.content), tokens[i], k, reason)
                 for i, (m, (k, reason)) in enumerate(zip(messages, explained, strict=True))]
    return TrimReport(messages, list(kept), decisions, max_tokens, count(list(kept)),
                      count(messages), settings, counter_name(token_counter))


def walk_back(messages: Sequence[BaseMessage], *, max_tokens: int, token_counter: Any,
              include_system: bool = True, start_on: str | None = "human") -> list[str]:
    """The walk back from the newest message, one line per step (rules 1, 2 and 4)."""
    messages = list(messages)
    count = as_counter(token_counter)
    lines = []
    budget, start = max_tokens, 0
    if include_system and messages and isinstance(messages[0], SystemMessage):
        sys_tokens = count([messages[0]])
        budget = max(0, max_tokens - sys_tokens)
        start = 1
        lines.append(f"system message: {sys_tokens} tokens, always kept; {max_tokens} - "
                     f"{sys_tokens} = {budget} tokens remain")
    tail: list[BaseMessage] = []
    for m in reversed(messages[start:]):
        total = count([m, *tail])
        label = f"{m.type} {str(m.content)[:30]!r}"
        if total > budget:
            lines.append(f"+ {label}: {count([m])} -> {total} > {budget}: stop (rule 1; rule 3 "
                         "forbids keeping a part of it)")
            break
        tail.insert(0, m)
        exact = " (fits exactly)" if total == budget else ""
        lines.append(f"+ {label}: {count([m])} -> {total} <= {budget}, fits{exact}")
    while tail and start_on is not None and tail[0].type != start_on:
        first = tail.pop(0)
        lines.append(f"- {first.type} {str(first.content)[:30]!r}: the kept history would start "
                     f"on {_turn_name(first)} turn whose question was dropped: drop it (rule 4)")
    kept = messages[:start] + tail
    lines.append(f"the model gets {len(kept)} messages and {count(kept)} tokens")
    return lines


# --- bug 2: what the fallback counts ----------------------------------------------------------

@dataclass
class CountRow:
    """One message counted two ways: LangChain's GPT-2 fallback and the model's tokenizer."""

    role: str
    content: str
    fallback_text: str
    gpt2_tokens: int
    model_tokens: int


def count_table(messages: Sequence[BaseMessage], gpt2_counter: Any,
                model_counter: ModelTokenCounter) -> list[CountRow]:
    """Per message: the string the fallback tokenizes, its GPT-2 count, the model's count."""
    gpt2 = count_each(messages, gpt2_counter)
    mine = count_each(messages, model_counter)
    return [CountRow(m.type, str(m.content), get_buffer_string([m]), g, k)
            for m, g, k in zip(messages, gpt2, mine, strict=True)]


def format_count_table(rows: Sequence[CountRow], width: int = 34) -> str:
    """A plain-text table of :func:`count_table` rows with totals."""
    lines = [f"{'role':>6}  {'what GPT-2 counts':<{width}} {'GPT-2':>5} {'model':>5}"]
    for r in rows:
        shown = repr(r.fallback_text)
        shown = shown if len(shown) <= width else shown[: width - 3] + "..."
        lines.append(f"{r.role:>6}  {shown:<{width}} {r.gpt2_tokens:>5} {r.model_tokens:>5}")
    lines.append(f"{'total':>6}  {'':<{width}} {sum(r.gpt2_tokens for r in rows):>5} "
                 f"{sum(r.model_tokens for r in rows):>5}")
    return "\n".join(lines)


# --- the trimming graph of the original, with and without the bugs ----------------------------

def make_trimmer(token_counter: Any, max_tokens: int = 45) -> Callable[[list[BaseMessage]],
                                                                        list[BaseMessage]]:
    """The original notebook's trimmer (``ORIGINAL_SETTINGS``) as a graph ``transform``."""
    settings = dict(ORIGINAL_SETTINGS, max_tokens=max_tokens)

    def trim(saved: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(saved, token_counter=token_counter, **settings)

    return trim


class FactsState(LanguageState):
    """The original state plus a fact field that trimming never touches."""

    user_name: NotRequired[str]


UNKNOWN_NAME = "not known yet"
FACTS_TEMPLATE = LANGUAGE_TEMPLATE + " The user's name is {user_name}."
_NAME = re.compile(r"\b(?:I'm|I am|my name is|call me)\s+([A-Z][a-z]+)", re.IGNORECASE)


def extract_user_name(text: str) -> str | None:
    """The user's name from ``I'm Bob`` / ``My name is Bob`` (a rule, not the model), or None."""
    found = _NAME.search(text or "")
    return found.group(1).capitalize() if found else None


class SummarizingTrimmer:
    """A transform: trim, then put a model-written summary of the dropped messages first.

    The summary is a system message ``Summary of the earlier conversation: ...`` written by
    ``chat_model`` (the same small model; what it writes is kept as it is). Summaries are cached
    by the ids of the dropped messages, so each new drop costs one generation.
    """

    PROMPT = ("Summarize the conversation below in one short sentence. Keep names and facts "
              "about the user.\n\n{transcript}")

    def __init__(self, chat_model: Any, token_counter: Any, max_tokens: int = 45) -> None:
        self.chat_model = chat_model
        self.trim = make_trimmer(token_counter, max_tokens)
        self.summaries: dict[tuple, str] = {}

    def __call__(self, saved: list[BaseMessage]) -> list[BaseMessage]:
        kept = self.trim(saved)
        kept_ids = {id(m) for m in kept}
        dropped = [m for m in saved if id(m) not in kept_ids]
        if not dropped:
            return kept
        key = tuple(m.id or str(m.content) for m in dropped)
        if key not in self.summaries:
            transcript = get_buffer_string(dropped)
            reply = self.chat_model.invoke([HumanMessage(self.PROMPT.format(
                transcript=transcript))])
            self.summaries[key] = " ".join(str(reply.content).split())
        note = SystemMessage(f"Summary of the earlier conversation: {self.summaries[key]}")
        return [note, *kept]


def build_trimming_graph(chat_model: Any, token_counter: Any, *, max_tokens: int | None = 45,
                         remedy: Literal["summary", "facts"] | None = None,
                         recorder: PromptRecorder | None = None, checkpointer: Any = None):
    """The original trimming graph: ``course.memory.chat_graph.build_chat_graph`` + the original trimmer.

    ``max_tokens=None`` means no trimming (the memory chapter's language graph). ``remedy``:
    ``"summary"`` adds a model-written summary of the dropped turns; ``"facts"`` adds the
    never-trimmed ``user_name`` field to the system instruction (pass it in the input, see
    :func:`run_turns`).
    """
    if remedy not in (None, "summary", "facts"):
        raise ValueError(f"remedy must be None, 'summary' or 'facts', got {remedy!r}")
    transform = None
    if max_tokens is not None:
        transform = (SummarizingTrimmer(chat_model, token_counter, max_tokens)
                     if remedy == "summary" else make_trimmer(token_counter, max_tokens))
    facts = remedy == "facts"
    return build_chat_graph(
        chat_model, system_template=FACTS_TEMPLATE if facts else LANGUAGE_TEMPLATE,
        state_schema=FactsState if facts else LanguageState, transform=transform,
        checkpointer=checkpointer, recorder=recorder,
    )


@dataclass
class TurnRecord:
    """One turn of a conversation: what the model received, and what was stored."""

    turn: int
    question: str
    received: list[tuple[str, str]]  # (type, content) of the messages the model got
    prompt_tokens: int
    name_in_prompt: bool
    reply: str
    reply_chars: int
    reply_model_tokens: int
    reply_gpt2_tokens: int

    @property
    def received_roles(self) -> list[str]:
        return [t for t, _ in self.received]

    def __repr__(self) -> str:
        return (f"turn {self.turn}: model got {len(self.received)} messages "
                f"{self.received_roles}, {self.prompt_tokens} tokens, name in prompt: "
                f"{'yes' if self.name_in_prompt else 'no'}; stored reply {self.reply_chars} "
                f"chars / {self.reply_model_tokens} model tokens / {self.reply_gpt2_tokens} "
                f"GPT-2 tokens")


def run_turns(app: Any, recorder: PromptRecorder, questions: Sequence[str], *, thread_id: str,
              language: str = "English", name: str = "Bob", facts: bool = False,
              gpt2_counter: Any, local: Any) -> list[TurnRecord]:
    """Ask ``questions`` one per turn on ``thread_id``; a :class:`TurnRecord` per turn.

    With ``facts=True`` the application writes the user's name (found by
    :func:`extract_user_name`) into the ``user_name`` state field whenever a message states it
    (``"not known yet"`` on turn 1 if it does not).
    """
    if not questions:
        raise ValueError("questions is empty: give the user's messages, one per turn")
    config = thread_config(thread_id)
    records = []
    for turn, question in enumerate(questions, start=1):
        payload: dict[str, Any] = {"messages": [HumanMessage(question)]}
        if turn == 1:
            payload["language"] = language
        found = extract_user_name(question)
        if facts and (found or turn == 1):
            payload["user_name"] = found or UNKNOWN_NAME
        out = app.invoke(payload, config)
        stored = out["messages"][-1]
        call = recorder.last
        records.append(TurnRecord(
            turn=turn, question=question,
            received=[(m.type, str(m.content)) for m in call.messages],
            prompt_tokens=local.count_tokens(call.prompt_text),
            name_in_prompt=name in call.prompt_text,
            reply=str(stored.content), reply_chars=len(str(stored.content)),
            reply_model_tokens=local.count_tokens(str(stored.content)),
            reply_gpt2_tokens=as_counter(gpt2_counter)([stored]),
        ))
    return records


def format_turns(records: Sequence[TurnRecord], width: int = 60) -> str:
    """Per turn: the messages the model received (content shortened) and the stored reply."""
    lines = []
    for r in records:
        lines.append(repr(r))
        for kind, content in r.received:
            text = " ".join(content.split())
            text = text if len(text) <= width else text[: width - 3] + "..."
            lines.append(f"    {kind:>6}: {text}")
    return "\n".join(lines)


def plot_reply_growth(runs: Mapping[str, Sequence[TurnRecord]]):
    """Stored assistant message length per turn (characters and model tokens), one line a run."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for label, records in runs.items():
        turns = [r.turn for r in records]
        axes[0].plot(turns, [r.reply_chars for r in records], marker="o", label=label)
        axes[1].plot(turns, [r.reply_model_tokens for r in records], marker="o", label=label)
    for ax, what in zip(axes, ("characters", "tokens (model tokenizer)"), strict=True):
        ax.set_xlabel("turn")
        ax.set_ylabel(what)
        ax.set_title(f"stored assistant message, {what.split()[0]}")
        ax.set_xticks(turns)
        ax.legend()
    fig.tight_layout()
    return fig


__all__ = [
    "ELEVEN",
    "FOUR_RULES",
    "ORIGINAL_SETTINGS",
    "WORKED_BUDGET",
    "WORKED_EXAMPLE",
    "CountRow",
    "FactsState",
    "ModelTokenCounter",
    "SummarizingTrimmer",
    "ToyCounter",
    "TrimDecision",
    "TrimReport",
    "TurnRecord",
    "as_counter",
    "build_trimming_graph",
    "count_each",
    "count_table",
    "counter_name",
    "eleven_messages",
    "extract_user_name",
    "format_count_table",
    "format_turns",
    "make_messages",
    "make_trimmer",
    "parse_conversation",
    "plot_reply_growth",
    "run_turns",
    "trim_and_explain",
    "walk_back",
    "worked_example_counter",
    "worked_example_messages",
]
