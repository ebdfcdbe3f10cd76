"""The memory chapter: stateless model, threads, update rules, prompt assembly, persistence, reuse."""

import re

import pytest

NOTEBOOK = "05_memory.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def _probabilities(text: str) -> dict[str, float]:
    found = re.findall(r"^\s*(.+?): P\(' Bob'\) = ([0-9.]+)", text, flags=re.M)
    return {label.strip(): float(p) for label, p in found}


def test_history_is_in_the_second_prompt_and_absent_in_the_first(run):
    alone = run.text("alone")
    assert "What's my name?" in alone and "I'm Bob" not in alone.split("--- SmolLM2")[0]
    history = run.text("with-history")
    prompt = history.split("--- SmolLM2")[0]
    assert prompt.index("Hi! I'm Bob") < prompt.index("What's my name?")
    assert "'Hi! I'm Bob' in the first prompt: False | in the second: True" in history


def test_published_outputs_are_labelled_recorded(run):
    text = run.text("recorded-qwen")
    assert "[recorded, Qwen2-0.5B-Instruct]" in text and "Your name is Bob." in text
    assert "[reconstructed from the note, Qwen2-0.5B-Instruct]" in text
    assert "[recorded, Qwen2-0.5B-Instruct] What is my name? -> Your name is Jim." in run.text(
        "pirate")
    assert "[recorded, Qwen2-0.5B-Instruct] turn 2: Tu nombre es Bob." in run.text("language")


def test_p_bob_is_higher_with_history(run):
    p = _probabilities(run.text("p-bob"))
    assert set(p) == {"question alone", "after its own greeting", "after the published greeting"}
    assert p["after its own greeting"] > 10 * p["question alone"]
    assert p["after the published greeting"] > 10 * p["question alone"]
    assert run.has_image("p-bob-chart")


def test_thread_continues_from_its_checkpoint(run):
    text = run.text("thread-abc123")
    prompt = text.split("rebuilt from the checkpoint):")[1]
    assert prompt.index("Hi! I'm Bob") < prompt.index("What's my name?")
    assert prompt.rstrip().endswith("<|im_start|>assistant")


def test_new_thread_starts_empty(run):
    text = run.text("new-thread")
    assert "saved in 'abc123': 4 messages" in text
    assert "saved in 'xyz789' before: 0 messages" in text
    assert "what the model received in 'xyz789': ['human']" in text
    assert "'Bob' in that prompt: False" in text


def test_one_checkpoint_per_step(run):
    text = run.text("checkpoints")
    assert "6 checkpoints for 2 turns" in text
    counts = [int(line.split()[-1]) for line in text.splitlines()[1:7]]
    assert counts == [0, 1, 2, 2, 3, 4]


def test_pirate_prompt_system_first_newest_user_last(run):
    prompt = run.text("pirate").split("newest user message last")[1].strip()
    assert prompt.startswith("<|im_start|>system\nYou talk like a pirate.")
    assert prompt.index("Hi! I'm Jim.") < prompt.index("What is my name?")
    assert prompt.endswith("What is my name?<|im_end|>\n<|im_start|>assistant")


def test_language_persists_when_omitted(run):
    text = run.text("language")
    system = text.split("the system message the model received on turn 2:")[1]
    assert "to the best of your ability in Spanish." in system
    state = run.text("get-state")
    assert "language: Spanish" in state and "4 saved messages" in state


def test_only_the_answer_is_stored(run):
    text = run.text("stored-answer")
    assert "NEW_TEXT" in text
    assert "any chat-template markup or user text inside: False" in text
    assert text.count("stored assistant message") == 2


def test_sqlite_conversation_survives_a_new_process(run):
    assert "written by this kernel: 4 messages" in run.text("sqlite-write")
    text = run.text("sqlite-restart")
    assert "read by a new process:  4 messages" in text
    assert "identical to what was written: True | messages lost: 0" in text


def test_concurrent_threads_are_isolated(run):
    text = run.text("concurrent")
    assert text.count("exactly what was sent: True") == 2
    assert "4 model calls; prompts that contain both conversations: 0" in text


def test_prefix_reuse_identical_outputs_and_figures_printed(run):
    text = run.text("prefix-reuse")
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s*\d+\s+\d+\s+\d+", line)]
    assert len(rows) == 10
    assert all(row[-1] == "yes" for row in rows)
    assert rows[0][2] == "0" and all(int(row[2]) > 0 for row in rows[1:])
    assert "identical token for token on 10 of 10 turns" in text
    assert "time to first token" in text and "faster with prefix reuse" in text
    assert run.has_image("prefix-plot")


def test_closing_note_has_the_figures(run):
    text = run.text("closing-note")
    assert "P(' Bob' | 'Your name is'), question alone:" in text
    assert "speed-up by turn" in text and "10: " in text
    assert "outputs identical on all turns: True" in text


@pytest.mark.parametrize("number", [1, 2, 3])
def test_exercises_pass(run, number):
    assert f"[passed] Exercise {number}" in run.text(f"ex{number}-check")
