"""The four trimming rules, walked by hand beside LangChain's ``trim_messages``.

:func:`keep_newest` is rules 1 and 3 as chapter 05 writes them in a cell (the same definition,
saved here): walk back from the newest message, and stop at the first one that does not fit
whole. The chapter's second exercise adds rules 2 and 4 to it. The kept set a
:class:`TrimReport` shows always comes from ``trim_messages`` itself; :func:`trim_and_explain`
explains it from :func:`keep_newest` plus rules 2 and 4 (:func:`_walk`): a reason per message
(:class:`TrimDecision`) and the step-by-step walk back (:class:`WalkStep`, the lines of
:meth:`TrimReport.walk_lines`). If the explanation and ``trim_messages`` ever disagree it raises
instead of showing a wrong explanation. :class:`KeptSets` puts kept sets side by side (one rule
switched off, then on). :func:`without_trim_messages` lets the exercise's check run a student's
trimmer with ``trim_messages`` out of reach. The rules:

1. keep the newest messages (walk back from the newest one);
2. always keep the system instruction and count it in the budget (``include_system=True``);
3. never cut a message (``allow_partial=False``);
4. start the kept history on a user turn (``start_on="human"``).

Not handled: ``allow_partial=True`` (rule 3 forbids it), ``end_on``, tool messages, and
counters that are not monotone (more messages must never count fewer tokens).
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal
from unittest.mock import patch

from langchain_core.messages import BaseMessage, trim_messages

from course.records import Record
from course.trimming.counters import TokenCounter, as_counter, count_each, counter_name

__all__ = [
    "REASON_FITS",
    "REASON_SYSTEM",
    "Contents",
    "KeptSets",
    "TrimDecision",
    "TrimReport",
    "WalkStep",
    "check_budget",
    "keep_newest",
    "refused_options",
    "trim_and_explain",
    "without_trim_messages",
]

REASON_SYSTEM = "system kept (rule 2: always kept, counted in the budget)"
REASON_FITS = "kept: fits the budget"
REASON_OVER = "over budget"
REASON_OLDER = "over budget (older than a message that did not fit; rule 1)"
REASON_LATER = "over budget (newer than a message that did not fit)"


def _turn_name(message: BaseMessage) -> str:
    return {"ai": "an assistant", "system": "a system", "human": "a user"}.get(
        message.type, f"a {message.type}")


def _label(message: BaseMessage) -> str:
    return f"{message.type} {str(message.content)[:30]!r}"


@dataclass(frozen=True)
class TrimDecision:
    """What happened to one message: kept or dropped, and the reason (one of the rules)."""

    index: int
    role: str
    content: str
    tokens: int
    kept: bool
    reason: str

    def __str__(self) -> str:
        return f"#{self.index} {self.role}: {self.tokens} tokens, " \
               f"{'kept' if self.kept else 'dropped'}: {self.reason}"


@dataclass(frozen=True)
class WalkStep:
    """One step of the walk: the system message, a message added (fits or stops), or a rule-4
    drop. ``total`` is the tokens of the kept tail with this message; ``budget`` what is left."""

    kind: Literal["system", "fits", "stop", "rule4", "end"]
    index: int | None
    tokens: int
    total: int
    budget: int
    text: str

    def __str__(self) -> str:
        return self.text


def keep_newest(messages, max_tokens, count):
    """Rules 1 and 3: the newest messages that fit the budget whole, oldest first.

    ``messages`` are LangChain messages, ``count(messages) -> tokens`` a monotone counter."""
    kept = []
    for message in reversed(messages):             # rule 1: walk back from the newest
        if count([message, *kept]) > max_tokens:   # rule 3: it fits whole,
            break                                  # or the walk stops here
        kept.insert(0, message)
    return kept


def _walk(messages: list[BaseMessage], max_tokens: int, count: TokenCounter, strategy: str,
          include_system: bool, start_on: str | None
          ) -> tuple[list[tuple[bool, str]], list[WalkStep]]:
    """(kept, reason) per message and the steps of the walk, from ONE pass over the rules."""
    n = len(messages)
    verdict: list[tuple[bool, str]] = [(False, REASON_LATER)] * n
    steps: list[WalkStep] = []
    if strategy == "first":
        used: list[BaseMessage] = []
        for i, m in enumerate(messages):
            total = count([*used, m])
            if total > max_tokens:
                verdict[i] = (False, f"{REASON_OVER}: would make {total} > {max_tokens}")
                steps.append(WalkStep("stop", i, count([m]), total, max_tokens,
                                      f"+ {_label(m)}: {count([m])} -> {total} > {max_tokens}: "
                                      "stop (rule 3 forbids keeping a part of it)"))
                break
            used.append(m)
            verdict[i] = (True, REASON_FITS)
            steps.append(WalkStep("fits", i, count([m]), total, max_tokens,
                                  f"+ {_label(m)}: {count([m])} -> {total} <= {max_tokens}, fits"))
        kept = used
    else:
        # Rule 2 sets the system message aside and takes its tokens out of the budget; the
        # walk of keep_newest (rules 1 and 3) gives the tail that fitted, so where it stopped;
        # rule 4 then drops from the tail's front until it starts on a user turn.
        with_system = include_system and bool(messages) and messages[0].type == "system"
        start = 1 if with_system else 0
        budget = max(0, max_tokens - count([messages[0]])) if with_system else max_tokens
        fitted = list(range(n - len(keep_newest(messages[start:], budget, count)), n))
        tail = list(fitted)
        while tail and start_on and messages[tail[0]].type != start_on:
            tail.pop(0)
        if with_system:
            sys_tokens = count([messages[0]])
            verdict[0] = (True, REASON_SYSTEM)
            steps.append(WalkStep("system", 0, sys_tokens, sys_tokens, budget,
                                  f"system message: {sys_tokens} tokens, always kept; "
                                  f"{max_tokens} - {sys_tokens} = {budget} tokens remain"))
        for k, i in enumerate(reversed(fitted)):
            m = messages[i]
            total = count([messages[j] for j in fitted[len(fitted) - 1 - k:]])
            exact = " (fits exactly)" if total == budget else ""
            steps.append(WalkStep("fits", i, count([m]), total, budget,
                                  f"+ {_label(m)}: {count([m])} -> {total} <= {budget}, "
                                  f"fits{exact}"))
        stop = (fitted[0] if fitted else n) - 1
        if stop >= start:
            m = messages[stop]
            total = count([messages[j] for j in [stop, *fitted]])
            left = " left after the system message" if start else ""
            verdict[stop] = (False, f"{REASON_OVER}: would make {total} > {budget}{left}")
            for j in range(start, stop):
                verdict[j] = (False, REASON_OLDER)
            steps.append(WalkStep("stop", stop, count([m]), total, budget,
                                  f"+ {_label(m)}: {count([m])} -> {total} > {budget}: stop "
                                  "(rule 1; rule 3 forbids keeping a part of it)"))
        for first in fitted[:len(fitted) - len(tail)]:  # rule 4, oldest first
            m = messages[first]
            rest = fitted[fitted.index(first) + 1:]
            verdict[first] = (False, f"would start on {_turn_name(m)} turn "
                                     f"(rule 4, start_on={start_on!r})")
            steps.append(WalkStep("rule4", first, count([m]), count([messages[j] for j in rest]),
                                  budget, f"- {_label(m)}: the kept history would start on "
                                  f"{_turn_name(m)} turn whose question was dropped: drop it "
                                  "(rule 4)"))
        for i in tail:
            verdict[i] = (True, REASON_FITS)
        kept = messages[:start] + [messages[i] for i in tail]
    total = count(kept)
    steps.append(WalkStep("end", None, 0, total, max_tokens,
                          f"the model gets {len(kept)} messages and {total} tokens"))
    return verdict, steps


@dataclass
class TrimReport(Record):
    """``trim_messages``' result beside the per-message explanation and the walk's steps.

    Displayed, it shows a table (one row per message, kept or dropped, and why); its values
    (:meth:`record`) are the kept indices and contents, the token totals, each decision and
    each step of the walk."""

    messages: list[BaseMessage]
    kept: list[BaseMessage]
    decisions: list[TrimDecision]
    steps: list[WalkStep]
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

    def walk_lines(self) -> list[str]:
        """The walk back from the newest message, one line per step (rules 1, 2 and 4)."""
        return [s.text for s in self.steps]

    def record(self) -> dict[str, Any]:
        return {"kept": self.kept_indices, "kept_contents": self.kept_contents,
                "kept_tokens": self.kept_tokens, "total_tokens": self.total_tokens,
                "max_tokens": self.max_tokens, "counter": self.counter,
                "settings": dict(self.settings),
                "decisions": [asdict(d) for d in self.decisions],
                "steps": [asdict(s) for s in self.steps]}

    def summary(self) -> str:
        return (f"kept {len(self.kept)} of {len(self.messages)} messages, {self.kept_tokens} "
                f"tokens of a budget of {self.max_tokens} (all: {self.total_tokens}; "
                f"counter: {self.counter})")

    def __str__(self) -> str:
        lines = []
        for d in self.decisions:
            text = " ".join(d.content.split())
            text = text if len(text) <= 60 else text[:57] + "..."
            lines.append(f"#{d.index} {d.role} ({d.tokens} tokens) "
                         f"{'kept' if d.kept else 'dropped'}: {d.reason}; {text!r}")
        lines.append(self.summary())
        return "\n".join(lines)

    __repr__ = __str__

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


@dataclass
class Contents(Record):
    """The contents of some messages, shown as the list of strings they are (``['Any plans?',
    ...]``); its value: ``{"contents": [...]}``."""

    contents: list[str]

    def __str__(self) -> str:
        return repr(self.contents)

    __repr__ = __str__


@dataclass
class KeptSets(Record):
    """Kept sets side by side: for each label (a setting), the contents kept and their tokens."""

    kept: dict[str, list[str]]
    tokens: dict[str, int]

    @classmethod
    def of(cls, labelled: Mapping[str, Sequence[BaseMessage]],
           count: Any | Mapping[str, Any]) -> KeptSets:
        """Each label's kept messages, counted by ``count`` (or by ``count[label]``)."""
        def counter(label: str) -> TokenCounter:
            return as_counter(count[label] if isinstance(count, Mapping) else count)

        return cls({label: [str(m.content) for m in kept] for label, kept in labelled.items()},
                   {label: counter(label)(list(kept)) for label, kept in labelled.items()})

    def __str__(self) -> str:
        width = max(map(len, self.kept), default=0)
        return "\n".join(f"{label:<{width}}  kept {contents} ({self.tokens[label]} tokens)"
                         for label, contents in self.kept.items())

    __repr__ = __str__


@contextlib.contextmanager
def without_trim_messages(namespace: dict[str, Any]) -> Iterator[None]:
    """While inside, ``trim_messages`` (under any name in ``namespace`` and in LangChain) and
    :func:`trim_and_explain` raise ``AssertionError``: a check runs a student's trimmer in it to
    see that the student's own rules did the trimming."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("your trimmer called trim_messages (or trim_and_explain): write "
                             "the rules yourself; keep_newest from the lesson may help")

    from langchain_core.messages import utils

    real = (trim_messages, trim_and_explain)
    shadowed = {name: value for name, value in list(namespace.items())
                if any(value is r for r in real)}
    namespace.update(dict.fromkeys(shadowed, refuse))
    try:
        with patch.object(utils, "trim_messages", refuse), \
                patch("langchain_core.messages.trim_messages", refuse), \
                patch(f"{__name__}.trim_and_explain", refuse):
            yield
    finally:  # only the names shadowed here: what the check assigned inside stays
        namespace.update(shadowed)


def check_budget(max_tokens: Any, *, at_least: int = 0) -> int:
    """``max_tokens`` if it is a whole number ``>= at_least``, else a ``ValueError`` saying so."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < at_least:
        raise ValueError(f"max_tokens must be a whole number >= {at_least}, got {max_tokens!r}")
    return max_tokens


def refused_options(strategy: str) -> tuple[str, ...]:
    """The options ``trim_messages`` refuses with ``strategy``: ``include_system`` and
    ``start_on`` (rules 2 and 4) apply to ``"last"`` only. :func:`trim_and_explain` raises when
    one of them is set; the explorer switches their controls off."""
    return ("include_system", "start_on") if strategy == "first" else ()


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
    check_budget(max_tokens)
    if strategy not in ("last", "first"):
        raise ValueError(f"strategy must be 'last' or 'first', got {strategy!r}")
    given = {"include_system": include_system, "start_on": start_on}
    if any(given[option] for option in refused_options(strategy)):
        raise ValueError(
            "include_system and start_on only apply to strategy='last' (trim_messages refuses "
            "them with 'first'). Fix: set include_system=False and start_on=None."
        )
    settings = {"max_tokens": max_tokens, "strategy": strategy, "include_system": include_system,
                "allow_partial": False, "start_on": start_on}
    count = as_counter(token_counter)  # a clear error for a bad counter, before LangChain's
    kept = trim_messages(messages, token_counter=token_counter, max_tokens=max_tokens,
                         strategy=strategy, include_system=include_system, allow_partial=False,
                         start_on=start_on)  # the settings above
    explained, steps = _walk(messages, max_tokens, count, strategy, include_system, start_on)
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
    return TrimReport(messages, list(kept), decisions, steps, max_tokens, count(list(kept)),
                      count(messages), settings, counter_name(token_counter))
