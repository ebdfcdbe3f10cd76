"""The first notebook: environment check, the two model roles, the agent model answers, the probe
model's next-token probabilities, the memory estimate, a bad setting, exercise feedback. The
values of the report, the answer, the probe and the estimate are read from the records the cells
display (``run.record``), not from their printed prose."""

import re
from pathlib import Path

NOTEBOOK = "00_start_here.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_environment_check_passes_in_the_notebook(run):
    report = run.record("doctor")
    assert report["ok"] and report["passed"] == report["required"] > 0, report
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["model"] == statuses["tools adapter"] == "ok", statuses
    assert "checks passed" in run.text("doctor")  # the student reads the same report as text


def test_the_roles_are_stated(run):
    setup = run.text("setup")
    assert re.search(r"^Agent model: SmolLM2-135M-Instruct", setup, re.M)
    assert "probe model: SmolLM2-135M-Instruct (bundled), the same model as the agent" in setup
    roles = run.text("roles")
    assert re.search(r"^agent model: SmolLM2-135M-Instruct", roles, re.M)
    assert re.search(r"^device: cpu, dtype: float32$", roles, re.M)
    assert "server:" not in roles and "problem:" not in roles


def test_the_agent_model_answers_through_langchain(run):
    first = run.record("first-answer")
    assert (first["chat_model"], first["where"]) == ("ChatHuggingFace", "this kernel")
    assert "Paris" in first["answer"]  # measured: "The capital of France is Paris."


def test_the_probe_reads_next_token_probabilities(run):
    top = run.record("probe")
    tokens, probs = top["tokens"], top["probs"]
    assert len(tokens) == len(probs) == 5
    assert probs == sorted(probs, reverse=True) and sum(probs) <= 1.0005
    assert tokens[0] == " Paris" and probs[0] > 0.5  # measured: 0.951


def test_the_memory_estimate(run):
    weights = run.record("memory")
    assert weights["model"] == "SmolLM2-135M-Instruct"
    params = weights["params"] / 1e6
    assert 134 < params < 135.5
    fp32, bf16 = weights["fp32_gb"], weights["bf16_gb"]
    assert abs(fp32 - params * 4e-3) < 0.01 and abs(bf16 - fp32 / 2) < 0.01
    assert weights["placement"] == "cpu, float32"
    assert weights["derived_model"] == "Qwen3-4B-Instruct-2507"
    assert (round(weights["derived_fp32_gb"]), round(weights["derived_bf16_gb"])) == (16, 8)
    assert "Qwen3-4B-Instruct-2507, derived: " in run.text("memory")  # the label the student reads


def test_bad_setting_message_names_the_setting(run):
    text = run.text("bad-setting")
    assert "COURSE_MODEL='nobody/no-such-model'" in text and "Fix:" in text
    assert "back to: SmolLM2-135M-Instruct" in text


def test_exercise_feedback(run):
    assert "[passed] Warm-up: count_words" in run.text("ex0-check")
    assert "[not yet done] An unfinished exercise" in run.text("not-yet-done")


def test_ends_with_summary_and_exercises(run):
    headings = [line for c in run.nb.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("## ")]
    assert headings[-3:] == ["## Summary", "## Quiz", "## Exercises"]


def test_the_quiz_shows_its_questions_and_the_instructor_answers_pass(run):
    shown = run.text("quiz")  # what a front end without widgets shows
    assert shown.startswith("Quiz (4 questions)") and "b) COURSE_MODEL" in shown
    assert run.has_widget("quiz")
    graded = run.text("quiz-check")
    assert "[passed] Quiz" in graded and "q3 right: measured = run here" in graded


def test_the_label_rule_is_the_same_in_readme_and_here(run):
    import re

    rule = re.search(r"\*\*How to read an output\.\*\*.*?carry none\.", run.nb.cells[0].source,
                     re.S)
    assert rule, "00's first cell states the label rule"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    squash = lambda t: " ".join(t.split())  # noqa: E731
    assert squash(rule[0]) in squash(readme)
    assert "labelled *recorded*" not in readme
