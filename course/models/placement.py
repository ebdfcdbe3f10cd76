"""Where a model loaded in the kernel goes, and whether it fits there.

:func:`placement` turns ``COURSE_DEVICE`` into a device, a dtype and a ``device_map``: on CUDA
bf16 where the GPU computes it natively and fp16 on older GPUs such as Colab's T4
(:func:`cuda_dtype`), fp16 on an Apple GPU, fp32 on the CPU. :func:`estimate_weight_bytes`
sizes a model's weights from its config alone (built on torch's ``meta`` device), and
:func:`check_fits` refuses, before any weight is read, a model that the GPU(s) or the RAM cannot
hold, with a :class:`~course.settings.CourseSettingError` naming the fix.

What this module does not handle: loading the weights (:mod:`course.models.local`), activations
and the KV cache beyond a fixed headroom, or several models sharing one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from course.settings import DEVICE_SETTING, MODEL_SETTING, CourseSettingError, device_setting

MEMORY_HEADROOM = 1.15  # weights plus activations and the allocator's slack
BYTES_PER_DTYPE = {"float32": 4, "bfloat16": 2, "float16": 2}

MAX_REPEATED_MODULES = 512
"""More layers or experts than any model the workbook can load (the largest published LLMs have
under 200 layers and under 400 experts): building them on ``meta`` takes tens of ms each, so
``num_hidden_layers=1000000`` would keep the estimate (the doctor, the loader) busy for hours."""


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


def gigabytes(n: float) -> str:
    """``n`` bytes as ``1.2 GB``."""
    return f"{n / 1e9:.1f} GB"


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
        return (f"{self.label}, compute capability {major}.{minor}, {gigabytes(self.free_bytes)} "
                f"free of {gigabytes(self.total_bytes)}; models load in {self.dtype}{why}")


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
    major, minor = torch.cuda.get_device_capability(0)
    return GpuInfo(torch.cuda.get_device_name(0), (major, minor), count, free, total, cuda_dtype())


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
            f"about {gigabytes(needed)} for the weights alone, but {holder} has "
            f"{gigabytes(free)} {what}. Nothing was loaded. Fix: {bigger}, a smaller model "
            "(Qwen/Qwen2-0.5B-Instruct), or serve the model elsewhere and set "
            f"{MODEL_SETTING}=http://HOST:PORT/v1."
        )
    return needed
