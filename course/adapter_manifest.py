"""The tools adapter's folder and its manifest check: what the loader and the doctor need.

Imports nothing of the course (the loader, :mod:`course.models`, and the doctor import it), so
checking an adapter never loads a model, the agents or the trainer.
:func:`check_adapter`: the manifest is readable, names the base model, and every adapter file is
present with the sha256 the manifest records. :func:`wrap_with_adapter` is the one place a model
gets the adapter (the loader's ``bundled+tools``, appendix A4's ``load_with_adapter``): the check,
then PEFT (imported only then).

Not handled: several adapters at once, adapters for other base models.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["ADAPTERS_DIR", "ADAPTER_FILES", "AGENT_ADAPTER", "BASE_MODEL_ID", "DEFAULT_ADAPTER", "STEP_TOKENS",
           "AdapterError", "adapter_dir", "adapter_label", "check_adapter", "read_manifest",
           "sha256_file", "taught_prompt", "wrap_with_adapter"]

ADAPTERS_DIR = Path(__file__).resolve().parent / "data" / "adapters"
BASE_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_config.json")
DEFAULT_ADAPTER = "smollm2-tools"
"""The course's tools adapter: ``COURSE_MODEL=bundled+tools``, appendix A4's worked run (96
trajectories, smolagents' own prompt)."""
AGENT_ADAPTER = "smollm2-agent"
"""The taught agent: appendix A4's run at scale (1,000 trajectories, then 480 more, the course's
compact prompt), the one chapter 02 runs live on the note's tasks."""
STEP_TOKENS = 160
"""Cap on one agent step's new tokens for base + adapter (its held-out evaluation and chapters
02-03's live runs; the longest trained output, a fixed script, is about 110 tokens)."""


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def adapter_label(name: str = DEFAULT_ADAPTER) -> str:
    """Base + adapter as outputs name it, e.g. ``SmolLM2-135M-Instruct + LoRA smollm2-tools
    (course/data/adapters)`` (chapters 02, 03 and A4's live runs, the BFCL table)."""
    return f"SmolLM2-135M-Instruct + LoRA {name} (course/data/adapters)"


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


def wrap_with_adapter(model: Any, folder: Path | None = None) -> Any:
    """``model`` (the bundled base, a transformers model) with the adapter in ``folder`` (default
    the course's), checked first (:func:`check_adapter`; AdapterError when it fails), unmerged
    (nothing writes into the base weights), in eval mode: a ``PeftModel``."""
    from peft import PeftModel

    folder = Path(folder) if folder is not None else adapter_dir()
    manifest = check_adapter(folder)
    wrapped = PeftModel.from_pretrained(model, str(folder)).eval()
    wrapped.course_prompt = manifest.get("settings", {}).get("prompt", "default")
    return wrapped


def taught_prompt(model: Any) -> str:
    """The agent system prompt ``model`` was taught with, ``default`` (smolagents') or
    ``compact`` (:mod:`course.agents.prompts`): what the manifest of the adapter that
    :func:`wrap_with_adapter` put on it says, read from the model itself or from the model a
    smolagents model or ``LocalModel`` holds; ``default`` for a model without an adapter."""
    for candidate in (model, getattr(model, "model", None)):
        prompt = getattr(candidate, "course_prompt", None)
        if isinstance(prompt, str):
            return prompt
    return "default"
