"""Contract cases of the cache and the doctor: damaged prepared files (truncated, empty, broken,
``tokenizer.json`` = ``{}``, zeroed weights of the right size) are reported by name with the fix
``python -m course prepare``; ``prepare`` writes a manifest of sizes and sha256, repairs what it
flags, and refuses an unusable COURSE_CACHE before the long conversion. Every case runs on a
copy of the converted model in a temporary cache: the real cache is only read."""

import os
import shutil
import time

import pytest

from course import assets, doctor
from course.assets import (
    MANIFEST_NAME,
    AssetError,
    bundled_model_problem,
    check_cache_writable,
    manifest_groups_wrong,
    manifest_problems,
    record_manifest,
)

REAL_MODEL = assets.converted_model_dir()
FIX = "python -m course prepare"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A converted model copied once, with its manifest (hashing the weights once)."""
    cache = tmp_path_factory.mktemp("pristine")
    shutil.copytree(REAL_MODEL, cache / REAL_MODEL.name)
    old = os.environ.get("COURSE_CACHE")
    os.environ["COURSE_CACHE"] = str(cache)
    try:
        record_manifest("bundled_model", sorted((cache / REAL_MODEL.name).iterdir()))
    finally:
        if old is None:
            del os.environ["COURSE_CACHE"]
        else:
            os.environ["COURSE_CACHE"] = old
    return cache


@pytest.fixture
def cache(pristine, empty_cache, monkeypatch):
    """A per-test cache: the data files linked in, the model's small files copied, the weights
    hard-linked (a test that changes them copies them first), the pristine manifest."""
    model = empty_cache / REAL_MODEL.name
    model.mkdir()
    for path in (pristine / REAL_MODEL.name).iterdir():
        if path.name == "model.safetensors":
            os.link(path, model / path.name)
        else:
            shutil.copy2(path, model / path.name)
    shutil.copy2(pristine / MANIFEST_NAME, empty_cache / MANIFEST_NAME)
    monkeypatch.setenv("COURSE_CACHE", str(empty_cache))
    monkeypatch.delenv("COURSE_MODEL", raising=False)
    return empty_cache


def _truncate(path):
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def _zero_weights(path, keep_mtime):
    """Zero the weights past 10% in a private copy, keeping the header and the size."""
    stat = path.stat()
    with path.open("rb") as f:
        head = f.read(stat.st_size // 10)
    path.unlink()  # break the hard link: the pristine copy stays as it was
    with path.open("wb") as f:
        f.write(head)
        f.truncate(stat.st_size)  # the rest reads as zeros, without writing 480 MB of them
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


DAMAGE = {
    "config.json truncated": ("config.json", _truncate),
    "config.json empty": ("config.json", lambda p: p.write_text("")),
    "config.json without model_type": ("config.json", lambda p: p.write_text('{"x": 1}')),
    "tokenizer_config.json broken": ("tokenizer_config.json", lambda p: p.write_text("{not json")),
    "tokenizer_config.json empty": ("tokenizer_config.json", lambda p: p.write_text("")),
    "chat_template.jinja broken": ("chat_template.jinja", lambda p: p.write_text("{% if %}")),
    "chat_template.jinja empty": ("chat_template.jinja", lambda p: p.write_text("")),
    "generation_config.json truncated": ("generation_config.json", _truncate),
    "tokenizer.json is {}": ("tokenizer.json", lambda p: p.write_text("{}")),
    "tokenizer.json truncated": ("tokenizer.json", _truncate),
    "weights zeroed past 10%": ("model.safetensors", lambda p: _zero_weights(p, False)),
    "weights zeroed, mtime kept": ("model.safetensors", lambda p: _zero_weights(p, True)),
}
NEEDS_MANIFEST = {"weights zeroed past 10%", "weights zeroed, mtime kept"}


@pytest.mark.contract("wrong result")
def test_a_pristine_copy_passes(cache):
    assert bundled_model_problem() is None
    assert doctor._model().ok and doctor._cache().ok
    assert manifest_problems() == []


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("with_manifest", [True, False], ids=["manifest", "no-manifest"])
@pytest.mark.parametrize("case", list(DAMAGE))
def test_damage_is_reported_by_name_with_the_fix(cache, case, with_manifest):
    name, damage = DAMAGE[case]
    if not with_manifest:
        if case in NEEDS_MANIFEST:
            pytest.skip("a right-sized, well-formed file is found by its hash only")
        (cache / MANIFEST_NAME).unlink()
    damage(cache / REAL_MODEL.name / name)
    model = doctor._model()
    assert not model.ok and model.status == "FAIL", model.line()  # was [ok]
    assert name in model.detail and FIX in model.detail
    cache_check = doctor._cache()
    if with_manifest:
        assert cache_check.status == "FAIL" and name in cache_check.detail
        assert FIX in cache_check.detail
        assert "bundled_model" in manifest_groups_wrong(full=True)
    else:
        assert cache_check.status == "ok" and FIX in cache_check.detail  # "none yet"


@pytest.mark.contract("hang")
def test_the_doctor_stays_fast_on_the_weights(cache):
    start = time.monotonic()
    for _ in range(3):
        assert manifest_problems() == []
    assert (time.monotonic() - start) / 3 < 1.0  # the 538 MB weights are sampled, not hashed


@pytest.mark.contract("wrong result")
def test_a_damaged_data_file_is_named(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    package = assets.GPT2_RANKS_PACKAGE
    real = package.path()
    monkeypatch.setenv("COURSE_CACHE", str(cache))
    target = package.path()
    target.parent.mkdir(parents=True)
    shutil.copy2(real, target)
    record_manifest(f"data:{package.name}", [target])
    assert doctor._cache().ok
    _truncate(target)
    check = doctor._cache()
    assert check.status == "FAIL" and str(target) in check.detail and FIX in check.detail
    assert manifest_groups_wrong() == {f"data:{package.name}"}


def _file_cache(tmp_path):
    path = tmp_path / "not-a-folder"
    path.write_text("x")
    return path


def _unwritable_cache(tmp_path):
    if os.geteuid() == 0:
        return "/proc/agents-workbook-cache"  # root writes through 0o555: /proc refuses mkdir
    path = tmp_path / "ro"
    path.mkdir()
    path.chmod(0o555)
    return path


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("make", [_file_cache, _unwritable_cache], ids=["a file", "unwritable"])
def test_prepare_refuses_a_bad_cache_before_converting(tmp_path, monkeypatch, make):
    monkeypatch.setenv("COURSE_CACHE", str(make(tmp_path)))
    converted = []
    monkeypatch.setattr(assets, "bundled_model_dir", lambda **kw: converted.append(kw))
    monkeypatch.setattr(assets, "fetch_data_package", lambda *a, **k: converted.append(a))
    start = time.monotonic()
    with pytest.raises(AssetError) as err:
        assets.prepare_offline_assets(progress=False)
    assert time.monotonic() - start < 5 and not converted  # was: 35-90 s, then a raw crash
    assert "COURSE_CACHE" in str(err.value) and "Fix:" in str(err.value)
    with pytest.raises(AssetError):
        check_cache_writable()


@pytest.mark.contract("wrong result")
def test_prepare_repairs_what_the_manifest_flags(cache, pristine, monkeypatch):
    """prepare converts the flagged copy again and records what it wrote. The conversion itself
    (the GGUF dequantised by transformers, a minute on 2 cores) is the pristine copy's files
    here: tests/test_contract_local_model.py converts for real once and loads the result."""
    config = cache / REAL_MODEL.name / "config.json"
    _truncate(config)
    assert "bundled_model" in manifest_groups_wrong(full=True)

    def no_npm(force=False):
        raise AssetError("npm is not used in this test")

    conversions = []

    def converted_before(gguf, folder, done=lambda n: None):
        conversions.append(gguf)
        folder.mkdir()
        for path in (pristine / REAL_MODEL.name).iterdir():
            os.link(path, folder / path.name)  # the module's private copy: never written

    monkeypatch.setattr(assets, "install_qwen_tokenizer", no_npm)
    monkeypatch.setattr(assets, "convert_gguf", converted_before)
    done = assets.prepare_offline_assets(progress=False)
    assert conversions == [assets.bundled_gguf_path()]  # the flagged copy, converted once
    assert done["manifest"] == cache / MANIFEST_NAME
    assert bundled_model_problem() is None and manifest_problems() == []
    assert doctor._model().ok and doctor._cache().ok
    assert (cache / REAL_MODEL.name / "config.json").read_bytes() == (
        REAL_MODEL / "config.json").read_bytes()
