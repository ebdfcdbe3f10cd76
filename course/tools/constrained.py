"""Constrained decoding of a tool call with a transformers ``LogitsProcessor`` written here.

:class:`ToolCallLogitsProcessor` masks the model's next-token scores so that whatever it
samples is a call in the course format for one of the given tools::

    <tool_call>{"name": "<a tool name>", "arguments": {"<prop>": <value>, ...}}</tool_call>

The structure (braces, keys, quotes) is forced token by token; the model chooses the tool name
among the allowed names, each ``enum`` value among its options, and the characters of free
strings (no quotes, backslashes, newlines or braces), integers (digits only: no sign, no
decimals, also for ``number``) and booleans (``true``/``false``). Every property of the chosen
tool is filled, in schema order, so the output always validates against a flat schema of
string / enum / integer / number / boolean properties.

:func:`sample_replies` draws ``n`` replies to ONE prompt cheaply: the prompt is run once and
its key/value cache is shared by all rows; a row that starts with plain text is stopped early.
:class:`PrefixCache` keeps one prompt's key/value cache so that later prompts sharing its first
tokens (the same tool list, another request) only run their own tokens: the cache is cut back to
the longest common token prefix, which gives the same next-token scores as running the whole
prompt (up to float rounding).

Not handled: nested objects, arrays, ``null``, negative or decimal numbers, string escapes,
several calls, or a grammar in general (a registry package such as outlines or xgrammar does
that); the model is forced to call a tool even when it should answer in text. This is the
lesson's point: the format becomes guaranteed, the content does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from course.models.local import common_prefix_length
from course.tools.protocol import CALL_CLOSE, CALL_OPEN

__all__ = ["PrefixCache", "StopWhenReply", "ToolCallLogitsProcessor",
           "constrained_call", "sample_replies"]

MAX_STRING_TOKENS = 8
MAX_DIGIT_TOKENS = 4


@lru_cache(maxsize=4)
def _vocab_masks(tokenizer: Any) -> tuple[Any, Any, Any]:
    """Boolean masks over the vocabulary: tokens safe inside a JSON string, ASCII digit
    tokens, and digit tokens that may start a JSON integer (no leading zero)."""
    import torch

    size = len(tokenizer)
    safe = torch.zeros(size, dtype=torch.bool)
    digits = torch.zeros(size, dtype=torch.bool)
    first_digits = torch.zeros(size, dtype=torch.bool)
    special = set(tokenizer.all_special_ids)
    texts = tokenizer.batch_decode([[i] for i in range(size)])
    for token_id, text in enumerate(texts):
        if token_id in special:
            continue
        if not text or len(text) > 12:
            continue
        if not any(c in text for c in '"\\\n\r\t{}<>') and text.isprintable():
            safe[token_id] = True
        if text.isascii() and text.isdigit():
            digits[token_id] = True
            first_digits[token_id] = text == "0" or not text.startswith("0")
    return safe, digits, first_digits


@dataclass
class _Literal:
    ids: list[int]


@dataclass
class _Choice:
    options: dict[str, list[int]]


@dataclass
class _Free:
    kind: str  # "string" | "digits"


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def _argument_segments(tokenizer: Any, parameters: dict[str, Any]) -> list[Any]:
    """Segments for ``"arguments": {...}}</tool_call>`` of one tool."""
    segments: list[Any] = []
    props = parameters.get("properties", {})
    pending = '", "arguments": {'
    if not props:
        return [_Literal(_encode(tokenizer, pending + "}}" + CALL_CLOSE))]
    for i, (prop, schema) in enumerate(props.items()):
        pending += ("" if i == 0 else ", ") + json.dumps(prop) + ": "
        if "enum" in schema:
            segments.append(_Literal(_encode(tokenizer, pending + '"')))
            segments.append(_Choice({str(v): _encode(tokenizer, str(v)) for v in schema["enum"]}))
            pending = '"'
        elif schema.get("type") == "boolean":
            segments.append(_Literal(_encode(tokenizer, pending)))
            segments.append(_Choice({v: _encode(tokenizer, v) for v in ("true", "false")}))
            pending = ""
        elif schema.get("type") in ("integer", "number"):
            segments.append(_Literal(_encode(tokenizer, pending)))
            segments.append(_Free("digits"))
            pending = ""
        elif schema.get("type", "string") == "string":
            segments.append(_Literal(_encode(tokenizer, pending + '"')))
            segments.append(_Free("string"))
            pending = '"'
        else:
            raise ValueError(
                f"constrained decoding here handles string, enum, integer, number and boolean "
                f"properties; {prop!r} has type {schema.get('type')!r}")
    segments.append(_Literal(_encode(tokenizer, pending + "}}" + CALL_CLOSE)))
    return segments


@dataclass
class _RowState:
    segments: list[Any]
    index: int = 0
    progress: list[int] = field(default_factory=list)
    done: bool = False
    stopped: bool = False
    tokens: list[int] = field(default_factory=list)

    def decided(self) -> bool:
        """True when nothing is left to choose: only literal tokens remain (or nothing)."""
        return self.done or all(isinstance(s, _Literal) for s in self.segments[self.index:])

    def remaining(self) -> list[int]:
        """The forced tokens that finish the call once the row is decided."""
        if self.done:
            return []
        rest: list[int] = []
        current = self.segments[self.index]
        if isinstance(current, _Literal):
            rest.extend(current.ids[len(self.progress):])
        for seg in self.segments[self.index + 1:]:
            if not isinstance(seg, _Literal):
                break  # out of tokens before a choice was made: the call stays truncated
            rest.extend(seg.ids)
        return rest


class PrefixCache:
    """The key/value cache of one kept prompt, reused by later prompts that start the same way.

    :meth:`keep` runs a prompt (token ids) once. :meth:`start` returns a fresh ``DynamicCache``
    for another prompt: the kept cache cut back to the longest token prefix both share (views of
    the kept tensors, which stay untouched), extended by the new prompt's own tokens, all but its
    last (``generate`` runs that one). ``reused`` and ``computed`` count the tokens of each kind.
    With ``follow=True`` each started prompt becomes the kept one (a conversation, where each
    turn extends the last; one row only, as the cache given out is the one kept).
    """

    def __init__(self, local: Any, follow: bool = False):
        self.local = local
        self.follow = follow
        self.ids: list[int] = []
        self.cache: Any = None
        self.reused = 0
        self.computed = 0

    def keep(self, ids: list[int]) -> None:
        """Run ``ids`` and keep their cache (replacing what was kept)."""
        self.ids = list(ids)
        self.cache = self._run(list(ids), None)

    def _run(self, ids: list[int], cache: Any) -> Any:
        import torch
        from transformers import DynamicCache

        cache = cache if cache is not None else DynamicCache()
        if ids:
            with torch.no_grad():
                self.local.model(input_ids=torch.tensor([ids], device=self.local.model.device),
                                 past_key_values=cache,
                                 use_cache=True, logits_to_keep=1)
            self.computed += len(ids)
        return cache

    def start(self, ids: list[int]) -> Any:
        """A new cache holding ``ids[:-1]``, built on the kept prefix where the tokens agree."""
        import copy

        shared = common_prefix_length(self.ids, ids[:-1])
        cache = None
        if shared and self.cache is not None:
            tensors = [t for layer in self.cache.layers for t in (layer.keys, layer.values)]
            cache = copy.deepcopy(self.cache, {id(t): t for t in tensors})  # new layers, same tensors
            cache.crop(shared - self.cache.get_seq_length())  # negative: drop what is not shared
            self.reused += shared
        cache = self._run(list(ids[shared:-1]), cache)
        if self.follow:
            self.ids, self.cache = list(ids[:-1]), cache
        return cache


class ToolCallLogitsProcessor:
    """A ``LogitsProcessor`` that only lets the model write a well-formed call to ``schemas``.

    ``schemas`` are OpenAI-format tool schemas (``registry.schemas()``). Use it with
    ``model.generate(..., logits_processor=LogitsProcessorList([processor]))``; make a fresh
    processor per ``generate`` call (it keeps per-row state). Tokens that are forced for every
    row (:meth:`forced_prefix`) can be put in the prompt, and a row can stop as soon as
    :meth:`decided` says only forced tokens remain (:meth:`completed_ids` adds them): forced
    tokens cost no choice, so the model need not run for them.
    """

    def __init__(self, tokenizer: Any, schemas: list[dict[str, Any]], start: list[int] | None = None):
        if not schemas:
            raise ValueError("constrained decoding needs at least one tool schema")
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        self.safe_mask, self.digit_mask, self.first_digit_mask = _vocab_masks(tokenizer)
        self.zero_ids = set(_encode(tokenizer, "0"))
        functions = [s.get("function", s) for s in schemas]
        self.tool_segments = {f["name"]: _argument_segments(tokenizer, f.get("parameters", {}))
                              for f in functions}
        self.prefix = [_Literal(_encode(tokenizer, CALL_OPEN + '{"name": "')),
                       _Choice({name: _encode(tokenizer, name) for name in self.tool_segments})]
        self.start = list(start or [])
        self.prompt_length: int | None = None
        self.rows: list[_RowState] = []

    def _new_row(self) -> _RowState:
        row = _RowState(list(self.prefix))
        for token in self.start:
            self._advance(row, token)
        return row

    def forced_prefix(self) -> list[int]:
        """The tokens every call starts with, whatever the model prefers (one allowed token)."""
        row, forced = _RowState(list(self.prefix)), []
        vocab = len(self.tokenizer)
        while not row.done:
            allowed = self._allowed(row, vocab).nonzero().flatten().tolist()
            if len(allowed) != 1:
                break
            forced.append(allowed[0])
            self._advance(row, allowed[0])
        return forced

    # The state machine: advance with the token just generated, then say what may come next.
    def _advance(self, row: _RowState, token: int) -> None:
        if row.done:
            return
        seg = row.segments[row.index]
        if isinstance(seg, _Literal) or isinstance(seg, _Choice):
            row.progress.append(token)
            finished = (row.progress == seg.ids if isinstance(seg, _Literal)
                        else row.progress in seg.options.values())
            if finished:
                if isinstance(seg, _Choice) and row.index == 1 and len(row.segments) == 2:
                    name = next(n for n, ids in seg.options.items() if ids == row.progress)
                    row.segments = row.segments + self.tool_segments[name]
                self._next(row)
            return
        # a free segment ends when the model emits the first token of the next literal
        nxt = row.segments[row.index + 1]
        if row.progress and token == nxt.ids[0]:
            row.index += 1
            row.progress = [token]
            if row.progress == nxt.ids:
                self._next(row)
        else:
            row.progress.append(token)

    def _next(self, row: _RowState) -> None:
        row.index += 1
        row.progress = []
        if row.index >= len(row.segments):
            row.done = True

    def _allowed(self, row: _RowState, vocab: int) -> Any:
        import torch

        mask = torch.zeros(vocab, dtype=torch.bool)
        if row.done:
            mask[self.eos_id] = True
            return mask
        seg = row.segments[row.index]
        if isinstance(seg, _Literal):
            mask[seg.ids[len(row.progress)]] = True
        elif isinstance(seg, _Choice):
            n = len(row.progress)
            for ids in seg.options.values():
                if ids[:n] == row.progress and len(ids) > n:
                    mask[ids[n]] = True
        else:
            limit = MAX_STRING_TOKENS if seg.kind == "string" else MAX_DIGIT_TOKENS
            end = row.segments[row.index + 1].ids[0]
            zero = seg.kind == "digits" and len(row.progress) == 1 and \
                row.progress[0] in self.zero_ids  # JSON: no digits after a leading 0
            if len(row.progress) < limit and not zero:
                if seg.kind == "string":
                    base = self.safe_mask
                else:
                    base = self.digit_mask if row.progress else self.first_digit_mask
                mask[: base.shape[0]] |= base
            if row.progress:
                mask[end] = True
        return mask

    def sync(self, input_ids: Any) -> None:
        """Advance every row over the tokens generated since the last look."""
        if self.prompt_length is None:
            self.prompt_length = input_ids.shape[1]
            self.rows = [self._new_row() for _ in range(input_ids.shape[0])]
            return
        for row, ids in zip(self.rows, input_ids[:, self.prompt_length:].tolist(), strict=True):
            for token in ids[len(row.tokens):]:
                if row.stopped:
                    break  # later tokens are padding after the row was stopped
                row.tokens.append(token)
                self._advance(row, token)

    def decided(self) -> list[bool]:
        """Per row: True when only forced tokens remain."""
        return [row.decided() for row in self.rows]

    def completed_ids(self, row: int) -> list[int]:
        """The row's full call: start tokens, what the model chose, and the forced rest."""
        state = self.rows[row]
        return self.start + state.tokens + state.remaining()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        self.sync(input_ids)
        masks = torch.stack([self._allowed(row, scores.shape[1]) for row in self.rows])
        return scores.masked_fill(~masks.to(scores.device), float("-inf"))


class _StopWhenDecided:
    """Stops a constrained row once only forced tokens remain."""

    def __init__(self, processor: ToolCallLogitsProcessor):
        self.processor = processor

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.processor.sync(input_ids)
        decided = self.processor.decided()
        for row, stop in zip(self.processor.rows, decided, strict=True):
            row.stopped = row.stopped or stop
        return torch.tensor(decided, dtype=torch.bool, device=input_ids.device)


class StopWhenReply:
    """A stopping criterion for batched ``generate``: a row stops once ``done(reply so far)``.

    Used to end a row as soon as its text shows what the cell needs (a first sentence, a reply
    that clearly does not start a call), which saves the tokens after it.
    """

    def __init__(self, tokenizer: Any, prompt_length: int, done: Callable[[str], bool]):
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.done = done

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_length:],
                                            skip_special_tokens=True)
        return torch.tensor([bool(self.done(t)) for t in texts], dtype=torch.bool,
                            device=input_ids.device)


def _plain_text(text: str) -> bool:
    """True once a reply clearly does not start a call."""
    head = text.lstrip()
    return bool(head) and not (head.startswith("{") or CALL_OPEN.startswith(
        head[: len(CALL_OPEN)]) or head.startswith(CALL_OPEN))


def sample_replies(
    local: Any,
    prompt_text: str,
    n: int,
    *,
    max_new_tokens: int = 40,
    temperature: float = 0.7,
    seed: int = 0,
    constrained_schemas: list[dict[str, Any]] | None = None,
    prefix_cache: PrefixCache | None = None,
) -> list[str]:
    """``n`` sampled replies of the local model to one rendered prompt.

    The prompt is encoded once and its cache shared across the ``n`` rows. Without
    ``constrained_schemas`` a row stops as soon as it begins with plain text (its reply is
    then only the first words); with them, :class:`ToolCallLogitsProcessor` shapes every row.
    ``temperature=0`` means greedy (then all rows are the same: use ``n=1``). With
    ``prefix_cache`` the prompt's cache starts from the tokens it shares with the kept prompt.
    """
    import torch
    from transformers import DynamicCache, LogitsProcessorList, StoppingCriteriaList

    tokenizer, model = local.tokenizer, local.model
    ids = tokenizer(prompt_text, return_tensors="pt", add_special_tokens=False).input_ids
    ids = ids.to(model.device)  # on a GPU the model does not move its inputs itself
    processor = None
    if constrained_schemas is not None:
        forced = ToolCallLogitsProcessor(tokenizer, constrained_schemas).forced_prefix()
        processor = ToolCallLogitsProcessor(tokenizer, constrained_schemas, start=forced)
        ids = torch.cat([ids, torch.tensor([forced], dtype=ids.dtype, device=ids.device)], dim=1)
    torch.manual_seed(seed)
    sampling: dict[str, Any] = ({"do_sample": False} if temperature == 0 else
                                {"do_sample": True, "temperature": temperature, "top_k": 0})
    with torch.no_grad():
        if prefix_cache is not None:
            cache = prefix_cache.start(ids[0].tolist())
        else:
            cache = DynamicCache()
            model(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(n)
        batch = ids.repeat(n, 1)
        if processor is not None:
            kwargs: dict[str, Any] = {
                "logits_processor": LogitsProcessorList([processor]),
                "stopping_criteria": StoppingCriteriaList([_StopWhenDecided(processor)])}
        else:
            kwargs = {"stopping_criteria": StoppingCriteriaList(
                [StopWhenReply(tokenizer, ids.shape[1], _plain_text)])}
        out = model.generate(
            input_ids=batch, attention_mask=torch.ones_like(batch), past_key_values=cache,
            max_new_tokens=max_new_tokens, **sampling,
            pad_token_id=tokenizer.eos_token_id, **kwargs)
    if processor is not None:
        processor.sync(out)
        return [tokenizer.decode(processor.completed_ids(i), skip_special_tokens=True).strip()
                for i in range(n)]
    return [t.strip() for t in tokenizer.batch_decode(out[:, ids.shape[1]:],
                                                      skip_special_tokens=True)]


def constrained_call(local: Any, prompt_text: str, schemas: list[dict[str, Any]],
                     max_new_tokens: int = 40, prefix_cache: PrefixCache | None = None) -> str:
    """The local model's greedy call under constrained decoding (one reply)."""
    return sample_replies(local, prompt_text, 1, max_new_tokens=max_new_tokens, temperature=0,
                          constrained_schemas=schemas, prefix_cache=prefix_cache)[0]
