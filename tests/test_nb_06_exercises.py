"""Chapter 06's graded checks reject wrong answers: each check cell (hidden tests included, as the
instructor wrote it) is run against constant, keyword and half-right answers, and against the
instructor's own solution, without executing the rest of the notebook."""

import random

import pytest
from langchain_core.messages import HumanMessage, trim_messages

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
from course.trimming.rules import trim_and_explain
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
    }


def _wrong_answers(ns: dict) -> dict[int, dict[str, object]]:
    eleven, model_counter = ns["eleven"], ns["model_counter"]

    def raw_tokens(messages, tok=None):  # no chat template around each message
        tok = tok or model_counter.tokenizer
        return sum(len(tok.encode(m.content, add_special_tokens=False)) for m in messages)

    def visible_only(messages, tok=None):  # hard-codes the two visible asserts
        return {1: model_counter([eleven[1]]), 11: model_counter(eleven)}.get(len(messages), 0)

    def without_rule4(roles, tokens, budget):
        kept, start, left = ([0], 1, budget - tokens[0]) if roles and roles[0] == "system" \
            else ([], 0, budget)
        tail, used = [], 0
        for i in range(len(roles) - 1, start - 1, -1):
            if used + tokens[i] > left:
                break
            used += tokens[i]
            tail.insert(0, i)
        return kept + tail

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
        3: {"the worked example's answer": lambda roles, tokens, budget: [0, 5, 6, 7],
            "everything": lambda roles, tokens, budget: list(range(len(roles))),
            "no rule 4": without_rule4},
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
