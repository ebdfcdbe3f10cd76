"""The first notebook: environment check, the two model roles, the agent model answers, the probe
model's next-token probabilities, the memory estimate, a bad setting, exercise feedback."""

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
    text = run.text("first-answer")
    assert re.search(r"^chat model: ChatHuggingFace at this kernel$", text, re.M)
    answer = re.search(r"^answer: (.+)$", text, re.M)
    assert answer and "Paris" in answer[1]  # measured: "The capital of France is Paris."


def test_the_probe_reads_next_token_probabilities(run):
    rows = re.findall(r"next token +'(.*)' +p = ([01]\.\d{3})", run.text("probe"))
    assert len(rows) == 5
    probs = [float(p) for _, p in rows]
    assert probs == sorted(probs, reverse=True) and sum(probs) <= 1.0005
    assert rows[0][0] == " Paris" and probs[0] > 0.5  # measured: 0.951


def test_the_memory_estimate(run):
    text = run.text("memory")
    params = float(re.search(r"SmolLM2-135M-Instruct: ([\d.]+) M parameters", text)[1])
    assert 134 < params < 135.5
    fp32, bf16 = map(float, re.search(
        r"weights in float32: ([\d.]+) GB; in bfloat16: ([\d.]+) GB", text).groups())
    assert abs(fp32 - params * 4e-3) < 0.01 and abs(bf16 - fp32 / 2) < 0.01
    assert "this kernel loads on: cpu, float32" in text
    assert "Qwen3-4B-Instruct-2507, derived: 16 GB in float32, 8 GB in bfloat16" in text


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
