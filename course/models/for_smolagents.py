"""The course's two smolagents models: one over the kernel's weights, one for a server.

:class:`SharedTransformersModel` is smolagents' ``TransformersModel`` over an already loaded
:class:`~course.models.local.LocalModel` (the parent's ``__init__`` would load a second copy of
the weights); each call starts from the key/value cache of the previous prompt it read, so an
agent's step computes only what it adds to the last one, and its cache keeps room for the reply
(:class:`RoomyLayer`: each new token is written in place, not copied with the whole cache, for
the same logits). :class:`ServedOpenAIServerModel` is
``OpenAIServerModel`` whose every failure, streamed or not, is one
:class:`~course.models.served.ServerError` naming the setting.

What this module does not handle: choosing between them (:func:`course.models.smolagents_model`
does), the timeouts and retries (the openai client's), or vision models. Importing it imports
smolagents and transformers, so :mod:`course.models` imports it only when one is built.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import torch
from smolagents import Model, OpenAIServerModel, TransformersModel
from transformers import DynamicCache, TextIteratorStreamer
from transformers.cache_utils import DynamicLayer

from course.models.local import LocalModel, common_prefix_length
from course.models.served import CallBudget, replies, server_errors
from course.settings import ModelChoice


class RoomyLayer(DynamicLayer):
    """A ``DynamicLayer`` that writes new keys and values into room it keeps after them.

    transformers' ``DynamicLayer`` concatenates every new token onto its whole cache, a copy of
    every key and value so far per layer and token (over a 2,400-token prompt, about 7 % of a
    decoding step's CPU on one thread, measured with the bundled model and the adapter). This
    layer copies once, into tensors with :attr:`spare` tokens of room, then writes each token
    into that room; attention reads the same values (a view of the first tokens), so the model
    computes the same logits, bit for bit (tested against ``DynamicLayer``).

    What it does not handle: beam search or batch reordering (a layer whose keys were replaced
    gets new room on its next update, so it stays correct, only not faster).

    The room belongs to this layer alone: a deep copy shares the keys and values (views) but
    gets room of its own on its first update, and :meth:`crop` gives the room up, so a write
    never lands under a view some other cache holds.
    """

    keys: torch.Tensor
    values: torch.Tensor
    _room: tuple[torch.Tensor, torch.Tensor] | None = None

    def __init__(self, spare: int = 256) -> None:
        super().__init__()
        self.spare = spare
        """Tokens of room made after the cached ones whenever the room runs out."""

    @classmethod
    def sharing(cls, layer: DynamicLayer, spare: int) -> RoomyLayer:
        """A new layer holding ``layer``'s keys and values (the same tensors, not copied)."""
        roomy = cls(spare)
        roomy.__dict__.update({k: v for k, v in layer.__dict__.items() if k != "_room"})
        return roomy

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        held, new = self.get_seq_length(), key_states.shape[-2]
        room = self._room
        if (room is None or held + new > room[0].shape[-2]
                or (held and self.keys.data_ptr() != room[0].data_ptr())):
            shape = (*key_states.shape[:-2], held + new + self.spare, key_states.shape[-1])
            room = (key_states.new_empty(shape), value_states.new_empty(shape))
            if held:
                room[0][..., :held, :].copy_(self.keys)
                room[1][..., :held, :].copy_(self.values)
            self._room = room
        room[0][..., held:held + new, :].copy_(key_states)
        room[1][..., held:held + new, :].copy_(value_states)
        self.keys, self.values = room[0][..., :held + new, :], room[1][..., :held + new, :]
        return self.keys, self.values

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        self._room = None

    def __deepcopy__(self, memo: dict[int, Any]) -> RoomyLayer:
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        twin.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items()
                              if k != "_room"})
        return twin


def with_room(cache: Any, spare: int) -> Any:
    """A ``DynamicCache`` holding ``cache``'s keys and values (the same tensors) in
    :class:`RoomyLayer` s with ``spare`` tokens of room; layers it adds are roomy too."""
    roomy = DynamicCache()
    roomy.layers = [RoomyLayer.sharing(layer, spare) if type(layer) is DynamicLayer else layer
                    for layer in cache.layers]
    roomy.layer_class_to_replicate = partial(RoomyLayer, spare)
    return roomy


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
    it. The cache a call starts from has room for its reply (:func:`with_room`). ``generate``
    itself is smolagents' own (the spans instrument it as it is).
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
        cache = with_room(cache, completion["max_new_tokens"])  # room for the reply
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
