"""The real GPT-2 tokenizer offline, and the guard against the empty-tokenizer trap."""

import os
import subprocess
import sys

import pytest

from course.assets import (
    GPT2_HELLO_WORLD,
    AssetError,
    build_gpt2_tokenizer,
    check_gpt2_tokenizer,
    install_gpt2_tokenizer,
)

ELEVEN = [
    ("system", "You're a good assistant."), ("human", "Hi! I'm Bob."), ("ai", "Hi!"),
    ("human", "I like vanilla ice cream."), ("ai", "Nice."), ("human", "What's 2 + 2?"),
    ("ai", "4."), ("human", "Thanks!"), ("ai", "No problem!"), ("human", "Having fun?"),
    ("ai", "Yes!"),
]


def test_built_tokenizer_matches_tiktoken_reference():
    import tiktoken

    from course.assets import gpt2_ranks_path

    ours = build_gpt2_tokenizer()
    ranks = tiktoken.load.load_tiktoken_bpe(str(gpt2_ranks_path()))
    reference = tiktoken.Encoding("gpt2-ref", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                                  mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    for text in ["Hello world", "Human: What's 2 + 2?", "  indented\n\ncode()", "naïve café 123"]:
        assert ours.encode(text) == reference.encode(text)
    assert ours.encode("Hello world") == GPT2_HELLO_WORLD


def test_empty_tokenizer_is_an_error_not_a_zero_count():
    class Empty:
        def encode(self, text):
            return []

    with pytest.raises(AssetError, match="make assets"):
        check_gpt2_tokenizer(Empty())


def test_langchain_fallback_counts_real_gpt2_offline():
    """LangChain's own, unmodified counter: the per-message counts of the 11-message example."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import convert_to_messages

    model = FakeListChatModel(responses=[""])
    messages = convert_to_messages(ELEVEN)
    counts = [model.get_num_tokens_from_messages([m]) for m in messages]
    assert counts == [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]


def test_install_into_an_empty_cache_then_from_pretrained_finds_it(tmp_path):
    snapshot = install_gpt2_tokenizer(tmp_path)
    code = ("from transformers import GPT2TokenizerFast;"
            "print(GPT2TokenizerFast.from_pretrained('gpt2').encode('Hello world'))")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "[15496, 995]", out.stderr[-2000:]
    assert snapshot.parent.parent.name == "models--gpt2"


def test_the_converted_model_is_readable_by_other_users():
    """The grader's sandbox runs kernels under another uid: it must read the prepared copy."""
    from course.assets import converted_model_dir

    unreadable = [p.name for p in converted_model_dir().iterdir() if not p.stat().st_mode & 0o004]
    assert unreadable == []
