"""One place that decides which model a notebook gets, and builds it for each library.

Two roles, stated once. The *agent model* is the setting (``COURSE_MODEL``, see
:mod:`course.settings`: bundled, local path, hub id, or an OpenAI-compatible server); it drives
every conversation, graph and agent run through :func:`chat_model` (LangChain) and
:func:`smolagents_model`. The *probe model* is a model loaded in this kernel for cells that
read internals (token probabilities, logits processors, the KV cache, the tokenizer): the
setting's model when it can be loaded here, else the bundled one; :func:`probe_note` prints
which. Everything loaded in the kernel shares one copy of the weights (:func:`load_local_model`);
the pipeline, the LangChain model and the smolagents model all wrap those very tensors.

Loading picks the device and dtype from ``COURSE_DEVICE`` (CUDA: bf16 where the GPU has it
natively, fp16 on older GPUs such as Colab's T4, with ``device_map="auto"``; CPU: fp32) and
first estimates the weights' memory from the config against the free memory of the GPU(s) or
the RAM, refusing with :class:`~course.settings.CourseSettingError` when it cannot fit. Server
models get a request timeout and bounded retries; token counting for a server never downloads
anything.
A bad setting fails fast with a ``CourseSettingError`` naming ``COURSE_MODEL`` and the fix.

What this module does not do: pick generation settings for a lesson (each chapter passes its
own), make a 135M model answer like a 4B one, or start a server.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from course.settings import (
    BUNDLED,
    DEVICE_SETTING,
    MODEL_SETTING,
    CourseSettingError,
    ModelChoice,
    active_model,
    device_setting,
    hub_offline,
)

__all__ = [
    "SMALL_MODEL_PARAMETERS", "GpuInfo", "LocalModel", "ModelsReport", "Placement", "ServerError",
    "agent_is_local", "agent_is_small", "agent_tokenizer", "chat_model", "check_fits",
    "cuda_dtype", "describe_models", "estimate_weight_bytes", "gpu_info", "load_local_model",
    "notes_tokenizer", "placement", "probe_chat_model", "probe_model", "probe_note",
    "served_model_name", "server_models", "short_name", "smolagents_model",
    "text_generation_pipeline", "transformers_source",
]

SERVER_TIMEOUT_S = 3.0  # GET /models: a server that is up answers at once
REQUEST_TIMEOUT_SETTING = "COURSE_SERVER_TIMEOUT"
REQUEST_TIMEOUT_S = 60.0  # one chat request to a server (a CPU server may take a while)
REQUEST_RETRIES = 1
CHAT_MAX_NEW_TOKENS = 48  # a chat reply, local or served, unless the chapter asks otherwise
AGENT_MAX_NEW_TOKENS = 256  # one agent step
MEMORY_HEADROOM = 1.15  # weights plus activations and the allocator's slack
BYTES_PER_DTYPE = {"float32": 4, "bfloat16": 2, "float16": 2}


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


# --- where and how a model is loaded ----------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where a kernel model goes: the device, the dtype and the ``device_map`` to load with."""

    device: str
    dtype: str
    device_map: str | None

    def __str__(self) -> str:
        return f"{self.device}, {self.dtype}"


def cuda_dtype() -> str:
    """The half-precision dtype the current CUDA GPU computes in natively.

    ``bfloat16`` from compute capability 8.0 (A100, L4, H100), ``float16`` below it (a T4 is 7.5).
    torch's ``is_bf16_supported()`` also says True where bf16 is only *emulated* (a T4 runs it,
    slowly, and without fp16's tensor cores), so it is asked without emulation.
    """
    import torch

    try:
        native = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # a torch (or a stand-in) without the emulation argument
        native = torch.cuda.is_bf16_supported()
    return "bfloat16" if native else "float16"


@dataclass(frozen=True)
class GpuInfo:
    """The CUDA GPU(s) this kernel sees: what the doctor reports and the memory guard reads."""

    name: str
    capability: tuple[int, int]
    count: int
    free_bytes: int
    total_bytes: int
    dtype: str

    @property
    def label(self) -> str:
        """``Tesla T4``, or ``2 x Tesla T4`` when there are several."""
        return self.name if self.count == 1 else f"{self.count} x {self.name}"

    def __str__(self) -> str:
        major, minor = self.capability
        why = "" if self.dtype == "bfloat16" else " (no native bf16 below compute capability 8.0)"
        return (f"{self.label}, compute capability {major}.{minor}, {_gb(self.free_bytes)} free "
                f"of {_gb(self.total_bytes)}; models load in {self.dtype}{why}")


def gpu_info() -> GpuInfo | None:
    """The CUDA GPUs torch sees (name, capability, free and total memory, dtype), else None."""
    import torch

    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    free = total = 0
    for index in range(count):
        device_free, device_total = torch.cuda.mem_get_info(index)
        free, total = free + device_free, total + device_total
    return GpuInfo(torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0)),
                   count, free, total, cuda_dtype())


def placement(device: str | None = None) -> Placement:
    """The device and dtype for ``COURSE_DEVICE`` (or ``device``): on CUDA bf16 where the GPU has
    it natively, else fp16 (:func:`cuda_dtype`); Apple GPU fp16; CPU fp32."""
    import torch

    wanted = device or device_setting()
    has_cuda = torch.cuda.is_available()
    has_mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if wanted == "auto":
        wanted = "cuda" if has_cuda else "mps" if has_mps else "cpu"
    if wanted == "cuda":
        if not has_cuda:
            raise CourseSettingError(
                f"{DEVICE_SETTING}=cuda, but torch sees no CUDA GPU here. Fix: use a GPU runtime "
                f"(Colab: Runtime > Change runtime type > GPU), or set {DEVICE_SETTING}=auto."
            )
        return Placement("cuda", cuda_dtype(), "auto")
    if wanted == "mps":
        if not has_mps:
            raise CourseSettingError(
                f"{DEVICE_SETTING}=mps, but torch sees no Apple GPU here. Fix: set "
                f"{DEVICE_SETTING}=auto."
            )
        return Placement("mps", "float16", "auto")
    return Placement("cpu", "float32", None)


def estimate_weight_bytes(source: str, dtype: str = "float32") -> tuple[int, int]:
    """``(parameters, bytes)`` of a model's weights in ``dtype``, from its config alone.

    The model is built on torch's ``meta`` device, which allocates nothing and reads no weight.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(source)
    _refuse_endless_build(source, config)
    with torch.device("meta"):
        empty = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in empty.parameters())
    return params, params * BYTES_PER_DTYPE.get(dtype, 4)


MAX_REPEATED_MODULES = 512
"""More layers or experts than any model the workbook can load (the largest published LLMs have
under 200 layers and under 400 experts): building them on ``meta`` takes tens of ms each, so
``num_hidden_layers=1000000`` would keep the estimate (the doctor, the loader) busy for hours."""


def _refuse_endless_build(source: str, config: Any) -> None:
    """CourseSettingError naming ``source``'s config.json when a layer or expert count in it
    exceeds :data:`MAX_REPEATED_MODULES` (the meta build is bounded by refusing it)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    counts = {key: value for key, value in text.to_dict().items()
              if isinstance(value, int) and not isinstance(value, bool)
              and key.endswith(("layers", "experts")) and value > MAX_REPEATED_MODULES}
    if counts:
        named = ", ".join(f"{key}={value:,}" for key, value in counts.items())
        raise CourseSettingError(
            f"{source}/config.json says {named}: more than {MAX_REPEATED_MODULES} layers or "
            "experts, which no model this workbook can load has (building them only to "
            "estimate the memory would take hours). Nothing was loaded. Fix: correct the "
            f"config.json, or set {MODEL_SETTING} to another model.")


def _free_bytes(where: Placement) -> tuple[int, str, str]:
    """What the device has free now (``device_map="auto"`` spreads a model over every GPU, so
    on CUDA the free memory of all of them), what holds it, and what was measured."""
    if where.device == "cuda":
        gpu = gpu_info()
        if gpu is not None:
            return gpu.free_bytes, f"the GPU ({gpu.label})", "free memory"
    import psutil

    return psutil.virtual_memory().available, f"this {where.device}", "available RAM"


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check_fits(source: str, where: Placement, label: str) -> int:
    """Refuse, before any weight is read, a model whose weights cannot fit; returns the estimate."""
    params, needed = estimate_weight_bytes(source, where.dtype)
    free, holder, what = _free_bytes(where)
    if needed * MEMORY_HEADROOM > free:
        bigger = ("a GPU with more memory (on Colab: Runtime > Change runtime type > A100 or L4; "
                  "or restart the runtime if another model holds the GPU)"
                  if where.device == "cuda" else
                  "a GPU runtime (on Colab: Runtime > Change runtime type > GPU)")
        raise CourseSettingError(
            f"{MODEL_SETTING}={label!r}: {params / 1e9:.2f} B parameters in {where.dtype} need "
            f"about {_gb(needed)} for the weights alone, but {holder} has {_gb(free)} {what}. "
            f"Nothing was loaded. Fix: {bigger}, a smaller model "
            "(Qwen/Qwen2-0.5B-Instruct), or serve the model elsewhere and set "
            f"{MODEL_SETTING}=http://HOST:PORT/v1."
        )
    return needed


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


@lru_cache(maxsize=2)
def _load(choice: ModelChoice, device: str) -> LocalModel:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    source = transformers_source(choice)
    where = placement(device)
    start = time.perf_counter()
    hf_logging.disable_progress_bar()  # a warm load takes well under a second: no bar needed
    try:
        check_fits(source, where, choice.value)
        tokenizer = _tokenizer_at(source)  # the same object agent_tokenizer counts with
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


PREPARE_COMMAND = "python -m course prepare"


def local_folder_fix(folder: str | Path) -> str:
    """The fix for a damaged model folder named by ``COURSE_MODEL`` (a path the student chose)."""
    return (f"Fix: save the model into {folder} again (save_pretrained()), point {MODEL_SETTING} "
            f"at another model folder, or unset {MODEL_SETTING} to use the bundled model.")


def model_folder_problem(folder: str | Path, label: str, fix: str,
                         where: Placement | None = None) -> str | None:
    """Why the loader (:func:`_load`) cannot load the transformers model in ``folder``,
    naming the file, or None; no weight is read.

    The same calls as the loader, in its order: ``AutoConfig.from_pretrained`` on
    ``config.json``; the weights' size estimated from it (:func:`check_fits`,
    a model built on the ``meta`` device) against ``where``'s memory (skipped when ``where`` is
    None); then the weights file transformers would pick (``model.safetensors``, its sharded
    index, ``pytorch_model.bin``), each safetensors file's header read with
    ``safetensors.safe_open`` (:func:`course.assets.safetensors_problem`). ``fix`` ends a
    message about a damaged or missing file; a model too big for this machine gets
    ``check_fits``' own message. Not checked: the tokenizer files and a ``.bin`` file's pickle
    (reading either costs as much as loading it).
    """
    from transformers import AutoConfig
    from transformers.utils import (
        SAFE_WEIGHTS_INDEX_NAME,
        SAFE_WEIGHTS_NAME,
        WEIGHTS_INDEX_NAME,
        WEIGHTS_NAME,
    )
    from transformers.utils.hub import get_checkpoint_shard_files

    from course.assets import safetensors_problem

    folder = Path(folder)
    config = folder / "config.json"

    def why(err: BaseException) -> str:
        text = " ".join(str(err).split())
        return f"{type(err).__name__}: {text[:200]}"

    try:
        AutoConfig.from_pretrained(str(folder))
    except Exception as err:  # whatever transformers raises, named with its file
        return f"{config} cannot be read by transformers' AutoConfig ({why(err)}). {fix}"
    try:
        if where is None:
            estimate_weight_bytes(str(folder))
        else:
            check_fits(str(folder), where, label)
    except CourseSettingError as err:
        return str(err)
    except Exception as err:  # e.g. a negative size: the meta model cannot be built
        return f"{config} describes a model that cannot be built ({why(err)}). {fix}"
    names = (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME)
    found = next((folder / n for n in names if (folder / n).is_file()), None)
    if found is None:
        return (f"{folder} holds no weights file (transformers looks for "
                f"{', '.join(names)}). {fix}")
    if found.name.endswith(".index.json"):
        try:
            shards, _ = get_checkpoint_shard_files(str(folder), str(found))
        except Exception as err:  # broken JSON, no weight_map
            return f"{found} cannot be read as a checkpoint index ({why(err)}). {fix}"
        shards = [Path(s) for s in shards]
    else:
        shards = [found]
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


def load_local_model(choice: ModelChoice | None = None) -> LocalModel:
    """The active model loaded in this kernel (cached: later calls return the same object).

    For a server setting this raises CourseSettingError; cells that read internals use
    :func:`probe_model`, which never does.
    """
    return _load(choice or active_model(), device_setting())


# --- the two roles -----------------------------------------------------------------------------


def agent_is_local() -> bool:
    """True when the agent model runs in this kernel (not an OpenAI-compatible server)."""
    return active_model().in_kernel


SMALL_MODEL_PARAMETERS = 1_000_000_000
"""Below this size a model cannot act as a code agent (chapter 02 gives it a short bounded run)."""


def agent_is_small(choice: ModelChoice | None = None) -> tuple[bool, str]:
    """Whether the agent model has under a billion parameters, and what it is, in words.

    Bundled: yes. A server: by the served model's name (a server does not report its size).
    In the kernel: the loaded model's parameter count.
    """
    choice = choice or active_model()
    if choice.is_bundled:
        return True, "the bundled SmolLM2-135M model"
    if not choice.in_kernel:
        name = served_model_name(choice)
        small = "smollm2" in name.lower() or name.rstrip("/").endswith("smollm2-135m-instruct")
        return small, f"the served model {name}"
    params = load_local_model(choice).model.num_parameters()
    return params < SMALL_MODEL_PARAMETERS, f"{choice.value} ({params / 1e6:.0f}M parameters)"


def _probe_choice() -> ModelChoice:
    choice = active_model()
    return choice if choice.in_kernel else ModelChoice("bundled", BUNDLED)


def probe_model() -> LocalModel:
    """The model loaded in the kernel for cells that read internals (never a server)."""
    return load_local_model(_probe_choice())


def probe_note() -> str:
    """One line saying which model a probing cell reads, and what the agent model is."""
    choice = active_model()
    if not choice.in_kernel:
        served = f" (model {choice.served_model})" if choice.served_model else ""
        return ("probe model: SmolLM2-135M-Instruct (bundled); the agent model is a server at "
                f"{choice.shown}{served}")
    probe = "SmolLM2-135M-Instruct (bundled)" if choice.is_bundled else choice.value
    return f"probe model: {probe}, the same model as the agent model, loaded in this kernel"


def text_generation_pipeline(
    return_full_text: bool = False, max_new_tokens: int = CHAT_MAX_NEW_TOKENS, *,
    local: LocalModel | None = None, **generate_kwargs: Any
):
    """A transformers ``text-generation`` pipeline over ``local`` (default: the probe model),
    greedy by default.

    ``return_full_text`` defaults to False here because only the model's answer belongs in the
    conversation store; the trimming chapter passes True on purpose to show the bug.
    """
    from transformers import pipeline

    local = local or probe_model()
    generate_kwargs.setdefault("do_sample", False)
    return pipeline(
        "text-generation",
        model=local.model,
        tokenizer=local.tokenizer,
        return_full_text=return_full_text,
        max_new_tokens=max_new_tokens,
        **generate_kwargs,
    )


# --- servers -----------------------------------------------------------------------------------


def _server_error(choice: ModelChoice, what: str) -> ServerError:
    """The one error for a server that fails (listing models or answering a chat request)."""
    return ServerError(f"{MODEL_SETTING}={choice.shown!r}: {what}. {_FIX}")


def server_models(choice: ModelChoice, timeout: float = SERVER_TIMEOUT_S) -> list[str]:
    """The model ids ``GET <url>/models`` lists; CourseSettingError for anything else."""
    import httpx

    try:
        with httpx.Client(transport=_deadline_transport(timeout), timeout=timeout) as client:
            response = client.get(f"{choice.value}/models")
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as err:
        raise _server_error(choice, f"the server did not answer GET /models within "
                                    f"{timeout:.0f} s ({err})") from err
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(
            isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"] for m in data):
        raise _server_error(choice, "GET /models did not answer an OpenAI model list "
                                    f"({{'data': [{{'id': ...}}]}}), got {str(body)[:120]!r}")
    return [m["id"] for m in data]


def served_model_name(choice: ModelChoice) -> str:
    """The served model name: from the setting, or the first one ``GET /models`` lists.

    Asked once per server setting in a kernel: the chat model, its token counter and the
    smolagents model share the answer (a failed look-up is not kept, so it is asked again).
    """
    if choice.served_model:
        return choice.served_model
    return _first_served_model(choice)


@lru_cache(maxsize=8)
def _first_served_model(choice: ModelChoice) -> str:
    ids = server_models(choice)
    if not ids:
        raise _server_error(choice, "the server lists no models")
    return ids[0]


MAX_REQUEST_TIMEOUT_S = 3600.0


def _request_timeout() -> float:
    """``COURSE_SERVER_TIMEOUT`` in seconds (default 60); a value that cannot work is refused."""
    raw = os.environ.get(REQUEST_TIMEOUT_SETTING, "").strip()
    if not raw:
        return REQUEST_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_REQUEST_TIMEOUT_S:  # also refuses nan and inf
        raise CourseSettingError(
            f"{REQUEST_TIMEOUT_SETTING}={raw[:40]!r} is not a request timeout. Fix: set it to a "
            f"number of seconds above 0 and at most {MAX_REQUEST_TIMEOUT_S:.0f} (e.g. 60), or "
            "unset it for the default of 60 s.")
    return value


@lru_cache(maxsize=4)
def _tokenizer_at(source: str) -> Any:
    """The tokenizer at ``source`` (a folder or hub id), read once: the loaded model's own and
    the one that counts without the weights are one object (a second is another 13 MB)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


@lru_cache(maxsize=4)
def _tokenizer_alone(choice: ModelChoice) -> Any:
    """The choice's tokenizer without its weights, found once per choice (finding the source
    checks the prepared copy, which takes tens of milliseconds)."""
    return _tokenizer_at(transformers_source(choice))


def agent_tokenizer(choice: ModelChoice | None = None) -> tuple[Any, str]:
    """The tokenizer that counts the agent model's tokens, and a label saying which it is.

    Kernel models: their own (the bundled one is read alone, without its weights, so a replay
    can count before any model is loaded). A server: the served model's own tokenizer when its
    name is a hub id in the local cache or a local path (no download), else the probe model's,
    labelled.
    """
    choice = choice or active_model()
    if choice.in_kernel:
        tokenizer = (_tokenizer_alone(choice) if choice.is_bundled
                     else load_local_model(choice).tokenizer)
        return tokenizer, f"{short_name(choice)} tokenizer (the agent model's own)"
    name = served_model_name(choice)
    try:
        from transformers import AutoTokenizer

        short = name.rstrip("/").rsplit("/", 1)[-1]
        return (AutoTokenizer.from_pretrained(name, local_files_only=True),
                f"{short} tokenizer (the served model's own, read locally)")
    except Exception:  # any failure to find it offline means: count with the probe model
        probe = probe_model()
        return probe.tokenizer, (f"{probe.short_name} tokenizer (the probe model's; the served "
                                 f"model {name}'s own tokenizer is not available offline)")


@lru_cache(maxsize=1)
def _served_chat_openai():
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_openai import ChatOpenAI

    class ServedChatOpenAI(ChatOpenAI):
        """ChatOpenAI that counts tokens with a local tokenizer instead of fetching tiktoken."""

        token_counter_label: str = ""
        course_choice: Any = None  # the ModelChoice: failures are ServerErrors naming it
        course_timeout: float = REQUEST_TIMEOUT_S

        def get_num_tokens_from_messages(self, messages, tools=None, **_: Any) -> int:
            return BaseChatModel.get_num_tokens_from_messages(self, messages, tools)

        def _generate(self, *args: Any, **kwargs: Any):
            if self.course_choice is None:
                return super()._generate(*args, **kwargs)
            return _call_server(self.course_choice, self.course_timeout, lambda: _has_reply(
                self.course_choice, super(ServedChatOpenAI, self)._generate(*args, **kwargs)))

        async def _agenerate(self, *args: Any, **kwargs: Any):
            if self.course_choice is None:
                return await super()._agenerate(*args, **kwargs)
            async def call():
                return _has_reply(self.course_choice, await super(
                    ServedChatOpenAI, self)._agenerate(*args, **kwargs))

            return await _acall_server(self.course_choice, self.course_timeout, call)

        def _stream(self, *args: Any, **kwargs: Any):
            if self.course_choice is None:
                yield from super()._stream(*args, **kwargs)
                return
            yield from _stream_server(
                self.course_choice, self.course_timeout,
                lambda: super(ServedChatOpenAI, self)._stream(*args, **kwargs), _is_reply_chunk)

        async def _astream(self, *args: Any, **kwargs: Any):
            if self.course_choice is None:
                async for chunk in super()._astream(*args, **kwargs):
                    yield chunk
                return
            async for chunk in _astream_server(
                    self.course_choice, self.course_timeout,
                    lambda: super(ServedChatOpenAI, self)._astream(*args, **kwargs),
                    _is_reply_chunk):
                yield chunk

    return ServedChatOpenAI


def _chat_huggingface(local: LocalModel, pipe: Any, **kwargs: Any):
    """``ChatHuggingFace`` over a ``text-generation`` pipeline on ``local`` (its own tensors)."""
    from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline

    llm = HuggingFacePipeline(pipeline=pipe, model_id=local.source)
    return ChatHuggingFace(llm=llm, tokenizer=local.tokenizer, model_id=local.source, **kwargs)


def _sampling(temperature: float | None, top_p: float | None) -> dict[str, Any]:
    """transformers' generation arguments: greedy unless a temperature above 0 is asked for."""
    if not temperature:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature,
            **({"top_p": top_p} if top_p is not None else {})}


def chat_model(pipeline: Any | None = None, *, max_new_tokens: int | None = None,
               temperature: float | None = None, top_p: float | None = None,
               choice: ModelChoice | None = None, **kwargs: Any):
    """The agent model as a LangChain chat model: the one builder of every chapter's chat model.

    ``max_new_tokens`` caps a reply (default 48); ``temperature`` (default: greedy) and ``top_p``
    sample. Kernel models: ``ChatHuggingFace`` over a :func:`text_generation_pipeline` with those
    settings, or over ``pipeline`` when one is given. Servers: ``ChatOpenAI`` pointed at the URL
    with the same reply length (``max_new_tokens``, else the given pipeline's) and sampling, a
    request timeout, bounded retries and a token counter that never downloads
    (``token_counter_label`` says what it counts with). ``choice`` defaults to the setting.
    """
    choice = choice or active_model()
    if not choice.in_kernel:
        if max_new_tokens is None and pipeline is not None:
            max_new_tokens = getattr(pipeline, "_generate_kwargs", {}).get("max_new_tokens")
        if top_p is not None:
            kwargs.setdefault("top_p", top_p)
        cls = _served_chat_openai()
        timeout = kwargs.pop("timeout", _request_timeout())
        kwargs.setdefault("http_client", _http_client(timeout))
        kwargs.setdefault("http_async_client", _async_http_client(timeout))
        chat = cls(
            base_url=choice.value,
            model=served_model_name(choice),
            api_key=kwargs.pop("api_key", "not-needed"),
            temperature=temperature or 0,
            max_tokens=kwargs.pop("max_tokens", max_new_tokens or CHAT_MAX_NEW_TOKENS),
            timeout=timeout,
            max_retries=kwargs.pop("max_retries", REQUEST_RETRIES),
            course_choice=choice,
            course_timeout=timeout,
            **kwargs,
        )
        # retries are the course's (_call_server: Retry-After only when it fits the timeout);
        # openai's own would wait up to 60 s for a Retry-After
        chat.root_client = chat.root_client.with_options(max_retries=0)
        chat.client = chat.root_client.chat.completions
        chat.root_async_client = chat.root_async_client.with_options(max_retries=0)
        chat.async_client = chat.root_async_client.chat.completions
        if chat.custom_get_token_ids is None:
            tokenizer, label = agent_tokenizer(choice)
            chat.custom_get_token_ids = lambda text: tokenizer.encode(
                text, add_special_tokens=False)
            chat.token_counter_label = label
        return chat
    pipe = pipeline if pipeline is not None else text_generation_pipeline(
        max_new_tokens=max_new_tokens or CHAT_MAX_NEW_TOKENS, local=load_local_model(choice),
        **_sampling(temperature, top_p))
    return _chat_huggingface(load_local_model(choice), pipe, **kwargs)


def probe_chat_model(*, return_full_text: bool = False,
                     max_new_tokens: int = CHAT_MAX_NEW_TOKENS):
    """The probe model as ``ChatHuggingFace`` over a greedy pipeline (always in this kernel).

    For the cells about the pipeline itself: ``return_full_text=True`` is the trimming chapter's
    bug 1, which only a transformers pipeline can show.
    """
    pipe = text_generation_pipeline(return_full_text=return_full_text,
                                    max_new_tokens=max_new_tokens)
    return _chat_huggingface(probe_model(), pipe)


@lru_cache(maxsize=1)
def _shared_transformers_model_class():
    from smolagents import Model, TransformersModel
    from transformers import TextIteratorStreamer

    class SharedTransformersModel(TransformersModel):
        """smolagents' TransformersModel over an already loaded :class:`LocalModel`.

        TransformersModel's own ``__init__`` loads a second copy of the weights; this one reuses
        the kernel's model and tokenizer, and keeps every generation method of the parent.
        """

        def __init__(self, local: LocalModel, max_new_tokens: int = 256,
                     apply_chat_template_kwargs: dict | None = None, **kwargs: Any) -> None:
            self._is_vlm = False
            self.model_kwargs = {}
            self.apply_chat_template_kwargs = apply_chat_template_kwargs or {}
            self.model = local.model
            self.tokenizer = local.tokenizer
            self.streamer = TextIteratorStreamer(
                local.tokenizer, skip_prompt=True, skip_special_tokens=True)
            Model.__init__(self, flatten_messages_as_text=True, model_id=local.source,
                           max_new_tokens=max_new_tokens, **kwargs)

    return SharedTransformersModel


@lru_cache(maxsize=1)
def _served_smolagents_model():
    from smolagents import OpenAIServerModel

    class ServedOpenAIServerModel(OpenAIServerModel):
        """OpenAIServerModel whose failures are one :class:`ServerError` naming the setting."""

        def __init__(self, choice: ModelChoice, timeout: float, **kwargs: Any) -> None:
            self.course_choice, self.course_timeout = choice, timeout
            super().__init__(**kwargs)

        def generate(self, *args: Any, **kwargs: Any):
            return _call_server(self.course_choice, self.course_timeout,
                                lambda: super(ServedOpenAIServerModel, self).generate(
                                    *args, **kwargs))

        def generate_stream(self, *args: Any, **kwargs: Any):
            yield from _stream_server(
                self.course_choice, self.course_timeout,
                lambda: super(ServedOpenAIServerModel, self).generate_stream(*args, **kwargs),
                _is_reply_delta)

    return ServedOpenAIServerModel


def smolagents_model(choice: ModelChoice | None = None, **kwargs: Any):
    """The agent model for smolagents: ``OpenAIServerModel`` for a server, else a
    ``TransformersModel`` over the kernel's loaded model (the same tensors, no second copy)."""
    choice = choice or active_model()
    if not choice.in_kernel:
        timeout = _request_timeout()
        # retries are the course's (_call_server), not openai's nor smolagents' (60 s waits)
        client_kwargs = {"timeout": timeout, "max_retries": 0,
                         "http_client": _http_client(timeout),
                         **kwargs.pop("client_kwargs", {})}
        kwargs.setdefault("retry", False)
        # the OpenAI API calls it max_tokens; the same budget as the in-kernel model gets
        kwargs["max_tokens"] = kwargs.pop("max_new_tokens", kwargs.pop("max_tokens", None)) or (
            AGENT_MAX_NEW_TOKENS)
        return _served_smolagents_model()(
            choice, timeout,
            model_id=served_model_name(choice),
            api_base=choice.value,
            api_key=kwargs.pop("api_key", "not-needed"),
            client_kwargs=client_kwargs,
            **kwargs,
        )
    kwargs.setdefault("max_new_tokens", AGENT_MAX_NEW_TOKENS)
    return _shared_transformers_model_class()(load_local_model(choice), **kwargs)


# --- tokenizers and the report -----------------------------------------------------------------


def notes_tokenizer() -> tuple[Any, str]:
    """The tokenizer the source notes counted with (Qwen3), and a label; offline only.

    Falls back to the probe model's tokenizer, labelled so, when the Qwen asset is not prepared.
    """
    from course.assets import AssetError, qwen_tokenizer

    try:
        return qwen_tokenizer(), "Qwen3 tokenizer"
    except AssetError as err:
        probe = probe_model()
        reason = str(err).split(". ")[0][:120] or type(err).__name__
        return probe.tokenizer, (f"{probe.short_name} tokenizer (the Qwen3 tokenizer asset is "
                                 f"missing: {reason}; run `python -m course prepare`)")


@dataclass
class ModelsReport:
    """What the workbook will use: agent and probe models, device, dtype, and a server's answer."""

    agent: str
    probe: str
    device: str
    dtype: str
    server: str | None = None
    server_answers: bool | None = None
    server_models: list[str] = field(default_factory=list)
    served_model: str | None = None
    problem: str | None = None
    gpu: GpuInfo | None = None

    @property
    def ok(self) -> bool:
        """True when nothing in the report stops the notebooks from running."""
        return self.problem is None

    def __str__(self) -> str:
        lines = [f"agent model: {self.agent}", f"probe model: {self.probe}",
                 f"device: {self.device}, dtype: {self.dtype}"]
        if self.gpu is not None:
            lines.append(f"gpu: {self.gpu}")
        if self.server:
            if self.server_answers:
                listed = ", ".join(self.server_models) or "(none)"
                lines.append(f"server: {self.server} answers GET /models; lists {listed}; "
                             f"the workbook asks for {self.served_model}")
            else:
                lines.append(f"server: {self.server} does not answer")
        if self.problem:
            lines.append(f"problem: {self.problem}")
        return "\n".join(lines)


def describe_models() -> ModelsReport:
    """Describe the agent and probe models without loading any weights (asks a server)."""
    try:
        choice = active_model()
    except CourseSettingError as err:
        return ModelsReport("(invalid setting)", "-", "-", "-", problem=str(err))
    try:
        where = placement()
    except CourseSettingError as err:
        return ModelsReport(choice.describe(), "-", "-", "-", problem=str(err))
    probe = probe_note().removeprefix("probe model: ")
    report = ModelsReport(choice.describe(), probe, where.device, where.dtype,
                          gpu=gpu_info() if where.device == "cuda" else None)
    if choice.in_kernel:
        return report
    report.server = choice.shown
    try:
        report.server_models = server_models(choice)
        report.server_answers = True
    except CourseSettingError as err:
        report.server_answers = False
        report.problem = str(err)
        return report
    report.served_model = choice.served_model or (report.server_models or [None])[0]
    if report.served_model not in report.server_models:
        report.problem = (f"{MODEL_SETTING}: the server does not list "
                          f"{report.served_model!r}. Fix: append '#<one of the listed ids>'.")
    return report




# --- a server that misbehaves: one deadline per request, bounded retries, one course error ------

RETRY_BACKOFF_S = 0.5  # wait before a retry when the server gives no Retry-After


class ServerError(CourseSettingError):
    """A server named by ``COURSE_MODEL`` failed a request; the message says what and the fix."""


def _deadline_transport(total: float, asynchronous: bool = False):
    """An httpx transport whose every request (connect, headers and the whole body together)
    ends within ``total`` seconds: each read gets only the time left, and a body that trickles
    past the deadline is cut with ``httpx.ReadTimeout``."""
    import httpx

    def bounded(request: httpx.Request) -> float:
        deadline = time.monotonic() + total
        request.extensions["timeout"] = {k: total for k in ("connect", "read", "write", "pool")}
        return deadline

    def late(request: httpx.Request) -> httpx.ReadTimeout:
        return httpx.ReadTimeout(f"no complete answer within {total:g} s", request=request)

    if asynchronous:
        class AsyncBody(httpx.AsyncByteStream):
            def __init__(self, inner, deadline, request):
                self.inner, self.deadline, self.request = inner, deadline, request

            async def __aiter__(self):
                async for chunk in self.inner:
                    if time.monotonic() > self.deadline:
                        raise late(self.request)
                    yield chunk

            async def aclose(self):
                await self.inner.aclose()

        class AsyncDeadline(httpx.AsyncHTTPTransport):
            async def handle_async_request(self, request):
                import asyncio

                deadline = bounded(request)
                try:
                    response = await asyncio.wait_for(
                        super().handle_async_request(request), total)
                except TimeoutError as err:
                    raise late(request) from err
                response.stream = AsyncBody(response.stream, deadline, request)
                return response

        return AsyncDeadline()

    class Body(httpx.SyncByteStream):
        def __init__(self, inner, deadline, request):
            self.inner, self.deadline, self.request = inner, deadline, request

        def __iter__(self):
            for chunk in self.inner:
                if time.monotonic() > self.deadline:
                    raise late(self.request)
                yield chunk

        def close(self):
            self.inner.close()

    class Deadline(httpx.HTTPTransport):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if hasattr(self._pool, "_network_backend"):  # headers that trickle in, too
                self._pool._network_backend = _deadline_backend()

        def handle_request(self, request):
            deadline = bounded(request)
            _DEADLINE.at = deadline
            response = super().handle_request(request)
            if time.monotonic() > deadline:
                response.close()
                raise late(request)
            response.stream = Body(response.stream, deadline, request)
            return response

    return Deadline()


_DEADLINE = threading.local()  # the deadline of the request this thread is sending


@lru_cache(maxsize=1)
def _deadline_backend():
    """An httpcore network backend whose every socket read and write gets only the time left
    before the thread's request deadline (a header or body trickling in byte by byte ends)."""
    import httpcore

    def left(timeout: float | None, error: type[Exception]) -> float | None:
        deadline = getattr(_DEADLINE, "at", None)
        if deadline is None:
            return timeout
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise error("the request's deadline passed")
        return remaining if timeout is None else min(timeout, remaining)

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, left(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return Stream(self._inner.start_tls(ssl_context, server_hostname,
                                                left(timeout, httpcore.ConnectTimeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.SyncBackend()

        def connect_tcp(self, host, port, timeout=None, local_address=None,
                        socket_options=None):
            return Stream(self._inner.connect_tcp(
                host, port, left(timeout, httpcore.ConnectTimeout), local_address,
                socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            return Stream(self._inner.connect_unix_socket(
                path, left(timeout, httpcore.ConnectTimeout), socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return Backend()


def _http_client(total: float):
    import httpx

    return httpx.Client(transport=_deadline_transport(total), timeout=total)


def _async_http_client(total: float):
    import httpx

    return httpx.AsyncClient(transport=_deadline_transport(total, asynchronous=True),
                             timeout=total)


_FIX = (f"Fix: start the server (or wait until it has loaded the model), check the URL and port "
        f"(it usually ends in /v1) and the '#model-name', raise {REQUEST_TIMEOUT_SETTING} for a "
        f"slow server, or unset {MODEL_SETTING} to use the bundled model.")


def _request_failed(choice: ModelChoice, what: str) -> ServerError:
    return _server_error(choice, f"the chat request failed: {what}")


def _has_reply(choice: ModelChoice, result: Any) -> Any:
    """``result`` (a LangChain ChatResult) when it holds a reply, else the ServerError."""
    if not getattr(result, "generations", None):
        raise _request_failed(choice, "the answer is not an OpenAI chat completion: its "
                                      "'choices' list is empty, so there is no reply")
    return result


def _retry_after(response: Any) -> float | None:
    raw = (getattr(response, "headers", None) or {}).get("retry-after")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


_RETRIED_STATUS = {429, 500, 502, 503, 504}
_STATUS_WORDS = {401: "401 Unauthorized (the server wants an API key: set OPENAI_API_KEY or "
                      "pass api_key=...)",
                 403: "403 Forbidden", 404: "404 Not Found (wrong URL, or no such model)",
                 429: "429 Too Many Requests"}


def _translate(choice: ModelChoice, timeout: float, err: BaseException, last: bool) -> float:
    """The pause before a retry for ``err``, or raise the one :class:`ServerError` it means."""
    import asyncio
    import json

    import httpx
    import openai

    if isinstance(err, ServerError):
        raise err
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        wait = _retry_after(err.response)
        words = _STATUS_WORDS.get(status, f"HTTP {status}")
        if status in _RETRIED_STATUS and not last:
            pause = RETRY_BACKOFF_S if wait is None else wait
            if pause <= timeout:
                return pause
        if wait is not None and wait > timeout:
            words += (f"; it asks to retry after {wait:g} s, longer than "
                      f"{REQUEST_TIMEOUT_SETTING}={timeout:g} s, so it was not waited for")
        raise _request_failed(choice, f"the server answered {words}: "
                                      f"{str(err.message)[:160]!r}") from err
    if isinstance(err, (openai.APITimeoutError, httpx.TimeoutException, TimeoutError,
                        asyncio.TimeoutError)):
        raise _request_failed(choice, f"timeout: no complete answer within {timeout:g} s "
                                      f"({REQUEST_TIMEOUT_SETTING})") from err
    if isinstance(err, (openai.APIConnectionError, httpx.TransportError)):
        if not last:
            return RETRY_BACKOFF_S
        cause = err.__cause__ or err
        raise _request_failed(choice, f"connection refused or lost, no server answered "
                                      f"({type(cause).__name__}: {str(cause)[:120]})") from err
    if isinstance(err, json.JSONDecodeError):
        raise _request_failed(choice, "the body is not JSON, so not an OpenAI chat "
                                      "completion") from err
    if isinstance(err, (IndexError, KeyError, TypeError, AttributeError, ValueError)):
        raise _request_failed(choice, "the answer is not an OpenAI chat completion (empty "
                                      f"or missing 'choices'?): {type(err).__name__}: "
                                      f"{str(err)[:120]}") from err
    raise err


def _call_server(choice: ModelChoice, timeout: float, call):
    """Run one chat call with bounded retries (``REQUEST_RETRIES``), each HTTP request within
    ``timeout``; every failure becomes one :class:`ServerError`."""
    attempts = 1 + REQUEST_RETRIES
    for attempt in range(attempts):
        try:
            return call()
        except Exception as err:
            time.sleep(_translate(choice, timeout, err, attempt == attempts - 1))
    raise AssertionError("unreachable")  # pragma: no cover


async def _acall_server(choice: ModelChoice, timeout: float, call):
    """:func:`_call_server` for a coroutine function ``call``."""
    import asyncio

    attempts = 1 + REQUEST_RETRIES
    for attempt in range(attempts):
        try:
            return await call()
        except Exception as err:
            await asyncio.sleep(_translate(choice, timeout, err, attempt == attempts - 1))
    raise AssertionError("unreachable")  # pragma: no cover


_NOT_A_STREAM = ("the answer to a streaming request is not a stream of OpenAI chat completion "
                 "chunks: no 'data:' event held a reply (the body is not server-sent events, or "
                 "every event's 'choices' list is empty)")


def _is_reply_chunk(chunk: Any) -> bool:
    """A LangChain stream chunk that comes from a reply: text, a tool call or a finish_reason
    (an empty reply still ends with one); an event with empty ``choices`` has none of them."""
    return bool(chunk.text or getattr(chunk.message, "tool_call_chunks", None)
                or (chunk.generation_info or {}).get("finish_reason"))


def _is_reply_delta(delta: Any) -> bool:
    """A smolagents stream delta that holds text or a tool call. smolagents drops the
    finish_reason, so a model that streams an empty reply looks like a stream of empty
    ``choices``: both are a ServerError (an agent cannot act on either)."""
    return bool(delta.content or delta.tool_calls)


def _stream_server(choice: ModelChoice, timeout: float, start, is_reply):
    """Yield the chunks of the stream ``start()`` opens, each HTTP request within ``timeout``
    (the deadline transport); every failure is one :class:`ServerError`. The course's bounded
    retries apply until the first chunk is yielded (a stream cannot be taken back after it); a
    stream in which no chunk ``is_reply`` is a ServerError, not an empty answer."""
    attempts = 1 + REQUEST_RETRIES
    for attempt in range(attempts):
        yielded = replied = False
        try:
            for chunk in start():
                replied = replied or is_reply(chunk)
                yielded = True
                yield chunk
            if not replied:
                raise _request_failed(choice, _NOT_A_STREAM)
            return
        except Exception as err:
            time.sleep(_translate(choice, timeout, err, yielded or attempt == attempts - 1))
    raise AssertionError("unreachable")  # pragma: no cover


async def _astream_server(choice: ModelChoice, timeout: float, start, is_reply):
    """:func:`_stream_server` for an async generator function ``start``."""
    import asyncio

    attempts = 1 + REQUEST_RETRIES
    for attempt in range(attempts):
        yielded = replied = False
        try:
            async for chunk in start():
                replied = replied or is_reply(chunk)
                yielded = True
                yield chunk
            if not replied:
                raise _request_failed(choice, _NOT_A_STREAM)
            return
        except Exception as err:
            await asyncio.sleep(_translate(choice, timeout, err,
                                           yielded or attempt == attempts - 1))
    raise AssertionError("unreachable")  # pragma: no cover
