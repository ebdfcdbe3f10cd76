"""course.trimming.policy: the kept set is trim_messages' own, the reasons follow the four rules."""

import random

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

from course.memory.chat_graph import PromptRecorder, saved_messages
from course.trimming.policy import (
    REASON_FITS,
    REASON_SYSTEM,
    ModelTokenCounter,
    SummarizingTrimmer,
    ToyCounter,
    build_trimming_graph,
    count_each,
    count_table,
    eleven_messages,
    extract_user_name,
    make_messages,
    make_trimmer,
    parse_conversation,
    run_turns,
    trim_and_explain,
    walk_back,
    worked_example_counter,
    worked_example_messages,
)

SEVEN = ["You're a good assistant.", "What's 2 + 2?", "4.", "Thanks!", "No problem!",
         "Having fun?", "Yes!"]


@pytest.fixture(scope="module")
def local():
    from course.models import load_local_model

    return load_local_model()


@pytest.fixture(scope="module")
def chat():
    from course.models import chat_model

    return chat_model()


@pytest.fixture(scope="module")
def model_counter(local):
    return ModelTokenCounter(local.tokenizer)


def _worked(budget=52, **kw):
    kw.setdefault("include_system", True)
    kw.setdefault("start_on", "human")
    return trim_and_explain(worked_example_messages(), max_tokens=budget,
                            token_counter=worked_example_counter(), **kw)


def test_worked_example_exactly_as_the_note():
    report = _worked()
    assert [m.id for m in report.kept] == ["system", "user-3", "assistant-3", "user-4"]
    assert report.kept_tokens == 32 and report.total_tokens == 75
    reasons = {d.index: d.reason for d in report.decisions}
    assert reasons[0] == REASON_SYSTEM
    assert reasons[3].startswith("over budget: would make 54 > 42")
    assert reasons[4].startswith("would start on an assistant turn")
    assert reasons[1].startswith("over budget") and reasons[2].startswith("over budget")
    assert all(reasons[i] == REASON_FITS for i in (5, 6, 7))


def test_walk_back_lines():
    lines = walk_back(worked_example_messages(), max_tokens=52,
                      token_counter=worked_example_counter())
    assert lines[0].endswith("52 - 10 = 42 tokens remain")
    assert any("-> 42 <= 42, fits (fits exactly)" in ln for ln in lines)
    assert any("-> 54 > 42: stop" in ln for ln in lines)
    assert lines[-1] == "the model gets 4 messages and 32 tokens"


def test_eleven_messages_with_langchains_gpt2_fallback(chat):
    eleven = eleven_messages()
    assert count_each(eleven, chat) == [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]
    report = trim_and_explain(eleven, max_tokens=45, token_counter=chat, include_system=True,
                              start_on="human")
    assert report.kept_contents == SEVEN
    direct = trim_messages(eleven, max_tokens=45, strategy="last", token_counter=chat,
                           include_system=True, allow_partial=False, start_on="human")
    assert [m.content for m in direct] == SEVEN


def test_model_token_counter_uses_the_chat_template(local, model_counter):
    hi = HumanMessage("Hi! I'm Bob.")
    block = "<|im_start|>user\nHi! I'm Bob.<|im_end|>\n"
    assert model_counter([hi]) == local.count_tokens(block)
    system = SystemMessage("You're a good assistant.")
    assert model_counter([system]) == local.count_tokens(
        "<|im_start|>system\nYou're a good assistant.<|im_end|>\n")
    assert model_counter([system, hi]) == model_counter([system]) + model_counter([hi])
    assert model_counter([]) == 0
    report = trim_and_explain(eleven_messages(), max_tokens=45, token_counter=model_counter,
                              include_system=True, start_on="human")
    assert len(report.kept) == 5 and report.kept_tokens <= 45


def test_model_token_counter_needs_a_chat_template():
    class NoTemplate:
        chat_template = None

    with pytest.raises(ValueError, match="no chat template"):
        ModelTokenCounter(NoTemplate())


def test_count_table_shows_what_gpt2_counts(chat, model_counter):
    rows = count_table(eleven_messages()[:2], chat, model_counter)
    assert rows[1].fallback_text == "Human: Hi! I'm Bob."
    assert rows[1].gpt2_tokens == 8 and rows[1].model_tokens == model_counter([HumanMessage("Hi! I'm Bob.")])


@pytest.mark.parametrize("seed", range(6))
def test_reasons_agree_with_the_four_rules_on_random_conversations(seed):
    rng = random.Random(seed)
    for _ in range(60):
        roles = (["system"] if rng.random() < 0.7 else []) + [
            rng.choice(["human", "ai"]) for _ in range(rng.randint(1, 8))]
        msgs = make_messages([(r, "x") for r in roles])
        counter = ToyCounter({m.id: rng.randint(1, 12) for m in msgs})
        budget = rng.randint(0, 50)
        report = trim_and_explain(msgs, max_tokens=budget, token_counter=counter,
                                  include_system=True, start_on="human")  # raises on disagreement
        kept = report.kept_indices
        has_system = roles[0] == "system"
        if has_system:  # rule 2
            assert kept[0] == 0 and report.decisions[0].reason == REASON_SYSTEM
        rest = [i for i in kept if not (has_system and i == 0)]
        assert rest == list(range(rest[0], len(roles))) if rest else True  # rule 1: a newest tail
        assert not rest or roles[rest[0]] == "human"  # rule 4
        assert all(m.content == "x" for m in report.kept)  # rule 3: nothing cut
        for d in report.decisions:
            if d.kept:
                assert d.reason in (REASON_SYSTEM, REASON_FITS)
            else:
                assert d.reason.startswith(("over budget", "would start on"))
        if not has_system:
            assert report.kept_tokens <= budget


def test_strategy_first_and_include_system_without_system():
    report = _worked(budget=52, strategy="first", include_system=False, start_on=None)
    assert [m.id for m in report.kept] == ["system", "user-1", "assistant-1", "user-2"]
    assert report.decisions[4].reason.startswith("over budget: would make 53 > 52")
    no_system = _worked(include_system=False)
    assert [m.id for m in no_system.kept] == ["user-3", "assistant-3", "user-4"]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"messages": []}, ValueError, "no messages"),
    ({"messages": ["hi"]}, TypeError, "LangChain messages"),
    ({"max_tokens": -1}, ValueError, "max_tokens"),
    ({"max_tokens": True}, ValueError, "max_tokens"),
    ({"strategy": "middle"}, ValueError, "strategy"),
    ({"strategy": "first", "include_system": True}, ValueError, "only apply to strategy='last'"),
    ({"token_counter": 42}, TypeError, "token_counter"),
])
def test_bad_input_is_named(kwargs, error, match):
    args = {"messages": worked_example_messages(), "max_tokens": 52,
            "token_counter": worked_example_counter(), **kwargs}
    with pytest.raises(error, match=match):
        trim_and_explain(args.pop("messages"), **args)


def test_a_non_monotone_counter_is_caught_not_explained_wrongly():
    msgs = make_messages([("human", "a"), ("ai", "b"), ("human", "c"), ("ai", "d")])

    def odd(messages):
        return 100 if len(messages) == 2 else len(messages)

    with pytest.raises(RuntimeError, match="disagrees with trim_messages"):
        trim_and_explain(msgs, max_tokens=10, token_counter=odd)


def test_parse_and_make_messages():
    msgs = parse_conversation("system: Be brief.\n\nuser: Hi!\nassistant: Hello.")
    assert [m.type for m in msgs] == ["system", "human", "ai"] and msgs[2].content == "Hello."
    with pytest.raises(ValueError, match="no 'role:' prefix"):
        parse_conversation("just text")
    with pytest.raises(ValueError, match="no messages"):
        parse_conversation("  \n")
    with pytest.raises(ValueError, match="role 'robot'"):
        make_messages([("robot", "beep")])
    with pytest.raises(ValueError, match="pair"):
        make_messages(["hello"])


def test_extract_user_name():
    assert extract_user_name("Hi! I'm Bob.") == "Bob"
    assert extract_user_name("my name is ana") == "Ana"
    assert extract_user_name("What's my name?") is None
    assert extract_user_name("") is None


def _scripted(replies):
    """A scripted chat model (LangChain's GenericFakeChatModel): the lesson here is the runtime."""
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_graph_with_an_over_budget_stored_reply_keeps_only_the_new_question(local, chat):
    long_reply = "<|im_start|>system\n" + "a prompt saved by mistake " * 10
    recorder = PromptRecorder()
    app = build_trimming_graph(_scripted([long_reply, "ok"]), chat, recorder=recorder)
    turns = run_turns(app, recorder, ["Hi! I'm Bob.", "What's my name?"], thread_id="t",
                      gpt2_counter=chat, local=local)
    assert turns[0].name_in_prompt and not turns[1].name_in_prompt
    assert turns[1].received_roles == ["system", "human"]
    assert turns[0].reply_gpt2_tokens > 45


def test_graph_with_short_replies_keeps_the_name_and_facts_survive_trimming(local, model_counter,
                                                                            chat):
    questions = ["Hi! I'm Bob.", "What's my name?", "I like vanilla ice cream.",
                 "Tell me a fact about penguins please.", "What's my name?"]
    replies = ["Hello there, nice to meet you!"] * 5
    recorder = PromptRecorder()
    app = build_trimming_graph(_scripted(replies), model_counter, recorder=recorder)
    plain = run_turns(app, recorder, questions, thread_id="p", gpt2_counter=chat, local=local)
    assert plain[1].name_in_prompt and not plain[-1].name_in_prompt  # forgotten when trimmed
    recorder = PromptRecorder()
    app = build_trimming_graph(_scripted(replies), model_counter, recorder=recorder,
                               remedy="facts")
    facts = run_turns(app, recorder, questions, thread_id="f", facts=True, gpt2_counter=chat,
                      local=local)
    assert all(t.name_in_prompt for t in facts)
    assert app.get_state({"configurable": {"thread_id": "f"}}).values["user_name"] == "Bob"
    assert len(saved_messages(app, "f")) == 10  # trimming never deletes saved messages


def test_facts_field_before_the_name_is_known(local, model_counter, chat):
    recorder = PromptRecorder()
    app = build_trimming_graph(_scripted(["Hello!", "Hi Bob!"]), model_counter,
                               recorder=recorder, remedy="facts")
    turns = run_turns(app, recorder, ["Hello there.", "I'm Bob."], thread_id="n", facts=True,
                      gpt2_counter=chat, local=local)
    assert "The user's name is not known yet." in recorder.calls[0].prompt_text
    assert turns[1].name_in_prompt and "The user's name is Bob." in recorder.calls[1].prompt_text


def test_summarizing_trimmer_puts_a_summary_first(model_counter):
    saved = make_messages([("human", "Hi! I'm Bob."), ("ai", "Hello Bob, how can I help you?"),
                           ("human", "I like vanilla ice cream a lot."),
                           ("ai", "Vanilla is a classic flavour, good choice."),
                           ("human", "What's my name?")])
    summarizer = SummarizingTrimmer(_scripted(["The user is Bob."]), model_counter, 45)
    shown = summarizer(saved)
    assert shown[0].type == "system" and shown[0].content.endswith("The user is Bob.")
    assert shown[1:] == make_trimmer(model_counter, 45)(saved)
    assert summarizer(saved) == shown  # cached: the scripted model has no second reply


def test_bad_remedy():
    with pytest.raises(ValueError, match="remedy"):
        build_trimming_graph(_scripted([]), ToyCounter(), remedy="magic")
