"""The two roles a model plays, and what the workbook will use, said without loading weights.

The *agent model* is the setting (``COURSE_MODEL``: bundled, local path, hub id, or a server);
it drives every conversation, graph and agent run. The *probe model* is a model loaded in this
kernel for cells that read internals (token probabilities, logits processors, the KV cache, the
tokenizer): the setting's model when it can be loaded here, else the bundled one.
:func:`probe_note` says which; :func:`agent_tokenizer` and :func:`notes_tokenizer` say which
tokenizer counts; :func:`describe_models` reports it all (and asks a server what it lists).

What this module does not handle: building the model for a library (:mod:`course.models.libraries`),
or the size of a served model (a server does not report it; its name is read instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from course.models.local import (
    LocalModel,
    load_local_model,
    short_name,
    tokenizer_alone,
    tokenizer_at,
)
from course.models.placement import GpuInfo, gpu_info, placement
from course.models.served import served_model_name, server_models
from course.settings import (
    BUNDLED,
    MODEL_SETTING,
    CourseSettingError,
    ModelChoice,
    active_model,
)

SMALL_MODEL_PARAMETERS = 1_000_000_000
"""Below this size a model cannot act as a code agent (chapter 02 gives it a short bounded run)."""


def agent_is_local() -> bool:
    """True when the agent model runs in this kernel (not an OpenAI-compatible server)."""
    return active_model().in_kernel


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


def probe_model() -> LocalModel:
    """The model loaded in the kernel for cells that read internals (never a server)."""
    choice = active_model()
    return load_local_model(choice if choice.in_kernel else ModelChoice("bundled", BUNDLED))


def probe_note() -> str:
    """One line saying which model a probing cell reads, and what the agent model is."""
    choice = active_model()
    if not choice.in_kernel:
        served = f" (model {choice.served_model})" if choice.served_model else ""
        return ("probe model: SmolLM2-135M-Instruct (bundled); the agent model is a server at "
                f"{choice.shown}{served}")
    probe = "SmolLM2-135M-Instruct (bundled)" if choice.is_bundled else choice.value
    return f"probe model: {probe}, the same model as the agent model, loaded in this kernel"


def agent_tokenizer(choice: ModelChoice | None = None) -> tuple[Any, str]:
    """The tokenizer that counts the agent model's tokens, and a label saying which it is.

    Kernel models: their own (the bundled one is read alone, without its weights, so a replay
    can count before any model is loaded). A server: the served model's own tokenizer when its
    name is a hub id in the local cache or a local path (no download), else the probe model's,
    labelled.
    """
    choice = choice or active_model()
    if choice.in_kernel:
        tokenizer = (tokenizer_alone(choice) if choice.is_bundled
                     else load_local_model(choice).tokenizer)
        return tokenizer, f"{short_name(choice)} tokenizer (the agent model's own)"
    name = served_model_name(choice)
    try:
        short = name.rstrip("/").rsplit("/", 1)[-1]
        return _served_tokenizer(name), f"{short} tokenizer (the served model's own, read locally)"
    except Exception:  # any failure to find it offline means: count with the probe model
        probe = probe_model()
        return probe.tokenizer, (f"{probe.short_name} tokenizer (the probe model's; the served "
                                 f"model {name}'s own tokenizer is not available offline)")


def _served_tokenizer(name: str) -> Any:
    """The tokenizer of the served model ``name`` from this machine, never downloaded; read once
    per name (every chat model a kernel builds for the server counts with the same object).

    A folder is read through :func:`~course.models.local.tokenizer_at`, so a server of the
    bundled model's folder counts with the very tokenizer the probe model loaded; a hub id only
    from the local cache. Raises when it is not on this machine.
    """
    if Path(name).is_dir():
        return tokenizer_at(name)
    return _cached_hub_tokenizer(name)


@lru_cache(maxsize=4)
def _cached_hub_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name, local_files_only=True)


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
    report.served_model = choice.served_model or (report.server_models[0] if report.server_models
                                                  else None)
    if report.served_model not in report.server_models:
        report.problem = (f"{MODEL_SETTING}: the server does not list "
                          f"{report.served_model!r}. Fix: append '#<one of the listed ids>'.")
    return report
