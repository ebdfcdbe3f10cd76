"""course.trimming: the kept set is trim_messages' own, the reasons follow the four rules, the
graphs store and trim what the chapter says, the summary lives in the checkpointed state."""

import random

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

from course.checkpoints import thread_config
from course.memory.chat_graph import saved_messages
from course.trimming.counters import (
    CountTable,
    Gpt2FallbackCounter,
    ModelTokenCounter,
    ToyCounter,
    count_each,
    worked_example_counter,
)
from course.trimming.examples import (
    eleven_messages,
    make_messages,
    parse_conversation,
    worked_example_messages,
)
from course.trimming.graph import TurnRuns, converse, pipeline_chat_model
from course.trimming.remedies import (
    build_facts_graph,
    build_summary_graph,
    extract_user_name,
    facts_input,
)
from course.trimming.rules import REASON_FITS, REASON_SYSTEM, trim_and_explain

SEVEN = ["You're a good assistant.", "What's 2 + 2?", "4.", "Thanks!", "No problem!",
         "Having fun?", "Yes!"]


@pytest.fixture(scope="module")
def local():
    from course.models import load_local_model

    return load_local_model()


@pytest.fixture(scope="module")
def chat():
    """ChatHuggingFace over the in-kernel model: what the original notebook passed as counter."""
    return pipeline_chat_model(return_full_text=False, max_new_tokens=8)


@pytest.fixture(scope="module")
def gpt2():
    return Gpt2FallbackCounter()


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


def test_walk_back_lines_come_from_the_same_walk():
    report = _worked()
    lines = report.walk_lines()
    assert lines[0].endswith("52 - 10 = 42 tokens remain")
    assert any("-> 42 <= 42, fits (fits exactly)" in ln for ln in lines)
    assert any("-> 54 > 42: stop" in ln for ln in lines)
    assert lines[-1] == "the model gets 4 messages and 32 tokens"
    assert [s.kind for s in report.steps] == ["system", "fits", "fits", "fits", "fits", "stop",
                                              "rule4", "end"]
    dropped_by_rule4 = [s.index for s in report.steps if s.kind == "rule4"]
    assert all(not report.decisions[i].kept for i in dropped_by_rule4)


def test_eleven_messages_with_langchains_gpt2_fallback(chat, gpt2):
    eleven = eleven_messages()
    assert count_each(eleven, chat) == [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]
    assert count_each(eleven, gpt2) == count_each(eleven, chat)  # the same arithmetic
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


def test_count_table_shows_what_gpt2_counts(gpt2, model_counter):
    table = CountTable.count(eleven_messages()[:2], {"GPT-2": gpt2, "model": model_counter})
    assert table.text_of(1) == "Human: Hi! I'm Bob."
    assert table.columns["GPT-2"] == [8, 8]
    assert table.columns["model"][1] == model_counter([HumanMessage("Hi! I'm Bob.")])
    assert table.totals == {"GPT-2": 16, "model": sum(table.columns["model"])}
    assert "total | | 16 |" in str(table).replace("  ", " ") and "<table>" in table._repr_html_()


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
    ({"strategy": "first", "start_on": "human"}, ValueError, "only apply to strategy='last'"),
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


def _counters(gpt2, model_counter):
    return {"GPT-2": gpt2, "model": model_counter}


def test_graph_with_an_over_budget_stored_reply_keeps_only_the_new_question(chat, gpt2,
                                                                            model_counter):
    long_reply = "<|im_start|>system\n" + "a prompt saved by mistake " * 10
    run = converse(_scripted([long_reply, "ok"]), chat, thread_id="t",
                   questions=["Hi! I'm Bob.", "What's my name?"], prompt_counter=model_counter,
                   reply_counters=_counters(gpt2, model_counter))
    turns = run.turns
    assert turns[0].name_in_prompt and not turns[1].name_in_prompt
    assert turns[1].received_roles == ["system", "human"]
    assert turns[0].reply_tokens["GPT-2"] > 45
    runs = TurnRuns({"bugged": turns})
    assert runs.first_turn_without_name("bugged") == 2
    assert "turn 2, bugged: received 2 messages, name in prompt: no" in str(runs)


QUESTIONS5 = ["Hi! I'm Bob.", "What's my name?", "I like vanilla ice cream.",
              "Tell me a fact about penguins please.", "What's my name?"]


def test_graph_with_short_replies_keeps_the_name_and_facts_survive_trimming(model_counter, gpt2):
    replies = ["Hello there, nice to meet you!"] * 5
    counters = _counters(gpt2, model_counter)
    plain = converse(_scripted(replies), model_counter, thread_id="p", questions=QUESTIONS5,
                     prompt_counter=model_counter, reply_counters=counters).turns
    assert plain[1].name_in_prompt and not plain[-1].name_in_prompt  # forgotten when trimmed
    facts = converse(_scripted(replies), model_counter, thread_id="f", questions=QUESTIONS5,
                     build=build_facts_graph, state_for_turn=facts_input,
                     prompt_counter=model_counter, reply_counters=counters)
    assert all(t.name_in_prompt for t in facts.turns)
    assert facts.app.get_state(thread_config("f")).values["user_name"] == "Bob"
    assert len(saved_messages(facts.app, "f")) == 10  # trimming never deletes saved messages


def test_facts_field_before_the_name_is_known(model_counter, gpt2):
    run = converse(_scripted(["Hello!", "Hi Bob!"]), model_counter, thread_id="n",
                   questions=["Hello there.", "I'm Bob."], build=build_facts_graph,
                   state_for_turn=facts_input, prompt_counter=model_counter,
                   reply_counters=_counters(gpt2, model_counter))
    assert "The user's name is not known yet." in run.recorder.calls[0].prompt_text
    assert run.turns[1].name_in_prompt
    assert "The user's name is Bob." in run.recorder.calls[1].prompt_text


def _summary_run(model_counter, gpt2, *, delete, budget=60, summary="The user is Bob."):
    writer = _scripted([summary] * 10)
    return converse(_scripted(["Hello there, nice to meet you!"] * 5), model_counter,
                    thread_id=f"s-{delete}", questions=QUESTIONS5, max_tokens=budget,
                    build=lambda chat, counter, **kw: build_summary_graph(
                        chat, counter, summary_model=writer, delete=delete, **kw),
                    prompt_counter=model_counter, reply_counters=_counters(gpt2, model_counter))


@pytest.mark.parametrize("delete", [False, True])
def test_summary_lives_in_state_and_is_counted_in_the_budget(model_counter, gpt2, delete):
    run = _summary_run(model_counter, gpt2, delete=delete)
    state = run.app.get_state(thread_config(run.thread_id)).values
    assert state["summary"] == "The user is Bob."  # in the checkpointed state, not on an object
    for call in run.recorder.calls:
        assert model_counter(call.messages) <= 60  # the summary counted in the budget (rule 2)
        assert call.messages[0].type == "system"
    last = run.recorder.calls[-1]
    assert "Summary of the earlier conversation: The user is Bob." in last.messages[0].content
    assert "Hi! I'm Bob." not in [m.content for m in last.messages]  # trimmed, yet Bob survives
    assert run.turns[-1].name_in_prompt
    saved = saved_messages(run.app, run.thread_id)
    if delete:  # RemoveMessage: gone for good, only the unsummarised tail is kept
        assert "Hi! I'm Bob." not in [m.content for m in saved] and state["summarized"] == 0
        assert len(saved) < 10
    else:  # trimming only: everything saved, the summary covers the oldest `summarized`
        assert len(saved) == 10 and state["summarized"] > 0


def test_a_summary_that_drops_the_name_loses_it(model_counter, gpt2):
    run = _summary_run(model_counter, gpt2, delete=False, summary="The user likes ice cream.")
    assert not run.turns[-1].name_in_prompt


def test_bad_summary_graph_arguments():
    with pytest.raises(ValueError, match="max_tokens must be a whole number >= 1, got 0"):
        build_summary_graph(_scripted([]), ToyCounter(), max_tokens=0)
    with pytest.raises(TypeError, match="chat model"):
        build_summary_graph(None, ToyCounter(), max_tokens=10)


def test_keep_newest_is_rules_1_and_3_the_walk_of_trim_messages():
    from course.trimming.rules import keep_newest

    rng = random.Random(7)
    for _ in range(200):
        msgs = make_messages([(rng.choice(["system", "human", "ai"]), "x")
                              for _ in range(rng.randint(0, 8))])
        counter = ToyCounter({m.id: rng.randint(1, 12) for m in msgs})
        budget = rng.randint(0, 50)
        want = trim_messages(msgs, max_tokens=budget, token_counter=counter, strategy="last",
                             allow_partial=False) if msgs else []
        assert [m.id for m in keep_newest(msgs, budget, counter)] == [m.id for m in want]


def test_records_say_their_values():
    from course.records import RECORD_MIME
    from course.trimming.rules import KeptSets

    report = _worked()
    values = report._repr_mimebundle_()[RECORD_MIME]
    assert values["kept"] == [0, 5, 6, 7] and values["kept_tokens"] == 32
    assert values["decisions"][3]["reason"].startswith("over budget: would make 54 > 42")
    assert [s["kind"] for s in values["steps"]] == [s.kind for s in report.steps]
    sets = KeptSets.of({"a": worked_example_messages()[:2]}, worked_example_counter())
    assert sets.record() == {"kept": {"a": ["You are a helpful assistant.", "My name is Ana."]},
                             "tokens": {"a": 16}}
    assert str(sets) == "a  kept ['You are a helpful assistant.', 'My name is Ana.'] (16 tokens)"
    by_label = KeptSets.of({"toy": worked_example_messages()[:1], "words": worked_example_messages()[:1]},
                           {"toy": worked_example_counter(), "words": ToyCounter()})
    assert by_label.tokens == {"toy": 10, "words": 5}
    table = CountTable.count(eleven_messages()[:2], {"toy": ToyCounter()})
    assert table.record()["columns"] == {"toy": [4, 3]}
    assert table.record()["rows"][1]["fallback text"] == "Human: Hi! I'm Bob."


def test_a_trimmer_may_not_call_trim_messages_inside_the_guard():
    from langchain_core.messages import utils

    from course.trimming import rules

    namespace = {"trim_messages": trim_messages, "tm": trim_messages, "other": 1}
    exec("def mine(m):\n    return trim_messages(m, max_tokens=5, token_counter=len)\n"
         "def theirs(m):\n    return tm(m, max_tokens=5, token_counter=len)\n"
         "def explain(m):\n    from course.trimming.rules import trim_and_explain\n"
         "    return trim_and_explain(m, max_tokens=5, token_counter=len)\n", namespace)
    msgs = worked_example_messages()
    for name in ("mine", "theirs", "explain"):
        with pytest.raises(AssertionError, match="write the rules yourself"), \
                rules.without_trim_messages(namespace):
            namespace[name](msgs)
    with rules.without_trim_messages(namespace):
        namespace["assigned"] = 2  # what the check assigns inside stays
    assert namespace["trim_messages"] is namespace["tm"] is trim_messages
    assert namespace["assigned"] == 2 and namespace["other"] == 1
    assert utils.trim_messages is trim_messages and rules.trim_and_explain is trim_and_explain
    assert namespace["mine"](msgs)  # works again outside


def test_runs_summary_gives_each_runs_figures(chat, gpt2, model_counter):
    long_reply = "<|im_start|>system\n" + "a prompt saved by mistake " * 10
    run = converse(_scripted([long_reply, "ok"]), chat, thread_id="rs",
                   questions=["Hi! I'm Bob.", "What's my name?"], prompt_counter=model_counter,
                   reply_counters=_counters(gpt2, model_counter))
    brief = TurnRuns({"bugged": run.turns}).brief("GPT-2")
    values = brief.record()["runs"]["bugged"]
    assert values["turns"] == [1, 2] and values["name_in_prompt"] == [1]
    assert values["received"] == [2, 2]
    assert values["stored_chars"] == [2, len(long_reply)]
    assert str(brief).splitlines()[1].startswith("bugged: name in prompt on turns [1]")
    assert "Hi! I'm Bob." in run.record()["turns"][0]["prompt_text"]  # the rendered prompt
    assert run.record()["turns"][0]["reply_chars"] == len(long_reply)
