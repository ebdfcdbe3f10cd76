"""One place that decides which model a notebook gets, and builds it for each library.

The active choice comes from ``COURSE_MODEL`` (see :mod:`course.settings`). Chapters ask for
what they need and never load a model themselves:

- :func:`load_local_model` -> a :class:`LocalModel` (transformers model + tokenizer), cached per
  kernel; for the bundled model this is SmolLM2-135M-Instruct, loaded from the converted copy.
- :func:`text_generation_pipeline` -> a transformers ``text-generation`` pipeline.
- :func:`chat_model` -> a LangChain chat model: ``ChatHuggingFace`` over that pipeline, or
  ``ChatOpenAI`` for a server.
- :func:`smolagents_model` -> ``TransformersModel`` or ``OpenAIServerModel``.

A bad setting fails fast with :class:`~course.settings.CourseSettingError` naming
``COURSE_MODEL`` and the fix; nothing waits minutes on hub retries. What this module does not
do: pick generation settings for a lesson (each chapter passes its own), or make a 135M model
answer like a 4B one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from course.settings import (
    MODEL_SETTING,
    CourseSettingError,
    ModelChoice,
    active_model,
    hub_offline,
)

SERVER_TIMEOUT_S = 3.0


@dataclass
class LocalModel:
    """A transformers causal LM with its tokenizer, and where it came from."""

    model: Any
    tokenizer: Any
    choice: ModelChoice
    source: str
    load_seconds: float = field(default=0.0)

    @property
    def name(self) -> str:
        """A short, readable name for outputs and traces."""
        return self.choice.describe()

    def render_chat(self, messages: list[dict], add_generation_prompt: bool = True, **kw) -> str:
        """The exact text the model receives for ``messages`` (the chat template applied)."""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kw
        )

    def count_tokens(self, text: str) -> int:
        """Number of tokens the model's own tokenizer makes of ``text`` (no special tokens added)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, messages: list[dict], max_new_tokens: int = 64, **kw) -> str:
        """Greedy reply to chat ``messages`` (only the new text, never the prompt)."""
        import torch

        inputs = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        kw.setdefault("do_sample", False)
        with torch.no_grad():
            output = self.model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                pad_token_id=self.tokenizer.eos_token_id,
                **kw,
            )
        new_tokens = output[0, inputs["input_ids"].shape[1] :]
        return self.tokenizer.decode(new_tokens, skip_special_tokens=True).strip()


def _resolve_transformers_source(choice: ModelChoice) -> str:
    """The path or hub id ``from_pretrained`` should read, checked fast."""
    if choice.kind == "bundled":
        from course.assets import AssetError, bundled_model_dir

        try:
            return str(bundled_model_dir())
        except AssetError as err:
            raise CourseSettingError(
                f"{MODEL_SETTING} selects the bundled model, but it is not available: {err}"
            ) from err
    if choice.kind == "path":
        return choice.value
    if choice.kind == "hub":
        if hub_offline():
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(choice.value, "config.json")
            if not isinstance(cached, str):
                raise CourseSettingError(
                    f"{MODEL_SETTING}={choice.value!r} is a Hugging Face id, but hub access is "
                    "off (HF_HUB_OFFLINE=1) and the model is not in the local cache. Fix: run "
                    f"`course.use_model({choice.value!r}, online=True)` on a machine with "
                    f"network, or unset {MODEL_SETTING} to use the bundled model."
                )
        return choice.value
    raise CourseSettingError(
        f"{MODEL_SETTING}={choice.value!r} is a server; this chapter needs a model loaded in "
        "the kernel (it reads token probabilities or the tokenizer). Fix: use a Hugging Face id "
        f"or unset {MODEL_SETTING}."
    )


@lru_cache(maxsize=2)
def _load(choice: ModelChoice) -> LocalModel:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    source = _resolve_transformers_source(choice)
    start = time.perf_counter()
    hf_logging.disable_progress_bar()  # a warm load takes well under a second: no bar needed
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    except OSError as err:
        raise CourseSettingError(
            f"{MODEL_SETTING}={choice.value!r} could not be loaded ({err}). Fix: check the id or "
            f"path, or unset {MODEL_SETTING} to use the bundled model."
        ) from err
    finally:
        hf_logging.enable_progress_bar()
    model.eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LocalModel(model, tokenizer, choice, source, time.perf_counter() - start)


def load_local_model(choice: ModelChoice | None = None) -> LocalModel:
    """The active model loaded in this kernel (cached: later calls return the same object)."""
    return _load(choice or active_model())


def text_generation_pipeline(
    return_full_text: bool = False, max_new_tokens: int = 48, **generate_kwargs: Any
):
    """A transformers ``text-generation`` pipeline over the active model, greedy by default.

    ``return_full_text`` defaults to False here because only the model's answer belongs in the
    conversation store; the trimming chapter passes True on purpose to show the bug.
    """
    from transformers import pipeline

    local = load_local_model()
    generate_kwargs.setdefault("do_sample", False)
    return pipeline(
        "text-generation",
        model=local.model,
        tokenizer=local.tokenizer,
        return_full_text=return_full_text,
        max_new_tokens=max_new_tokens,
        **generate_kwargs,
    )


def _server_model_name(choice: ModelChoice) -> str:
    """The served model name: from the setting, or the first one ``GET /models`` lists."""
    if choice.served_model:
        return choice.served_model
    import httpx

    try:
        response = httpx.get(f"{choice.value}/models", timeout=SERVER_TIMEOUT_S)
        response.raise_for_status()
        models = response.json().get("data", [])
    except (httpx.HTTPError, ValueError) as err:
        raise CourseSettingError(
            f"{MODEL_SETTING}={choice.value!r}: the server did not answer GET /models within "
            f"{SERVER_TIMEOUT_S:.0f} s ({err}). Fix: start the server, check the URL (it usually "
            f"ends in /v1), or unset {MODEL_SETTING} to use the bundled model."
        ) from err
    if not models:
        raise CourseSettingError(
            f"{MODEL_SETTING}={choice.value!r}: the server lists no models. Fix: append "
            "'#model-name' to the URL."
        )
    return str(models[0]["id"])


def chat_model(pipeline: Any | None = None, **kwargs: Any):
    """A LangChain chat model for the active setting.

    Local or hub models: ``ChatHuggingFace`` over ``pipeline`` (default:
    :func:`text_generation_pipeline`). Servers: ``ChatOpenAI`` pointed at the URL.
    """
    choice = active_model()
    if choice.kind == "server":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            base_url=choice.value,
            model=_server_model_name(choice),
            api_key=kwargs.pop("api_key", "not-needed"),
            temperature=kwargs.pop("temperature", 0),
            **kwargs,
        )
    from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline

    local = load_local_model()
    pipe = pipeline if pipeline is not None else text_generation_pipeline()
    llm = HuggingFacePipeline(pipeline=pipe, model_id=local.source)
    return ChatHuggingFace(llm=llm, tokenizer=local.tokenizer, model_id=local.source, **kwargs)


def smolagents_model(**kwargs: Any):
    """A smolagents model for the active setting: TransformersModel or OpenAIServerModel."""
    choice = active_model()
    if choice.kind == "server":
        from smolagents import OpenAIServerModel

        return OpenAIServerModel(
            model_id=_server_model_name(choice),
            api_base=choice.value,
            api_key=kwargs.pop("api_key", "not-needed"),
            **kwargs,
        )
    from smolagents import TransformersModel

    local = load_local_model()
    kwargs.setdefault("max_new_tokens", 256)
    return TransformersModel(model_id=local.source, device_map="cpu", **kwargs)
