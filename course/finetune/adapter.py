"""The committed adapters: where they live, their manifest check, and loading base + adapter.

``COURSE_MODEL=bundled+tools`` selects the bundled SmolLM2-135M-Instruct with the LoRA adapter
trained by ``python -m course.finetune`` (``course/data/adapters/smollm2-tools/``); the taught
agent of chapter 02 is another (``smollm2-agent``, :data:`course.adapter_manifest.AGENT_ADAPTER`),
loaded by :func:`load_with_adapter` with its folder (it and :func:`fresh_base` are
:mod:`course.models`' own, which chapter 02 uses too; named here for appendix A4). The base is a
separate model object from the plain bundled model (its weights are the same file, mapped
again, so no second copy in memory), wrapped by PEFT; the adapter stays unmerged, so nothing
writes into the base weights.

:func:`check_adapter` is what the doctor runs: the manifest is readable, names the base model,
and every adapter file is present with the sha256 the manifest records.

Not handled: several adapters on one base at once, merging the adapter into the weights,
adapters for other base models.
"""

from __future__ import annotations

from course.adapter_manifest import (
    DEFAULT_ADAPTER,
    AdapterError,
    adapter_dir,
    adapter_label,
    check_adapter,
    read_manifest,
)
from course.models import fresh_base, load_with_adapter

__all__ = ["DEFAULT_ADAPTER", "AdapterError", "adapter_dir", "adapter_label", "check_adapter",
           "fresh_base", "load_with_adapter", "read_manifest"]
