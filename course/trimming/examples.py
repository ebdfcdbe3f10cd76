"""The chapter's message lists: the note's worked example, the original 11 messages, your own.

The worked example carries the note's toy token counts (the texts of user 1 and user 4 are the
note's, the others are reconstructed: only their counts matter). The 11 messages and the
trimmer settings are the original notebook's. :func:`make_messages` and
:func:`parse_conversation` turn ``(role, text)`` pairs or typed ``role: text`` lines into
LangChain messages with ids.

Not handled here: tool messages, multimodal content, message names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

__all__ = [
    "ELEVEN",
    "ORIGINAL_BUDGET",
    "ORIGINAL_SETTINGS",
    "QUESTIONS",
    "WORKED_BUDGET",
    "WORKED_EXAMPLE",
    "eleven_messages",
    "make_messages",
    "parse_conversation",
    "worked_example_messages",
]

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
ORIGINAL_BUDGET = 45
ORIGINAL_SETTINGS: dict[str, Any] = {
    "max_tokens": ORIGINAL_BUDGET, "strategy": "last", "include_system": True,
    "allow_partial": False, "start_on": "human",
}

#: The four user turns the chapter's graphs are run on (the name is stated on turn 1 only).
QUESTIONS = ("Hi! I'm Bob.", "What's my name?", "I like vanilla ice cream.", "What's my name?")

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
