"""Chapter 06's graded checks reject wrong answers: each check cell (hidden tests included, as the
instructor wrote it) is run against constant, keyword and half-right answers, and against the
instructor's own solution, without executing the rest of the notebook."""

import random

import pytest
from langchain_core.messages import HumanMessage, trim_messages

from course.checkpoints import thread_config
from course.checks import check
from course.trimming.counters import (
    Gpt2FallbackCounter,
    ModelTokenCounter,
    ToyCounter,
    count_each,
    worked_example_counter,
)
from course.trimming.examples import (
    WORKED_BUDGET,
    eleven_messages,
    make_messages,
    worked_example_messages,
)
from course.trimming.remedies import extract_user_name
from course.trimming.rules import keep_by_rules, trim_and_explain
from nbharness import Exercises

EXERCISES = Exercises("06_trimming.ipynb")


@pytest.fixture(scope="module")
def base():
    from course.models import notes_tokenizer

    model_counter = ModelTokenCounter()
    return {
        "check": check, "HumanMessage": HumanMessage, "trim_messages": trim_messages,
        "make_messages": make_messages, "ToyCounter": ToyCounter, "count_each": count_each,
        "trim_and_explain": trim_and_explain, "extract_user_name": extract_user_name,
        "random": random, "WORKED_BUDGET": WORKED_BUDGET, "eleven": eleven_messages(),
        "worked": worked_example_messages(), "toy": worked_example_counter(),
        "gpt2": Gpt2FallbackCounter(), "model_counter": model_counter,
        "qwen_counter": ModelTokenCounter(*notes_tokenizer()),
        "keep_by_rules": keep_by_rules, "words": ToyCounter(), "thread_config": thread_config,
    }


def _wrong_answers(ns: dict) -> dict[int, dict[str, object]]:
    eleven, model_counter = ns["eleven"], ns["model_counter"]

    def raw_tokens(messages, tok=None):  # no chat template around each message
        tok = tok or model_counter.tokenizer
        return sum(len(tok.encode(m.content, add_special_tokens=False)) for m in messages)

    def visible_only(messages, tok=None):  # hard-codes the two visible asserts
        return {1: model_counter([eleven[1]]), 11: model_counter(eleven)}.get(len(messages), 0)

    from course.memory.chat_graph import LANGUAGE_TEMPLATE, make_prompt

    def _templated(state):
        return make_prompt(LANGUAGE_TEMPLATE).invoke(
            {"messages": list(state["messages"]), "language": state["language"]}).to_messages()

    def trim_before_template(state, counter, max_tokens):  # the include_system pitfall
        saved = list(state["messages"])
        kept = [saved[i] for i in keep_by_rules(saved, max_tokens, counter)]
        return _templated({"messages": kept, "language": state["language"]})

    def system_not_counted(state, counter, max_tokens):
        prompt = _templated(state)
        return [prompt[0]] + [prompt[1:][i] for i in keep_by_rules(prompt[1:], max_tokens, counter)]

    def no_rule4(state, counter, max_tokens):
        prompt = _templated(state)
        return [prompt[i] for i in keep_by_rules(prompt, max_tokens, counter, start_on=None)]

    def no_trimming(state, counter, max_tokens):
        return _templated(state)

    def no_system(state, counter, max_tokens):
        saved = list(state["messages"])
        return [saved[i] for i in keep_by_rules(saved, max_tokens, counter)]

    def plain_trim(messages, max_tokens, counter):  # forgets the pinned fact
        return trim_messages(messages, max_tokens=max_tokens, token_counter=counter,
                             strategy="last", include_system=True, start_on="human")

    def pins_not_counted(messages, max_tokens, counter):
        messages = list(messages)
        pinned = [m for i, m in enumerate(messages) if (i == 0 and m.type == "system") or (
            m.type == "human" and extract_user_name(str(m.content)))]
        rest = [m for m in messages if all(m is not p for p in pinned)]
        tail = trim_messages(rest, max_tokens=max_tokens, token_counter=counter,
                             strategy="last", start_on="human") if rest else []
        ids = {id(m) for m in [*pinned, *tail]}
        return [m for m in messages if id(m) in ids]

    return {
        1: {"constant": lambda messages, tok=None: 0, "words": lambda messages, tok=None: sum(
            len(m.content.split()) for m in messages), "raw tokens": raw_tokens,
            "visible asserts only": visible_only},
        2: {"the old answer 75": lambda messages, counter, target: 75,
            "the total": lambda messages, counter, target: counter(list(messages)),
            "the target's own tokens": lambda messages, counter, target: counter(
                [messages[target]])},
        3: {"trim before the template": trim_before_template,
            "system message not counted": system_not_counted, "no rule 4": no_rule4,
            "no trimming": no_trimming, "no system message": no_system},
        4: {"unchanged": lambda messages, max_tokens, counter: list(messages),
            "plain trimming": plain_trim, "pins not counted": pins_not_counted,
            "name message only": lambda messages, max_tokens, counter: [
                m for m in messages if "Ana" in str(m.content)]},
    }


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_the_instructor_solution_passes(base, n):
    verdict = EXERCISES.grade(n, base)
    assert verdict.passed, verdict


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_wrong_answers_fail_the_check(base, n):
    for label, answer in _wrong_answers(base)[n].items():
        verdict = EXERCISES.grade(n, base, answer, label=label)
        assert verdict.rejected, verdict


def test_exercise_2_is_no_longer_a_constant():
    assert "budget == 75" not in EXERCISES.cells["ex2-check"]


def test_exercise_1_hint_says_what_was_expected_and_what_came_back(base):
    def one_too_many(messages, tok=None):  # a plausible slip: one token more per message
        return model_counter(messages) + len(messages)

    model_counter = base["model_counter"]
    verdict = EXERCISES.grade(1, base, one_too_many, label="one token too many per message")
    assert verdict.rejected, verdict
    expected = model_counter([base["eleven"][1]])
    assert f"expected {expected} tokens (ModelTokenCounter), got {expected + 1} (+1)" in verdict.printed
    assert "<|im_start|>user" in verdict.printed  # the template's own text, to read
    assert "subtract" not in EXERCISES.cells["c49"]  # the hint no longer dictates the algorithm
