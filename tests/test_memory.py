"""course.memory: graph builders, state rules, prompt rendering and sizes, the checkpoint table,
read-back from another process, the recorded Qwen2 lines, next-token probability.

The runtime tests use a *scripted* chat model (LangChain's FakeListChatModel): they are about the
graph, the checkpointer and the prompt, not about what a model answers. The rendering and
probability tests use the real bundled model.
"""

import json
import subprocess
import sys

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from course.checkpoints import CheckpointStoreError, sqlite_checkpointer, thread_config
from course.memory import stateless as memory
from course.memory.chat_graph import (
    LanguageState,
    PromptRecorder,
    build_chat_graph,
    checkpoint_history,
    compile_chat_graph,
    format_messages,
    make_prompt,
    prompt_size,
    qwen2_chat_text,
    render_prompt,
    saved_messages,
)
from course.memory.recorded import QWEN2_MEMORY_FILE, _load, qwen2_memory
from course.memory.store import read_thread_from_file, run_threads_concurrently


def scripted(*replies: str) -> FakeListChatModel:
    return FakeListChatModel(responses=list(replies) or ["scripted reply"])


def test_thread_config_shape_and_bad_input():
    assert thread_config("abc123") == {"configurable": {"thread_id": "abc123"}}
    for bad in ("", "  ", None, 7):
        with pytest.raises(ValueError, match="thread_id"):
            thread_config(bad)


def test_make_prompt_puts_system_first_and_fills_fields():
    prompt = make_prompt("Answer in {language}.")
    assert set(prompt.input_variables) == {"language", "messages"}
    out = prompt.invoke({"language": "Spanish", "messages": [HumanMessage("hi")]}).to_messages()
    assert isinstance(out[0], SystemMessage) and out[0].content == "Answer in Spanish."
    assert out[-1].content == "hi"
    assert make_prompt().input_variables == ["messages"]
    with pytest.raises(ValueError, match="Invalid template"):  # LangChain's own check
        make_prompt(123)


def test_compile_chat_graph_is_the_published_graph_with_a_checkpointer():
    from langgraph.checkpoint.memory import MemorySaver

    model = scripted("hello", "you are Bob")

    def call_model(state):
        return {"messages": [model.invoke(state["messages"])]}

    app = compile_chat_graph(call_model)
    assert isinstance(app.checkpointer, MemorySaver)
    assert sorted(app.get_graph().nodes) == ["__end__", "__start__", "model"]
    for text in ("Hi! I'm Bob.", "What's my name?"):
        app.invoke({"messages": [HumanMessage(text)]}, thread_config("abc123"))
    assert [m.content for m in saved_messages(app, "abc123")] == [
        "Hi! I'm Bob.", "hello", "What's my name?", "you are Bob"]
    saver = MemorySaver()
    assert compile_chat_graph(call_model, LanguageState, saver).checkpointer is saver


def test_build_chat_graph_rejects_bad_arguments():
    with pytest.raises(TypeError, match="chat_model"):
        build_chat_graph(None)
    with pytest.raises(TypeError, match="transform"):
        build_chat_graph(scripted(), transform="trim")


def test_same_thread_continues_new_thread_starts_empty():
    rec = PromptRecorder()
    app = build_chat_graph(scripted("hello", "you are Bob", "no idea"), recorder=rec)
    app.invoke({"messages": [HumanMessage("Hi! I'm Bob")]}, thread_config("a"))
    app.invoke({"messages": [HumanMessage("What's my name?")]}, thread_config("a"))
    assert [m.type for m in rec.last.messages] == ["human", "ai", "human"]
    assert [m.content for m in saved_messages(app, "a")] == [
        "Hi! I'm Bob", "hello", "What's my name?", "you are Bob"]
    assert saved_messages(app, "b") == []
    app.invoke({"messages": [HumanMessage("What's my name?")]}, thread_config("b"))
    assert rec.last.roles() == ["human"] and "Bob" not in rec.last.prompt_text
    assert len(rec) == 3 and "ModelCall(1 messages" in repr(rec.last)


def test_checkpoints_three_per_turn():
    app = build_chat_graph(scripted("x", "y"))
    for text in ("one", "two"):
        app.invoke({"messages": [HumanMessage(text)]}, thread_config("t"))
    table = checkpoint_history(app, "t")
    assert [r.messages for r in table] == [0, 1, 2, 2, 3, 4]
    assert [r.step for r in table] == [-1, 0, 1, 2, 3, 4]
    assert [r.source for r in table] == ["input", "loop", "loop"] * 2
    assert [r.parent for r in table] == [None, 1, 2, 3, 4, 5]
    assert len({r.checkpoint_id for r in table}) == 6 and table.forks() == []
    assert table[-1].last == "ai: y" and table[0].last == "-"
    values = table.record()  # what a notebook test reads: the rows without their configs
    assert [r["parent"] for r in values["rows"]] == [None, 1, 2, 3, 4, 5]
    assert values["rows"][-1]["last"] == "ai: y" and "checkpoint_id" not in values["rows"][0]
    text = str(table)
    assert text.splitlines()[0] == "thread 't': 6 checkpoints"
    assert "#6 parent=5 step=4 source=loop next=- messages=4 last=ai: y" in text
    assert "<table>" in table._repr_html_() and table._repr_html_().count("<tr>") == 7


def test_checkpoint_table_shows_a_fork_from_update_state():
    app = build_chat_graph(scripted("x", "y", "z"))
    cfg = thread_config("t")
    app.invoke({"messages": [HumanMessage("I'm Rob")]}, cfg)
    table = checkpoint_history(app, "t")
    before_model = next(r for r in table if r.next == ("model",))
    first = app.get_state(before_model.config).values["messages"][0]
    forked = app.update_state(before_model.config,
                              {"messages": [HumanMessage("I'm Bob", id=first.id)]})
    app.invoke(None, forked)
    after = checkpoint_history(app, "t")
    assert after.forks() == [before_model.number]
    ax = after.plot()
    assert len(ax.collections) == len({r.source for r in after})  # one scatter per source
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(after)
    assert "fork" in [t.get_text() for t in ax.texts]
    assert [m.content for m in saved_messages(app, "t")] == ["I'm Bob", "y"]


def test_language_field_persists_when_omitted_and_is_overwritten_when_passed():
    rec = PromptRecorder()
    app = build_chat_graph(scripted("hola", "Bob", "hello"), recorder=rec,
                           system_template="Answer in {language}.", state_schema=LanguageState)
    cfg = thread_config("abc456")
    app.invoke({"messages": [HumanMessage("Hi! I'm Bob")], "language": "Spanish"}, cfg)
    app.invoke({"messages": [HumanMessage("What's my name?")]}, cfg)
    assert rec.last.messages[0].content == "Answer in Spanish."
    assert app.get_state(cfg).values["language"] == "Spanish"
    app.invoke({"messages": [HumanMessage("and now?")], "language": "English"}, cfg)
    assert rec.last.messages[0].content == "Answer in English."
    assert len(app.get_state(cfg).values["messages"]) == 6


def test_missing_template_field_names_the_fix():
    app = build_chat_graph(scripted(), system_template="Answer in {language}.",
                           state_schema=LanguageState)
    with pytest.raises(KeyError, match=r"language.*Fix"):
        app.invoke({"messages": [HumanMessage("hi")]}, thread_config("t"))


def test_transform_runs_before_the_system_message_is_added():
    seen = []

    def keep_last(messages):
        seen.append([m.type for m in messages])
        return messages[-1:]

    rec = PromptRecorder()
    app = build_chat_graph(scripted("a", "b"), system_template="Be brief.", transform=keep_last,
                           recorder=rec)
    for text in ("first", "second"):
        app.invoke({"messages": [HumanMessage(text)]}, thread_config("t"))
    assert seen == [["human"], ["human", "ai", "human"]]  # never a system message
    assert [m.content for m in rec.last.messages] == ["Be brief.", "second"]
    assert len(saved_messages(app, "t")) == 4  # the transform does not change what is saved


def test_invoke_and_record_wraps_plain_strings_and_records():
    from langchain_core.language_models.fake import FakeListLLM

    from course.memory.chat_graph import invoke_and_record

    rec = PromptRecorder()
    reply = invoke_and_record(FakeListLLM(responses=["plain"]), [HumanMessage("q")], rec)
    assert isinstance(reply, AIMessage) and reply.content == "plain"
    assert rec.last.reply == "plain" and rec.last.roles() == ["human"]
    assert invoke_and_record(scripted("x"), [HumanMessage("q")]).content == "x"


def test_render_prompt_transcript_for_models_without_a_template():
    text = render_prompt(scripted(), [SystemMessage("s"), HumanMessage("q"), AIMessage("a")])
    assert text.splitlines() == [
        "[transcript: this model renders the chat template on its server]",
        "system: s", "user: q", "assistant: a"]


def test_format_messages_and_recorder_errors():
    text = format_messages([HumanMessage("x" * 100), AIMessage("ok")], width=20)
    assert text.splitlines() == [" human: " + "x" * 17 + "...", "    ai: ok"]
    with pytest.raises(LookupError, match="invoke the graph first"):
        _ = PromptRecorder().last


def test_sqlite_survives_a_new_process(tmp_path):
    db = tmp_path / "memory.sqlite"
    app = build_chat_graph(scripted("hello Bob", "you are Bob"), checkpointer=sqlite_checkpointer(db))
    for text in ("Hi! I'm Bob", "What's my name?"):
        app.invoke({"messages": [HumanMessage(text)]}, thread_config("bob"))
    out = subprocess.run([sys.executable, "-m", "course.memory.store", "read", str(db), "bob"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [
        {"type": "human", "content": "Hi! I'm Bob"}, {"type": "ai", "content": "hello Bob"},
        {"type": "human", "content": "What's my name?"}, {"type": "ai", "content": "you are Bob"}]
    assert read_thread_from_file(db, "nobody") == []
    again = build_chat_graph(scripted(), checkpointer=sqlite_checkpointer(db))
    assert len(saved_messages(again, "bob")) == 4


def test_sqlite_bad_input(tmp_path, capsys):
    from course.memory.store import _main

    with pytest.raises(CheckpointStoreError, match="is a folder"):
        sqlite_checkpointer(tmp_path)
    with pytest.raises(CheckpointStoreError, match="write a conversation first"):
        read_thread_from_file(tmp_path / "missing.sqlite", "t")
    with pytest.raises(SystemExit) as stopped:  # the command line with no command (in-process:
        _main([])                               # the new-process path is tested above)
    assert stopped.value.code == 2 and "usage" in capsys.readouterr().err


def test_concurrent_threads_never_see_each_other(tmp_path):
    rec = PromptRecorder()
    app = build_chat_graph(scripted("ok"), checkpointer=sqlite_checkpointer(tmp_path / "c.sqlite"),
                           recorder=rec)
    conversations = {f"user{i}": [f"I am user {i}.", "Who am I?", "Bye."] for i in range(4)}
    replies = run_threads_concurrently(app, conversations)
    assert {k: len(v) for k, v in replies.items()} == {k: 3 for k in conversations}
    for tid, sent in conversations.items():
        humans = [m["content"] for m in read_thread_from_file(tmp_path / "c.sqlite", tid)
                  if m["type"] == "human"]
        assert humans == sent
    assert len(rec) == 12
    for call in rec.calls:
        assert len({m.content for m in call.messages if m.content.startswith("I am user")}) == 1
    with pytest.raises(ValueError, match="empty"):
        run_threads_concurrently(app, {})


def test_recorded_qwen2_lines_are_the_original_notebooks_outputs():
    qwen = qwen2_memory()
    assert qwen.model == "Qwen/Qwen2-0.5B-Instruct"
    assert {line.label for line in qwen.lines} == {"recorded"}
    # Qwen2's own greeting, and the one the notebook's author typed into the history
    assert qwen.reply("greeting") == "Hello, Bob! How can I assist you today?"
    typed = qwen.line("typed-greeting")
    assert typed.reply == "Hello Bob! How can I assist you today?"
    assert typed.typed_by == "the notebook's author" and qwen.line("greeting").typed_by is None
    assert qwen.reply("with-history").startswith("Your name is Bob. ")
    assert qwen.reply("alone").startswith("Your name is your unique identifier")
    assert (qwen.line("thread-1").thread, qwen.line("thread-1").user) == ("abc123", "Hi! I'm Bob.")
    assert qwen.reply("pirate") == "Your name is Jim."
    assert qwen.reply("language-1") == "¡Hola, Bob! ¿Cómo puedo ayudarte hoy?"
    assert (qwen.line("language-2").user, qwen.reply("language-2")) == (
        "What is my name?", "Tu nombre es Bob.")
    with pytest.raises(KeyError, match="no recorded line"):
        qwen.line("nope")
    side = qwen.beside({"pirate": "Arr, ye be Jim", "typed-greeting": None}, "measured, X")
    assert str(side).splitlines() == [
        "user: What is my name?", "  [measured, X] Arr, ye be Jim",
        "  [recorded, Qwen2-0.5B-Instruct] Your name is Jim.",
        "user: Hi! I'm Bob", "  [recorded, typed by the notebook's author] "
        "Hello Bob! How can I assist you today?"]
    rows = side.record()["rows"]
    assert [(r["key"], r["live"], r["author"]) for r in rows] == [
        ("pirate", "Arr, ye be Jim", "Qwen2-0.5B-Instruct"),
        ("typed-greeting", None, "typed by the notebook's author")]


def test_a_described_reply_is_never_shown_as_text(tmp_path):
    data = json.loads(QWEN2_MEMORY_FILE.read_text(encoding="utf-8"))
    data["lines"][1].update(reply=None, description="a generic paragraph about what names are")
    path = tmp_path / "described.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    alone = _load(path).line("alone")
    assert alone.shown == "<described: a generic paragraph about what names are>"
    with pytest.raises(KeyError, match="only describes"):
        _load(path).reply("alone")
    data["lines"][1]["description"] = None
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="exactly one of reply or description"):
        _load(path)


def test_recording_loader_rejects_bad_labels(tmp_path):
    data = json.loads(QWEN2_MEMORY_FILE.read_text(encoding="utf-8"))
    data["lines"][1]["label"] = "measured"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="label 'measured'"):
        _load(bad)
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json"):
        _load(bad)


def test_qwen2_chat_text_adds_the_default_system_message():
    text = qwen2_chat_text([HumanMessage("hi")])
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    own = qwen2_chat_text([SystemMessage("Be brief."), HumanMessage("hi")])
    assert own.startswith("<|im_start|>system\nBe brief.<|im_end|>") and "helpful" not in own


def test_concurrent_error_is_raised_in_the_caller():
    app = build_chat_graph(scripted(), system_template="{language}", state_schema=LanguageState)
    with pytest.raises(KeyError):
        run_threads_concurrently(app, {"a": ["hi"], "b": ["hi"]})


# --- with the real bundled model -----------------------------------------------------------

@pytest.fixture(scope="module")
def local():
    from course.models import load_local_model

    return load_local_model()


def test_render_prompt_matches_the_chat_template(local):
    from course.models import chat_model, text_generation_pipeline

    chat = chat_model(text_generation_pipeline(max_new_tokens=2))
    messages = [HumanMessage("Hi! I'm Bob"), AIMessage("Hello!"), HumanMessage("What's my name?")]
    expected = local.render_chat([{"role": "user", "content": "Hi! I'm Bob"},
                                  {"role": "assistant", "content": "Hello!"},
                                  {"role": "user", "content": "What's my name?"}])
    assert render_prompt(chat, messages) == expected


def test_p_bob_rises_with_history(local):
    alone = memory.next_token_probability(local, [HumanMessage("What's my name?")])
    history = memory.next_token_probability(local, [
        HumanMessage("Hi! I'm Bob"), AIMessage("Hello Bob! How can I assist you today?"),
        HumanMessage("What's my name?")])
    assert 0 < alone.probability < history.probability <= 1
    assert history.probability / alone.probability > 10
    assert history.rank < alone.rank and len(history.top) == 5
    assert "P(' Bob'" in repr(history)
    same = memory.next_token_probability(local, [{"role": "user", "content": "What's my name?"}])
    assert same.probability == pytest.approx(alone.probability)


def test_prompt_size_counts_with_the_model_and_the_qwen_tokenizer():
    from course.models import notes_tokenizer

    messages = [HumanMessage("Hi! I'm Bob"), AIMessage("Hello Bob!"), HumanMessage("What's my name?")]
    size = prompt_size(messages)
    tokenizer, label = notes_tokenizer()
    want = len(tokenizer.encode(qwen2_chat_text(messages), add_special_tokens=False))
    assert size.tokens("Qwen2-Instruct chat template") == want
    assert size.record()["counts"][1] == {"counter": size.counts[1][0], "tokens": want}
    assert label in str(size) and str(size).startswith("prompt size (measured): ")
    assert size.counts[0][1] > 0 and "its chat template" in size.counts[0][0]


def test_history_effect_gain_and_rendering(local):
    effect = memory.history_effect(local, {
        "alone": [HumanMessage("What's my name?")],
        "history": [HumanMessage("Hi! I'm Bob"), AIMessage("Hello Bob!"),
                    HumanMessage("What's my name?")]})
    assert effect.gain("alone") == 1.0
    assert effect.gain("history") == pytest.approx(
        effect.probabilities["history"].probability / effect.probabilities["alone"].probability)
    assert effect.gain("history") > 10
    assert "history: P(' Bob') = " in str(effect) and "<table>" in effect._repr_html_()
    rows = effect.record()["rows"]  # what a notebook test reads
    assert [r["conversation"] for r in rows] == ["alone", "history"]
    assert rows[1]["gain"] == pytest.approx(effect.gain("history")) and rows[0]["gain"] == 1.0


def test_next_token_probability_bad_input(local):
    with pytest.raises(ValueError, match="exactly one"):
        memory.next_token_probability(local, [HumanMessage("hi")], target=" Bobby McBobface")
    with pytest.raises(ValueError, match="empty"):
        memory.next_token_probability(local, [])
