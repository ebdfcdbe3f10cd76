"""The first notebook: environment check, the model answers, a bad setting, exercise feedback."""

import re

NOTEBOOK = "00_start_here.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_environment_check_passes_in_the_notebook(run):
    passed = re.search(r"(\d+) of (\d+) checks passed", run.text("doctor"))
    assert passed and passed[1] == passed[2], run.text("doctor")


def test_the_bundled_model_is_active_and_answers(run):
    assert "SmolLM2-135M-Instruct" in run.text("setup")
    answer = [line for line in run.text("first-answer").splitlines() if line.strip()]
    assert answer[0].startswith("loaded from ") and len(answer) >= 2 and answer[1].strip()


def test_bad_setting_message_names_the_setting(run):
    text = run.text("bad-setting")
    assert "COURSE_MODEL='nobody/no-such-model'" in text and "Fix:" in text


def test_exercise_feedback(run):
    assert "[passed] Warm-up: count_words" in run.text("ex0-check")
    assert "[not yet done] An unfinished exercise" in run.text("not-yet-done")
