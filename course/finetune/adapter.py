"""The committed adapter: where it lives, its manifest check, and loading base + adapter.

``COURSE_MODEL=bundled+tools`` selects the bundled SmolLM2-135M-Instruct with the LoRA adapter
trained by ``python -m course.finetune`` (``course/data/adapters/smollm2-tools/``). The base is a
separate model object from the plain bundled model (its weights are the same file, mapped
again, so no second copy in memory), wrapped by PEFT; the adapter stays unmerged, so nothing
writes into the base weights.

:func:`check_adapter` is what the doctor runs: the manifest is readable, names the base model,
and every adapter file is present with the sha256 the manifest records.

Not handled: several adapters at once, merging the adapter into the weights, adapters for other
base models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from course.finetune.train import ADAPTER_FILES, ADAPTERS_DIR, BASE_MODEL_ID, sha256_file

__all__ = ["DEFAULT_ADAPTER", "AdapterError", "adapter_dir", "check_adapter", "fresh_base",
           "load_with_adapter", "read_manifest"]

DEFAULT_ADAPTER = "smollm2-tools"


class AdapterError(RuntimeError):
    """The adapter or its manifest is missing or does not match; the message says the fix."""


_FIX = "Fix: run `python -m course.finetune` to train it again (a few minutes on a CPU)."


def adapter_dir(name: str = DEFAULT_ADAPTER) -> Path:
    """The folder of the adapter called ``name`` under ``course/data/adapters/``."""
    return ADAPTERS_DIR / name


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of the adapter in ``folder``; AdapterError naming the file when it is bad."""
    path = Path(folder) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise AdapterError(f"adapter manifest {path}: cannot read it ({err}). {_FIX}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise AdapterError(f"adapter manifest {path}: field 'files' must map file names to "
                           f"sha256 hashes. {_FIX}")
    return manifest


def check_adapter(folder: Path | None = None) -> dict[str, Any]:
    """Check the adapter in ``folder`` against its manifest; return the manifest.

    Raises AdapterError naming the file when the manifest is unreadable, names another base
    model, lacks an adapter file, or a file's sha256 differs from the one recorded.
    """
    folder = Path(folder) if folder is not None else adapter_dir()
    manifest = read_manifest(folder)
    if manifest.get("base_model") != BASE_MODEL_ID:
        raise AdapterError(f"adapter manifest {folder / 'manifest.json'}: base_model is "
                           f"{manifest.get('base_model')!r}, not {BASE_MODEL_ID!r}. {_FIX}")
    for name in ADAPTER_FILES:
        recorded = manifest["files"].get(name)
        path = folder / name
        if not recorded:
            raise AdapterError(f"adapter manifest {folder / 'manifest.json'} records no sha256 "
                               f"for {name}. {_FIX}")
        if not path.is_file():
            raise AdapterError(f"adapter file {path} is missing. {_FIX}")
        if sha256_file(path) != recorded:
            raise AdapterError(f"adapter file {path} does not match the sha256 its manifest "
                               f"records (changed or damaged). {_FIX}")
    return manifest


def fresh_base() -> Any:
    """A new model object holding the bundled weights (mapped from the same converted file)."""
    import torch
    from transformers import AutoModelForCausalLM

    from course.models import LocalModel, _tokenizer_at, transformers_source
    from course.settings import ModelChoice

    choice = ModelChoice("bundled", "bundled")
    source = transformers_source(choice)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    model.eval()
    tokenizer = _tokenizer_at(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LocalModel(model, tokenizer, choice, source)


def load_with_adapter(folder: Path | None = None, base: Any = None) -> Any:
    """The bundled model with the adapter in ``folder`` (checked first), as a ``LocalModel``."""
    from peft import PeftModel

    folder = Path(folder) if folder is not None else adapter_dir()
    check_adapter(folder)
    base = base or fresh_base()
    model = PeftModel.from_pretrained(base.model, str(folder))
    model.eval()
    base.model = model
    return base
