"""The bundled model loads offline through every factory the chapters use."""

import pytest

from course import models


@pytest.fixture(scope="module")
def local():
    return models.load_local_model()


def test_bundled_model_is_smollm2_and_generates(local):
    assert local.choice.kind == "bundled"
    assert local.model.config.model_type == "llama"
    reply = local.generate([{"role": "user", "content": "Say hello."}], max_new_tokens=8)
    assert isinstance(reply, str) and reply and "<|im_start|>" not in reply


def test_chat_template_puts_the_history_in_the_prompt(local):
    text = local.render_chat([{"role": "user", "content": "Hi! I'm Bob"},
                              {"role": "assistant", "content": "Hello Bob!"},
                              {"role": "user", "content": "What's my name?"}])
    assert text.index("I'm Bob") < text.index("Hello Bob!") < text.index("What's my name?")
    assert text.endswith("<|im_start|>assistant\n")


def test_pipeline_returns_only_the_answer_by_default(local):
    pipe = models.text_generation_pipeline(max_new_tokens=5)
    prompt = local.render_chat([{"role": "user", "content": "Say hi."}])
    out = pipe(prompt)[0]["generated_text"]
    assert not out.startswith(prompt)
    full = models.text_generation_pipeline(return_full_text=True, max_new_tokens=5)(prompt)
    assert full[0]["generated_text"].startswith(prompt)


def test_chat_model_and_smolagents_model_from_the_same_setting(local):
    from langchain_core.messages import HumanMessage
    from langchain_huggingface import ChatHuggingFace
    from smolagents import TransformersModel

    chat = models.chat_model(models.text_generation_pipeline(max_new_tokens=5))
    assert isinstance(chat, ChatHuggingFace)
    assert chat.invoke([HumanMessage("Say hi.")]).content
    agent_model = models.smolagents_model(max_new_tokens=5)
    assert isinstance(agent_model, TransformersModel)
    assert agent_model.model_id == local.source


def test_one_copy_of_the_weights(local):
    """The pipeline, the LangChain model and the smolagents model wrap the very tensors loaded."""
    first = next(local.model.parameters()).data_ptr()
    agent_model = models.smolagents_model(max_new_tokens=5)
    assert next(agent_model.model.parameters()).data_ptr() == first
    pipe = models.chat_model().llm.pipeline
    assert next(pipe.model.parameters()).data_ptr() == first
    assert models.probe_model() is local
    reply = agent_model.generate([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    assert reply.content and reply.token_usage.output_tokens <= 5


def test_roles_are_stated_for_the_bundled_model(local):
    assert models.agent_is_local()
    note = models.probe_note()
    assert note.startswith("probe model: SmolLM2-135M-Instruct") and "same model" in note
    report = models.describe_models()
    assert (report.device, report.dtype, report.server) == ("cpu", "float32", None)
    assert "agent model: SmolLM2" in str(report) and report.ok


def test_notes_tokenizer_is_qwen_or_says_what_it_counts_with(local):
    tokenizer, label = models.notes_tokenizer()
    if label == "Qwen3 tokenizer":
        assert len(tokenizer) == 151669
    else:
        assert label.startswith("SmolLM2-135M-Instruct tokenizer") and "missing" in label
        assert tokenizer is local.tokenizer


def _chat(*turns: tuple[str, str]) -> list[dict]:
    return [{"role": role, "content": [{"type": "text", "text": text}]} for role, text in turns]


def test_a_later_step_reads_the_previous_prompt_from_its_cache(local):
    """An agent's step repeats the previous step's prompt: the smolagents model starts from that
    prompt's kept keys and values, and writes the tokens a model reading it all would write."""
    first = _chat(("system", "You answer with Python code in <code> tags."),
                  ("user", "Print the sum of 2 and 3."))
    model = models.smolagents_model(max_new_tokens=12)
    step1 = model.generate(first)
    second = first + _chat(("assistant", step1.content), ("user", "Observation: 5"))
    step2 = model.generate(second)
    assert model.reused_tokens == step1.token_usage.input_tokens  # the whole first prompt
    whole = models.smolagents_model(max_new_tokens=12)  # a new object: nothing kept
    again = whole.generate(second)
    assert whole.reused_tokens == 0
    assert again.content == step2.content and again.token_usage == step2.token_usage


def test_room_for_the_reply_gives_the_same_numbers_without_a_copy_per_token(local):
    """A cache whose layers write each new token into room kept after the prompt gives the
    logits of transformers' own DynamicCache, bit for bit, and never copies the cache again."""
    import torch
    from transformers import DynamicCache

    from course.models.for_smolagents import with_room

    ids = local.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a Python function that adds two numbers."}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    runs = {}
    for kind, cache in [("dynamic", DynamicCache()), ("roomy", with_room(DynamicCache(), 12))]:
        with torch.no_grad():
            runs[kind] = local.model.generate(
                ids, past_key_values=cache, max_new_tokens=12, min_new_tokens=12,
                do_sample=False, output_logits=True, return_dict_in_generate=True,
                pad_token_id=local.tokenizer.eos_token_id), cache
    (plain, _), (roomy, cache) = runs["dynamic"], runs["roomy"]
    assert torch.equal(roomy.sequences, plain.sequences)
    assert all(torch.equal(a, b) for a, b in zip(roomy.logits, plain.logits, strict=True))
    layer = cache.layers[0]  # prompt + 11 fed-back tokens, all in the one room made at the prompt
    assert layer.get_seq_length() == ids.shape[1] + 11
    assert layer.keys.data_ptr() == layer._room[0].data_ptr()
    assert layer._room[0].shape[-2] == ids.shape[1] + 12


def test_a_roomy_cache_never_writes_under_another_cache(local):
    """A deep copy (the previous prompt's cache, shared by views) gets room of its own on its
    first update, and a cropped layer gives its room up: the kept keys stay as they were."""
    import copy

    import torch
    from transformers import DynamicCache

    from course.models.for_smolagents import with_room

    kept = with_room(DynamicCache(), 8)
    with torch.no_grad():
        local.model(input_ids=torch.tensor([[1, 2, 3, 4, 5, 6]]), past_key_values=kept)
    before = kept.layers[0].keys.clone()
    tensors = [t for layer in kept.layers for t in (layer.keys, layer.values)]
    twin = copy.deepcopy(kept, {id(t): t for t in tensors})
    assert twin.layers[0].keys is kept.layers[0].keys  # shared, not copied
    twin.crop(-2)
    with torch.no_grad():
        local.model(input_ids=torch.tensor([[7, 8]]), past_key_values=twin)
    assert torch.equal(kept.layers[0].keys, before)
    assert twin.layers[0]._room[0].data_ptr() != kept.layers[0]._room[0].data_ptr()
    kept.crop(-3)
    assert kept.layers[0]._room is None
