"""The GPU path on Colab's GPUs, with ``torch.cuda`` made to look like a T4 or an A100.

No GPU runs here: the tests replace the few ``torch.cuda`` functions the workbook asks
(availability, bf16 support, capability, name, free memory) with a T4's answers (compute
capability 7.5, no native bf16, ~15 GB) or an A100's (8.0, bf16, 40 GB), and check the dtype
chosen, the memory estimate against the GPU's free memory, the refusal message, and what the
doctor reports. The model sizes are real: Qwen3-4B's and Qwen3-8B's configs, built on torch's
``meta`` device (no weight exists).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from course import models
from course.settings import CourseSettingError, parse_model_setting


@dataclass(frozen=True)
class FakeGpu:
    name: str
    capability: tuple[int, int]
    total: int
    free: int


T4 = FakeGpu("Tesla T4", (7, 5), 15_828_320_256, 15_720_000_000)  # Colab's free GPU
A100 = FakeGpu("NVIDIA A100-SXM4-40GB", (8, 0), 42_481_549_312, 42_000_000_000)


def _qwen3(hidden: int, layers: int, intermediate: int, heads: int, tied: bool) -> dict:
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
            "intermediate_size": intermediate, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": 8, "head_dim": 128,
            "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": tied}


QWEN3_4B = _qwen3(2560, 36, 9728, 32, tied=True)  # Qwen/Qwen3-4B-Instruct-2507's config
QWEN3_8B = _qwen3(4096, 36, 12288, 32, tied=False)  # Qwen/Qwen3-8B's config


def pretend(monkeypatch: pytest.MonkeyPatch, gpu: FakeGpu) -> None:
    """Make ``torch.cuda`` answer as on ``gpu``. ``is_bf16_supported`` answers as torch does on
    that card: with emulation (torch's default) True even on a T4, which emulates bf16."""
    import torch

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return gpu.capability >= (8, 0) or including_emulation

    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "current_device", lambda: 0)
    monkeypatch.setattr(cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(cuda, "get_device_name", lambda device=None: gpu.name)
    monkeypatch.setattr(cuda, "get_device_capability", lambda device=None: gpu.capability)
    monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: (gpu.free, gpu.total))
    monkeypatch.delenv("COURSE_DEVICE", raising=False)


def config_dir(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_t4_loads_in_fp16_although_torch_says_it_can_emulate_bf16(monkeypatch):
    import torch

    pretend(monkeypatch, T4)
    assert torch.cuda.is_bf16_supported()  # what asking torch plainly would have chosen
    assert models.cuda_dtype() == "float16"
    assert models.placement() == models.Placement("cuda", "float16", "auto")


def test_an_a100_loads_in_bf16(monkeypatch):
    pretend(monkeypatch, A100)
    assert models.placement() == models.Placement("cuda", "bfloat16", "auto")


def test_the_notes_model_fits_a_t4_in_fp16_with_the_estimate_from_its_config(tmp_path, monkeypatch):
    pretend(monkeypatch, T4)
    source = str(config_dir(tmp_path, QWEN3_4B))
    params, needed = models.estimate_weight_bytes(source, "float16")
    assert 4.0e9 < params < 4.05e9 and needed == 2 * params  # ~8 GB, as the README says
    assert models.check_fits(source, models.placement(), source) == needed


def test_a_model_too_big_for_a_t4_is_refused_naming_the_gpu_and_its_free_memory(tmp_path,
                                                                                monkeypatch):
    pretend(monkeypatch, T4)
    source = config_dir(tmp_path, QWEN3_8B)
    params, needed = models.estimate_weight_bytes(str(source), "float16")
    assert 8.1e9 < params < 8.3e9
    choice = parse_model_setting(str(source))
    with pytest.raises(CourseSettingError) as err:
        models.load_local_model(choice)  # refused by the estimate: the folder holds no weights
    message = str(err.value)
    print("\nT4 memory guard:", message)
    assert f"{params / 1e9:.2f} B parameters in float16" in message
    assert f"about {needed / 1e9:.1f} GB for the weights alone" in message
    assert "but the GPU (Tesla T4) has 15.7 GB free memory" in message
    assert "Nothing was loaded" in message and "A100 or L4" in message
    assert "Qwen/Qwen2-0.5B-Instruct" in message and "COURSE_MODEL=http://" in message
    assert "Change runtime type > GPU)" not in message  # already on a GPU: not the fix


def test_the_same_model_fits_an_a100_in_bf16(tmp_path, monkeypatch):
    pretend(monkeypatch, A100)
    source = str(config_dir(tmp_path, QWEN3_8B))
    where = models.placement()
    assert where.dtype == "bfloat16"
    assert models.check_fits(source, where, source) == models.estimate_weight_bytes(
        source, "bfloat16")[1]


def test_the_guard_reads_the_gpus_free_memory_not_its_total(tmp_path, monkeypatch):
    busy = FakeGpu("Tesla T4", (7, 5), T4.total, 6_000_000_000)  # another model holds 9 GB
    pretend(monkeypatch, busy)
    source = str(config_dir(tmp_path, QWEN3_4B))
    with pytest.raises(CourseSettingError, match=r"the GPU \(Tesla T4\) has 6\.0 GB free memory"):
        models.check_fits(source, models.placement(), "Qwen/Qwen3-4B-Instruct-2507")


@pytest.mark.parametrize("gpu,line", [
    (T4, "gpu: Tesla T4, compute capability 7.5, 15.7 GB free of 15.8 GB; models load in "
         "float16 (no native bf16 below compute capability 8.0)"),
    (A100, "gpu: NVIDIA A100-SXM4-40GB, compute capability 8.0, 42.0 GB free of 42.5 GB; "
           "models load in bfloat16"),
])
def test_the_models_report_and_the_doctor_name_the_gpu_its_free_memory_and_the_dtype(
        monkeypatch, capsys, gpu, line):
    from course import doctor

    pretend(monkeypatch, gpu)
    report = models.describe_models()
    assert report.device == "cuda" and line in str(report).splitlines()
    check = doctor._gpu()
    assert check.ok and check.line() == "[ok] GPU: " + line.removeprefix("gpu: ")
