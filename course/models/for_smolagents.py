"""The course's two smolagents models: one over the kernel's weights, one for a server.

:class:`SharedTransformersModel` is smolagents' ``TransformersModel`` over an already loaded
:class:`~course.models.local.LocalModel` (the parent's ``__init__`` would load a second copy of
the weights); each call starts from the key/value cache of the previous prompt it read, so an
agent's step computes only what it adds to the last one. :class:`ServedOpenAIServerModel` is
``OpenAIServerModel`` whose every failure, streamed or not, is one
:class:`~course.models.served.ServerError` naming the setting.

What this module does not handle: choosing between them (:func:`course.models.smolagents_model`
does), the timeouts and retries (the openai client's), or vision models. Importing it imports
smolagents and transformers, so :mod:`course.models` imports it only when one is built.
"""

from __future__ import annotations

import copy
from typing import Any

from smolagents import Model, OpenAIServerModel, TransformersModel
from transformers import TextIteratorStreamer

from course.models.local import LocalModel, common_prefix_length
from course.models.served import CallBudget, replies, server_errors
from course.settings import ModelChoice


class SharedTransformersModel(TransformersModel):
    """smolagents' TransformersModel over an already loaded :class:`LocalModel`.

    TransformersModel's own ``__init__`` loads a second copy of the weights; this one reuses
    the kernel's model and tokenizer, and keeps every generation method of the parent.

    An agent's step re-reads the whole previous prompt, then the step's reply and observation.
    The model keeps the keys and values of the prompt it last read (:attr:`previous`), and the
    next call starts from them as far as its prompt repeats that one: ``generate`` computes only
    the rest, with the same greedy tokens as a call that reads the whole prompt (compared token
    for token on chapters 02 and 06). ``reused_tokens`` counts the prompt tokens read from it.
    The kept cache (tens of MB for a 2,000-token prompt) is held until the next call replaces
    it. ``generate`` itself is smolagents' own (the spans instrument it as it is).
    """

    previous: tuple[list[int], Any] | None = None
    """(token ids, their key/value cache) of the last prompt read before the current call."""
    reused_tokens: int = 0
    _reading: tuple[list[int], Any] | None = None

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

    def start_from_previous(self, ids: list[int]) -> tuple[Any, int]:
        """A new cache for prompt ``ids``: the previous prompt's keys and values (views of its
        tensors, which stay untouched) for the tokens both share, at most all but the last one,
        and how many that is (a fresh, empty cache and 0 when they share none)."""
        from transformers import DynamicCache

        if self._reading is not None:  # the last call's cache, which generate has extended
            read, cache = self._reading
            self._reading = None
            if cache.get_seq_length() >= len(read):  # not a call that failed before reading
                cache.crop(len(read) - cache.get_seq_length())  # the prompt's keys and values
                self.previous = (read, cache)
        if self.previous is None:
            return DynamicCache(), 0
        kept_ids, kept = self.previous
        shared = min(common_prefix_length(kept_ids, ids), len(ids) - 1)
        if shared <= 0:
            return DynamicCache(), 0
        tensors = [t for layer in kept.layers for t in (layer.keys, layer.values)]
        cache = copy.deepcopy(kept, {id(t): t for t in tensors})  # new layers, same tensors
        cache.crop(shared - kept.get_seq_length())
        return cache, shared

    def start_cache(self, ids: list[int]) -> tuple[Any, int, int]:
        """The cache prompt ``ids`` starts from, how many of its tokens came from a kept cache,
        and how many of its tokens the cache holds once ``generate`` has read the prompt (here
        all: ``generate`` computes the rest of the prompt in one pass)."""
        cache, shared = self.start_from_previous(ids)
        return cache, shared, len(ids)

    def _prepare_completion_args(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        completion = super()._prepare_completion_args(*args, **kwargs)
        ids = completion["inputs"][0].tolist()
        cache, reused, kept = self.start_cache(ids)
        self.reused_tokens += reused
        completion["past_key_values"] = cache
        self._reading = (ids[:kept], cache)
        return completion


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
