"""The agent model for each library the chapters use, built from the one setting.

:func:`chat_model` is the LangChain chat model: ``ChatHuggingFace`` over a transformers
pipeline for a model in the kernel, :class:`~course.models.for_langchain.ServedChatOpenAI` for
a server. :func:`smolagents_model` is the smolagents model: a ``TransformersModel`` over the
kernel's loaded weights, or an ``OpenAIServerModel`` for a server. :func:`text_generation_pipeline`
and :func:`probe_chat_model` are the transformers pipeline over the probe model, for the cells
about the pipeline itself. In the kernel, all of them wrap the very tensors
:func:`~course.models.local.load_local_model` loaded; for a server, all of them get the same
bound (``COURSE_SERVER_TIMEOUT``, see :mod:`course.models.served`).

What this module does not handle: generation settings a chapter wants (each passes its own), a
server's errors (:mod:`course.models.served`), or making a 135M model answer like a 4B one.
"""

from __future__ import annotations

from typing import Any

from course.models.local import LocalModel, load_local_model
from course.models.roles import agent_tokenizer, probe_model
from course.models.served import (
    REQUEST_RETRIES,
    CallBudget,
    http_client,
    request_timeout,
    served_model_name,
)
from course.settings import ModelChoice, active_model

CHAT_MAX_NEW_TOKENS = 48  # a chat reply, local or served, unless the chapter asks otherwise
AGENT_MAX_NEW_TOKENS = 256  # one agent step


def text_generation_pipeline(
    return_full_text: bool = False, max_new_tokens: int = CHAT_MAX_NEW_TOKENS, *,
    local: LocalModel | None = None, **generate_kwargs: Any
):
    """A transformers ``text-generation`` pipeline over ``local`` (default: the probe model),
    greedy by default.

    ``return_full_text`` defaults to False here because only the model's answer belongs in the
    conversation store; the trimming chapter passes True on purpose to show the bug.
    """
    from transformers import pipeline

    local = local or probe_model()
    generate_kwargs.setdefault("do_sample", False)
    return pipeline(
        "text-generation",
        model=local.model,
        tokenizer=local.tokenizer,
        return_full_text=return_full_text,
        max_new_tokens=max_new_tokens,
        **generate_kwargs,
    )


def _chat_huggingface(local: LocalModel, pipe: Any, **kwargs: Any):
    """``ChatHuggingFace`` over a ``text-generation`` pipeline on ``local`` (its own tensors)."""
    from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline

    llm = HuggingFacePipeline(pipeline=pipe, model_id=local.source)
    return ChatHuggingFace(llm=llm, tokenizer=local.tokenizer, model_id=local.source, **kwargs)


def _sampling(temperature: float | None, top_p: float | None) -> dict[str, Any]:
    """transformers' generation arguments: greedy unless a temperature above 0 is asked for."""
    if not temperature:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature,
            **({"top_p": top_p} if top_p is not None else {})}


def _served_chat_model(choice: ModelChoice, max_new_tokens: int | None,
                       temperature: float | None, **kwargs: Any):
    from course.models.for_langchain import ServedChatOpenAI

    budget = CallBudget(kwargs.pop("timeout", None) or request_timeout())
    kwargs.setdefault("http_client", http_client(budget.attempt, budget.longest_wait))
    kwargs.setdefault("http_async_client",
                      http_client(budget.attempt, budget.longest_wait, asynchronous=True))
    chat = ServedChatOpenAI(
        base_url=choice.value,
        model=served_model_name(choice),
        api_key=kwargs.pop("api_key", "not-needed"),
        temperature=temperature or 0,
        # sets max_tokens: its alias is the constructor's parameter name as typed
        max_completion_tokens=kwargs.pop("max_tokens", max_new_tokens or CHAT_MAX_NEW_TOKENS),
        timeout=budget.attempt,
        max_retries=kwargs.pop("max_retries", REQUEST_RETRIES),
        course_choice=choice,
        course_budget=budget,
        **kwargs,
    )
    if chat.custom_get_token_ids is None:
        tokenizer, label = agent_tokenizer(choice)
        chat.custom_get_token_ids = lambda text: tokenizer.encode(text, add_special_tokens=False)
        chat.token_counter_label = label
    return chat


def chat_model(pipeline: Any | None = None, *, max_new_tokens: int | None = None,
               temperature: float | None = None, top_p: float | None = None,
               choice: ModelChoice | None = None, **kwargs: Any):
    """The agent model as a LangChain chat model: the one builder of every chapter's chat model.

    ``max_new_tokens`` caps a reply (default 48); ``temperature`` (default: greedy) and ``top_p``
    sample. Kernel models: ``ChatHuggingFace`` over a :func:`text_generation_pipeline` with those
    settings, or over ``pipeline`` when one is given. Servers: ``ChatOpenAI`` pointed at the URL
    with the same reply length (``max_new_tokens``, else the given pipeline's) and sampling, the
    call bounded by ``COURSE_SERVER_TIMEOUT`` (openai's timeout and one retry), failures as one
    ServerError, and a token counter that never downloads (``token_counter_label`` says what it
    counts with). ``choice`` defaults to the setting.
    """
    choice = choice or active_model()
    if not choice.in_kernel:
        if max_new_tokens is None and pipeline is not None:
            max_new_tokens = getattr(pipeline, "_generate_kwargs", {}).get("max_new_tokens")
        if top_p is not None:
            kwargs.setdefault("top_p", top_p)
        return _served_chat_model(choice, max_new_tokens, temperature, **kwargs)
    pipe = pipeline if pipeline is not None else text_generation_pipeline(
        max_new_tokens=max_new_tokens or CHAT_MAX_NEW_TOKENS, local=load_local_model(choice),
        **_sampling(temperature, top_p))
    return _chat_huggingface(load_local_model(choice), pipe, **kwargs)


def probe_chat_model(*, return_full_text: bool = False,
                     max_new_tokens: int = CHAT_MAX_NEW_TOKENS):
    """The probe model as ``ChatHuggingFace`` over a greedy pipeline (always in this kernel).

    For the cells about the pipeline itself: ``return_full_text=True`` is the trimming chapter's
    bug 1, which only a transformers pipeline can show.
    """
    pipe = text_generation_pipeline(return_full_text=return_full_text,
                                    max_new_tokens=max_new_tokens)
    return _chat_huggingface(probe_model(), pipe)


def smolagents_model(choice: ModelChoice | None = None, **kwargs: Any):
    """The agent model for smolagents: ``OpenAIServerModel`` for a server, else a
    ``TransformersModel`` over the kernel's loaded model (the same tensors, no second copy)."""
    choice = choice or active_model()
    if choice.in_kernel:
        from course.models.for_smolagents import SharedTransformersModel

        kwargs.setdefault("max_new_tokens", AGENT_MAX_NEW_TOKENS)
        return SharedTransformersModel(load_local_model(choice), **kwargs)
    from course.models.for_smolagents import ServedOpenAIServerModel

    budget = CallBudget(request_timeout())
    client_kwargs = {"timeout": budget.attempt, "max_retries": REQUEST_RETRIES,
                     "http_client": http_client(budget.attempt, budget.longest_wait),
                     **kwargs.pop("client_kwargs", {})}
    kwargs.setdefault("retry", False)  # smolagents' own retry waits 60 s; openai's retries
    # the OpenAI API calls it max_tokens; the same budget as the in-kernel model gets
    kwargs["max_tokens"] = kwargs.pop("max_new_tokens", kwargs.pop("max_tokens", None)) or (
        AGENT_MAX_NEW_TOKENS)
    return ServedOpenAIServerModel(
        choice, budget,
        model_id=served_model_name(choice),
        api_base=choice.value,
        api_key=kwargs.pop("api_key", "not-needed"),
        client_kwargs=client_kwargs,
        **kwargs,
    )
