"""The committed adapters: where they live, their manifest check, and loading base + adapter.

``COURSE_MODEL=bundled+tools`` selects the bundled SmolLM2-135M-Instruct with the LoRA adapter
trained by ``python -m course.finetune`` (``course/data/adapters/smollm2-tools/``); the taught
agent of chapter 02 is another (``smollm2-agent``, :data:`course.adapter_manifest.AGENT_ADAPTER`),
loaded by :func:`load_with_adapter` with its folder. The base is a
separate model object from the plain bundled model (its weights are the same file, mapped
again, so no second copy in memory), wrapped by PEFT; the adapter stays unmerged, so nothing
writes into the base weights.

:func:`check_adapter` is what the doctor runs: the manifest is readable, names the base model,
and every adapter file is present with the sha256 the manifest records.

Not handled: several adapters on one base at once, merging the adapter into the weights, adapters for other
base models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from course.adapter_manifest import (
    DEFAULT_ADAPTER,
    AdapterError,
    adapter_dir,
    adapter_label,
    check_adapter,
    read_manifest,
    wrap_with_adapter,
)
from course.finetune.train import fresh_base

__all__ = ["DEFAULT_ADAPTER", "AdapterError", "adapter_dir", "adapter_label", "check_adapter",
           "fresh_base", "load_with_adapter", "read_manifest"]


def load_with_adapter(folder: Path | None = None, base: Any = None) -> Any:
    """The bundled model with the adapter in ``folder`` (checked first), as a ``LocalModel``:
    ``base`` (default a :func:`fresh_base`) with its model wrapped (:func:`wrap_with_adapter`,
    as the loader does for ``bundled+tools``)."""
    base = base or fresh_base()
    base.model = wrap_with_adapter(base.model, folder)
    return base
