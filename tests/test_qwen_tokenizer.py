"""The Qwen tokenizer asset: verified against Qwen's own ranks, and refused when it is wrong."""

import shutil
from pathlib import Path

import pytest

from course.assets import (
    QWEN_FILES,
    QWEN_HELLO_WORLD,
    QWEN_VOCAB_SIZE,
    AssetError,
    check_qwen_tokenizer,
    install_qwen_tokenizer,
    qwen_reference_ids,
    qwen_tokenizer,
    qwen_tokenizer_dir,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def qwen():
    try:
        return qwen_tokenizer()
    except AssetError as err:  # make assets prepares it; a machine without npm cannot
        pytest.skip(f"Qwen tokenizer not prepared here: {err}")


def test_same_ids_as_qwen_tiktoken_on_many_languages_and_a_long_text(qwen):
    texts = [
        "Hello world",
        "Что такое агент? Агент — это цикл: модель, инструмент, наблюдение.",
        "¿Cómo te llamas? Me llamo Bob y me gusta el helado de vainilla.",
        "# 中文注释\nprint('你好，世界')  # 打印\n",
        "    indented\n\n\n\t\ttabs   and  spaces   \n",
        (ROOT / "README.md").read_text(encoding="utf-8")[:5000],
    ]
    want = qwen_reference_ids(texts)
    got = [qwen.encode(t, add_special_tokens=False) for t in texts]
    assert got == want
    assert got[0] == QWEN_HELLO_WORLD and len(qwen) == QWEN_VOCAB_SIZE


def test_chat_template_renders_tools_with_qwen_special_tokens(qwen):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    text = qwen.apply_chat_template([{"role": "user", "content": "Berlin?"}], tools=tools,
                                    tokenize=False, add_generation_prompt=True)
    assert "<tools>" in text and '"name": "get_weather"' in text and "<tool_call>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert qwen.convert_tokens_to_ids(["<tool_call>", "</tool_call>", "<|im_start|>"]) == [
        151657, 151658, 151644]


def test_a_tokenizer_that_disagrees_is_an_error():
    class OffByOne:
        def __len__(self):
            return QWEN_VOCAB_SIZE

        def encode(self, text, add_special_tokens=False):
            return [i + 1 for i in qwen_reference_ids([text])[0]]

    with pytest.raises(AssetError, match=r"disagrees with qwen\.tiktoken"):
        check_qwen_tokenizer(OffByOne())

    class Small(OffByOne):
        def __len__(self):
            return 49152

    with pytest.raises(AssetError, match="49152 tokens, not Qwen's 151669"):
        check_qwen_tokenizer(Small())


def test_missing_asset_says_how_to_prepare_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    with pytest.raises(AssetError, match=r"not prepared .*python -m course prepare"):
        qwen_tokenizer()


def test_without_npm_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm on this PATH
    with pytest.raises(AssetError, match=r"npm is not installed.*apt-get install -y npm"):
        install_qwen_tokenizer()


def test_a_damaged_copy_is_refused_and_prepare_repairs_it(qwen, empty_cache, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(empty_cache))
    damaged = qwen_tokenizer_dir()
    damaged.mkdir(parents=True)
    real = Path(qwen.name_or_path)
    for name in QWEN_FILES:
        shutil.copy(real / name, damaged / name)
    with (damaged / "tokenizer.json").open("r+b") as f:
        f.truncate(1000)
    with pytest.raises(AssetError, match=r"do not load .*python -m course prepare"):
        qwen_tokenizer()
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the repair step cannot run here")
    try:
        repaired = install_qwen_tokenizer()  # npm's own cache serves it without a network
    except AssetError as err:
        if "failed" in str(err):
            pytest.skip(f"npm could not serve the package from its cache: {err}")
        raise
    assert repaired == damaged and qwen_tokenizer().encode("Hello world") == QWEN_HELLO_WORLD
