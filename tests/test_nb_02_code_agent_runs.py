"""Chapter 02: the three note runs replayed through the real CodeAgent, their traces and checks."""

import re

NOTEBOOK = "02_code_agent_runs.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_recordings_are_listed_with_their_labels(run):
    text = run.text("recordings")
    assert re.search(r"weather_note\s+3 step\(s\)\s+\[reconstructed from the note\]", text)
    assert re.search(r"bond_reference_72b\s+3 step\(s\)\s+\[recorded\]", text)
    assert "9528 input and 225 output tokens" in run.text("weather-recording")


def test_weather_replay_three_steps_glued_answer(run):
    text = run.text("weather-replay")
    assert "[reconstructed from the note] steps: 3" in text
    assert "final answer: Clear sky, around 13-16°C" in text
    search = run.text("weather-search")
    first, second = search.split("web_search('current weather in Paris, France'):")
    assert first.count("Orbit Mobile Community") == 3
    assert "MeteoCity" in second and "SkyReport" in second


def test_bond_replay_draws_once_never_searches(run):
    text = run.text("bond-replay")
    assert "image_generator calls: 1; web_search calls: 0" in text
    assert "the generator received: James Bond's car from the latest Bond movie, high-res, photorealistic" in text
    assert run.has_image("bond-image")


def test_debug_replay_never_runs_the_script(run):
    assert "numbers=[0, 1, 2]" in run.text("debug-replay")
    text = run.text("debug-answer")
    assert "steps: 1" in text and "steps whose code executed the script: none" in text
    assert "range(len(numbers))" in text and "numbers[i]" in text
    shows = run.text("debug-what-running-shows")
    assert "original:" in shows and "not callable" in shows
    assert "fixed: runs, prints ['0', '1', '2']" in shows


def test_checks_flag_exactly_the_note_runs(run):
    text = run.text("checks")
    assert "weather: answer 'Clear sky, around 13-16°C' -> 1 flag(s)" in text
    assert "[merged contradictions] step 3" in text
    assert "bond: answer" in text and "[relevant tool never called]" in text
    assert "[instruction to run code ignored]" in text
    assert text.count("-> 1 flag(s)") == 3
    assert "flags: none" in run.text("ideal-bond")
    assert "search results named the DB5: True" in run.text("ideal-bond")
    table = run.text("side-by-side")
    for label in ("bond, 72B reference", "bond, ideal ReAct", "debug, 72B reference"):
        line = next(row for row in table.splitlines() if row.startswith(label))
        assert line.endswith("no flags"), line
    assert "ran script in step [1, 2]" in table


def test_reference_runs_show_recorded_and_measured(run):
    text = run.text("reference-runs")
    assert "input (recorded)" in text and "prompt (measured here)" in text
    assert "10191" in text and "6885" in text
    assert "IndexError" in text


def test_measured_prompt_grows_every_step(run):
    assert run.has_image("prompt-growth")
    sizes = [int(n) for n in re.findall(r"step \d: prompt (\d+) tokens \[measured\]", run.text("prompt-parts"))]
    assert len(sizes) == 3 and sizes[0] < sizes[1] < sizes[2]
    note = run.text("closing-note")
    assert note.count("prompt (measured here)") == 6 and "2083" in note and "9528" in note


def test_steppers_render_as_widgets(run):
    for cell in ("weather-stepper", "bond-stepper", "debug-stepper", "ideal-stepper",
                 "reference-stepper", "live-stepper"):
        assert run.has_widget(cell), cell
    assert "step 1 of 3" in run.text("weather-stepper")


def test_bad_trace_files_give_clear_errors(run):
    text = run.text("bad-trace")
    assert "truncated.json: not valid JSON" in text
    assert "field 'steps[1].input_tokens' must be" in text


def test_live_cell_is_labelled_measured(run):
    text = run.text("live-run")
    assert "[measured]" in text and "SmolLM2-135M" in text


def test_exercises_pass(run):
    for n in (1, 2, 3):
        assert "[passed] Exercise" in run.text(f"ex{n}-check"), n
