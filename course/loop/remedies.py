"""The remedies of the failure table, as chapter 03 writes them in its cells.

Each function is the few lines of one row's "what helps" (note 000):

- fabricated results: :func:`ungrounded_numbers` (only observations the runtime inserted count);
- error accumulation: :func:`agrees` (a verification step against a second source);
- cost: :func:`keep_recent` (compact state: the model re-reads only the latest steps);
- silent side effects: :func:`dry_run` (say what a write would do, do nothing) and
  :func:`with_approval` (a write runs only after a person says yes).

Wrong tool or arguments, looping and prompt injection are answered by what earlier cells built:
the single door's schema check and allowlist (:mod:`course.tools.registry`) and the stop rules
(:func:`course.loop.agent_loop.run_loop`). :mod:`course.loop.failures` runs each row on a
scripted model that makes the mistake.

Not handled: how often a real model makes these mistakes; a person's approval that waits for a
click (chapter 06 pauses the run for it); undoing a write that already happened.
"""

from __future__ import annotations

import functools
import re

__all__ = ["agrees", "dry_run", "keep_recent", "ungrounded_numbers", "with_approval"]

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def ungrounded_numbers(run):
    """Numbers in the final answer that no observation inserted by the runtime contains."""
    observed = " ".join(m["content"] for m in run.messages
                        if m["role"] == "tool" and m.get("origin") == "runtime")
    return [n for n in NUMBER.findall(run.final_answer or "")
            if n not in NUMBER.findall(observed)]


def agrees(value, reference, tolerance=0.01):
    """A verification step: does a second source give the same number, within ``tolerance``?"""
    return abs(value - reference) <= tolerance * abs(reference)


def keep_recent(messages, keep_steps=1):
    """Compact state: the system prompt, the task, a note, and only the last ``keep_steps`` steps."""
    head, body = messages[:2], messages[2:]
    keep = body[len(body) - 2 * keep_steps:] if keep_steps else []
    dropped = (len(body) - len(keep)) // 2
    if dropped <= 0:
        return list(messages)
    note = {"role": "user", "content": f"({dropped} earlier step(s) left out to save tokens)"}
    return [*head, note, *keep]


def dry_run(write, would_write):
    """Dry-run mode for a write tool: record what it would do, change nothing."""
    @functools.wraps(write)
    def planned(**arguments):
        would_write.append(f"{write.__name__}({arguments})")
        return f"DRY RUN: {write.__name__} was not executed; nothing was written"
    return planned


def with_approval(write, approve):
    """Confirmation: the write runs only if ``approve(name, arguments)`` says yes."""
    @functools.wraps(write)
    def gated(**arguments):
        if not approve(write.__name__, arguments):
            return f"not executed: {write.__name__}({arguments}) was not approved"
        return write(**arguments)
    return gated
