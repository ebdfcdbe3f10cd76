"""Two remedies for what trimming forgets, and deleting from state for good.

- **A fact field** (:func:`build_facts_graph`): ``user_name`` in the graph's state, filled by
  the application with a plain rule (:func:`extract_user_name`, not the model) and placed in the
  system instruction; trimming only touches the messages, so the field is never trimmed.
- **A summary in the checkpointed state** (:func:`build_summary_graph`): a ``summarize`` node
  folds the turns the budget no longer holds into a model-written ``summary`` field of the
  state; the ``model`` node puts the summary into the system message and trims AFTER the
  template with ``include_system=True``, so the summary is kept and counted in the budget
  (rule 2). With ``delete=True`` the summarised messages are removed from the state for good
  with ``RemoveMessage``; without it they stay saved and are only left out of the prompt.

Not handled: summaries that must fit a budget by themselves (the summary's length is bounded
only by the summarising model's ``max_new_tokens``), several facts, names the rule does not
recognise, and checking that a summary is faithful (a small model may drop the name: the
chapter shows what it wrote).
"""

from __future__ import annotations

import re
from typing import Any, NotRequired

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    get_buffer_string,
    trim_messages,
)
from langgraph.graph import START, StateGraph

from course.memory.chat_graph import (
    LANGUAGE_TEMPLATE,
    LanguageState,
    PromptRecorder,
    invoke_and_record,
)
from course.trimming.examples import ORIGINAL_BUDGET, ORIGINAL_SETTINGS
from course.trimming.graph import build_trimming_graph
from course.trimming.rules import check_budget

__all__ = [
    "build_facts_graph",
    "build_summary_graph",
    "extract_user_name",
    "facts_input",
]

UNKNOWN_NAME = "not known yet"
FACTS_TEMPLATE = LANGUAGE_TEMPLATE + " The user's name is {user_name}."
_NAME = re.compile(r"\b(?:I'm|I am|my name is|call me)\s+([A-Z][a-z]+)", re.IGNORECASE)


class FactsState(LanguageState):
    """The original state plus a fact field that trimming never touches."""

    user_name: NotRequired[str]


def extract_user_name(text: str) -> str | None:
    """The user's name from ``I'm Bob`` / ``My name is Bob`` (a rule, not the model), or None."""
    found = _NAME.search(text or "")
    return found.group(1).capitalize() if found else None


def facts_input(turn: int, question: str) -> dict:
    """The ``user_name`` to pass with a turn: the name found in it, or "not known yet" on turn 1."""
    found = extract_user_name(question)
    return {"user_name": found or UNKNOWN_NAME} if (found or turn == 1) else {}


def build_facts_graph(chat_model: Any, token_counter: Any, *, max_tokens: int = ORIGINAL_BUDGET,
                      recorder: PromptRecorder | None = None, checkpointer: Any = None):
    """The trimming graph with ``user_name`` in state and in the system instruction."""
    return build_trimming_graph(chat_model, token_counter, max_tokens=max_tokens,
                                system_template=FACTS_TEMPLATE, state_schema=FactsState,
                                recorder=recorder, checkpointer=checkpointer)


class SummaryState(LanguageState):
    """The language state plus the running summary and how many saved messages it covers."""

    summary: NotRequired[str]
    summarized: NotRequired[int]


SUMMARY_PROMPT = ("Summarize the conversation below in one short sentence. Keep names and facts "
                  "about the user.\n\n{previous}{transcript}")


def _system(state: SummaryState, summary: str) -> SystemMessage:
    text = LANGUAGE_TEMPLATE.format(language=state.get("language") or "English")
    if summary:
        text += f" Summary of the earlier conversation: {summary}"
    return SystemMessage(text)


def build_summary_graph(chat_model: Any, token_counter: Any, *, max_tokens: int,
                        delete: bool = False, summary_model: Any = None,
                        recorder: PromptRecorder | None = None, checkpointer: Any = None,
                        max_rounds: int = 3):
    """START -> ``summarize`` -> ``model``: the summary lives in the checkpointed state.

    ``summarize`` computes the prompt the budget allows (system message WITH the current
    summary, then the newest saved messages, trimmed with the original settings and
    ``include_system=True``); the saved messages that no longer fit and are not yet summarised
    are folded into ``summary`` by ``summary_model`` (default: ``chat_model``), repeated up to
    ``max_rounds`` times while a longer summary pushes more out. ``delete=True`` also removes
    them from the state with ``RemoveMessage``.
    """
    if chat_model is None or not hasattr(chat_model, "invoke"):
        raise TypeError("chat_model must be a LangChain chat model; pass course.models.chat_model()")
    check_budget(max_tokens, at_least=1)
    writer = summary_model if summary_model is not None else chat_model
    settings = dict(ORIGINAL_SETTINGS, max_tokens=max_tokens)

    def fit(state: SummaryState, summary: str, start: int) -> list[BaseMessage]:
        unsummarized = list(state.get("messages", []))[start:]
        return trim_messages([_system(state, summary), *unsummarized],
                             token_counter=token_counter, **settings)

    def summarize(state: SummaryState) -> dict:
        saved = list(state.get("messages", []))
        summary, start = state.get("summary", ""), state.get("summarized", 0)
        for _ in range(max_rounds):
            kept = fit(state, summary, start)
            end = min(len(saved) - (len(kept) - 1), len(saved) - 1)  # never the new question
            if end <= start:
                break
            previous = f"Earlier summary: {summary}\n\n" if summary else ""
            reply = writer.invoke([HumanMessage(SUMMARY_PROMPT.format(
                previous=previous, transcript=get_buffer_string(saved[start:end])))])
            summary, start = " ".join(str(reply.content).split()), end
        update: dict[str, Any] = {"summary": summary}
        if delete:
            # (add_messages gave every saved message an id)
            update["messages"] = [RemoveMessage(id=m.id) for m in saved[:start] if m.id is not None]
            update["summarized"] = 0
        else:
            update["summarized"] = start
        return update

    def call_model(state: SummaryState) -> dict:
        prompt = fit(state, state.get("summary", ""), state.get("summarized", 0))
        return {"messages": [invoke_and_record(chat_model, prompt, recorder)]}

    builder = StateGraph(SummaryState)
    builder.add_node("summarize", summarize)
    builder.add_node("model", call_model)
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "model")
    if checkpointer is None:
        from langgraph.checkpoint.memory import MemorySaver

        checkpointer = MemorySaver()
    return builder.compile(checkpointer=checkpointer)

