"""Appendix A4, teaching the bundled model the course's tools: the outputs that carry the lesson,
read by value from what the student sees under each cell of one offline run, against the
committed adapter folder (evaluation.json, manifest.json, train_log.jsonl) and the generator."""

import json
import math

import pytest

from course.adapter_manifest import adapter_dir
from course.finetune.data import HELD_OUT_FAMILIES, held_out_tasks, training_tasks

NOTEBOOK = "A4_teach_a_small_model.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)
LABELS = ("measured", "recorded", "reconstructed", "derived", "scripted")
COMMITTED = "measured (committed result of an earlier run: course/data/"
EVALUATION = "course/data/adapters/smollm2-tools/evaluation.json"


@pytest.fixture(scope="module")
def evaluation():
    return json.loads((adapter_dir() / "evaluation.json").read_text())


@pytest.fixture(scope="module")
def manifest():
    return json.loads((adapter_dir() / "manifest.json").read_text())


def test_the_problem_cites_the_committed_base_figures(run, evaluation):
    shown = run.record("problem")
    assert shown["source"] == f"measured (committed result of an earlier run: {EVALUATION})"
    assert shown["file"] == EVALUATION
    assert shown["summary"] == evaluation["summary"][:1]  # the base model's part, as committed
    assert list(shown["runs"]) == [evaluation["summary"][0]["model"]]
    assert shown["summary"][0]["tasks"] == 6  # held-out tasks
    assert run.text("problem").startswith(f"[{shown['source']}] ")  # the label comes first


def test_the_base_live_step_writes_no_parseable_code(run):
    step = run.record("base-live")
    assert step["model"] == "SmolLM2-135M-Instruct (bundled)"
    assert step["task"] == "What is the current weather in Paris?" and step["steps"] == 1
    assert step["parsed_steps"] == 0 and step["tools_called"] == [] and not step["right_tool"]
    assert "[measured] SmolLM2-135M-Instruct (bundled), live" in run.text("base-live")


def test_no_held_out_family_is_trained_on(run):
    counts = run.shown_one("families", "training")
    assert sum(counts.values()) == len(training_tasks(0)) == 96
    assert not set(counts) & set(HELD_OUT_FAMILIES)
    held = run.shown_one("families", "held-out")
    assert set(held) == set(HELD_OUT_FAMILIES) and sum(held.values()) == len(held_out_tasks())
    assert run.shown_one("families", "trajectories") == 96  # shown after the cell's asserts ran, and it says so:
    assert run.text("families").rstrip().endswith("training trajectories (asserted)")


def test_the_trajectory_is_scripted_and_rendered_through_the_agent(run):
    assert run.text("one-trajectory").startswith("[scripted] family ")  # the label, first
    example = run.shown_one("one-trajectory", "example")
    assert example["family"] == "fact_lookup", example
    outputs = example["outputs"]
    assert "--- output 2 (scripted) ---\n" + outputs[1] in run.text("one-trajectory")  # as printed
    assert len(outputs) == 2 and all(o.startswith("Thought:") for o in outputs), outputs
    assert "web_search(" in outputs[0] and "final_answer(" in outputs[1], outputs
    assert run.text("render").startswith("[scripted outputs, observations computed here")
    assert run.shown_one("render", "steps") == 2
    assert "## Search Results" in run.shown_one("render", "observation")  # the offline search really ran


def test_the_loss_mask_trains_the_model_words_only(run):
    prefix, rest, trained = run.shown_one("loss-mask", "tokens")
    assert 2000 < prefix and 0 < trained < rest
    pieces = run.shown("loss-mask")["trained"]
    assert len(pieces) == 2 and sum(n for n, _ in pieces) == trained
    assert all(words.startswith("Thought:") for _, words in pieces)


def test_lora_parameters_by_hand_equal_peft_and_the_adapter_file(run, manifest):
    by_hand, peft = run.shown_one("lora-count", "lora")
    assert by_hand == peft == 2_442_240  # 30 blocks x 8 x (2x1152 + 2x768 + 3x2112)
    size = manifest["bytes"]["adapter_model.safetensors"]
    assert peft * 4 <= size < peft * 4 + 100_000  # fp32 tensors plus the safetensors header


def test_the_live_run_lowers_the_loss_on_the_same_trajectory(run):
    text = run.text("live-train")
    assert "[measured] SmolLM2-135M-Instruct + a fresh LoRA, 3 steps on one fact_lookup" in text
    losses = run.shown_one("live-train", "losses")
    assert len(losses) == 3 and all(math.isfinite(x) and x > 0 for x in losses)
    assert losses[-1] < losses[0]  # two updates later, the same trajectory's loss is lower
    reused, prefix = run.shown_one("live-train", "cache")  # 3 steps, each read the prefix cached
    assert prefix > 0 and reused == 3 * prefix, (reused, prefix)


def test_the_masked_loss_is_written_in_the_lesson_and_used_live(run):
    """The cell writes masked_loss (test_saved_cells keeps it equal to course.finetune.train's),
    prints nothing, and the live steps call it."""
    cell = run.cells("masked-loss-source")[0]
    assert cell.source.startswith("# saved in course.finetune.train\n")
    assert "def masked_loss(" in cell.source and run.text("masked-loss-source") == ""
    assert "masked_loss(peft_model, sample, cache)" in run.cells("live-train")[0].source


def test_the_full_run_curve_is_the_committed_log(run, manifest):
    assert run.has_image("loss-curve")
    assert f"[{COMMITTED}adapters/smollm2-tools/train_log.jsonl)] full run" in run.text("loss-curve")
    steps, first, last = run.shown_one("loss-curve", "full run")
    assert steps == manifest["steps"], steps
    assert f"{first:.3f}" == f"{manifest['mean_loss_first_8']:.3f}", first
    assert f"{last:.3f}" == f"{manifest['mean_loss_last_8']:.3f}", last
    losses = run.shown_one("live-train", "losses")  # the live run above: its figures, as recorded there
    assert f"[measured] the live run above: {losses[0]:.3f} -> {losses[-1]:.3f}\n" in \
        run.text("loss-curve")


def test_the_manifest_check_passes_with_the_doctors_check(run, manifest):
    import course.adapter_manifest
    import course.finetune.adapter

    assert course.finetune.adapter.check_adapter is course.adapter_manifest.check_adapter
    text = run.text("manifest")
    assert text.startswith(f"[{COMMITTED}adapters/smollm2-tools/manifest.json)] adapter ")
    assert "manifest check, run here: every adapter file has the sha256" in text
    # the manifest the check read, whole: name, files and their sha256, data, steps, seconds
    assert run.shown_one("manifest", "manifest") == manifest


def test_the_held_out_table_is_the_committed_evaluation(run, evaluation):
    shown = run.record("heldout-table")
    assert shown["file"] == EVALUATION and shown["source"].startswith(COMMITTED)
    assert shown["summary"] == evaluation["summary"] and shown["runs"] == evaluation["runs"]
    assert shown["max_steps"] == evaluation["max_steps"] == 3
    base, tuned = shown["summary"]
    assert tuned["parse_rate"] > base["parse_rate"]
    text = run.text("heldout-table")  # the student's table says the same rows
    for s in shown["summary"]:
        row = next(line for line in text.splitlines() if line.strip().startswith(s["model"]))
        assert [c.strip() for c in row.split("|")][1:3] == [f"{s['parsed_steps']}/{s['steps']}",
                                                            f"{s['right_tool']}/{s['tasks']}"]


def test_the_live_step_shows_the_format_learned_and_the_search_skipped(run):
    base, tuned = run.records("tuned-live")
    assert base == run.record("base-live")
    assert tuned["model"] == "SmolLM2-135M-Instruct + LoRA (bundled+tools)"
    assert base["parsed_steps"] == 0
    assert tuned["first_output"].startswith("Thought:") and tuned["parsed_steps"] == 1
    assert not tuned["right_tool"] and "web_search" not in tuned["tools_called"]  # no judgement


def test_the_lesson_is_computed_from_the_runs(run, evaluation):
    text = run.text("lesson")
    tuned = evaluation["runs"][evaluation["summary"][1]["model"]]
    assert text.startswith(f"[measured (committed result of an earlier run: {EVALUATION})] "
                           f"{evaluation['summary'][1]['model']}, per held-out task")
    lesson = run.shown("lesson")
    assert lesson["task"] == tuned  # one line per held-out task, in order
    assert lesson["format learned"] == [True]
    assert lesson["weather"] == [[True, True]]  # never searched, flagged by the trajectory checks
    assert lesson["bond"] == [[True, [], False, "Aston Martin"]]  # drew, flags, success, car missing


def test_the_instructor_edition_passes_the_quiz_and_the_exercises(run):
    assert "[passed] Quiz" in run.text("quiz-check")
    for n, title in [(1, "a trajectory of a new family"), (2, "the loss mask"),
                     (3, "count LoRA's parameters")]:
        assert f"[passed] Exercise {n}: {title}" in run.text(f"ex{n}-check")


def test_outputs_are_short_and_labelled(run):
    for cell in run.nb.cells:
        if cell.cell_type == "code":
            assert len(run.text(cell.id)) <= 3000, (cell.id, len(run.text(cell.id)))
    for cell_id in ("problem", "base-live", "one-trajectory", "render", "live-train",
                    "loss-curve", "heldout-table", "tuned-live", "lesson", "bfcl"):
        first = next(line for line in run.text(cell_id).splitlines()
                     if line.strip() and not line.startswith(("LoRA steps", "Loading weights",
                                                              "<Figure")))
        assert any(f"[{label}" in first or f"{label}:" in first for label in LABELS), (cell_id, first)
    for cell_id in ("problem", "loss-curve", "manifest", "heldout-table", "lesson", "bfcl"):
        first = run.text(cell_id).splitlines()
        first = next(line for line in first if line.startswith("["))
        assert first.startswith(f"[{COMMITTED}"), (cell_id, first)  # read from a file, named
    for cell_id in ("base-live", "live-train", "tuned-live"):  # run in the student's kernel
        assert run.text(cell_id).count("committed") == 0, cell_id


def test_the_bfcl_cell_shows_both_committed_tables(run):
    from course.tools.bfcl import BFCL_LAST_RUN, BFCL_TOOLS_RUN

    if not BFCL_TOOLS_RUN.is_file():
        pytest.skip("the adapter's BFCL table is not committed")
    text = run.text("bfcl")
    base, tuned = (json.loads(p.read_text()) for p in (BFCL_LAST_RUN, BFCL_TOOLS_RUN))
    assert text.startswith(f"[{COMMITTED}bfcl_bundled.json, course/data/bfcl_bundled_tools.json)] "
                           "BFCL, flat questions")
    for category in ("simple", "multiple"):
        for mode in ("free", "constrained"):
            a, b = (next(r for r in t["rows"] if (r["category"], r["mode"], r["subset"])
                         == (category, mode, "flat")) for t in (base, tuned))
            line = run.shown_one("bfcl", f"{category} {mode}")  # base, base + adapter
            assert line == [f"{a['well_formed']}/{a['n']} / {a['accepted']}/{a['n']}",
                            f"{b['well_formed']}/{b['n']} / {b['accepted']}/{b['n']}"], line
    assert tuned["model"] in text and base["model"] in text  # the models it names


def test_the_larger_run_is_read_from_its_committed_files_per_family(run):
    from course.finetune.evaluate import RUNS_DIR

    folder = RUNS_DIR / "pilot-1000"
    manifest = json.loads((folder / "manifest.json").read_text())
    committed = json.loads((folder / "evaluation-30-tasks.json").read_text())
    assert run.shown_one("at-scale", "manifest-1000")["data_sha256"] == manifest["data_sha256"]
    assert run.text("at-scale").startswith(
        f"[{COMMITTED}finetune_runs/pilot-1000/manifest.json)] adapter pilot-1000: 1,000 trajectories")
    shown = run.record("at-scale", shown=False)  # the HeldOut table, besides the lines shown
    assert shown["file"] == "course/data/finetune_runs/pilot-1000/evaluation-30-tasks.json"
    assert shown["summary"] == committed["summary"] and shown["summary"][0]["tasks"] == 30
    per_family = {(r["model"], r["family"]): (r["success"], r["tasks"])
                  for r in run.shown_one("at-scale", "per-family")}
    assert per_family == {(r["model"], r["family"]): (r["success"], r["tasks"])
                          for r in committed["by_family"]}  # the cell's count is the file's
    base, tuned = (s["model"] for s in committed["summary"])
    assert [per_family[(base, f)] for f in HELD_OUT_FAMILIES] == [(0, 10)] * 3
    assert [per_family[(tuned, f)][0] for f in HELD_OUT_FAMILIES] == [6, 7, 0]


def test_the_larger_runs_failure_modes_are_counted_as_the_prose_says(run):
    assert run.shown_one("at-scale-failures", "notes-three") == [False, False, False]
    disagree = run.shown_one("at-scale-failures", "disagree")
    assert disagree == {"tasks": 10, "searched more than once": 2, "named one source's figure": 6,
                        "names no source's temperature": 2, "no final answer": 2}
    assert not any("glue" in kind or "range" in kind for kind in disagree)  # "none glues a range"
    odd = run.shown_one("at-scale-failures", "film-answers")
    assert len(odd) == 1 and odd[0].startswith("<function")  # the check's hole, found by the cell
    prose = next(c.source for c in run.nb.cells if c.get("id") == "at-scale-read")
    assert "none glues a range" in prose and "function object" in prose and "**A script to debug**: none" in prose


def test_the_taught_agent_is_read_from_its_shipped_files_beside_the_run_it_started_from(run):
    from course.adapter_manifest import AGENT_ADAPTER, adapter_dir, check_adapter

    folder = adapter_dir(AGENT_ADAPTER)
    manifest = check_adapter(folder)
    committed = json.loads((folder / "evaluation.json").read_text())
    shown = run.shown_one("agent-run", "manifest-agent")
    assert shown["files"] == manifest["files"] and shown["started_from"]["name"] == "pilot-1000"
    assert manifest["settings"]["mix"] == "code" and manifest["trajectories"] == 480
    assert run.text("agent-run").startswith(
        f"[{COMMITTED}adapters/{AGENT_ADAPTER}/manifest.json)] adapter {manifest['name']}: from "
        "pilot-1000 (1,000 trajectories), then 480 of the code mix, 480 steps")
    assert committed["adapter_sha256"] == manifest["files"]["adapter_model.safetensors"]
    per_family = {(r["model"], r["family"]): r["success"] for r in run.shown_one("agent-run", "per-family-agent")}
    agent = f"+ LoRA {AGENT_ADAPTER}"
    assert [per_family[("base", f)] for f in HELD_OUT_FAMILIES] == [0, 0, 0]
    assert [per_family[("+ LoRA pilot-1000", f)] for f in HELD_OUT_FAMILIES] == [6, 7, 0]
    assert [per_family[(agent, f)] for f in HELD_OUT_FAMILIES] == [
        r["success"] for r in committed["by_family"]]  # the cell's count is the file's
    totals = run.shown_one("agent-run", "totals")
    assert totals == {"base": 0, "+ LoRA pilot-1000": 13, agent: committed["summary"][0]["success"]}
    assert totals[agent] >= 18  # at least 60 % of the 30 held-out tasks
    disagree = run.shown_one("agent-run", "disagree-agent")
    assert disagree["named one source's figure"] == per_family[(agent, "weather")]
    prose = next(c.source for c in run.nb.cells if c.get("id") == "agent-read")
    assert f"{totals[agent]} of the 30 held-out tasks succeed" in prose
    assert per_family[(agent, "debug_list_index")] == 10 and "from none to all ten" in prose
    assert disagree.get("glues the figures of 2 sources") == 1 and "appears once" in prose
    assert all(per_family[(agent, f)] < per_family[("+ LoRA pilot-1000", f)]
               for f in ("weather", "film_vehicle_photo")) and "fewer successes" in prose
