"""The course's two smolagents models: one over the kernel's weights, one for a server.

:class:`SharedTransformersModel` is smolagents' ``TransformersModel`` over an already loaded
:class:`~course.models.local.LocalModel` (the parent's ``__init__`` would load a second copy of
the weights). :class:`ServedOpenAIServerModel` is ``OpenAIServerModel`` whose every failure,
streamed or not, is one :class:`~course.models.served.ServerError` naming the setting.

What this module does not handle: choosing between them (:func:`course.models.smolagents_model`
does), the timeouts and retries (the openai client's), or vision models. Importing it imports
smolagents and transformers, so :mod:`course.models` imports it only when one is built.
"""

from __future__ import annotations

from typing import Any

from smolagents import Model, OpenAIServerModel, TransformersModel
from transformers import TextIteratorStreamer

from course.models.local import LocalModel
from course.models.served import CallBudget, replies, server_errors
from course.settings import ModelChoice


class SharedTransformersModel(TransformersModel):
    """smolagents' TransformersModel over an already loaded :class:`LocalModel`.

    TransformersModel's own ``__init__`` loads a second copy of the weights; this one reuses
    the kernel's model and tokenizer, and keeps every generation method of the parent.
    """

    def __init__(self, local: LocalModel, max_new_tokens: int = 256,
                 apply_chat_template_kwargs: dict | None = None, **kwargs: Any) -> None:
        self._is_vlm = False
        self.model_kwargs: dict[str, Any] = {}
        self.apply_chat_template_kwargs = apply_chat_template_kwargs or {}
        self.model = local.model
        self.tokenizer = local.tokenizer
        self.streamer = TextIteratorStreamer(
            local.tokenizer, skip_prompt=True, skip_special_tokens=True)
        Model.__init__(self, flatten_messages_as_text=True, model_id=local.source,
                       max_new_tokens=max_new_tokens, **kwargs)


def is_reply_delta(delta: Any) -> bool:
    """A smolagents stream delta that holds text or a tool call. smolagents drops the
    finish_reason, so a model that streams an empty reply looks like a stream of empty
    ``choices``: both are a ServerError (an agent cannot act on either)."""
    return bool(delta.content or delta.tool_calls)


class ServedOpenAIServerModel(OpenAIServerModel):
    """OpenAIServerModel whose failures are one :class:`ServerError` naming the setting."""

    def __init__(self, choice: ModelChoice, budget: CallBudget, **kwargs: Any) -> None:
        self.course_choice, self.course_budget = choice, budget
        super().__init__(**kwargs)

    def generate(self, *args: Any, **kwargs: Any):
        with server_errors(self.course_choice, self.course_budget):
            return super().generate(*args, **kwargs)

    def generate_stream(self, *args: Any, **kwargs: Any):
        with server_errors(self.course_choice, self.course_budget):
            yield from replies(self.course_choice, super().generate_stream(*args, **kwargs),
                               is_reply_delta)
