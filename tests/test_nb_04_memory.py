"""Chapter 04 executed: each test reads the values a cell computed from the records it displays
(``run.record`` / ``run.records``; the lines shown with ``course.records.show``, by key:
``run.shown`` / ``run.shown_one``), not from its printed prose. Text checks remain for what a
student must read: the provenance labels, the kind of prompt shown, the closing note's wording."""

import re

import pytest

NOTEBOOK = "04_memory.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_history_is_in_the_second_prompt_and_absent_in_the_first(run):
    # in this kernel the cells show the token sequence itself (a server's run says transcript)
    for cell in ("alone", "with-history"):
        assert run.text(cell).startswith("what the model receives: the token sequence as text")
    alone = run.shown_one("alone", "prompt")
    assert "What's my name?" in alone and "I'm Bob" not in alone
    prompt = run.shown_one("with-history", "prompt")
    assert prompt.index("Hi! I'm Bob") < prompt.index("What's my name?")
    assert run.shown_one("with-history", "bob_in_prompt") == {"first": False, "second": True}


def test_prompt_sizes_are_counted_with_both_tokenizers_and_grow_with_history(run):
    from course.models import notes_tokenizer

    def sizes(cell):
        counts = run.record(cell, shown=False)["counts"]
        assert [c["counter"].endswith(end) for c, end in zip(counts, (
            ", its chat template", ", Qwen2-Instruct chat template"), strict=True)] == [True, True]
        return counts

    alone, history = sizes("alone"), sizes("with-history")
    # "Qwen3 tokenizer" where the asset is prepared
    assert alone[1]["counter"].startswith(notes_tokenizer()[1])
    for mine, more in zip(alone, history, strict=True):
        assert more["tokens"] > mine["tokens"] + 10
    # Qwen2's template adds a 5-token default system message; SmolLM2's adds a longer one.
    assert alone[0]["tokens"] != alone[1]["tokens"]


MEASURED = "measured, SmolLM2-135M-Instruct (bundled)"


def _beside(run, cell):
    """The rows of the live-beside-published record a cell displayed, by key."""
    side = run.record(cell, shown=False)
    assert side["live_label"].startswith(MEASURED)  # the label rule: what ran here says so
    return {row["key"]: row for row in side["rows"]}


def test_live_replies_stand_beside_the_labelled_recorded_ones(run):
    rows = _beside(run, "recorded-qwen")
    assert list(rows) == ["greeting", "alone", "typed-greeting", "with-history"]
    assert {r["label"] for r in rows.values()} == {"recorded"}
    # Qwen2's own greeting; the history's greeting was typed by the notebook's author
    assert rows["greeting"]["published"] == "Hello, Bob! How can I assist you today?"
    assert rows["greeting"]["author"] == "Qwen2-0.5B-Instruct"
    typed = rows["typed-greeting"]
    assert (typed["published"], typed["author"], typed["live"]) == (
        "Hello Bob! How can I assist you today?", "typed by the notebook's author", None)
    assert rows["alone"]["published"].startswith("Your name is your unique identifier")
    assert rows["with-history"]["published"].startswith("Your name is Bob.")
    assert rows["with-history"]["live"] == run.shown_one("with-history", "answer")
    assert rows["alone"]["live"] == run.shown_one("alone", "answer")
    for cell, key, published in (("thread-abc123", "thread-2", "Your name is Bob. Is there"),
                                 ("pirate", "pirate", "Your name is Jim."),
                                 ("language", "language-1", "¡Hola, Bob! ¿Cómo puedo ayudarte hoy?"),
                                 ("language", "language-2", "Tu nombre es Bob.")):
        row = _beside(run, cell)[key]
        assert row["published"].startswith(published) and row["live"], (cell, row)


def test_p_bob_is_higher_with_history_and_the_probe_is_named(run):
    assert run.text("p-bob").startswith("probe model: SmolLM2-135M-Instruct")
    rows = {r["conversation"]: r for r in run.record("p-bob", shown=False)["rows"]}
    assert list(rows) == ["question alone", "after the greeting above",
                          "after the hand-typed greeting"]
    alone = rows["question alone"]
    assert alone["gain"] == 1.0
    for label in ("after the greeting above", "after the hand-typed greeting"):
        assert rows[label]["probability"] > 10 * alone["probability"]
        assert rows[label]["gain"] == pytest.approx(rows[label]["probability"]
                                                    / alone["probability"])
        assert rows[label]["rank"] < alone["rank"]
    assert run.has_image("p-bob")


def test_the_lesson_writes_the_three_pieces_before_its_exercises(run):
    ids = [c.id for c in run.nb.cells]
    for cell in ("chat-graph", "prompt-template", "language-state"):
        source = run.cells(cell)[0].source
        assert source.startswith("# saved in course.memory.chat_graph"), cell
        assert ids.index(cell) < ids.index("quiz")
    assert "MemorySaver()" in run.cells("chat-graph")[0].source
    assert "MessagesPlaceholder" in run.cells("prompt-template")[0].source
    assert "Annotated[Sequence[BaseMessage], add_messages]" in run.cells("language-state")[0].source
    for cell in ("thread-abc123", "pirate", "language"):  # the lesson uses its own pieces
        assert "compile_chat_graph(" in run.cells(cell)[0].source, cell


def test_thread_continues_from_its_checkpoint(run):
    rows = _beside(run, "thread-abc123")
    assert [r["user"] for r in rows.values()] == ["Hi! I'm Bob.", "What's my name?"]
    assert "received on turn 2: the token sequence as text" in run.text("thread-abc123")
    prompt = run.shown_one("thread-abc123", "prompt")
    assert prompt.index("Hi! I'm Bob.") < prompt.index("What's my name?")
    assert rows["thread-1"]["live"] in prompt  # the saved reply came back in the prompt
    assert prompt.rstrip().endswith("<|im_start|>assistant")


def test_new_thread_starts_empty(run):
    saved = run.shown("new-thread")["saved"]
    assert {s["thread"]: s["messages"] for s in saved} == {"abc123": 4, "xyz789": 0}
    assert run.shown_one("new-thread", "received") == ["human"]  # received in 'xyz789'


def test_one_checkpoint_per_step_with_parents(run):
    table = run.record("checkpoints", shown=False)
    assert table["thread_id"] == "abc123"
    rows = table["rows"]
    assert [r["messages"] for r in rows] == [0, 1, 2, 2, 3, 4]
    assert [r["source"] for r in rows] == ["input", "loop", "loop"] * 2
    assert [r["parent"] for r in rows] == [None, 1, 2, 3, 4, 5]
    assert [r["next"] for r in rows] == [["__start__"], ["model"], []] * 2


def test_streaming_updates_and_tokens(run):
    (update,) = run.shown("stream-updates")["update"]
    assert update["node"] == "model" and len(update["messages"]) == 1
    (kind, text), = update["messages"]
    assert kind == "ai" and text.strip()
    pieces = run.shown_one("stream-tokens", "pieces")
    assert pieces["pieces"] >= 2 and pieces["node"] == "model" and pieces["joined equal"] is True


def test_pirate_prompt_system_first_newest_user_last(run):
    prompt = run.shown_one("pirate", "prompt").strip()
    assert prompt.startswith("<|im_start|>system\nYou talk like a pirate.")
    assert prompt.index("Hi! I'm Jim.") < prompt.index("What is my name?")
    assert prompt.endswith("What is my name?<|im_end|>\n<|im_start|>assistant")


def test_language_persists_when_omitted(run):
    from course.memory.chat_graph import LANGUAGE_TEMPLATE

    system = run.shown_one("language", "system")  # the system message the model received on turn 2
    assert system.strip() == LANGUAGE_TEMPLATE.format(language="Spanish")
    state = run.record("get-state", shown=False)
    assert (state["thread_id"], state["language"], state["label"]) == ("abc456", "Spanish",
                                                                      "measured")
    assert [kind for kind, _ in state["messages"]] == ["human", "ai", "human", "ai"]
    assert [text for kind, text in state["messages"] if kind == "human"] == [
        "Hi! I'm Bob.", "What is my name?"]


def test_the_original_read_back_is_shown_exactly_with_its_gpt2_count(run):
    from langchain_core.language_models.base import get_tokenizer
    from langchain_core.messages import AIMessage, get_buffer_string

    from course.memory.recorded import original_trimming_state

    state = run.record("original-readback", shown=False)
    assert state == original_trimming_state().record()  # the recorded artefact, not a rebuild
    assert (state["thread_id"], state["language"], state["label"]) == ("abc123", "Spanish",
                                                                      "recorded")
    (_, human), (_, ai) = state["messages"]
    assert human == "Hi! I'm Bob." and len(ai) == 205
    size = run.shown_one("original-readback", "size")
    chars, tokens = size["characters"], size["gpt2_tokens"]
    want = len(get_tokenizer().encode(get_buffer_string([AIMessage(ai)])))
    assert (chars, tokens) == (205, want) and tokens >= 66  # the note: at least 66
    assert "205 characters" in run.text("original-readback")  # the student sees the figure


def test_only_the_answer_is_stored(run):
    assert run.shown_one("stored-answer", "return_type") == "ReturnType.NEW_TEXT"
    assert run.shown_one("stored-answer", "inside") is False  # no markup or user text inside
    stored = run.shown("stored-answer")["stored"]
    assert len(stored) == 2 and all(0 < len(reply) < 200 for reply in stored)


def test_time_travel_replay_and_fork(run):
    before = run.record("time-travel", shown=False)["rows"]
    assert len(before) == 6 and [r["messages"] for r in before] == [0, 1, 2, 2, 3, 4]
    assert run.shown_one("replay", "replayed")["checkpoint"] == 2
    assert "[measured, SmolLM2-135M-Instruct" in run.text("replay")  # the replay's label
    assert run.shown_one("replay", "same") is True  # greedy decoding: the same reply as the first time
    counts = run.shown_one("fork", "checkpoints")
    assert counts["before"] == len(before) and counts["after"] > counts["before"]
    assert counts["forks"] == [2]
    assert run.has_image("fork-plot")
    assert "latest branch (the ai messages: measured, SmolLM2-135M-Instruct" in run.text("fork")
    latest = run.shown_one("fork", "latest")
    assert ["human", "Hi! I'm Bob"] in latest and not any("Rob" in text for _, text in latest)


def test_remove_message_deletes_from_state_trimming_does_not(run):
    assert run.shown_one("remove-message", "trimming") == {"seen": 2, "held": 4}
    assert run.shown_one("remove-message", "removed") == {"held": 2, "of": 4}
    assert len(run.shown_one("remove-message", "left")) == 2


def test_appendix_topics_are_going_further_after_the_exercises(run):
    ids = [c.id for c in run.nb.cells]
    assert ids.index("going-further") > max(ids.index(f"ex{n}-check") for n in range(1, 6))
    assert ids.index("going-further") > ids.index("ex6-answer")
    for cell in ("stream-updates", "time-travel", "remove-message"):
        assert ids.index(cell) > ids.index("going-further"), cell
    # the checkpoint file, two writers, growth and prefix reuse are appendix A2's
    assert "A2_checkpoint_files" in run.cells("going-further")[0].source
    assert not {"sqlite-write", "two-writers", "growth", "prefix-reuse"} & set(ids)


def test_outputs_that_show_the_models_words_name_their_provenance(run):
    measured = "measured, SmolLM2-135M-Instruct (bundled)"
    for cell in ("thread-abc123", "new-thread", "checkpoints", "stream-updates", "stream-tokens",
                 "get-state", "stored-answer", "time-travel", "replay", "fork",
                 "remove-message"):
        assert measured in run.text(cell), cell
    assert run.text("closing-note").startswith("measured in this run")


def test_closing_note_repeats_the_measured_figures(run):
    shown = run.shown("closing-note")
    rows = run.record("p-bob", shown=False)["rows"]
    assert [(g["conversation"], g["gain"]) for g in shown["gain"]] == [
        (r["conversation"], r["gain"]) for r in rows]
    assert round(shown["gain"][0]["gain"]) == 1
    assert shown["original"] == [run.shown_one("original-readback", "size")]
    assert shown["original"][0]["characters"] == 205
    assert "prefix" not in run.text("closing-note")  # prefix reuse is going further, not the lesson's figures


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_exercises_pass(run, number):
    assert re.search(rf"\[passed\] Exercise {number}:", run.text(f"ex{number}-check"))


def test_the_instructor_quiz_passes(run):
    assert run.has_widget("quiz")
    assert "[passed] Quiz" in run.text("quiz-check")
    assert len(re.findall(r"^q\d right: ", run.text("quiz-check"), re.M)) == 5


def test_written_question_has_a_rubric_for_the_instructor(run):
    cell = run.cells("ex6-answer")[0]
    assert cell.metadata["nbgrader"]["points"] == 3 and cell.metadata["nbgrader"]["solution"]
    assert "Rubric" in cell.source
