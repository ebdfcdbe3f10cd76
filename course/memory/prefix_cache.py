"""Prefix reuse: keep the KV cache of a conversation's prefix instead of recomputing it.

Each chat turn sends the whole conversation again. The new prompt starts with exactly the tokens
of the previous one (system, earlier turns), so a server may keep their keys and values (the KV
cache) and compute only the new tokens. That saves prefill compute and changes no output: the
attention over the cached prefix is the same computation, done once.

:func:`measure_prefix_reuse` runs a growing conversation with the local model twice per turn,
greedy: once recomputing the whole prompt, once starting from the previous turn's
``DynamicCache`` cut back (``crop``) to the longest token prefix it shares with the new prompt,
so only the new tokens are fed. Per turn it records time to first token and total latency of
both, how many prompt tokens came from the cache, and whether the generated tokens are
identical. Time spent preparing the cache counts against reuse.

``python -m course.memory.prefix_cache`` runs the whole measurement from the command line (all
twelve turns, 16 new tokens per answer by default; the chapter runs a short sample of it).

What this module does not do: share a cache between different conversations, evict, or page
memory (servers such as vLLM do all three); guarantee bitwise-equal logits (floating-point
order can differ; the check compares the greedy tokens, which is what a user sees); or make
timings meaningful on a machine that is busy with other work (they are measured, not promised).
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from course.cli import whole_number
from course.models.local import common_prefix_length
from course.records import Record

__all__ = [
    "DEFAULT_TURNS",
    "PrefixReuseReport",
    "TurnTiming",
    "measure_prefix_reuse",
]

DEFAULT_SYSTEM = (
    "You are the assistant of a small cooking school. Answer briefly and kindly. The school "
    "teaches bread, pasta, soups and desserts to adult beginners in evening classes of eight "
    "students. Classes start at 18:30 and last two hours. Students bring an apron; the school "
    "provides knives, pans, ingredients and recipes. If a question is not about cooking or the "
    "school, say politely that you can only help with cooking and the school."
)

DEFAULT_TURNS = (
    "Hi! I'm Bob.",
    "How do I make bread rise?",
    "Which flour is best?",
    "How long should I knead?",
    "What about pasta dough?",
    "Do I need eggs for pasta?",
    "How salty should pasta water be?",
    "What soup is easiest?",
    "How do I thicken a soup?",
    "What dessert is quick?",
    "When do classes start?",
    "Thanks! What's my name?",
)


@dataclass
class TurnTiming:
    """One turn measured both ways: full recomputation and prefix reuse."""

    turn: int
    prompt_tokens: int
    reused_tokens: int
    ttft_full: float
    ttft_reuse: float
    total_full: float
    total_reuse: float
    new_tokens: int
    identical: bool
    reply: str

    @property
    def ttft_speedup(self) -> float:
        """How many times faster the first token came with reuse."""
        return self.ttft_full / self.ttft_reuse if self.ttft_reuse > 0 else float("inf")

    @property
    def total_speedup(self) -> float:
        return self.total_full / self.total_reuse if self.total_reuse > 0 else float("inf")


@dataclass
class PrefixReuseReport(Record):
    """All turns of one measurement, with a table, a summary line and a plot.

    Displayed, it shows the table and the summary; its values (:meth:`record`) are each turn's
    measurement and the number of turns whose outputs were identical."""

    turns: list[TurnTiming] = field(default_factory=list)
    model_name: str = ""

    @property
    def all_identical(self) -> bool:
        return bool(self.turns) and all(t.identical for t in self.turns)

    def record(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "turns": [asdict(t) for t in self.turns],
                "identical": sum(t.identical for t in self.turns),
                "all_identical": self.all_identical}

    def __str__(self) -> str:
        return f"{self.table()}\n{self.summary()}"

    __repr__ = __str__

    def table(self) -> str:
        """A fixed-width table, one row per turn."""
        head = (f"{'turn':>4} {'prompt':>6} {'cached':>6} {'ttft full':>9} {'ttft reuse':>10} "
                f"{'x':>5} {'total full':>10} {'total reuse':>11} {'x':>5}  identical")
        rows = [head]
        for t in self.turns:
            rows.append(
                f"{t.turn:>4} {t.prompt_tokens:>6} {t.reused_tokens:>6} {t.ttft_full:>8.3f}s "
                f"{t.ttft_reuse:>9.3f}s {t.ttft_speedup:>5.1f} {t.total_full:>9.3f}s "
                f"{t.total_reuse:>10.3f}s {t.total_speedup:>5.2f}  {'yes' if t.identical else 'NO'}"
            )
        return "\n".join(rows)

    def summary(self) -> str:
        """One line: identical outputs or not, and the speed-up on the later turns."""
        if not self.turns:
            return "no turns measured"
        later = self.turns[len(self.turns) // 2:]
        ttft = sum(t.ttft_speedup for t in later) / len(later)
        total = sum(t.total_speedup for t in later) / len(later)
        same = sum(t.identical for t in self.turns)
        return (f"greedy outputs identical token for token on {same} of {len(self.turns)} turns; "
                f"turns {later[0].turn}-{later[-1].turn}: time to first token {ttft:.1f}x faster, "
                f"total latency {total:.2f}x faster with prefix reuse")

    def plot(self, axes: Any = None):
        """Two panels per turn: time to first token, and total latency, full vs reuse."""
        import matplotlib.pyplot as plt

        if axes is None:
            _, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        x = [t.turn for t in self.turns]
        for ax, key, title in ((axes[0], "ttft", "time to first token"),
                               (axes[1], "total", "total latency")):
            ax.plot(x, [getattr(t, f"{key}_full") for t in self.turns], "o-",
                    label="recompute whole prompt")
            ax.plot(x, [getattr(t, f"{key}_reuse") for t in self.turns], "s-",
                    label="reuse cached prefix")
            ax.set_xlabel("turn")
            ax.set_ylabel("seconds")
            ax.set_title(title)
            ax.set_ylim(bottom=0)
            ax.legend()
        return axes


class _FirstTokenClock:
    """A generate() streamer that notes when the first new token arrives.

    ``generate`` calls ``put`` once with the prompt, then once per new token.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.first_token_at: float | None = None

    def put(self, value: Any) -> None:
        self.calls += 1
        if self.calls == 2 and self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    def end(self) -> None:
        pass


def _cache_argument(model: Any) -> str:
    """``generate``'s name for a prefilled cache: ``cache`` (newer transformers) or the old one."""
    params = inspect.signature(model.prepare_inputs_for_generation).parameters
    return "cache" if "cache" in params else "past_key_values"


def _generate(local: Any, input_ids: Any, max_new_tokens: int, cache: Any = None):
    """Greedy generation; returns (new token ids, ttft, total seconds, cache afterwards)."""
    import torch

    clock = _FirstTokenClock()
    start = time.perf_counter()
    kwargs: dict[str, Any] = {}
    if cache is not None:
        kwargs[_cache_argument(local.model)] = cache
    with torch.no_grad():
        out = local.model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=local.tokenizer.eos_token_id,
            streamer=clock,
            return_dict_in_generate=True,
            use_cache=True,
            **kwargs,
        )
    total = time.perf_counter() - start
    ttft = (clock.first_token_at or time.perf_counter()) - start
    new = out.sequences[0, input_ids.shape[1]:].tolist()
    after = getattr(out, "cache", None)
    if after is None:
        after = out.past_key_values
    return new, out.sequences[0].tolist(), ttft, total, after


def measure_prefix_reuse(
    local: Any,
    user_turns: Sequence[str] = DEFAULT_TURNS,
    system: str | None = DEFAULT_SYSTEM,
    max_new_tokens: int = 16,
) -> PrefixReuseReport:
    """Run a growing conversation; per turn, time full recomputation against prefix reuse.

    ``local`` is a :class:`course.models.LocalModel`. The conversation continues with the
    replies of the full-recomputation run (the reference); the reuse run must produce the same
    tokens, which ``TurnTiming.identical`` records.
    """
    turns = list(user_turns)
    if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise ValueError("user_turns must be a non-empty list of non-empty strings")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    report = PrefixReuseReport(model_name=getattr(local, "name", ""))
    cache, cache_ids = None, []
    for number, text in enumerate(turns, start=1):
        messages.append({"role": "user", "content": text})
        ids = local.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"].to(local.model.device)
        prompt = ids[0].tolist()

        full_new, _, ttft_f, total_f, _ = _generate(local, ids, max_new_tokens)

        start = time.perf_counter()
        reused = 0
        if cache is not None:
            reused = min(common_prefix_length(cache_ids, prompt), len(prompt) - 1,
                         cache.get_seq_length())
            if reused > 0:
                surplus = cache.get_seq_length() - reused
                if surplus > 0:
                    cache.crop(-surplus)  # negative: drop that many tokens from the end
            else:
                cache = None
        prep = time.perf_counter() - start
        reuse_new, sequence, ttft_r, total_r, cache = _generate(local, ids, max_new_tokens, cache)
        cache_ids = sequence[: cache.get_seq_length()]

        reply = local.tokenizer.decode(full_new, skip_special_tokens=True).strip()
        report.turns.append(TurnTiming(
            turn=number, prompt_tokens=len(prompt), reused_tokens=reused,
            ttft_full=ttft_f, ttft_reuse=ttft_r + prep, total_full=total_f,
            total_reuse=total_r + prep, new_tokens=len(full_new),
            identical=full_new == reuse_new, reply=reply,
        ))
        messages.append({"role": "assistant", "content": reply})
    return report


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.memory.prefix_cache",
        description="Measure prefix reuse on the probe model: full recomputation vs the cached "
                    "prefix, per turn of a growing conversation.")
    parser.add_argument("--turns", type=whole_number(1, len(DEFAULT_TURNS), example=4),
                        default=len(DEFAULT_TURNS),
                        help=f"turns of the default conversation (1-{len(DEFAULT_TURNS)})")
    parser.add_argument("--max-new-tokens", type=whole_number(1, 512, example=16), default=16)
    args = parser.parse_args(argv)
    from course.models import probe_model, probe_note
    from course.setup import setup_notebook

    setup_notebook()
    print(probe_note())
    report = measure_prefix_reuse(probe_model(), DEFAULT_TURNS[:args.turns],
                                  max_new_tokens=args.max_new_tokens)
    print(report.table())
    print(report.summary())
    return 0 if report.all_identical else 1


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
