"""Chapter 05's graded checks reject wrong answers: each check cell (hidden tests included, as the
instructor wrote it) runs against constant, half-right and rule-breaking answers, and against the
instructor's own solution, without executing the rest of the notebook. The notebook's objects
the checks read (``app``, ``sql_app``, ``effect`` ...) are rebuilt here with a scripted model
(and the bundled model for the probability exercise)."""

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from course.checkpoints import sqlite_checkpointer, thread_config
from course.checks import check
from course.memory.chat_graph import (
    PromptRecorder,
    build_chat_graph,
    checkpoint_history,
    saved_messages,
)
from course.memory.stateless import history_effect, next_token_probability
from course.memory.store import ScriptedEcho
from nbharness import Exercises

EXERCISES = Exercises("05_memory.ipynb")


def _make_base(folder: Path) -> dict:
    recorder = PromptRecorder()
    app = build_chat_graph(ScriptedEcho(), recorder=recorder)
    for text in ("Hi! I'm Bob", "What's my name?"):
        app.invoke({"messages": [HumanMessage(text)]}, thread_config("abc123"))
    app.invoke({"messages": [HumanMessage("What's my name?")]}, thread_config("xyz789"))
    db = folder / "conversations.sqlite"
    sql_app = build_chat_graph(ScriptedEcho(), checkpointer=sqlite_checkpointer(db),
                               recorder=recorder)
    for tid, turns in {"sqlite-bob": ["Hi! I'm Bob", "What's my name?"],
                       "alice": ["Hi! I'm Alice.", "What's my name?"],
                       "carol": ["Hi! I'm Carol.", "What's my name?"]}.items():
        for text in turns:
            sql_app.invoke({"messages": [HumanMessage(text)]}, thread_config(tid))
    return {"check": check, "HumanMessage": HumanMessage, "AIMessage": AIMessage,
            "thread_config": thread_config, "build_chat_graph": build_chat_graph,
            "checkpoint_history": checkpoint_history, "saved_messages": saved_messages,
            "recorder": recorder, "app": app, "sql_app": sql_app}


@pytest.fixture
def base(tmp_path):
    """Fresh apps per test: a wrong answer may write to them."""
    return _make_base(tmp_path)


@pytest.fixture(scope="module")
def probe_namespace(tmp_path_factory):
    from course.models import probe_model

    base = _make_base(tmp_path_factory.mktemp("ex2"))
    probe = probe_model()
    alone = [HumanMessage("What's my name?")]
    published = [HumanMessage("Hi! I'm Bob"), AIMessage("Hello Bob! How can I assist you today?"),
                 HumanMessage("What's my name?")]
    effect = history_effect(probe, {"question alone": alone,
                                    "after the published greeting": published})
    return {**base, "probe": probe, "alone": alone, "published_history": published,
            "effect": effect, "next_token_probability": next_token_probability}


def _rejects(number, namespace, answer, label=""):
    verdict = EXERCISES.grade(number, namespace, answer, label=label)
    assert verdict.rejected, verdict


def _passes(number, namespace):
    verdict = EXERCISES.grade(number, namespace)
    assert verdict.passed, verdict


# --- exercise 1: a reducer -----------------------------------------------------------------

def _append_all(saved, new):
    return list(saved or []) + list(new or [])


def _overwrite(saved, new):
    return list(new or [])


def _sorted_set(saved, new):
    return sorted(set(saved or []) | set(new or []))


def _constant(saved, new):
    return ["bread", "pasta", "soup"]


@pytest.mark.parametrize("wrong", [_append_all, _overwrite, _sorted_set, _constant])
def test_exercise1_rejects(base, wrong):
    _rejects(1, base, wrong)


def test_exercise1_accepts_the_solution(base):
    _passes(1, base)


# --- exercise 2: build the memory graph (state schema, reducers, checkpointer) -------------

EX2 = EXERCISES.cells["ex2-solution"]
EX2_WRONG = {
    "stores the prompt too": EX2.replace(
        'return {"messages": [chat_model.invoke([system, *state["messages"]])]}',
        'return {"messages": [system, chat_model.invoke([system, *state["messages"]])]}'),
    "no reducer on topics": EX2.replace("topics: Annotated[list[str], add_unique]",
                                        "topics: list[str]"),
    "no reducer on messages": EX2.replace("messages: Annotated[list[AnyMessage], add_messages]",
                                          "messages: list[AnyMessage]"),
    "its own checkpointer": EX2.replace(
        "return builder.compile(checkpointer=checkpointer)",
        "from langgraph.checkpoint.memory import MemorySaver\n"
        "    return builder.compile(checkpointer=MemorySaver())"),
    "only the newest message": EX2.replace('[system, *state["messages"]]',
                                           'state["messages"][-1:]'),
    "no system message": EX2.replace('[system, *state["messages"]]', 'state["messages"]'),
    "topics not in the prompt": EX2.replace(
        "f\"Topics so far: {', '.join(state.get('topics', []))}.\"", '"Topics so far: ."'),
}


@pytest.mark.parametrize("label", sorted(EX2_WRONG))
def test_exercise2_rejects(base, label):
    answer = EX2_WRONG[label]
    assert answer != EX2, f"the wrong answer {label!r} did not change the solution"
    verdict = EXERCISES.grade(2, base, answer, before=("ex1-solution",), label=label)
    assert verdict.rejected, verdict


def test_exercise2_accepts_the_solution(base):
    verdict = EXERCISES.grade(2, base, before=("ex1-solution",))
    assert verdict.passed, verdict


# --- exercise 3: history gain (the bundled model's logits) --------------------------------

def test_exercise3_rejects_and_accepts(probe_namespace):
    ns = probe_namespace
    expected = ns["effect"].gain("after the published greeting")
    wrong = {
        "constant": lambda messages, prefix="Your name is", target=" Bob": expected,
        "inverted": lambda messages, prefix="Your name is", target=" Bob": (
            next_token_probability(ns["probe"], messages[-1:], prefix, target).probability
            / next_token_probability(ns["probe"], messages, prefix, target).probability),
        "ignores target": lambda messages, prefix="Your name is", target=" Bob": (
            next_token_probability(ns["probe"], messages, prefix, " Bob").probability
            / next_token_probability(ns["probe"], messages[-1:], prefix, " Bob").probability),
    }
    for name, answer in wrong.items():
        _rejects(3, ns, answer, name)
    _passes(3, ns)


# --- exercise 4: read a thread back --------------------------------------------------------

def _any_message(app, thread_ids, text):
    return [t for t in thread_ids
            if any(text in m.content for m in saved_messages(app, t))]


def _sorted_ids(app, thread_ids, text):
    return sorted(t for t in thread_ids
                  if any(m.type == "human" and text in m.content for m in saved_messages(app, t)))


def _asks_the_model(app, thread_ids, text):
    found = []
    for t in thread_ids:
        out = app.invoke({"messages": [HumanMessage(f"Did I say {text}?")]}, thread_config(t))
        if any(m.type == "human" and text in m.content for m in out["messages"][:-2]):
            found.append(t)
    return found


@pytest.mark.parametrize("wrong", [
    _any_message, _sorted_ids, _asks_the_model,
    lambda app, ids, text: ["alice"],
    lambda app, ids, text: [t for t in ids if text.lower() in t],
])
def test_exercise4_rejects(base, wrong):
    _rejects(4, base, wrong)


def test_exercise4_accepts_the_solution(base):
    _passes(4, base)


# --- exercise 5: correct a message with update_state --------------------------------------

def _appends(app, thread_id, old, new):
    return app.update_state(thread_config(thread_id), {"messages": [HumanMessage(new)]})


def _no_update(app, thread_id, old, new):
    return app.get_state(thread_config(thread_id)).config


def _any_type(app, thread_id, old, new):
    for m in app.get_state(thread_config(thread_id)).values["messages"]:
        if old in m.content:
            return app.update_state(thread_config(thread_id),
                                    {"messages": [HumanMessage(new, id=m.id)]})
    raise ValueError(old)


def _first_message_always(app, thread_id, old, new):
    first = app.get_state(thread_config(thread_id)).values["messages"][0]
    return app.update_state(thread_config(thread_id), {"messages": [HumanMessage(new, id=first.id)]})


@pytest.mark.parametrize("wrong", [_appends, _no_update, _any_type, _first_message_always])
def test_exercise5_rejects(base, wrong):
    _rejects(5, base, wrong)


def test_exercise5_accepts_the_solution(base):
    _passes(5, base)
