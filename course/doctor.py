"""``python -m course doctor``: is this machine ready for the workbook?

Each check gives one line; a failed check says what to do. The same report shows in the first
notebook (:func:`doctor_report`, a :class:`Report` record whose values a test reads). The doctor
reads files, headers and versions and asks a configured server for its model list (a few
seconds at most); it does not load model weights or download anything. It
compares the prepared files with the manifest ``prepare`` wrote (course/assets.py): small files
are hashed whole, the weights and the GGUF only when their size or mtime changed, else by a
sample of 64 blocks. A model folder the kernel would load (``COURSE_MODEL=/some/dir``, or the
bundled model's converted copy) is checked the way the loader loads it
(:func:`course.models.model_folder_problem`: transformers' ``AutoConfig``, the weights' size from the config,
each safetensors header), so a folder that cannot load is a ``[FAIL]`` naming the file; the
loader's own failures are named by the same check (:func:`course.models.load_failure`). A hub id's files are
not checked beyond finding its ``config.json`` in the local cache.

On Google Colab the checks of JupyterLab and its widget extension do not apply (Colab shows the
notebooks and their widgets in its own front end): they print ``[n/a]`` and count neither way.
On a CUDA GPU the report names the GPU, its free memory and the dtype models load in.
"""

from __future__ import annotations

import importlib.metadata
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from course.models import PREPARE_COMMAND
from course.records import Record
from course.settings import (
    MODEL_SETTING,
    CourseSettingError,
    active_model,
    hub_offline,
    on_colab,
)

if TYPE_CHECKING:
    from course.models import Placement

LIBRARIES = [
    "torch", "transformers", "smolagents", "langgraph", "langchain-core",
    "langchain-huggingface", "ipywidgets", "nbclient", "gguf", "tiktoken",
]
WIDGETS_EXTENSION = Path("share/jupyter/labextensions/@jupyter-widgets/jupyterlab-manager")
SUPPORTED_PYTHONS = ">=3.11,<3.14"  # pyproject's requires-python, when the package metadata is absent
NOT_ON_COLAB = "does not apply on Colab, which shows the notebooks and widgets in its own front end"


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, whether it passed, and the detail or fix.

    An optional check that fails prints ``[warn]`` and does not fail the report: the workbook
    runs without it and says what it uses instead.
    """

    name: str
    ok: bool
    detail: str
    optional: bool = False
    applies: bool = True  # False: a check this platform has no use for (``[n/a]``, not counted)

    @property
    def status(self) -> str:
        """``ok``, ``warn`` (optional, failed), ``FAIL`` or ``n/a`` (does not apply here)."""
        if not self.applies:
            return "n/a"
        return "ok" if self.ok else "warn" if self.optional else "FAIL"

    def line(self) -> str:
        return f"[{self.status}] {self.name}: {self.detail}"


def supported_pythons() -> str:
    """The Python versions the workbook supports: the installed package's ``Requires-Python``."""
    try:
        return importlib.metadata.metadata("agents-workbook")["Requires-Python"] or SUPPORTED_PYTHONS
    except importlib.metadata.PackageNotFoundError:
        return SUPPORTED_PYTHONS


def _python() -> Check:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    version = sys.version.split()[0]
    try:
        wanted = SpecifierSet(supported_pythons())
    except InvalidSpecifier:
        wanted = SpecifierSet(SUPPORTED_PYTHONS)
    if wanted.contains(version, prereleases=True):
        return Check("python", True, version)
    minors = [f"3.{m}" for m in range(8, 30) if wanted.contains(f"3.{m}.0")]
    listed = ", ".join(minors[:-1]) + f" and {minors[-1]}" if len(minors) > 1 else "".join(minors)
    return Check("python", False, f"{version} (the workbook supports Python {listed}). Fix: "
                 "make a venv with one of them (`make lab` finds one, or PYTHON=python3.12).")


def _libraries() -> Check:
    found, missing = [], []
    for name in LIBRARIES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        return Check("libraries", False, f"missing {', '.join(missing)}. Fix: run `make install` "
                     "(or `pip install <the workbook>`).")
    return Check("libraries", True, "; ".join(found))


def _jupyterlab() -> Check:
    if on_colab():
        return Check("JupyterLab", True, NOT_ON_COLAB, applies=False)
    try:
        return Check("JupyterLab", True, importlib.metadata.version("jupyterlab"))
    except importlib.metadata.PackageNotFoundError:
        return Check("JupyterLab", False, "not installed, so the notebooks cannot be opened here. "
                     "Fix: run `make install` (or `pip install \"<the workbook>[lab]\"`).")


def _gpu() -> Check:
    from course.models import gpu_info, placement

    try:
        where = placement()
    except CourseSettingError as err:
        return Check("GPU", False, str(err))
    if where.device == "cuda":
        gpu = gpu_info()
        if gpu is not None:
            return Check("GPU", True, str(gpu))
    if where.device == "cpu" and on_colab():
        return Check("GPU", False, "this Colab runtime has no GPU: the bundled model runs on the "
                     "CPU, the notes' models need one. Fix: Runtime > Change runtime type > T4 GPU.",
                     optional=True)
    import torch

    seen = "not used" if torch.cuda.is_available() else "no CUDA GPU here"
    return Check("GPU", True, f"{seen}: models load on the {where.device} in {where.dtype}")


PREPARE = PREPARE_COMMAND  # the loader's fix text and the doctor's say the same command


def _model() -> Check:
    try:
        choice = active_model()
    except CourseSettingError as err:
        return Check("model", False, str(err))
    if choice.is_bundled:
        from course.assets import (
            AssetError,
            bundled_gguf_path,
            bundled_model_problem,
            converted_model_dir,
        )

        try:
            gguf = bundled_gguf_path()
        except AssetError as err:
            return Check("model", False, str(err))
        converted = converted_model_dir()
        problem = bundled_model_problem()
        if problem:
            what = "no converted copy" if "missing" in problem else "a damaged converted copy"
            return Check(
                "model", False,
                f"{choice.describe()}: GGUF at {gguf}, but {what} at {converted} ({problem})."
                f" Fix: run `{PREPARE}` (or `make assets`); it converts again.",
            )
        from course.assets import manifest_groups
        from course.models import model_folder_problem

        # files the manifest matched are the ones prepare converted and saved: loadable. A
        # cache without the manifest's record is checked the way the loader reads it (a few
        # seconds for the model classes' imports and the meta build)
        problem = None if "bundled_model" in manifest_groups() else model_folder_problem(
            converted, choice.value, f"Fix: run `{PREPARE}` (or `make assets`); it converts again.",
            _placement_or_none())
        if problem:
            return Check("model", False, f"{choice.describe()}: the converted copy at {converted} "
                                         f"cannot load: {problem}")
        return Check("model", True, f"{choice.describe()}; converted copy at {converted}")
    try:
        from course.models import (
            local_folder_fix,
            model_folder_problem,
            served_model_name,
            transformers_source,
        )

        if not choice.in_kernel:
            name = served_model_name(choice)
            return Check("model", True, f"{choice.describe()} (serves {name})")
        source = transformers_source(choice)
    except CourseSettingError as err:
        return Check("model", False, str(err))
    if choice.local_path:
        problem = model_folder_problem(source, choice.value, local_folder_fix(source),
                                       _placement_or_none())
        if problem:
            return Check("model", False, f"{MODEL_SETTING}={choice.value!r}: {problem}")
    return Check("model", True, f"{choice.describe()} from {source}")


def _placement_or_none() -> Placement | None:
    """Where the loader would put a model; None when COURSE_DEVICE is wrong (the GPU check says
    so), and the model's size is then not compared with any memory."""
    from course.models import placement

    try:
        return placement()
    except CourseSettingError:
        return None


def _cache() -> Check:
    """The course cache against the manifest ``prepare`` wrote (sizes, sha256; see assets)."""
    from course.assets import AssetError, manifest_path, manifest_problems

    try:
        manifest = manifest_path()
    except AssetError as err:  # COURSE_CACHE that cannot be a folder: named, with its fix
        return Check("cache manifest", False, str(err))
    if not manifest.is_file():
        return Check("cache manifest", True, f"none yet at {manifest} (a cache prepared before "
                     "manifests existed): the files were checked by their format only; "
                     f"`{PREPARE}` writes one, then their hashes are checked too")
    wrong = manifest_problems()
    if wrong:
        more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
        return Check("cache manifest", False, "; ".join(wrong[:3]) + more +
                     f". Fix: run `{PREPARE}`; it replaces what the manifest flags.")
    return Check("cache manifest", True, f"every prepared file matches {manifest}")


def _roles() -> Check:
    from course.models import describe_models

    report = describe_models()
    return Check("agent and probe models", report.ok, "; ".join(str(report).splitlines()))


def _offline() -> Check:
    offline = hub_offline()
    detail = "HF_HUB_OFFLINE=1: nothing reaches a model hub" if offline else (
        "hub access is on (a Hugging Face model was chosen)")
    return Check("offline mode", True, detail)


def _gpt2() -> Check:
    import warnings

    from langchain_core.language_models.base import get_tokenizer
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from course.assets import AssetError, load_gpt2_like_langchain

    loaded_here = get_tokenizer.cache_info().currsize == 0
    try:
        # LangChain's own loader, so the count below reuses the tokenizer checked here; one
        # LangChain already keeps is not the file on disk, which is then loaded apart
        load_gpt2_like_langchain(get_tokenizer if loaded_here else None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            count = FakeListChatModel(responses=[""]).get_num_tokens("Hello world")
    except AssetError as err:
        return Check("GPT-2 tokenizer", False, str(err))
    finally:  # LangChain keeps the GPT-2 tokenizer it loaded (about 80 MB): not for a check
        if loaded_here:
            get_tokenizer.cache_clear()
    if count != 2:
        return Check("GPT-2 tokenizer", False, f"LangChain's fallback counts {count} tokens in "
                     f"'Hello world', not 2. Fix: run `{PREPARE}`.")
    return Check("GPT-2 tokenizer", True, "'Hello world' -> [15496, 995]; LangChain's fallback counts 2")


def _qwen() -> Check:
    from course import assets
    from course.assets import AssetError, check_qwen_tokenizer, qwen_tokenizer, qwen_tokenizer_dir

    loaded_here = assets._load_qwen.cache_info().currsize == 0
    try:
        tokenizer = qwen_tokenizer()
        check_qwen_tokenizer(tokenizer, source=str(qwen_tokenizer_dir()))
    except AssetError as err:
        return Check("Qwen tokenizer", False, f"{err} Without it, token counts use the local "
                     "model's tokenizer and are labelled so.", optional=True)
    finally:  # the check's copy is not kept (about 90 MB): a chapter that counts loads its own
        if loaded_here:
            assets._load_qwen.cache_clear()
    return Check("Qwen tokenizer", True, f"{len(tokenizer):,} tokens at {qwen_tokenizer_dir()}; "
                 "agrees with qwen.tiktoken on the reference texts")


def _widgets() -> Check:
    if on_colab():
        return Check("widgets extension", True, NOT_ON_COLAB, applies=False)
    candidates = [Path(sys.prefix) / WIDGETS_EXTENSION, Path(sys.base_prefix) / WIDGETS_EXTENSION]
    for path in candidates:
        if (path / "package.json").is_file():
            return Check("widgets extension", True, f"@jupyter-widgets/jupyterlab-manager at {path}")
    return Check("widgets extension", False, "JupyterLab's widget manager is not installed, "
                 "widgets would show as text. Fix: run `make install` (it installs ipywidgets).")


def _adapter() -> Check:
    """The tools adapter (``course/data/adapters/smollm2-tools``) against its manifest: required
    when ``COURSE_MODEL=bundled+tools`` selects it, optional otherwise."""
    try:
        wanted = active_model().with_adapter
    except CourseSettingError:
        wanted = False
    from course.adapter_manifest import AdapterError, adapter_dir, check_adapter

    try:
        manifest = check_adapter()
    except AdapterError as err:
        return Check("tools adapter", False, str(err), optional=not wanted)
    return Check("tools adapter", True,
                 f"{adapter_dir()}: files match the manifest (base {manifest['base_model']}, "
                 f"{manifest.get('steps')} steps, final loss {manifest.get('final_loss')})",
                 optional=not wanted)


def run_checks() -> list[Check]:
    """Run every check, in the order the report prints them."""
    return [_python(), _libraries(), _jupyterlab(), _model(), _adapter(), _roles(), _gpu(),
            _offline(), _gpt2(), _qwen(), _cache(), _widgets()]


@dataclass(frozen=True)
class Report(Record):
    """The doctor's report: one line per check, then a count of the required checks that passed,
    and what to fix. Shown as text; a test reads :meth:`record` (each check's name, status and
    detail, the counts, ``ok``)."""

    checks: tuple[Check, ...]

    @property
    def counted(self) -> list[Check]:
        return [c for c in self.checks if c.applies]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.counted if not c.ok and not c.optional]

    @property
    def required(self) -> list[Check]:
        return [c for c in self.counted if not c.optional]

    @property
    def ok(self) -> bool:
        """True when every required check passed (a failed optional check only warns)."""
        return not self.failed

    def __str__(self) -> str:
        warned = [c for c in self.counted if not c.ok and c.optional]
        skipped = [c for c in self.checks if not c.applies]
        total = (f"{len(self.required) - len(self.failed)} of {len(self.required)} checks passed"
                 + ("" if not self.failed else f"; fix: {', '.join(c.name for c in self.failed)}")
                 + ("" if not warned else f"; optional, missing: {', '.join(c.name for c in warned)}")
                 + ("" if not skipped else f"; not applicable on Colab: "
                                           f"{', '.join(c.name for c in skipped)}"))
        return "\n".join([*(c.line() for c in self.checks), total])

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(str(self))

    def record(self) -> dict:
        return {"checks": [{"name": c.name, "status": c.status, "detail": c.detail}
                           for c in self.checks],
                "passed": len(self.required) - len(self.failed), "required": len(self.required),
                "ok": self.ok}


def doctor_report() -> Report:
    """Run every check and return the report (the notebook displays it)."""
    return Report(tuple(run_checks()))


def report() -> bool:
    """Print the report; True when every check passed."""
    result = doctor_report()
    print(result)
    return result.ok


# --- what the first notebook shows after the report: the models at work ---------------------

@dataclass(frozen=True)
class FirstAnswer(Record):
    """The agent model's first answer: the chat model's class, where it runs, and its reply."""

    chat_model: str
    where: str
    answer: str

    def __str__(self) -> str:
        return f"chat model: {self.chat_model} at {self.where}\nanswer: {self.answer}"

    __repr__ = __str__


@dataclass(frozen=True)
class NextTokens(Record):
    """A model's most likely next tokens after a prompt, most likely first, with probabilities."""

    tokens: tuple[str, ...]
    probs: tuple[float, ...]

    def __str__(self) -> str:
        return "\n".join(f"next token {token!r:>12}  p = {p:.3f}"
                         for token, p in zip(self.tokens, self.probs, strict=True))

    __repr__ = __str__


@dataclass(frozen=True)
class WeightMemory(Record):
    """The memory a model's weights take, measured from its config: parameters, bytes in float32
    and in bfloat16, and where this kernel loads it; then another model's, derived from its
    published parameter count (``derived_params``)."""

    model: str
    params: int
    fp32_bytes: int
    placement: str
    derived_model: str
    derived_params: float

    def record(self) -> dict:
        return {"model": self.model, "params": self.params, "fp32_gb": self.fp32_bytes / 1e9,
                "bf16_gb": self.params * 2 / 1e9, "placement": self.placement,
                "derived_model": self.derived_model, "derived_params": self.derived_params,
                "derived_fp32_gb": self.derived_params * 4 / 1e9,
                "derived_bf16_gb": self.derived_params * 2 / 1e9}

    def __str__(self) -> str:
        values = self.record()
        return "\n".join([
            f"{self.model}: {self.params / 1e6:.1f} M parameters",
            f"weights in float32: {values['fp32_gb']:.2f} GB; in bfloat16: {values['bf16_gb']:.2f} GB",
            f"this kernel loads on: {self.placement}",
            f"{self.derived_model}, derived: {values['derived_fp32_gb']:.0f} GB in float32, "
            f"{values['derived_bf16_gb']:.0f} GB in bfloat16"])

    __repr__ = __str__
