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
