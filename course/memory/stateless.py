"""The model is stateless: what a conversation's history changes in the next-token distribution.

For chapter 04's first section. :func:`next_token_probability` reads, from the logits of a model
loaded in the kernel (the probe model), the probability that the answer to a conversation
continues a prefix ("Your name is") with one target token (" Bob"). :class:`HistoryEffect` puts
several conversations side by side, prints them, and plots them.

The last position's logits are kept per model and exact token sequence (a model in eval mode
gives the same logits for the same tokens), so asking again about a conversation already
measured, as the chapter's exercise check does, costs no second forward pass.

Not handled: servers (they return no logits here; the probe model is always loaded in the
kernel), targets of more than one token, and sampling: the figures are the model's own
probabilities, not frequencies of generated answers.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from course.memory.chat_graph import as_role_dicts
from course.records import Record

__all__ = ["HistoryEffect", "NextTokenProbability", "history_effect", "next_token_probability"]


@dataclass
class NextTokenProbability:
    """P(target | prompt + prefix) for one prompt, read from the model's logits."""

    target: str
    prefix: str
    probability: float
    rank: int
    top: list[tuple[str, float]]
    prompt_tokens: int

    def __repr__(self) -> str:
        tops = ", ".join(f"{t!r} {p:.3f}" for t, p in self.top)
        return (f"P({self.target!r} | ...{self.prefix!r}) = {self.probability:.5f} "
                f"(rank {self.rank}, {self.prompt_tokens} prompt tokens; top: {tops})")


def next_token_probability(
    local: Any, messages: Sequence[BaseMessage | dict], prefix: str = "Your name is",
    target: str = " Bob", top_k: int = 5,
) -> NextTokenProbability:
    """Probability that the model's answer to ``messages`` continues ``prefix`` with ``target``.

    ``local`` is a :class:`course.models.LocalModel`. The prompt is the chat template with the
    generation prompt, followed by ``prefix`` as the start of the assistant's answer.
    ``target`` must be one token of the model's tokenizer.
    """
    import torch

    if not messages:
        raise ValueError("messages is empty: give at least the user's question")
    target_ids = local.tokenizer.encode(target, add_special_tokens=False)
    if len(target_ids) != 1:
        raise ValueError(
            f"target {target!r} is {len(target_ids)} tokens for this tokenizer; it must be "
            "exactly one. Fix: use the first token, e.g. ' Bob' with its leading space."
        )
    dicts = [m if isinstance(m, dict) else as_role_dicts([m])[0] for m in messages]
    text = local.render_chat(dicts) + prefix
    ids = local.tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    probs = torch.softmax(_last_logits(local.model, ids).float(), dim=-1).cpu()
    p = float(probs[target_ids[0]])
    rank = int((probs > probs[target_ids[0]]).sum()) + 1
    values, indices = probs.topk(top_k)
    top = [(local.tokenizer.decode([int(i)]), float(v)) for v, i in zip(values, indices, strict=True)]
    return NextTokenProbability(target, prefix, p, rank, top, int(ids.shape[1]))


_LOGITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOGITS_PER_MODEL = 64


def _last_logits(model: Any, ids: Any) -> Any:
    """The logits at the last position of ``ids`` (one sequence), kept per model and sequence
    while the model is in eval mode (in training mode dropout changes them: nothing is kept)."""
    import torch

    key = tuple(ids[0].tolist())
    kept = {} if getattr(model, "training", False) else _LOGITS.setdefault(model, {})
    if key not in kept:
        only_last = ({"logits_to_keep": 1}
                     if "logits_to_keep" in inspect.signature(model.forward).parameters else {})
        with torch.no_grad():
            kept[key] = model(input_ids=ids.to(model.device), **only_last).logits[0, -1]
        if len(kept) > _LOGITS_PER_MODEL:
            kept.pop(next(iter(kept)))
    return kept[key]


@dataclass
class HistoryEffect(Record):
    """P(target | ... prefix) for several conversations, compared with the first one."""

    probabilities: dict[str, NextTokenProbability] = field(default_factory=dict)
    model_name: str = ""

    def record(self) -> dict:
        return {"model": self.model_name, "rows": [
            {"conversation": label, "target": p.target, "probability": p.probability,
             "gain": self.gain(label), "rank": p.rank, "prompt_tokens": p.prompt_tokens,
             "most_likely": p.top[0][0]} for label, p in self.probabilities.items()]}

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    @property
    def baseline(self) -> NextTokenProbability:
        return next(iter(self.probabilities.values()))

    def gain(self, label: str) -> float:
        """How many times more likely the target is for ``label`` than for the first row."""
        return self.probabilities[label].probability / self.baseline.probability

    def __str__(self) -> str:
        lines = []
        for label, p in self.probabilities.items():
            lines.append(f"{label}: P({p.target!r}) = {p.probability:.6f} gain={self.gain(label):.1f}x "
                         f"rank={p.rank} prompt_tokens={p.prompt_tokens} most_likely={p.top[0][0]!r}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td>{html.escape(label)}</td><td>{p.probability:.6f}</td>"
            f"<td>{self.gain(label):.1f}x</td><td>{p.rank}</td>"
            f"<td>{html.escape(repr(p.top[0][0]))}</td></tr>"
            for label, p in self.probabilities.items())
        return ("<table><tr><th>conversation</th><th>probability</th><th>vs first</th>"
                f"<th>rank</th><th>most likely</th></tr>{rows}</table>")

    def plot(self, ax: Any = None):
        """One bar per conversation, log scale."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(8, 3))
        labels = list(self.probabilities)
        ax.bar(labels, [self.probabilities[k].probability for k in labels])
        ax.set_yscale("log")
        first = self.baseline
        ax.set_ylabel(f"P({first.target!r} | ... {first.prefix!r})")
        ax.set_title(f"Measured: the history changes what {self.model_name or 'the model'} "
                     "computes (log scale)")
        return ax


def history_effect(local: Any, conversations: dict[str, Sequence[BaseMessage | dict]],
                   prefix: str = "Your name is", target: str = " Bob") -> HistoryEffect:
    """:func:`next_token_probability` for each conversation (the first is the baseline)."""
    if not conversations:
        raise ValueError("conversations is empty: give {label: messages}")
    return HistoryEffect({label: next_token_probability(local, msgs, prefix, target)
                          for label, msgs in conversations.items()},
                         getattr(local, "short_name", "") or getattr(local, "name", ""))
