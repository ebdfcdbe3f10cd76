"""Chapter 05's graded checks reject wrong answers: each check cell (hidden tests included, as the
instructor wrote it) is run against constant, keyword and half-right answers, against the
instructor's own solution and against the untouched stub, without executing the rest of the
notebook."""

import random

import nbformat
import pytest
from langchain_core.messages import HumanMessage, trim_messages

from classroom.grading.student import student_edition
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
from course.trimming.rules import keep_newest, trim_and_explain
from nbharness import NOTEBOOKS, Exercises

EXERCISES = Exercises("05_trimming.ipynb")


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
        "keep_newest": keep_newest, "words": ToyCounter(), "thread_config": thread_config,
        "chat_log": make_messages([
            ("system", "Be brief."), ("user", "Hi, I am Bob."),
            ("assistant", "Hello Bob, nice to meet you."), ("user", "Any plans?"),
            ("assistant", "Not yet."), ("user", "What is my name?")]),
    }


def _four_rules(messages, max_tokens, counter, *, include_system=True, start_on="human"):
    return trim_messages(messages, max_tokens=max_tokens, token_counter=counter,
                         strategy="last", allow_partial=False, include_system=include_system,
                         start_on=start_on)


# Answer cells that let LangChain do the trimming, in the ways a student might reach it; run in
# the notebook's namespace (a function defined here would hold this module's trim_messages).
LIBRARY_TRIMMERS = {
    "calls trim_messages": """
def trim_to_budget(messages, max_tokens, count):
    return trim_messages(messages, max_tokens=max_tokens, token_counter=count, strategy="last",
                         include_system=True, allow_partial=False, start_on="human")
""",
    "calls trim_messages under another name": """
from langchain_core.messages import trim_messages as cut

def trim_to_budget(messages, max_tokens, count):
    return cut(messages, max_tokens=max_tokens, token_counter=count, include_system=True,
               start_on="human")
""",
    "imports trim_messages when called": """
def trim_to_budget(messages, max_tokens, count):
    import langchain_core.messages as lc
    return lc.trim_messages(messages, max_tokens=max_tokens, token_counter=count,
                            include_system=True, start_on="human")
""",
    "calls trim_and_explain": """
def trim_to_budget(messages, max_tokens, count):
    from course.trimming.rules import trim_and_explain
    return trim_and_explain(messages, max_tokens=max_tokens, token_counter=count,
                            include_system=True, start_on="human").kept
""",
}


def _wrong_answers(ns: dict) -> dict[int, dict[str, object]]:
    eleven, model_counter = ns["eleven"], ns["model_counter"]

    def raw_tokens(messages, tok=None):  # no chat template around each message
        tok = tok or model_counter.tokenizer
        return sum(len(tok.encode(m.content, add_special_tokens=False)) for m in messages)

    def visible_only(messages, tok=None):  # hard-codes the two visible asserts
        return {1: model_counter([eleven[1]]), 11: model_counter(eleven)}.get(len(messages), 0)

    from course.memory.chat_graph import LANGUAGE_TEMPLATE, make_prompt

    def _system_and_rest(messages):
        messages = list(messages)
        system = messages[:1] if messages and messages[0].type == "system" else []
        return system, messages[len(system):]

    def _rule_4(tail):
        tail = list(tail)
        while tail and tail[0].type != "human":
            tail.pop(0)
        return tail

    def no_rule_2(messages, max_tokens, count):
        return _rule_4(keep_newest(list(messages), max_tokens, count))

    def system_not_counted_2(messages, max_tokens, count):
        system, rest = _system_and_rest(messages)
        return system + _rule_4(keep_newest(rest, max_tokens, count))

    def no_rule_4(messages, max_tokens, count):
        system, rest = _system_and_rest(messages)
        return system + keep_newest(rest, max_tokens - count(system), count)

    def rule_4_once(messages, max_tokens, count):
        system, rest = _system_and_rest(messages)
        tail = keep_newest(rest, max_tokens - count(system), count)
        return system + (tail[1:] if tail and tail[0].type != "human" else tail)

    def skips_what_does_not_fit(messages, max_tokens, count):  # rule 1 broken: no stop
        system, rest = _system_and_rest(messages)
        kept = []
        for m in reversed(rest):
            if count([m, *kept]) <= max_tokens - count(system):
                kept.insert(0, m)
        return system + _rule_4(kept)

    def the_oldest(messages, max_tokens, count):
        system, rest = _system_and_rest(messages)
        kept = []
        for m in rest:
            if count([*system, *kept, m]) > max_tokens:
                break
            kept.append(m)
        return system + kept

    def _templated(state):
        return make_prompt(LANGUAGE_TEMPLATE).invoke(
            {"messages": list(state["messages"]), "language": state["language"]}).to_messages()

    def trim_before_template(state, counter, max_tokens):  # the include_system pitfall
        saved = list(state["messages"])
        kept = _four_rules(saved, max_tokens, counter)
        return _templated({"messages": kept, "language": state["language"]})

    def system_not_counted(state, counter, max_tokens):
        prompt = _templated(state)
        return [prompt[0], *_four_rules(prompt[1:], max_tokens, counter)]

    def no_rule4(state, counter, max_tokens):
        prompt = _templated(state)
        return _four_rules(prompt, max_tokens, counter, start_on=None)

    def no_trimming(state, counter, max_tokens):
        return _templated(state)

    def no_system(state, counter, max_tokens):
        saved = list(state["messages"])
        return _four_rules(saved, max_tokens, counter)

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
        2: {**LIBRARY_TRIMMERS,
            "no rule 2": no_rule_2, "system kept, not counted": system_not_counted_2,
            "no rule 4": no_rule_4, "rule 4 drops one message only": rule_4_once,
            "skips what does not fit": skips_what_does_not_fit, "the oldest": the_oldest,
            "contents, not messages": lambda messages, max_tokens, count: [
                m.content for m in _four_rules(messages, max_tokens, count)]},
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


def test_the_untouched_stubs_are_not_yet_done(base):
    student = {c.id: c.source for c in student_edition(
        nbformat.read(NOTEBOOKS / EXERCISES.notebook, 4)).cells}
    for n in [1, 2, 3, 4]:
        verdict = EXERCISES.grade(n, base, student[f"ex{n}-solution"], label="the stub")
        assert verdict.outcome == "not yet done", verdict


@pytest.mark.parametrize("label", sorted(LIBRARY_TRIMMERS))
def test_exercise_2_says_why_a_trimmer_that_calls_trim_messages_is_refused(base, label):
    verdict = EXERCISES.grade(2, base, LIBRARY_TRIMMERS[label], label=label)
    assert verdict.rejected and "write the rules yourself" in verdict.printed, verdict
    assert base["trim_messages"] is trim_messages  # given back after the check
    assert "keep_newest" not in EXERCISES.cells["ex2-solution"].split("### BEGIN SOLUTION")[0]


def test_exercise_2_shows_what_trim_messages_keeps_and_what_came_back(base):
    def no_system(messages, max_tokens, count):
        return keep_newest(list(messages)[1:], max_tokens, count)

    verdict = EXERCISES.grade(2, base, no_system, label="no system message")
    assert verdict.rejected, verdict
    assert "the worked example, budget 52: trim_messages keeps ['system: You are a helpful" \
        in verdict.printed, verdict.printed


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
