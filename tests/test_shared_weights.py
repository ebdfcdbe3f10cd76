"""One copy of the weights per machine: on the CPU in fp32 the bundled model's tensors
are views of the mapped ``model.safetensors`` (transformers maps safetensors files and, where the
dtype on disk is the dtype used, keeps the mapping's pages as the parameters), so every kernel
shares the same page-cache pages instead of holding its own copy; the greedy tokens are those of
a load that copies the weights; nothing writes into the mapping; the memory guard still runs
before anything is read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from course import models
from course.settings import BUNDLED, CourseSettingError, ModelChoice

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/maps and /proc/self/smaps")

PROMPTS = ["Say hello.", "What is the capital of France?", "List three colours, one per line."]


@pytest.fixture(scope="module")
def local():
    return models.load_local_model()


def weights_file(local) -> Path:
    return (Path(local.source) / "model.safetensors").resolve()


def mapped_regions(path: Path) -> list[tuple[int, int, str]]:
    """``(start, end, permissions)`` of every mapping of ``path`` in this process."""
    regions = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == str(path):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            regions.append((start, end, fields[1]))
    return regions


def private_dirty_bytes(path: Path) -> int:
    """Pages of the mapped ``path`` this process wrote to (copied on write): 0 if none."""
    dirty, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 1)[0] if line.strip() else ""
        if not head.endswith(":"):
            inside = line.rstrip().endswith(str(path))
        elif inside and head == "Private_Dirty:":
            dirty += int(line.split()[1]) * 1024
    return dirty


def greedy_tokens(model, tokenizer, prompt: str, new_tokens: int = 12) -> list[int]:
    import torch

    inputs = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                           add_generation_prompt=True, return_tensors="pt",
                                           return_dict=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
    return out[0, inputs["input_ids"].shape[1]:].tolist()


def test_every_parameter_is_a_view_of_the_mapped_file(local):
    assert (models.placement().device, models.placement().dtype) == ("cpu", "float32")
    regions = mapped_regions(weights_file(local))
    assert regions, "model.safetensors is not mapped: the weights were copied"
    assert all(perms[3] == "p" for _, _, perms in regions)  # private: copy on write, never shared
    outside = [name for name, p in local.model.named_parameters()
               if not any(start <= p.data_ptr() < end for start, end, _ in regions)]
    assert not outside, f"parameters copied out of the mapping: {outside[:5]}"
    size = sum(p.numel() * p.element_size() for p in local.model.parameters())
    assert size > 500_000_000  # the 538 MB of fp32 weights, all of them


def test_greedy_tokens_are_those_of_a_copying_load(local):
    import torch
    from transformers import AutoModelForCausalLM

    copied = AutoModelForCausalLM.from_pretrained(local.source, dtype=torch.float32,
                                                  disable_mmap=True).eval()
    regions = mapped_regions(weights_file(local))
    assert not any(start <= next(copied.parameters()).data_ptr() < end
                   for start, end, _ in regions)  # the reference really is a copy
    mapped = dict(local.model.state_dict())
    for name, tensor in copied.state_dict().items():
        assert torch.equal(tensor, mapped[name]), name
    for prompt in PROMPTS:
        assert (greedy_tokens(local.model, local.tokenizer, prompt)
                == greedy_tokens(copied, local.tokenizer, prompt)), prompt


def test_nothing_writes_into_the_mapped_weights(local):
    local.generate([{"role": "user", "content": "Say hi."}], max_new_tokens=4)
    models.text_generation_pipeline(max_new_tokens=4)(
        local.render_chat([{"role": "user", "content": "Say hi."}]))
    assert not local.model.training
    assert private_dirty_bytes(weights_file(local)) == 0


def test_the_memory_guard_runs_before_any_weight_is_read(monkeypatch):
    import psutil
    import transformers

    read = []
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        classmethod(lambda cls, *a, **k: read.append(a)))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("vm", (), {"available": 10**8}))
    with pytest.raises(CourseSettingError, match="Nothing was loaded"):
        models.load_model_on.__wrapped__(ModelChoice("bundled", BUNDLED), "cpu")
    assert read == []
