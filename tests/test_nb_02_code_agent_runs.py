"""Chapter 02: the hand-written ReAct loop, the note runs replayed through the real CodeAgent,
CodeAgent vs ToolCallingAgent, live runs of the active model, the quiz and the exercises."""

import re

import nbformat
import pytest

from nbharness import NOTEBOOKS, cell_sources

NOTEBOOK = "02_code_agent_runs.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)
MAX_OUTPUT_CHARS = 3000


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
    # interface-live's CodeAgent read the first prompt; these reuse the part all CodeAgent
    # prompts share (smolagents' instructions up to the tool list)
    assert cached["weather"] == cached["bond"] == cached["debug"] > 1500, cached
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
    table = run.text("live-side-by-side")  # each flag names the tool it is about
    assert row(table, "bond, live").endswith(
        "flags=relevant tool never called (image_generator), relevant tool never called "
        "(web_search)"), table
    assert row(table, "weather, live").endswith("flags=relevant tool never called (web_search)")


TUNED = "SmolLM2-135M-Instruct + LoRA smollm2-tools (course/data/adapters)"


def test_the_fine_tuned_model_runs_the_three_tasks_live_beside_the_replays(run):
    """Base + the committed adapter (its manifest checks), bounded, measured, read by the same
    trajectory checks: the format is learnt (every step parses), the judgement is not."""
    plan = run.text("tuned-plan")
    assert f"bounded run of {TUNED}: up to 2 steps, each ending at its first complete code block " \
           "or after 160 new tokens" in plan and f"model: {TUNED}, loaded in this kernel" in plan
    summary = run.text("tuned-side-by-side")
    table = summary.split("\n\n")[0]
    expected_flags = {"weather": "relevant tool never called (web_search)", "bond": "none",
                      "debug": "none"}
    for task, flags in expected_flags.items():
        text = run.text(f"tuned-{task}")
        assert text.startswith(f"{task} [measured] model: {TUNED}"), text
        steps = int(field(text, "steps"))
        assert 1 <= steps <= 2 and text.count("the call ended at its first complete code block") == steps
        assert "AgentParsingError" not in text and "cached_prompt_tokens=0" not in text, text
        assert re.search(r"step_seconds=\d+\.\d", text), text
        # one verdict, three readings: the run's flags, the comparison's row, the summary line
        shown = re.search(r"^flags: (.*)$", text, re.M).group(1)
        labels = re.findall(r"\[([^\]]+)\] run: the task calls for '(\w+)'", shown)
        assert (", ".join(f"{k} ({t})" for k, t in labels) or shown) == flags, (task, shown)
        assert row(table, f"{task}, tuned live").endswith(f"flags={flags}"), table
        line = row(summary, task)
        assert line.startswith(f"{task}: parsed {steps} of {steps} steps;"), line
        assert f"; flags: {flags}; " in line, line
        assert row(table, f"{task}, note") and row(table, f"{task}, live")  # beside the others
    assert "weather: parsed 2 of 2 steps; tools called: none; stopped: step limit (2)" in summary
    bond = row(summary, "bond")  # search, draw, answer: the checks pass it...
    assert "tools called: web_search, image_generator, final_answer; stopped: final_answer" in bond
    assert "answer: an image (AgentImage)" in bond and "answer: an image" in run.text("tuned-bond")
    # ...though the generator got no car: what the checks do not read
    assert ("bond, tuned: searched ['latest car James Bond']; the image generator received "
            "['a car, detailed, high-res']") in summary
    debug = run.text("tuned-debug")  # uses the script's name, never runs it: no flag
    assert "numbers = numbers + 1" in debug and "answer: None" in debug
    assert row(table, "debug, tuned live").endswith("ran the script in step [1, 2]; flags=none")
    cells = [c.id for c in run.nb.cells]
    assert cells.index("going-further") < cells.index("tuned-intro") < cells.index("tuned-read")


# ----- the hand-written loop -----
DUMMY_CELLS = ("dummy-prompt", "dummy-parse", "dummy-loop")
REPLIES = [  # the chapter's cases: the note's replies, the bundled model's, and malformed ones
    'Thought: I need the weather.\nAction: get_weather(city="Rome")\nObservation: sunny',
    "Thought: I know the answer\nFinal Answer: 18 °C", "The weather in Rome is quite hot.",
    "The current weather in Paris is: - Paris: 2023-01-01T00:00:00.000000Z",
    'Action: `web_search("current weather in Paris")`', "Action: get_weather(city=rome)",
    "Action: get_weather(", "Action: tools.get_weather(city='x')", "Action: 42",
    'Final Answer: done\nAction: get_weather(city="Rome")',
    'Action: get_weather("Oslo", units="imperial")\nFinal Answer: too early',
]


@pytest.fixture(scope="module")
def cells_version():
    """The loop as the chapter's cells write it (executed here, without the notebook)."""
    namespace: dict = {}
    sources = cell_sources(NOTEBOOK)
    for cell in DUMMY_CELLS:
        source = sources[cell]
        if cell == "dummy-prompt":  # the cell also prints the prompt for its tools
            source = source.split("\ntools = dummy_tools()")[0]
        if cell == "dummy-parse":  # and parses three examples
            source = source.split("\nfor reply in")[0]
        exec(compile(source, cell, "exec", dont_inherit=True), namespace)
    return namespace


def _outcome(parse, reply):
    from course.agents.dummy_agent import ActionParseError

    try:
        return parse(reply)
    except ActionParseError as err:
        return f"ActionParseError: {err}"


def test_the_cells_and_the_package_are_one_loop(cells_version):
    from course.agents import dummy_agent as package

    tools = package.dummy_tools()
    assert cells_version["system_prompt"](tools) == package.system_prompt(tools)
    assert cells_version["STOP"] == package.STOP == "Observation:"
    for reply in REPLIES:
        cut = package.cut_at_stop(reply, [package.STOP])
        assert cells_version["cut_at_stop"](reply, [package.STOP]) == cut
        assert _outcome(cells_version["parse_reply"], cut) == _outcome(package.parse_reply, cut), reply
    unknown = package.Action("send_email", (), {"to": "x"})
    broken = package.Action("get_weather", (), {"town": "Rome"})  # a TypeError becomes text
    for action in (unknown, broken, package.Action("get_weather", ("Oslo",), {})):
        assert cells_version["call_tool"](action, tools) == package.call_tool(action, tools)
    assert "get_weather failed: TypeError" in package.call_tool(broken, tools)
    scripts = [*(replies for _, _, replies in package.NOTE_REPLIES.values()),
               [REPLIES[0], REPLIES[2]], [REPLIES[0]] * 5]
    for replies in scripts:
        question = "What is the weather in Rome?"
        ours = cells_version["run_dummy_agent"](question, tools, package.scripted_generate(replies))
        theirs = package.run_dummy_agent(question, tools, package.scripted_generate(replies))
        assert str(ours) == str(theirs) and ours.messages == theirs.messages, replies


def test_the_loop_parses_and_runs_the_notes_replies(cells_version):
    from course.agents.dummy_agent import Action, FinalAnswer, scripted_generate

    parse = cells_version["parse_reply"]
    assert parse('Action: get_weather("Oslo", units="imperial")') == Action(
        "get_weather", ("Oslo",), {"units": "imperial"})
    # a final answer before any action wins, and keeps every line after it (an answer may be code)
    assert parse("Final Answer: done\nAction: x()") == FinalAnswer("done\nAction: x()")
    assert parse("Thought: ok\nFinal Answer: 18 °C") == FinalAnswer("18 °C")
    assert "is not a Python call" in _outcome(parse, "Action: get_weather(")
    assert "not a literal" in _outcome(parse, "Action: get_weather(city=rome)")
    assert "not a call like tool" in _outcome(parse, "Action: tools.get_weather(city='x')")
    from course.agents.dummy_agent import NOTE_REPLIES, dummy_tools

    question, _, replies = NOTE_REPLIES["weather"]
    run = cells_version["run_dummy_agent"](question, dummy_tools(), scripted_generate(replies))
    assert run.answer == "Clear sky, around 13-16°C" and run.stopped == "final answer"
    assert "Orbit Mobile Community" in run.steps[0].observation  # the forum, for "current"
    assert "MeteoCity" in run.steps[1].observation and "SkyReport" in run.steps[1].observation
    # the observation goes back as a user message after the model's reply, cut at the stop
    assert run.messages[-1]["content"].startswith("Observation: ## Search Results")
    looping = cells_version["run_dummy_agent"](question, dummy_tools(),
                                               scripted_generate([REPLIES[0]] * 5), max_steps=2)
    assert looping.stopped == "step limit (2)" and len(looping.steps) == 2


def test_the_dummy_agent_cells_show_the_loop_replayed_and_live(run):
    prompt = run.text("dummy-prompt")
    assert "- web_search(query: str) -> str: Search the web" in prompt
    assert 'Action: tool_name(argument="value")' in prompt
    parsed = run.text("dummy-parse")
    assert "Action(name='get_weather', args=(), kwargs={'city': 'Rome'})" in parsed
    assert "FinalAnswer(text='18 °C')" in parsed and "ActionParseError: expected" in parsed
    replay = run.text("dummy-replay")
    assert replay.startswith("[recorded: the two queries and the answer (quoted by note 000); "
                             "reconstructed: the Thought lines")
    assert "stopped: final answer; answer: 'Clear sky, around 13-16°C'" in replay
    ideal = run.text("dummy-ideal")
    assert ideal.startswith("[recorded: note 000's ideal ReAct trajectory")
    assert "the search found the DB5: True" in ideal
    assert "kwargs={'prompt': 'Aston Martin DB5'}" in ideal
    live = run.text("dummy-live")
    assert live.startswith("[measured] model: SmolLM2-135M-Instruct (bundled); N=3 questions, "
                           "3 model calls, 0 with an action or answer the parser read"), live
    assert "stopped: no action to run" in live


# ----- code as the interface -----
def test_code_takes_one_step_where_tool_calls_take_three(run):
    text = run.text("interface-scripted")
    assert text.startswith("[scripted] model outputs written by the course (no LLM)")
    code, calls = row(text, "CodeAgent"), row(text, "ToolCallingAgent")
    assert field(code, "steps") == "1" and field(calls, "steps") == "3", text
    assert field(code, "get_weather_runs") == field(calls, "get_weather_runs") == "6"
    for line in (code, calls):
        assert line.endswith("answer='Madrid: 70 °F, clear sky'"), line
    assert int(field(code, "input_tokens")) < int(field(calls, "input_tokens"))
    assert row(run.text("interface-live"), "CodeAgent")  # one agent per cell, then both
    live = run.text("interface-live-calls")
    assert live.startswith("[measured] model: SmolLM2-135M-Instruct (bundled)")
    for agent in ("CodeAgent", "ToolCallingAgent"):
        line = row(live, agent)
        assert field(line, "steps") == "1" and field(line, "stopped") == "step", line
        assert int(field(line, "input_tokens")) > 500, line
    assert live.count("AgentParsingError") == 2, live


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


def test_the_original_notebooks_misleading_cells_are_shown(run):
    cell7 = run.text("original-cell-7")
    assert "generator received: \"James Bond's car from the latest Bond movie, high-res, photorealistic\"" in cell7
    assert "names a car model ('Aston Martin' or 'DB5'): False" in cell7
    text = run.text("original-text-cell")
    assert "steps that ran the script: none (1 step)" in text
    assert re.search(r"72B cookbook run.*steps that ran the script: \[1, 2\]", text)


def test_the_search_result_count_is_sourced(run):
    text = run.text("search-defaults")
    assert "DuckDuckGoSearchTool: max_results=10 by default" in text
    assert "the offline web_search: max_results=3" in text


def row(table: str, label: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(label + ":"))


def test_checks_flag_exactly_the_note_runs(run):
    text = run.text("checks")
    assert text.startswith("[model outputs reconstructed from note 000; observations computed here]")
    assert run.text("ideal-bond").startswith("[reconstructed: from the note's ideal trajectory")
    assert "weather: answer 'Clear sky, around 13-16°C' -> 1 flag(s)" in text
    assert "[merged contradictions] step 3" in text
    assert "bond: answer" in text and "[relevant tool never called]" in text
    assert "[instruction to run code ignored]" in text
    assert text.count("-> 1 flag(s)") == 3
    assert "flags: none" in run.text("ideal-bond")
    assert "search results named the DB5: True" in run.text("ideal-bond")
    table = run.text("side-by-side")
    assert row(table, "bond, note").endswith("flags=relevant tool never called (web_search)")
    for label in ("bond, 72B reference", "bond, ideal ReAct", "debug, 72B reference"):
        assert row(table, label).endswith("flags=none"), row(table, label)
    for label in ("weather, note", "bond, note", "debug, note"):
        assert not row(table, label).endswith("flags=none"), row(table, label)
    assert "ran the script in step [1, 2]" in row(table, "debug, 72B reference")
    assert field(row(table, "bond, 72B reference"), "outputs") == "reconstructed"
    assert field(row(table, "bond, 72B reference"), "figures") == "recorded"
    assert field(row(table, "weather, note"), "figures") == "recorded/derived"
    assert field(row(run.text("live-side-by-side"), "weather, live"), "outputs") == "measured"


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



def test_the_closing_note_names_cells_that_exist():
    nb = nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4)
    ids = {c.id for c in nb.cells}
    note = next(c for c in nb.cells if c.id == "closing-note")
    assert note.cell_type == "markdown"
    named = set(re.findall(r"`([a-z0-9-]+)`", note.source))
    assert len(named) >= 15 and named <= ids, named - ids


def test_no_output_is_a_wall_and_no_bug_text_remains(run):
    nb = nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4)
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        assert len(run.text(cell.id)) <= MAX_OUTPUT_CHARS, (cell.id, len(run.text(cell.id)))
    assert "measured with as the model" not in run.all_text()


def test_traces_are_explained_with_a_replay_before_the_first_live_widget(run):
    ids = [c.id for c in nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4).cells]
    widgets = [i for i in ids if run.has_widget(i)]
    assert widgets[0] == "weather-stepper", widgets  # a three-step replay whose next button works
    assert ids.index("live-stepper-now") > ids.index("going-further")


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


def test_quiz_and_exercises_pass(run):
    assert "[passed] Quiz" in run.text("quiz-check")
    assert run.text("quiz-check").count(" right: ") == 5
    for n in (1, 2, 3):
        assert "[passed] Exercise" in run.text(f"ex{n}-check"), n


def test_the_fine_tuned_runs_skip_with_a_reason(monkeypatch, tmp_path):
    """Another setting, or an adapter whose manifest does not check: the chapter says why it
    skips the fine-tuned runs; the committed adapter in the default setting runs them."""
    import course.adapter_manifest as manifest
    from course.agents import live

    monkeypatch.delenv("COURSE_MODEL", raising=False)
    assert live.tuned_skip_reason() is None and live.tuned_unavailable() is None
    monkeypatch.setenv("COURSE_MODEL", "http://127.0.0.1:9/v1")
    reason = live.tuned_skip_reason()
    assert reason.startswith("COURSE_MODEL selects OpenAI-compatible server http://127.0.0.1:9/v1")
    assert "unset COURSE_MODEL (or set it to bundled)" in reason
    monkeypatch.setenv("COURSE_MODEL", "bundled+tools")
    assert live.tuned_skip_reason() is None
    (tmp_path / "manifest.json").write_text("{not json")
    monkeypatch.setattr(manifest, "adapter_dir", lambda name=manifest.DEFAULT_ADAPTER: tmp_path)
    reason = live.tuned_skip_reason()
    assert reason.startswith("the fine-tuned model's adapter does not check: ") and "manifest" in reason
    with pytest.raises(RuntimeError, match="the fine-tuned model cannot run"):
        live.run_live_tuned("weather")
