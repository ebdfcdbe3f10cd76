"""A model loaded in this kernel: its weights, its tokenizer, and why a folder cannot load.

:func:`load_local_model` loads the setting's model once per kernel (the bundled SmolLM2, a local
folder or a hub id) where :func:`~course.models.placement.placement` says, after
:func:`~course.models.placement.check_fits` has refused a model too big for the machine. Every
user of the weights shares that one :class:`LocalModel`. :func:`tokenizer_at` reads a tokenizer
once, so the loaded model's own and the one that counts without the weights are one object.
When a folder cannot load, :func:`load_failure` names the broken file and the fix that fits the
setting (:func:`model_folder_problem` runs the loader's checks without reading a weight).

What this module does not handle: a server (nothing to load: :mod:`course.models.served`),
downloading a hub model (``course.use_model(..., online=True)`` does), or generation settings
(each chapter passes its own).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from course.models.placement import Placement, check_fits, estimate_weight_bytes, placement
from course.settings import (
    MODEL_SETTING,
    CourseSettingError,
    ModelChoice,
    active_model,
    device_setting,
    hub_offline,
)

PREPARE_COMMAND = "python -m course prepare"


def short_name(choice: ModelChoice) -> str:
    """The model's folder or id name, e.g. ``SmolLM2-135M-Instruct`` (nothing is loaded)."""
    if choice.is_bundled:
        return "SmolLM2-135M-Instruct"
    return choice.value.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class LocalModel:
    """A transformers causal LM with its tokenizer, and where it came from."""

    model: Any
    tokenizer: Any
    choice: ModelChoice
    source: str
    load_seconds: float = field(default=0.0)

    @property
    def name(self) -> str:
        """A short, readable name for outputs and traces."""
        return self.choice.describe()

    @property
    def short_name(self) -> str:
        """The model's folder or id name, e.g. ``SmolLM2-135M-Instruct``."""
        return short_name(self.choice)

    def render_chat(self, messages: list[dict], add_generation_prompt: bool = True, **kw) -> str:
        """The exact text the model receives for ``messages`` (the chat template applied)."""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kw
        )

    def count_tokens(self, text: str) -> int:
        """Number of tokens the model's own tokenizer makes of ``text`` (no special tokens added)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, messages: list[dict], max_new_tokens: int = 64, **kw) -> str:
        """Greedy reply to chat ``messages`` (only the new text, never the prompt)."""
        import torch

        inputs = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(self.model.device)
        kw.setdefault("do_sample", False)
        with torch.no_grad():
            output = self.model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                pad_token_id=self.tokenizer.eos_token_id,
                **kw,
            )
        new_tokens = output[0, inputs["input_ids"].shape[1] :]
        return self.tokenizer.decode(new_tokens, skip_special_tokens=True).strip()


def transformers_source(choice: ModelChoice) -> str:
    """The path or hub id ``from_pretrained`` should read, checked fast."""
    if choice.kind == "bundled":
        from course.assets import AssetError, bundled_model_dir

        try:
            return str(bundled_model_dir())
        except AssetError as err:
            raise CourseSettingError(
                f"{MODEL_SETTING} selects the bundled model, but it is not available: {err}"
            ) from err
    if choice.kind == "path":
        return choice.value
    if choice.kind == "hub":
        if hub_offline():
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(choice.value, "config.json")
            if not isinstance(cached, str):
                raise CourseSettingError(
                    f"{MODEL_SETTING}={choice.value!r} is a Hugging Face id, but hub access is "
                    "off (HF_HUB_OFFLINE=1) and the model is not in the local cache. Fix: run "
                    f"`course.use_model({choice.value!r}, online=True)` on a machine with "
                    f"network, or unset {MODEL_SETTING} to use the bundled model."
                )
        return choice.value
    raise CourseSettingError(
        f"{MODEL_SETTING}={choice.shown!r} is a server: nothing to load in the kernel. "
        "Fix: use probe_model() for cells that read model internals."
    )


@lru_cache(maxsize=4)
def tokenizer_at(source: str) -> Any:
    """The tokenizer at ``source`` (a folder or hub id), read once: the loaded model's own and
    the one that counts without the weights are one object (a second is another 13 MB)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


@lru_cache(maxsize=4)
def tokenizer_alone(choice: ModelChoice) -> Any:
    """The choice's tokenizer without its weights, found once per choice (finding the source
    checks the prepared copy, which takes tens of milliseconds)."""
    return tokenizer_at(transformers_source(choice))


@lru_cache(maxsize=2)
def load_model_on(choice: ModelChoice, device: str) -> LocalModel:
    """``choice`` loaded on ``device`` (a ``COURSE_DEVICE`` value), once per pair: later calls
    return the same object. :func:`load_local_model` is the usual way in."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    source = transformers_source(choice)
    where = placement(device)
    start = time.perf_counter()
    hf_logging.disable_progress_bar()  # a warm load takes well under a second: no bar needed
    try:
        check_fits(source, where, choice.value)
        tokenizer = tokenizer_at(source)  # the same object agent_tokenizer counts with
        extra = {"device_map": where.device_map} if where.device_map else {}
        # On the CPU, where the dtype on disk is the dtype used (the bundled model's fp32),
        # transformers (5.x) maps the safetensors file copy-on-write and keeps its pages as the
        # parameters: every kernel shares one copy of the weights through the page cache (tested
        # in tests/test_shared_weights.py; nothing may write into a parameter in place).
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=getattr(torch, where.dtype), **extra)
    except CourseSettingError:
        raise
    except Exception as err:  # a damaged file raises anything: the doctor's check names it
        raise load_failure(choice, source, err) from err
    finally:
        hf_logging.enable_progress_bar()
    model.eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    local = LocalModel(model, tokenizer, choice, source, time.perf_counter() - start)
    if choice.with_adapter:  # bundled+tools: the base wrapped by PEFT with the checked adapter
        from course.adapter_manifest import AdapterError, wrap_with_adapter

        try:
            local.model = model = wrap_with_adapter(model)
        except AdapterError as err:
            raise CourseSettingError(f"{MODEL_SETTING}={choice.value!r}: {err}") from None
        local.load_seconds = time.perf_counter() - start
    # In a Jupyter kernel on glibc: after each cell that ran this model, what its forward passes
    # freed goes back to the system (seven kernels open at once)
    from course.memory_release import release_after_model_cells

    release_after_model_cells(model)
    return local


def load_local_model(choice: ModelChoice | None = None) -> LocalModel:
    """The active model loaded in this kernel (cached: later calls return the same object).

    For a server setting this raises CourseSettingError; cells that read internals use
    :func:`~course.models.roles.probe_model`, which never does.
    """
    return load_model_on(choice or active_model(), device_setting())


def fresh_base() -> LocalModel:
    """A new model object holding the bundled weights (mapped from the same converted file, so
    no second copy in memory), not the kernel's cached one: what LoRA trains, and what an
    adapter other than ``bundled+tools``'s wraps."""
    import torch
    from transformers import AutoModelForCausalLM

    choice = ModelChoice("bundled", "bundled")
    source = transformers_source(choice)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    model.eval()
    tokenizer = tokenizer_at(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LocalModel(model, tokenizer, choice, source)


def load_with_adapter(folder: Path | None = None, base: LocalModel | None = None) -> LocalModel:
    """The bundled model with the adapter in ``folder`` (default the course's; checked first), as
    a ``LocalModel``: ``base`` (default a :func:`fresh_base`) with its model wrapped
    (:func:`course.adapter_manifest.wrap_with_adapter`, as the loader does for ``bundled+tools``)."""
    from course.adapter_manifest import wrap_with_adapter

    base = base or fresh_base()
    base.model = wrap_with_adapter(base.model, folder)
    return base


# --- why a folder cannot load ------------------------------------------------------------------


def local_folder_fix(folder: str | Path) -> str:
    """The fix for a damaged model folder named by ``COURSE_MODEL`` (a path the student chose)."""
    return (f"Fix: save the model into {folder} again (save_pretrained()), point {MODEL_SETTING} "
            f"at another model folder, or unset {MODEL_SETTING} to use the bundled model.")


def _why(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200]}"


def _weight_files(folder: Path, fix: str) -> list[Path] | str:
    """The weights files transformers would read in ``folder``, or why there are none."""
    from transformers.utils import (
        SAFE_WEIGHTS_INDEX_NAME,
        SAFE_WEIGHTS_NAME,
        WEIGHTS_INDEX_NAME,
        WEIGHTS_NAME,
    )
    from transformers.utils.hub import get_checkpoint_shard_files

    names = (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME)
    found = next((folder / n for n in names if (folder / n).is_file()), None)
    if found is None:
        return (f"{folder} holds no weights file (transformers looks for "
                f"{', '.join(names)}). {fix}")
    if not found.name.endswith(".index.json"):
        return [found]
    try:
        shards, _ = get_checkpoint_shard_files(str(folder), str(found))
    except Exception as err:  # broken JSON, no weight_map
        return f"{found} cannot be read as a checkpoint index ({_why(err)}). {fix}"
    return [Path(s) for s in shards]


def model_folder_problem(folder: str | Path, label: str, fix: str,
                         where: Placement | None = None) -> str | None:
    """Why the loader (:func:`load_model_on`) cannot load the transformers model in ``folder``,
    naming the file, or None; no weight is read.

    The same calls as the loader, in its order: ``AutoConfig.from_pretrained`` on
    ``config.json``; the weights' size estimated from it (``check_fits``, a model built on the
    ``meta`` device) against ``where``'s memory (skipped when ``where`` is None); then the
    weights file transformers would pick (``model.safetensors``, its sharded index,
    ``pytorch_model.bin``), each safetensors file's header read with ``safetensors.safe_open``
    (:func:`course.assets.safetensors_problem`). ``fix`` ends a message about a damaged or
    missing file; a model too big for this machine gets ``check_fits``' own message. Not
    checked: the tokenizer files and a ``.bin`` file's pickle (reading either costs as much as
    loading it).
    """
    from transformers import AutoConfig

    from course.assets import safetensors_problem

    folder = Path(folder)
    config = folder / "config.json"
    try:
        AutoConfig.from_pretrained(str(folder))
    except Exception as err:  # whatever transformers raises, named with its file
        return f"{config} cannot be read by transformers' AutoConfig ({_why(err)}). {fix}"
    try:
        if where is None:
            estimate_weight_bytes(str(folder))
        else:
            check_fits(str(folder), where, label)
    except CourseSettingError as err:
        return str(err)
    except Exception as err:  # e.g. a negative size: the meta model cannot be built
        return f"{config} describes a model that cannot be built ({_why(err)}). {fix}"
    shards = _weight_files(folder, fix)
    if isinstance(shards, str):
        return shards
    for shard in shards:
        if shard.suffix == ".safetensors":
            problem = safetensors_problem(shard)
        else:
            problem = None if shard.is_file() else f"{shard} is missing"
        if problem:
            return f"{problem}. {fix}"
    return None


def converted_copy_cannot_load(folder: Path | None = None) -> bool:
    """True when the bundled model's converted copy (``folder``, default the cache's) is there
    but the loader's own checks (:func:`model_folder_problem`) fail: ``prepare`` converts it
    again. A copy that is missing or fails its format checks is converted again anyway."""
    from course.assets import converted_model_dir

    folder = folder or converted_model_dir()
    return folder.is_dir() and model_folder_problem(folder, "bundled", "") is not None


def load_failure(choice: ModelChoice, source: str, err: BaseException) -> CourseSettingError:
    """The course error for a model the loader could not load: the file that is broken (by
    :func:`model_folder_problem`) and the fix that fits the setting.

    The bundled model's converted copy is repaired by ``python -m course prepare``; nothing
    tells a student to unset a ``COURSE_MODEL`` they never set. A local folder gets
    :func:`local_folder_fix`; a hub id the advice to check it.
    """
    raw = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    if choice.is_bundled:
        fix = (f"Fix: run `{PREPARE_COMMAND}`; it checks the converted copy and converts the bundled "
               "model again.")
        problem = model_folder_problem(source, choice.value, fix)
        return CourseSettingError(
            f"The bundled model's converted copy at {source} could not be loaded ({raw}): "
            + (problem or f"a file in it is damaged. {fix}"))
    if choice.local_path:
        problem = model_folder_problem(source, choice.value, local_folder_fix(source))
        return CourseSettingError(f"{MODEL_SETTING}={choice.value!r} could not be loaded "
                                  f"({raw}): " + (problem or local_folder_fix(source)))
    return CourseSettingError(
        f"{MODEL_SETTING}={choice.value!r} could not be loaded ({raw}). Fix: check the id, or "
        f"unset {MODEL_SETTING} to use the bundled model.")


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
