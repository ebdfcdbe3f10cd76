"""Chapter 02: live runs of the active model, the note runs replayed through the real CodeAgent."""

import re

NOTEBOOK = "02_code_agent_runs.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def field(text: str, name: str) -> str:
    return re.search(rf"\b{name}=(\S+)", text).group(1)


def test_live_runs_of_the_three_tasks_are_measured_and_read_by_the_checks(run):
    assert "short bounded run" in run.text("live-plan")  # the default setting: the bundled model
    assert "ending at its first code block or after 64 new tokens" in run.text("live-plan")
    cached = {}
    for task in ("weather", "bond", "debug"):
        text = run.text(f"live-{task}")
        assert f"{task} [measured] model: SmolLM2-135M-Instruct (bundled)" in text, text
        assert int(field(text, "steps")) == 1, text  # one model call, as the plan says
        assert field(text, "stopped") == "step" and "answer: None" in text, text  # step limit (1)
        assert float(field(text, "seconds")) > 0
        assert re.search(r"step_seconds=\d+\.\d", text), text
        assert int(field(text, "input_tokens")) > 2000  # smolagents' real prompt re-read
        assert 0 < int(field(text, "output_tokens")) <= 64, text
        cached[task] = int(field(text, "cached_prompt_tokens"))
    # the first prompt is computed; the others reuse the prefix all three share (up to the tools)
    assert cached["weather"] == 0 and cached["bond"] == cached["debug"] > 1500, cached
    for task, tool in (("weather", "web_search"), ("bond", "image_generator")):
        text = run.text(f"live-{task}")
        assert "AgentParsingError" in text, text
        assert f"[relevant tool never called] run: the task calls for '{tool}'" in text, text
    debug = run.text("live-debug")  # it runs a copy of the script, bugs and all: no check fires
    assert "the call ended at its first complete code block" in debug, debug
    code = re.search(r"code run: (.*)", debug).group(1)
    assert "range(4)" in code and "numbers(i)" in code, code
    assert "error: AgentExecutionError" in debug and "flags: none" in debug, debug
    assert run.has_widget("live-stepper-now")


def test_recordings_are_listed_with_their_provenance(run):
    text = run.text("recordings")
    assert re.search(r"weather_note: steps=3", text)
    assert ("code reconstructed from the published step descriptions; token figures recorded "
            "(published)") in text
    assert "token figures recorded (published) (step 1, 3) and derived (step 2)" in text
    recording = run.text("weather-recording")
    assert "9528 input and 225 output tokens" in recording
    assert re.search(r"step 2: code \[reconstructed\], input tokens 3345 \[derived\]", recording)
    assert re.search(r"step 1: code \[reconstructed\], input tokens 2083 \[recorded\]", recording)


def test_weather_replay_three_steps_glued_answer(run):
    text = run.text("weather-replay")
    assert "[reconstructed] steps: 3" in text
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


def row(table: str, label: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(label + ":"))


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
        assert row(table, label).endswith("flags=none"), row(table, label)
    for label in ("weather, note", "bond, note", "debug, note"):
        assert not row(table, label).endswith("flags=none"), row(table, label)
    assert "ran the script in step [1, 2]" in row(table, "debug, 72B reference")
    assert field(row(table, "bond, 72B reference"), "outputs") == "reconstructed"
    assert field(row(table, "bond, 72B reference"), "figures") == "recorded"
    assert field(row(table, "weather, note"), "figures") == "recorded/derived"
    assert field(row(table, "weather, live"), "outputs") == "measured"


def test_reference_runs_show_recorded_and_measured(run):
    text = run.text("reference-runs")
    for published in (2152, 2059):  # step 1 of each 72B run, counted here with the Qwen3 tokenizer
        step1 = re.search(rf"step 1: input={published} \[recorded\].*qwen_prompt=(\d+)", text)
        assert abs(int(step1.group(1)) - published) <= 60, (published, step1.group(1))
    assert "code reconstructed from the published step descriptions" in text
    assert re.search(r"step 3: input=10191 \[recorded\]", text)
    assert re.search(r"step 3: input=6885 \[recorded\]", text)
    assert "IndexError" in text


def test_qwen_tokenizer_counts_step_one_like_the_note(run):
    text = run.text("weather-tokens")
    qwen, recorded = map(int, re.search(r"step 1: Qwen3 tokenizer (\d+) vs recorded (\d+)", text).groups())
    assert recorded == 2083 and abs(qwen - recorded) <= 10, (qwen, recorded)
    steps = re.findall(r"step (\d): input=(\S+) \[(\w+)\].*prompt=(\d+) .*qwen_prompt=(\d+)", text)
    assert [s[2] for s in steps] == ["recorded", "derived", "recorded"]
    smol = [int(s[3]) for s in steps]
    qwen_all = [int(s[4]) for s in steps]
    assert all(a > b for a, b in zip(smol, qwen_all, strict=True))  # SmolLM2 needs more tokens
    assert qwen_all == sorted(qwen_all)


def test_measured_prompt_grows_every_step(run):
    assert run.has_image("prompt-growth")
    sizes = [int(n) for n in re.findall(r"step \d: prompt (\d+) tokens \[measured", run.text("prompt-parts"))]
    assert len(sizes) == 3 and sizes[0] < sizes[1] < sizes[2]
    note = run.text("closing-note")
    assert "2083" in note and "9528" in note and note.count("qwen_prompt=") >= 12


def test_steppers_render_as_widgets(run):
    for cell in ("weather-stepper", "bond-stepper", "debug-stepper", "ideal-stepper",
                 "reference-stepper", "live-stepper-now"):
        assert run.has_widget(cell), cell
    assert "step 1 of 3 [code: reconstructed; figures: recorded]" in run.text("weather-stepper")


def test_bad_trace_files_give_clear_errors(run):
    text = run.text("bad-trace")
    assert "truncated.json: not valid JSON" in text
    assert "field 'steps[1].input_tokens' must be" in text


def test_a_live_trace_round_trips(run):
    text = run.text("live-run")
    assert "model outputs measured (a model ran); token figures measured" in text
    assert "same trace after the round trip: True" in text


def test_exercises_pass(run):
    for n in (1, 2, 3):
        assert "[passed] Exercise" in run.text(f"ex{n}-check"), n
