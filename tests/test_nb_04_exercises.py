"""Chapter 04's graded checks reject wrong answers: each check cell (hidden tests included, as the
instructor wrote it) runs against constant, half-right and rule-breaking answers, and against the
instructor's own solution, without executing the rest of the notebook. The notebook's objects the
checks read are rebuilt here with a scripted model."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from course.checkpoints import thread_config
from course.checks import check
from course.memory.chat_graph import (
    LANGUAGE_TEMPLATE,
    build_chat_graph,
    checkpoint_history,
    saved_messages,
)
from nbharness import Exercises

EXERCISES = Exercises("04_memory.ipynb")


@pytest.fixture
def base():
    """What the lesson defines before the exercises, fresh per test."""
    return {"check": check, "HumanMessage": HumanMessage, "AIMessage": AIMessage,
            "thread_config": thread_config, "build_chat_graph": build_chat_graph,
            "checkpoint_history": checkpoint_history, "saved_messages": saved_messages,
            "LANGUAGE_TEMPLATE": LANGUAGE_TEMPLATE}


def _rejects(number, namespace, answer, label=""):
    verdict = EXERCISES.grade(number, namespace, answer, label=label)
    assert verdict.rejected, verdict


def _passes(number, namespace):
    verdict = EXERCISES.grade(number, namespace)
    assert verdict.passed, verdict


def _stub(number):
    """The released stub: the solution region replaced as nbgrader does."""
    source = EXERCISES.cells[f"ex{number}-solution"]
    begin, end = source.index("    ### BEGIN SOLUTION"), source.index("### END SOLUTION")
    return source[:begin] + "    raise NotImplementedError()" + source[end + len("### END SOLUTION"):]


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_the_untouched_stub_is_not_yet_done(base, number):
    before = ("ex1-solution",) if number == 2 else ()
    verdict = EXERCISES.grade(number, base, _stub(number), before=before, label="the stub")
    assert verdict.outcome == "not yet done", verdict


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


# --- exercise 3: a memory runtime by hand -----------------------------------------------

EX3 = EXERCISES.cells["ex3-solution"]
EX3_WRONG = {
    "overwrites the messages": EX3.replace(
        'state["messages"] = [*state["messages"], *value]', 'state["messages"] = list(value)'),
    "stores the system message": EX3.replace(
        'state["messages"] = [*state["messages"], reply]',
        'state["messages"] = [*state["messages"], system, reply]'),
    "only the newest message": EX3.replace('chat_model.invoke([system, *state["messages"]])',
                                           'chat_model.invoke([system, *state["messages"][-1:]])'),
    "system message last": EX3.replace('chat_model.invoke([system, *state["messages"]])',
                                       'chat_model.invoke([*state["messages"], system])'),
    "one state for every thread": EX3.replace(
        'store.get(thread_id, {"messages": []})', 'store.get("all", {"messages": []})').replace(
        "store[thread_id] = state", 'store[thread_id] = store["all"] = state'),
    "language not kept": EX3.replace(
        'state = dict(store.get(thread_id, {"messages": []}))',
        'state = {"messages": store.get(thread_id, {"messages": []})["messages"], '
        '"language": "English"}'),
    "language never overwritten": EX3.replace(
        "            state[name] = value", "            state.setdefault(name, value)"),
}


# --- exercise 4: the chat template by hand ---------------------------------------------------

EX4 = EXERCISES.cells["ex4-solution"]
EX4_WRONG = {
    "no default system message": EX4.replace(
        '    if not messages or messages[0].type != "system":\n'
        '        messages = [SystemMessage("You are a helpful assistant."), *messages]\n', ""),
    "always the default system message": EX4.replace(
        'if not messages or messages[0].type != "system":', "if True:"),
    "no generation prompt": EX4.replace('return turns + "<|im_start|>assistant\\n"', "return turns"),
    "LangChain's type names as roles": EX4.replace("{ROLES[m.type]}", "{m.type}"),
    "no newline after the end marker": EX4.replace("<|im_end|>\\n", "<|im_end|>"),
}


# --- exercises 2-4: whole solution cells, each with one rule broken ---------------------------

WRONG_CELLS = {2: (EX2, EX2_WRONG), 3: (EX3, EX3_WRONG), 4: (EX4, EX4_WRONG)}
BEFORE = {2: ("ex1-solution",)}  # exercise 2's state uses exercise 1's reducer


@pytest.mark.parametrize("number,label", [(n, label) for n, (_, wrong) in WRONG_CELLS.items()
                                          for label in sorted(wrong)])
def test_exercises_2_to_4_reject_a_broken_rule(base, number, label):
    solution, wrong = WRONG_CELLS[number]
    answer = wrong[label]
    assert answer != solution, f"the wrong answer {label!r} did not change the solution"
    verdict = EXERCISES.grade(number, base, answer, before=BEFORE.get(number, ()), label=label)
    assert verdict.rejected, verdict


@pytest.mark.parametrize("number", [2, 3, 4])
def test_exercises_2_to_4_accept_the_solution(base, number):
    verdict = EXERCISES.grade(number, base, before=BEFORE.get(number, ()))
    assert verdict.passed, verdict


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
