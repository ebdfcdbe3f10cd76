"""Contract cases of a local model folder: the doctor checks it the way the loader loads it.

``COURSE_MODEL=/some/dir`` folders that cannot load (a truncated or empty ``config.json``, an
unknown ``model_type``, no weights file, a config whose weights need terabytes, a negative
``hidden_size``, garbage or truncated weights, a sharded index naming a missing shard) were
``[ok]`` in ``python -m course doctor``; each is now a ``[FAIL]`` naming the file and the fix,
and the loader itself raises a CourseSettingError naming the same file (a raw
``SafetensorError`` / ``RuntimeError`` / ``StrictDataclassError`` before). The bundled
model's converted copy, when its config loads badly, names the file and ``python -m course
prepare`` (which converts it again), never "unset COURSE_MODEL" when nothing is set.

Each folder is a real tiny Llama (two layers, 64 wide) saved with ``save_pretrained`` in
tmp_path, with the bundled model's tokenizer files; the good one loads and generates.
"""

from __future__ import annotations

import json
import shutil

import pytest

from course import assets, doctor, models
from course.settings import CourseSettingError, parse_model_setting

FIX = "python -m course prepare"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A real, randomly initialised two-layer Llama saved with save_pretrained, and a tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=49152,
                         tie_word_embeddings=True, max_position_embeddings=512)
    LlamaForCausalLM(config).save_pretrained(folder)
    bundled = assets.converted_model_dir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy2(bundled / name, folder / name)
    return folder


def _config(path, **changes):
    data = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**data, **changes}))


def _shard(path):
    """model.safetensors moved into a one-shard index, then the shard removed."""
    weights = path / "model.safetensors"
    index = {"metadata": {}, "weight_map": {"lm_head.weight": "model-00001-of-00001.safetensors"}}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    weights.unlink()


BROKEN = {  # case: (damage, the file the message must name, what it must say)
    "config.json truncated": (lambda p: (p / "config.json").write_text(
        (p / "config.json").read_text()[:40]), "config.json", "AutoConfig"),
    "config.json empty": (lambda p: (p / "config.json").write_text(""), "config.json",
                          "AutoConfig"),
    "unknown model_type": (lambda p: _config(p, model_type="no-such-arch"), "config.json",
                           "no-such-arch"),
    "hidden_size=-5": (lambda p: _config(p, hidden_size=-5), "config.json", "-5"),
    "hidden_size=-8": (lambda p: _config(p, hidden_size=-8), "config.json", "cannot be built"),
    "3 TB config": (lambda p: _config(p, hidden_size=64_000, intermediate_size=256_000,
                                      num_hidden_layers=60),
                    "COURSE_MODEL", "Nothing was loaded"),
    "no weights file": (lambda p: (p / "model.safetensors").unlink(), "no weights file",
                        "model.safetensors"),
    "garbage weights": (lambda p: (p / "model.safetensors").write_bytes(
        b"\x89PNG\r\n\x1a\n" + bytes(4096)), "model.safetensors", "not a safetensors file"),
    "weights truncated": (lambda p: (p / "model.safetensors").write_bytes(
        (p / "model.safetensors").read_bytes()[:100_000]), "model.safetensors", "truncated"),
    "index names a missing shard": (_shard, "model-00001-of-00001.safetensors", "missing"),
}


@pytest.fixture
def folder(tiny_model, tmp_path, monkeypatch):
    copy = tmp_path / "model"
    shutil.copytree(tiny_model, copy)
    monkeypatch.setenv("COURSE_MODEL", str(copy))
    return copy


@pytest.mark.contract("wrong result")
def test_a_good_folder_passes_the_doctor_and_loads(folder):
    check = doctor._model()
    assert check.ok, check.line()
    assert models.model_folder_problem(folder, str(folder), "Fix: x") is None
    local = models.load_local_model(parse_model_setting(str(folder)))
    assert isinstance(local.generate([{"role": "user", "content": "hi"}], max_new_tokens=2), str)


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_folder_that_cannot_load_fails_the_doctor_by_name(folder, case):
    damage, named, said = BROKEN[case]
    damage(folder)
    check = doctor._model()
    assert check.status == "FAIL", check.line()  # was [ok]
    assert named in check.detail and said in check.detail and "Fix:" in check.detail
    if case != "3 TB config":
        assert str(folder) in check.detail


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("case", list(BROKEN))
def test_the_loader_names_the_same_file(folder, case):
    damage, named, _said = BROKEN[case]
    damage(folder)
    with pytest.raises(CourseSettingError) as caught:  # was raw for garbage weights, -5, -8
        models.load_local_model(parse_model_setting(str(folder)))
    message = str(caught.value)
    assert named in message and "Fix:" in message, message


@pytest.fixture
def bundled_copy(empty_cache, monkeypatch):
    """A converted bundled model in a temporary cache, without a manifest (a cache prepared
    before manifests existed: only the files' formats and the loader's checks can find damage)."""
    real = assets.converted_model_dir()
    monkeypatch.setenv("COURSE_CACHE", str(empty_cache))
    monkeypatch.delenv("COURSE_MODEL", raising=False)
    copy = assets.converted_model_dir()
    copy.mkdir()
    for path in real.iterdir():
        if path.name == "model.safetensors":
            (copy / path.name).symlink_to(path)  # read only; never written by these tests
        else:
            shutil.copy2(path, copy / path.name)
    models.load_model_on.cache_clear()  # a bundled model loaded from the real cache is not this copy
    yield copy
    models.load_model_on.cache_clear()  # nor is this one, for the tests after


BUNDLED_BROKEN = {
    "hidden_size=-8": lambda p: _config(p, hidden_size=-8),
    "hidden_size=-5": lambda p: _config(p, hidden_size=-5),
    "unknown model_type": lambda p: _config(p, model_type="no-such-arch"),
}


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("case", list(BUNDLED_BROKEN))
def test_a_broken_bundled_copy_names_the_file_and_prepare_not_unset(bundled_copy, case):
    BUNDLED_BROKEN[case](bundled_copy)
    assert assets.bundled_model_problem() is None  # its format is fine: only loading finds it
    with pytest.raises(CourseSettingError) as caught:
        models.load_local_model()
    message = str(caught.value)
    assert "unset COURSE_MODEL" not in message, message  # nothing is set
    assert str(bundled_copy / "config.json") in message and FIX in message, message
    check = doctor._model()
    assert check.status == "FAIL" and "config.json" in check.detail and FIX in check.detail
    assert "unset COURSE_MODEL" not in check.detail
    assert models.converted_copy_cannot_load()  # prepare converts it again (not 'all done')


@pytest.mark.contract("wrong result")
def test_a_good_bundled_copy_is_left_alone(bundled_copy):
    assert doctor._model().ok and not models.converted_copy_cannot_load()


@pytest.mark.slow
@pytest.mark.contract("raw crash")
def test_loading_a_damaged_bundled_copy_converts_it_again_instead_of_crashing(bundled_copy):
    """The finding: ``tokenizer.json`` = ``{}`` or a broken chat template made loading fail raw
    (``KeyError: 'added_tokens'``, jinja2 ``TemplateSyntaxError``). The loader's source check
    finds the damage and converts the copy again from the GGUF, then loads and answers. This is
    the suite's one real conversion (about a minute on 2 cores): tests/test_contract_cache.py's
    repair by ``prepare`` puts a copy of converted files in its place."""
    (bundled_copy / "tokenizer.json").write_text("{}")
    (bundled_copy / "chat_template.jinja").write_text("{% if %}")
    assert "tokenizer.json" in assets.bundled_model_problem()
    local = models.load_local_model()
    assert local.source == str(bundled_copy)
    assert assets.bundled_model_problem() is None and not models.converted_copy_cannot_load()
    assert "added_tokens" in json.loads((bundled_copy / "tokenizer.json").read_text())
    reply = local.generate([{"role": "user", "content": "What is 2+2?"}], max_new_tokens=8)
    assert isinstance(reply, str) and reply.strip()


@pytest.mark.contract("hang")
@pytest.mark.parametrize("field", ["num_hidden_layers", "num_local_experts"])
def test_a_config_with_a_million_layers_is_refused_at_once(folder, field):
    """Building a million layers on ``meta`` only to estimate the memory took hours (about 30 ms
    a layer here): the doctor and the loader refuse the count, naming the file, in seconds."""
    import time

    _config(folder, **{field: 1_000_000})
    start = time.monotonic()
    check = doctor._model()
    assert check.status == "FAIL" and f"{folder}/config.json" in check.detail
    assert f"{field}=1,000,000" in check.detail and "Fix:" in check.detail
    with pytest.raises(CourseSettingError, match=f"{field}=1,000,000"):
        models.load_local_model(parse_model_setting(str(folder)))
    assert time.monotonic() - start < 15
