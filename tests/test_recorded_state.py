"""The original notebook's trimming app state, as recorded: the shared artefact of the memory and
trimming lessons (its figures are the note's: 205 characters, thread ``abc123``, Spanish)."""

from course.memory.recorded import original_trimming_state
from course.records import RECORD_MIME


def test_the_recorded_state_is_the_original_notebooks():
    state = original_trimming_state()
    assert (state.thread_id, state.language, state.label) == ("abc123", "Spanish", "recorded")
    assert [kind for kind, _ in state.messages] == ["human", "ai"]
    human, ai = (content for _, content in state.messages)
    assert human == "Hi! I'm Bob."
    assert len(ai) == 205
    assert ai.startswith("<|im_start|>system\nYou are a helpful assistant. Answer all questions")
    assert ai.endswith("<|im_start|>assistant\n¡Hola, Bob! ¿Cómo estás?")


def test_it_says_its_values_to_a_machine():
    bundle = original_trimming_state()._repr_mimebundle_()
    assert bundle[RECORD_MIME]["thread_id"] == "abc123"
    assert len(bundle[RECORD_MIME]["messages"][1][1]) == 205
