"""course.finetune: the generator's split, rendering through a real CodeAgent, a short LoRA run,
the committed adapter's manifest, and base + adapter loading."""

from __future__ import annotations

import json
import shutil

import pytest

from course.finetune.data import (
    HELD_OUT_FAMILIES,
    TRAIN_FAMILIES,
    Rendered,
    held_out_tasks,
    render,
    training_tasks,
    trajectories_jsonl,
)


@pytest.fixture(scope="module")
def tokenizer():
    from course.models import agent_tokenizer

    return agent_tokenizer()[0]


def test_training_families_never_include_the_held_out_ones():
    train = training_tasks(0)
    held = held_out_tasks()
    assert {t.family for t in train} == set(TRAIN_FAMILIES)
    assert {t.family for t in held} == set(HELD_OUT_FAMILIES)
    assert not set(TRAIN_FAMILIES) & set(HELD_OUT_FAMILIES)
    held_texts = {t.task for t in held}
    assert not any(t.task in held_texts for t in train)
    # nothing of the note's three tasks leaks in through the words of a trajectory
    for t in train:
        words = " ".join([t.task, *t.outputs, *t.additional_args.values()]).lower()
        assert "weather" not in words and "bond" not in words and "(i)" not in words, t.task
    # the note's three come first, with their recordings' task text and additional_args
    assert held[0].task == "What is the current weather in Paris?"
    assert held[1].answer == "Aston Martin" and set(held[1].tools) == {"web_search", "image_generator"}
    assert "numbers(i)" in held[2].additional_args["code"]


def test_generator_is_seeded():
    assert trajectories_jsonl(training_tasks(0)) == trajectories_jsonl(training_tasks(0))
    assert trajectories_jsonl(training_tasks(0)) != trajectories_jsonl(training_tasks(1))
    with pytest.raises(ValueError, match="unknown kinds"):
        training_tasks(0, mix=(("weather", 3),))


def test_each_family_renders_through_codeagent_and_passes_the_checks(tokenizer):
    from course.finetune.train import tokenize

    train = training_tasks(0)
    for family in TRAIN_FAMILIES:
        traj = next(t for t in train if t.family == family)
        r = render(traj, tokenizer)
        assert r.text.startswith(r.prefix) and r.prefix.endswith("New task:\n")
        assert len(r.spans) == len(traj.outputs)
        for (a, b), out in zip(r.spans, traj.outputs, strict=True):
            assert r.text[a:].startswith("Thought: ") and out.startswith(r.text[a:b][:40])
        assert r.text.endswith("</code><|im_end|>")
        (sample,) = tokenize([r], tokenizer)
        trained_text = tokenizer.decode([i for i, t in zip(sample.ids, sample.trained,
                                                           strict=True) if t])
        assert "Thought:" in trained_text and "Observation" not in trained_text
        assert "New task" not in trained_text and traj.task not in trained_text
        if family == "run_and_fix":  # the given script failed when run, as the thought says
            assert "Error" in r.observations[0] or "error" in r.observations[0].lower()
        if family in ("fact_lookup", "lookup_then_draw"):
            assert traj.answer in " ".join(r.observations)  # the answer came from a search


def test_a_trajectory_that_does_not_reach_its_answer_is_refused(tokenizer):
    traj = next(t for t in training_tasks(0) if t.family == "compute")
    traj.outputs = traj.outputs[:1]  # computes, never answers
    with pytest.raises(ValueError, match="without reaching its final answer"):
        render(traj, tokenizer)


def _tiny_sample(tokenizer):
    from course.finetune.train import tokenize

    prefix = ("<|im_start|>system\nYou solve tasks with Python code.<|im_end|>\n"
              "<|im_start|>user\nNew task:\n")
    output = 'Thought: I compute it.\n<code>\nfinal_answer(2 + 3)\n</code><|im_end|>'
    text = prefix + "What is 2 plus 3?<|im_end|>\n<|im_start|>assistant\n" + output
    start = text.index("Thought:")
    rendered = Rendered("compute", "What is 2 plus 3?", text, prefix, [(start, len(text))], 1, [])
    return tokenize([rendered], tokenizer)


def test_a_two_step_run_lowers_the_loss_and_leaves_the_base_weights(tokenizer, tmp_path):
    import torch

    from course.finetune.adapter import check_adapter, fresh_base
    from course.finetune.train import TrainSettings, train

    samples = _tiny_sample(tokenizer)
    assert sum(samples[0].trained) > 5 and not all(samples[0].trained)
    base = fresh_base()
    weight = base.model.model.layers[0].self_attn.q_proj.weight
    before = weight.detach().clone()
    result = train(samples, TrainSettings(name="tiny", steps=2, learning_rate=3e-3,
                                          warmup_steps=1, refresh_every=1),
                   local=base, out_dir=tmp_path / "tiny", progress=False)
    assert len(result.losses) == 2 and result.losses[1] < result.losses[0]
    assert torch.equal(weight.detach(), before)  # LoRA adds tensors; the base is untouched
    manifest = check_adapter(tmp_path / "tiny")
    assert manifest["steps"] == 2 and manifest["final_loss"] == round(result.losses[1], 4)
    log = [json.loads(line) for line in (tmp_path / "tiny" / "train_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [1, 2] and log[1]["loss"] == round(result.losses[1], 5)


def test_a_run_can_start_from_an_adapters_weights(tokenizer, tmp_path):
    from safetensors.torch import load_file

    from course.adapter_manifest import adapter_dir, check_adapter
    from course.finetune.adapter import fresh_base
    from course.finetune.train import TrainSettings, train

    samples = _tiny_sample(tokenizer)
    with pytest.raises(ValueError, match=r"trained with rank 8, .* and the default prompt"):
        train(samples, TrainSettings(steps=1, start_from="smollm2-tools", prompt="compact"),
              local=fresh_base(), progress=False)
    fresh = train(samples, TrainSettings(steps=1, learning_rate=1e-9), local=fresh_base(), progress=False)
    went_on = train(samples, TrainSettings(name="on", steps=1, learning_rate=1e-9, start_from="smollm2-tools"),
                    local=fresh_base(), out_dir=tmp_path / "on", progress=False)
    assert went_on.losses[0] < fresh.losses[0]  # it starts where the committed adapter got to
    parent = check_adapter(adapter_dir("smollm2-tools"))
    assert went_on.manifest["started_from"] == {
        "name": "smollm2-tools", "adapter_sha256": parent["files"]["adapter_model.safetensors"],
        "steps": parent["steps"], "trajectories": parent["trajectories"]}
    theirs = load_file(str(adapter_dir("smollm2-tools") / "adapter_model.safetensors"))
    mine = load_file(str(tmp_path / "on" / "adapter_model.safetensors"))
    assert theirs.keys() == mine.keys()
    assert max(float((theirs[k] - mine[k]).abs().max()) for k in theirs) < 1e-6


def test_a_model_runs_with_the_prompt_its_adapter_was_taught_with(tokenizer, tmp_path):
    from course.adapter_manifest import taught_prompt, wrap_with_adapter
    from course.agents.prompts import COMPACT_SYSTEM_PROMPT, templates_for
    from course.finetune.adapter import fresh_base
    from course.finetune.evaluate import kernel_agent_model
    from course.finetune.train import TrainSettings, train

    samples = _tiny_sample(tokenizer)
    train(samples, TrainSettings(name="c", steps=1, prompt="compact"), local=fresh_base(),
          out_dir=tmp_path / "c", progress=False)
    base = fresh_base()
    assert taught_prompt(base.model) == "default" and templates_for(kernel_agent_model(base)) is None
    base.model = wrap_with_adapter(base.model, tmp_path / "c")
    assert taught_prompt(base.model) == "compact"
    assert templates_for(kernel_agent_model(base))["system_prompt"] == COMPACT_SYSTEM_PROMPT
    plain = fresh_base()
    plain.model = wrap_with_adapter(plain.model)  # the committed adapter: smolagents' own prompt
    assert taught_prompt(kernel_agent_model(plain)) == "default"


def test_bad_settings_name_the_setting():
    from course.finetune.train import TrainSettings

    with pytest.raises(ValueError, match="steps=0"):
        TrainSettings(steps=0).check()
    with pytest.raises(ValueError, match="name="):
        TrainSettings(name="../x").check()


# ----- the committed adapter -----
def test_committed_adapter_matches_its_manifest_and_generator(tmp_path):
    from course.adapter_manifest import AdapterError, adapter_dir, check_adapter

    folder = adapter_dir()
    manifest = check_adapter(folder)
    assert manifest["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert 1_000_000 < manifest["bytes"]["adapter_model.safetensors"] < 20_000_000
    assert manifest["mean_loss_last_8"] < manifest["mean_loss_first_8"]
    assert set(manifest["families"]) == set(TRAIN_FAMILIES)
    # the committed trajectories are what the generator yields for the manifest's seed
    assert (folder / "trajectories.jsonl").read_text(encoding="utf-8") == trajectories_jsonl(
        training_tasks(manifest["settings"]["seed"]))
    log = (folder / "train_log.jsonl").read_text().splitlines()
    assert len(log) == manifest["steps"]
    # a damaged copy is refused, naming the file
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    data = bytearray((copy / "adapter_model.safetensors").read_bytes())
    data[-1] ^= 1
    (copy / "adapter_model.safetensors").write_bytes(bytes(data))
    with pytest.raises(AdapterError, match=r"adapter_model\.safetensors does not match"):
        check_adapter(copy)
    (copy / "manifest.json").write_text("{")
    with pytest.raises(AdapterError, match=r"manifest\.json: cannot read it"):
        check_adapter(copy)


def test_the_taught_agents_adapter_matches_its_manifest_its_parent_and_its_data():
    from course.adapter_manifest import AGENT_ADAPTER, adapter_dir, check_adapter
    from course.finetune.evaluate import RUNS_DIR
    from course.finetune.tasks import MIXES, generate

    folder = adapter_dir(AGENT_ADAPTER)
    manifest = check_adapter(folder)
    settings = manifest["settings"]
    assert (settings["prompt"], settings["mix"], settings["start_from"]) == ("compact", "code", "pilot-1000")
    # it went on from the 1,000-run, whose manifest is committed: the same weights by their sha256
    parent = json.loads((RUNS_DIR / "pilot-1000" / "manifest.json").read_text())
    assert manifest["started_from"]["adapter_sha256"] == parent["files"]["adapter_model.safetensors"]
    assert manifest["started_from"]["trajectories"] == parent["trajectories"] == 1000
    # its trajectories are what the generator draws for its seed and mix
    assert (folder / "trajectories.jsonl").read_text(encoding="utf-8") == trajectories_jsonl(
        generate(manifest["trajectories"], settings["seed"], MIXES[settings["mix"]]))
    evaluation = json.loads((folder / "evaluation.json").read_text())
    assert evaluation["adapter_sha256"] == manifest["files"]["adapter_model.safetensors"]
    assert evaluation["prompt"] == "compact" and evaluation["held_out"] == "all, 9 kin"


def test_bundled_tools_setting_loads_base_plus_adapter(tokenizer):
    import torch

    from course.finetune.adapter import fresh_base, load_with_adapter
    from course.settings import parse_model_setting

    choice = parse_model_setting("bundled+tools")
    assert choice.with_adapter and choice.is_bundled and choice.setting == "bundled+tools"
    assert not parse_model_setting("bundled").with_adapter
    base = fresh_base()
    tuned = load_with_adapter(base=fresh_base())
    assert type(tuned.model).__name__ == "PeftModelForCausalLM"
    ids = torch.tensor([tokenizer.encode("Thought: I will search the web.")])
    with torch.no_grad():
        a = base.model(input_ids=ids).logits
        b = tuned.model(input_ids=ids).logits
    assert not torch.allclose(a, b, atol=1e-4)  # the adapter changes what the model computes
    from course.models import load_local_model  # the setting, through the course's loader

    local = load_local_model(choice)
    assert type(local.model).__name__ == "PeftModelForCausalLM" and local.choice == choice
    with torch.no_grad():
        assert torch.allclose(local.model(input_ids=ids).logits, b, atol=1e-4)


def test_doctor_checks_the_adapter(monkeypatch, tmp_path):
    from course import adapter_manifest as adapter
    from course import doctor

    monkeypatch.delenv("COURSE_MODEL", raising=False)
    check = doctor._adapter()
    assert check.ok and "files match the manifest" in check.detail and check.optional
    shutil.copytree(adapter.adapter_dir(), tmp_path / adapter.DEFAULT_ADAPTER)
    (tmp_path / adapter.DEFAULT_ADAPTER / "adapter_config.json").write_text("{}")
    monkeypatch.setattr(adapter, "ADAPTERS_DIR", tmp_path)
    check = doctor._adapter()
    assert not check.ok and check.status == "warn" and "adapter_config.json" in check.detail
    monkeypatch.setenv("COURSE_MODEL", "bundled+tools")  # selected: a damaged adapter fails
    check = doctor._adapter()
    assert check.status == "FAIL" and "python -m course.finetune" in check.detail


def test_loss_curve_means_each_window():
    from course.finetune.train import loss_curve

    assert loss_curve([3, 2, 1, 0.5, 0.25], 2) == [(1, 2, 2.5), (3, 4, 0.75), (5, 5, 0.25)]
    with pytest.raises(ValueError, match="window=0"):
        loss_curve([1.0], 0)


def test_fixed_code_is_what_a_debug_answer_must_be():
    from course.finetune.evaluate import fixed_code_returned

    script = "numbers=[0, 1, 2]\n\nfor i in range(4):\n    print(numbers(i))\n"
    fixed = "numbers = [0, 1, 2]\nfor i in range(len(numbers)):\n    print(numbers[i])\n"
    assert fixed_code_returned(fixed, script)
    assert not fixed_code_returned(script, script)  # the script handed back unchanged
    assert not fixed_code_returned("3", script)  # a value (the tuned model's answer, measured)
    assert not fixed_code_returned("final_answer(numbers)", script)
    assert not fixed_code_returned("numbers = [", script)


def test_committed_evaluation_shows_the_adapter_beats_the_base_on_parse_rate():
    from course.adapter_manifest import adapter_dir, check_adapter

    record = json.loads((adapter_dir() / "evaluation.json").read_text())
    assert record["label"] == "measured"
    assert record["adapter_sha256"] == check_adapter()["files"]["adapter_model.safetensors"]
    base, tuned = record["summary"]
    assert "LoRA" in tuned["model"] and "LoRA" not in base["model"]
    assert tuned["tasks"] == base["tasks"] == 6
    assert tuned["parse_rate"] > base["parse_rate"]
    for summary in (base, tuned):  # the summary is the runs' own sum
        runs = record["runs"][summary["model"]]
        assert summary["parsed_steps"] == sum(r["parsed_steps"] for r in runs)
        assert summary["success"] == sum(r["success"] for r in runs)
