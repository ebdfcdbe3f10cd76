"""Chapter 02: the hand-written ReAct loop, the note runs replayed through the real CodeAgent,
CodeAgent vs ToolCallingAgent, live runs of the active model, the quiz and the exercises."""

import re

import nbformat
import pytest

from course.adapter_manifest import AGENT_ADAPTER
from nbharness import NOTEBOOKS, cell_sources

NOTEBOOK = "02_code_agent_runs.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)
MAX_OUTPUT_CHARS = 3000


def test_live_runs_of_the_three_tasks_are_measured_and_read_by_the_checks(run):
    assert "short bounded run" in run.text("live-plan")  # the default setting: the bundled model
    plan = run.shown_one("live-plan", "plan")
    assert (plan["max_steps"], plan["max_new_tokens"], plan["first_block"]) == (1, 64, True), plan
    cached = {}
    for task in ("weather", "bond", "debug"):
        live = run.record(f"live-{task}")
        assert live["name"] == task and live["model"] == "SmolLM2-135M-Instruct (bundled)", live
        assert live["steps"] == 1, live  # one model call, as the plan says
        assert live["stopped"] == "step limit (1)" and live["answer"] == "None", live
        assert live["seconds"] > 0 and live["step_records"][0]["seconds"] > 0, live
        assert live["input_tokens"] > 2000  # smolagents' real prompt re-read
        assert 0 < live["output_tokens"] <= 64, live
        cached[task] = live["cached_prompt_tokens"]
    # the live CodeAgent of the interface comparison read the first prompt; these reuse the part
    # all CodeAgent prompts share (smolagents' instructions up to the tool list)
    assert cached["weather"] == cached["bond"] == cached["debug"] > 1500, cached
    for task, tool in (("weather", "web_search"), ("bond", "image_generator")):
        live = run.record(f"live-{task}")
        assert live["step_records"][0]["error"].startswith("AgentParsingError"), live
        assert f"relevant tool never called ({tool})" in live["flags"], live
    debug = run.record("live-debug")  # it runs a copy of the script, bugs and all: no check fires
    assert debug["step_records"][0]["ended"] == "its first complete code block", debug
    code = debug["step_records"][0]["code"]
    assert "range(4)" in code and "numbers(i)" in code, code
    assert debug["step_records"][0]["error"].startswith("AgentExecutionError") and debug["flags"] == []
    assert run.has_widget("live-stepper-now")
    rows = {r["run"]: r for r in run.record("live-side-by-side")["rows"]}  # each flag names its tool
    assert rows["bond, live"]["flags"] == ["relevant tool never called (image_generator)",
                                           "relevant tool never called (web_search)"], rows
    assert rows["weather, live"]["flags"] == ["relevant tool never called (web_search)"]
    assert rows["weather, live"]["outputs"] == "measured"


TUNED = "SmolLM2-135M-Instruct + LoRA smollm2-agent (course/data/adapters)"


def test_the_taught_agent_runs_the_three_tasks_live_beside_the_replays(run):
    """Base + the taught agent's adapter (its manifest checks), bounded, measured, with the prompt
    it was taught with, read by the trajectory checks and the answer checks: it fixes the note's
    script, and the checks name how the other two fail."""
    assert f"bounded run of {TUNED}: " in run.text("tuned-plan")  # what the student reads first
    plan = run.shown_one("tuned-plan", "plan")
    assert (plan["max_steps"], plan["max_new_tokens"]) == (3, 160), plan
    assert plan["first_block"] and run.shown_one("tuned-plan", "model") == TUNED, plan
    default, compact = run.shown_one("tuned-plan", "prompt tokens")
    assert compact < 500 < 2000 < default, (default, compact)
    summary = run.shown("tuned-side-by-side")  # {key: [value]}
    rows = {r["run"]: r for r in run.shown_one("tuned-side-by-side", "comparison")}  # the note's, live and tuned runs
    expected = {"weather": ([], "no final answer"),
                "bond": (["relevant tool never called (image_generator)",
                          "relevant tool never called (web_search)"], "no final answer"),
                "debug": ([], "passes")}
    for task, (flags, answer_check) in expected.items():
        tuned = run.record(f"tuned-{task}")
        assert tuned["name"] == task and tuned["model"] == TUNED, tuned
        steps = tuned["steps"]
        assert steps == 3 and tuned["parsed_steps"] == steps, tuned  # every step parses
        assert [step["ended"] for step in tuned["step_records"]] == ["its first complete code block"] * steps
        assert tuned["cached_prompt_tokens"] > 0, tuned
        assert all(step["seconds"] > 0 for step in tuned["step_records"]), tuned
        assert 300 < tuned["input_tokens"] / steps < 1500, tuned  # the compact prompt, not smolagents'
        # one verdict, three readings: the run's flags, the comparison's row, the summary line
        assert tuned["flags"] == flags, (task, tuned["flags"])
        assert rows[f"{task}, tuned live"]["flags"] == flags, rows
        assert summary[task] == [{"flags": flags, "answer check": answer_check}], summary
        assert f"{task}, note" in rows and f"{task}, live" in rows  # beside the others
    weather, bond, debug = (run.record(f"tuned-{task}") for task in ("weather", "bond", "debug"))
    assert weather["tools_called"] == ["web_search"] * 3 and weather["stopped"] == "step limit (3)"
    searched = run.shown_one("tuned-side-by-side", "weather, tuned")
    assert len(searched) == 3 and len(set(searched)) == 1, searched  # the same query, three times
    assert bond["tools_called"] == [] and bond["stopped"] == "step limit (3)", bond
    assert all("input(" in step["code"] for step in bond["step_records"]), bond
    # debug: run as it is, the list called; fixed, read past its end; fixed, run and returned
    errors = [step["error"] or "" for step in debug["step_records"]]
    assert "'list' object is not callable" in errors[0] and "out of range" in errors[1] and not errors[2]
    assert debug["stopped"] == "final_answer" and "range(len(numbers))" in debug["answer"], debug
    assert rows["debug, tuned live"]["script runs"] == [1, 2, 3], rows
    # the rates of the committed held-out evaluation, read from its file
    families = {r["family"]: r for r in run.shown_one("tuned-heldout", "held-out")}
    assert [families[f]["tasks"] for f in ("weather", "film_vehicle_photo", "debug_list_index")] == [10, 10, 10]
    assert sum(r["success"] for r in families.values()) >= 18, families  # the aim, 60 %
    assert families["debug_list_index"]["success"] == 10, families
    disagree = run.shown_one("tuned-heldout", "disagree")
    assert disagree["tasks"] == 10 and disagree["named one source's figure"] == families["weather"]["success"]
    assert disagree["glues the figures of 2 sources"] == 1, disagree
    # the lookup tasks again, the first search missing: read from its file, stated in the prose
    miss = run.shown_one("tuned-heldout", "search misses")
    assert miss["tasks"] == 20 and miss["searched again"] <= miss["searched"] <= 20, miss
    assert "(20 lookup tasks, at most 4 steps each)" in run.text("tuned-heldout")
    prose = " ".join(next(c.source for c in run.nb.cells if c.get("id") == "tuned-read").split())
    succeeded = [families[f]["success"] for f in ("debug_list_index", "weather", "film_vehicle_photo")]
    assert "all {} are fixed. Weather: {} of 10 succeed; the film car: {} of 10".format(*succeeded) in prose
    named, no_figure = disagree["named one source's figure"], disagree["names no source's temperature"]
    assert f"{named} answers name one source's figure, {no_figure} name no temperature" in prose
    assert f"{disagree['no final answer']} runs never answer" in prose
    assert (f"searches again in {miss['searched again']} of 20 tasks, but with another query in only "
            f"{miss['with another query']}") in prose
    assert f"still succeeds in {miss['succeeded']} of 10; the film car in none" in prose
    cells = [c.id for c in run.nb.cells]
    assert cells.index("going-further") < cells.index("tuned-intro") < cells.index("tuned-heldout") < cells.index("tuned-read")


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
    # another parser plugs into both loops the same way (exercise 1 gives one for JSON actions)
    upper = lambda reply: package.FinalAnswer(reply.upper())  # noqa: E731
    ours = cells_version["run_dummy_agent"]("q", tools, package.scripted_generate(["ok"]), parse=upper)
    theirs = package.run_dummy_agent("q", tools, package.scripted_generate(["ok"]), parse=upper)
    assert ours.answer == theirs.answer == "OK"


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
    parsed = run.shown("dummy-parse")["parsed"]
    assert parsed[:2] == [{"name": "get_weather", "args": [], "kwargs": {"city": "Rome"}},
                          {"text": "18 °C"}], parsed
    assert parsed[2].startswith("expected a line 'Action: tool(arg=...)'"), parsed
    assert "Action(name='get_weather', args=(), kwargs={'city': 'Rome'})" in run.text("dummy-parse")
    assert "ActionParseError: expected" in run.text("dummy-parse")  # the error the student reads
    assert run.text("dummy-replay").startswith(
        "[recorded: the two queries and the answer (quoted by note 000); reconstructed: the Thought lines")
    replay = run.record("dummy-replay")
    assert replay["stopped"] == "final answer" and replay["answer"] == "Clear sky, around 13-16°C"
    assert [s["parsed"]["kwargs"] for s in replay["steps"][:2]] == [
        {"query": "current weather in Paris"}, {"query": "current weather in Paris, France"}]
    assert run.text("dummy-ideal").startswith("[reconstructed (from the note): the ideal ReAct trajectory")
    assert run.shown("dummy-ideal") == {"DB5": [True]}
    ideal = next(r for r in run.records("dummy-ideal") if "steps" in r)
    assert [s["parsed"] for s in ideal["steps"]] == [
        {"action": "web_search", "args": [], "kwargs": {"query": "car James Bond latest movie"}},
        {"action": "text_to_image", "args": [], "kwargs": {"prompt": "Aston Martin DB5"}},
        {"final_answer": "<image>"}]
    assert run.text("dummy-live").startswith("[measured] model: SmolLM2-135M-Instruct (bundled); ")
    live = run.shown_one("dummy-live", "live")
    assert live == [3, 3, 0], live  # questions, model calls, with an action or answer parsed
    first = next(r for r in run.records("dummy-live") if "steps" in r)
    assert first["stopped"] == "no action to run" and first["steps"][0]["parsed"] is None, first


# ----- code as the interface -----
def test_code_takes_one_step_where_tool_calls_take_three(run):
    pair = run.record("interface-scripted")
    assert pair["label"].startswith("[scripted] model outputs written by the course (no LLM)")
    code, calls = pair["runs"]["CodeAgent"], pair["runs"]["ToolCallingAgent"]
    assert code["steps"] == 1 and calls["steps"] == 3, pair
    assert code["get_weather_runs"] == calls["get_weather_runs"] == 6
    assert code["answer"] == calls["answer"] == "Madrid: 70 °F, clear sky"
    assert code["input_tokens"] < calls["input_tokens"]
    assert list(run.record("interface-live")["runs"]) == ["CodeAgent"]  # one agent per cell
    live = run.record("interface-live-calls")
    assert live["label"].startswith("[measured] model: SmolLM2-135M-Instruct (bundled)")
    for agent in ("CodeAgent", "ToolCallingAgent"):
        one = live["runs"][agent]
        assert one["steps"] == 1 and one["stopped"] == "step limit (1)", one
        assert one["input_tokens"] > 500, one
        assert one["errors"][0].startswith("AgentParsingError"), one


def test_recordings_are_listed_with_their_provenance(run):
    steps, provenance = run.shown_one("recordings", "weather_note")
    assert steps == 3, provenance
    assert "token figures recorded (published) (step 1, 3) and derived (step 2)" in provenance
    bond = run.shown_one("recordings", "bond_reference_72b")
    assert ("code reconstructed from the published step descriptions; token figures recorded "
            "(published)") in bond[1], bond
    assert "9528 input and 225 output tokens" in run.text("weather-recording")  # the note's words
    assert "--- step 1: code [reconstructed]" in run.text("weather-recording")
    one, two = (run.shown_one("weather-recording", f"step {n}") for n in (1, 2))
    assert (one["input_tokens"], one["figures"]) == (2083, "recorded"), one
    assert (two["input_tokens"], two["figures"]) == (3345, "derived"), two


def test_weather_replay_three_steps_glued_answer(run):
    assert run.text("weather-replay").startswith("[reconstructed] steps: ")
    replay = run.shown("weather-replay")
    assert replay["steps"] == [3] and replay["answer"] == ["Clear sky, around 13-16°C"], replay
    (first, first_titles), (second, second_titles) = replay["web_search"]
    assert (first, second) == ("current weather in Paris", "current weather in Paris, France")
    assert sum("Orbit Mobile Community" in t for t in first_titles) == 3, first_titles
    assert any("MeteoCity" in t for t in second_titles) and any("SkyReport" in t for t in second_titles)


def test_bond_replay_draws_once_never_searches(run):
    assert run.shown_one("bond-replay", "calls") == [1, 0]  # image_generator, web_search
    assert run.shown_one("bond-replay", "prompt") == (
        "James Bond's car from the latest Bond movie, high-res, photorealistic")
    assert run.shown_one("bond-replay", "car") is False  # names a car model? The original's cell 7
    assert run.has_image("bond-image")


def test_debug_replay_never_runs_the_script(run):
    text = run.text("debug-replay")  # the script and the answer, as code the student reads
    assert "numbers=[0, 1, 2]" in text
    assert "range(len(numbers))" in text and "numbers[i]" in text
    debug = run.shown("debug-replay")
    assert debug == {"steps": [1], "runs": ["none"]}, debug
    original = run.shown_one("debug-what-running-shows", "original")
    assert isinstance(original, str) and "not callable" in original, original  # fails
    assert run.shown_one("debug-what-running-shows", "fixed") == ["0", "1", "2"]  # what it prints


def test_the_original_notebooks_text_cell_is_read_against_the_traces(run):
    runs = run.shown("reference-runs")
    assert runs["note run"] == [[]] and runs["72B run"] == [[1, 2]], runs


def test_the_search_result_count_is_sourced(run):
    assert run.shown_one("weather-tokens", "max_results") == [10, 3]  # DuckDuckGoSearchTool, ours


def test_checks_flag_exactly_the_note_runs(run):
    assert run.text("checks").startswith(
        "[model outputs reconstructed from note 000; observations computed here]")
    verdicts = {v["run"]: v for v in run.records("checks")}
    assert list(verdicts) == ["weather", "bond", "debug"]
    assert verdicts["weather"]["answer"] == "Clear sky, around 13-16°C"
    flags = {name: [(f["check"], f["step"], f["subject"]) for f in v["flags"]]
             for name, v in verdicts.items()}
    assert flags == {"weather": [("merged contradictions", 3, None)],
                     "bond": [("relevant tool never called", None, "web_search")],
                     "debug": [("instruction to run code ignored", 1, None)]}, flags
    ideal = run.text("ideal-bond")
    assert ideal.startswith("[reconstructed (from the note)]"), ideal
    assert run.shown("ideal-bond") == {"DB5": [True]}
    ideal_verdict = next(r for r in run.records("ideal-bond") if "flags" in r)
    assert ideal_verdict["run"] == "ideal" and ideal_verdict["flags"] == [], ideal_verdict
    rows = {r["run"]: r for r in run.record("side-by-side")["rows"]}
    assert rows["bond, note"]["flags"] == ["relevant tool never called (web_search)"]
    for label in ("bond, 72B reference", "bond, ideal ReAct", "debug, 72B reference"):
        assert rows[label]["flags"] == [], rows[label]
    for label in ("weather, note", "bond, note", "debug, note"):
        assert rows[label]["flags"], rows[label]
    assert rows["debug, 72B reference"]["script runs"] == [1, 2]
    assert rows["bond, 72B reference"]["outputs"] == "reconstructed"
    assert rows["bond, 72B reference"]["figures"] == "recorded"
    assert rows["bond, ideal ReAct"]["outputs"] == "reconstructed"
    assert rows["weather, note"]["figures"] == "recorded/derived"


def test_reference_runs_show_recorded_and_measured(run):
    text = run.text("reference-runs")
    bond, debug = (run.shown_one("reference-runs", f"{task} (published reference, Qwen2.5-72B)")
                   for task in ("James Bond's car", "Debug a script"))
    for steps, published, last in ((bond, 2152, 10191), (debug, 2059, 6885)):
        # step 1 of each 72B run, counted here with the Qwen3 tokenizer
        assert steps[0]["input"] == published and steps[0]["figures"] == "recorded", steps
        assert abs(steps[0]["qwen prompt"] - published) <= 60, (published, steps[0])
        assert steps[2]["step"] == 3 and steps[2]["input"] == last, steps
        assert steps[2]["figures"] == "recorded", steps
    assert "code reconstructed from the published step descriptions" in text  # the label
    assert "IndexError" in text  # the 72B run's error, as the student reads it


def test_qwen_tokenizer_counts_step_one_like_the_note(run):
    steps = run.shown_one("weather-tokens", "tokens")
    qwen, recorded = steps[0]["qwen prompt"], steps[0]["input"]
    assert recorded == 2083 and abs(qwen - recorded) <= 10, (qwen, recorded)
    assert "step 1: Qwen3 tokenizer" in run.text("weather-tokens")  # the line that compares them
    assert [s["figures"] for s in steps] == ["recorded", "derived", "recorded"]
    smol = [s["measured prompt"] for s in steps]
    qwen_all = [s["qwen prompt"] for s in steps]
    assert all(a > b for a, b in zip(smol, qwen_all, strict=True))  # SmolLM2 needs more tokens
    assert qwen_all == sorted(qwen_all)


def test_measured_prompt_grows_every_step(run):
    assert run.has_image("prompt-growth")
    sizes = run.shown("prompt-growth")["step"]
    assert "tokens [measured" in run.text("prompt-growth")  # each size says it was measured
    assert len(sizes) == 3 and sizes[0] < sizes[1] < sizes[2]



NOTE_TABLE = [  # note 000, "What changed", translated row by row
    "| Who decides the steps | the program | the model, one step | the model, repeatedly |",
    "| Side effects | none | possible | likely |",
    "| State | the prompt | the prompt + one result | accumulates, saved in checkpoints, trimmed |",
    "| Cost | fixed | one extra generation | unbounded without budgets |",
    "| Predictability | high | medium | low |",
    "| What to evaluate | retrieval + answer | correctness of the call + answer | the trajectory, "
    "success, cost |",
]
REFERENCES = ["S. Yao, J. Zhao, D. Yu, N. Du, I. Shafran, K. Narasimhan, Y. Cao. ReAct",
              "T. Schick et al. Toolformer", "Y. Qin et al. Tool Learning with Foundation Models",
              "X. Wang et al. Executable Code Actions Elicit Better LLM Agents",
              "K. Greshake, S. Abdelnabi, S. Mishra, C. Endres, T. Holz, M. Fritz. Not what",
              "Hugging Face. smolagents documentation"]


def test_the_notes_table_and_references_are_shown_whole():
    sources = cell_sources(NOTEBOOK)
    rows = [line for line in sources["framing"].splitlines() if line.startswith("| ")]
    assert rows[0] == "| | Pipeline (RAG) | Tool use | Agent |" and rows[1:] == NOTE_TABLE, rows
    text = " ".join(sources["summary"].split())
    found = [text.find(ref) for ref in REFERENCES]
    assert -1 not in found and found == sorted(found), dict(zip(REFERENCES, found, strict=True))


def test_the_ideal_bond_trajectory_has_one_label():
    """Written by the course from the note's lines: reconstructed (from the note), everywhere."""
    from course.agents.dummy_agent import NOTE_REPLIES
    from course.agents.traces import RECORDINGS_DIR, load_run

    label = "reconstructed (from the note)"
    recording = load_run(RECORDINGS_DIR / "bond_ideal_react.json")
    assert recording.source == "reconstructed" and recording.source_detail == "(from the note)"
    assert recording.provenance.startswith(f"code {label};")
    assert NOTE_REPLIES["ideal_bond"][1].startswith(label)
    sources = cell_sources(NOTEBOOK)
    about_ideal = [cid for cid, text in sources.items()
                   if "ideal" in text.lower() and cid not in ("quiz", "ex5-answer")]
    for cid in about_ideal:
        words = " ".join(sources[cid].split())
        assert not re.search(r"ideal[^.]*\b(recorded|scripted)\b", words, re.I), cid


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
    for cell in ("weather-stepper", "reference-stepper", "live-stepper-now"):
        assert run.has_widget(cell), cell
    assert "step 1 of 3 [code: reconstructed; figures: recorded]" in run.text("weather-stepper")


def test_a_live_trace_round_trips(run):
    text = run.text("live-run")
    assert "model outputs measured (a model ran); token figures measured" in text
    assert run.shown("live-run") == {"round trip": [True]}


def test_quiz_and_exercises_pass(run):
    assert "[passed] Quiz" in run.text("quiz-check")
    assert run.text("quiz-check").count(" right: ") == 5
    for n in (1, 2, 3, 4):
        assert f"[passed] Exercise {n}" in run.text(f"ex{n}-check"), n


def test_the_fine_tuned_runs_skip_with_a_reason(monkeypatch, tmp_path):
    """Another setting, or an adapter whose manifest does not check: the chapter says why it
    skips the fine-tuned runs; the committed adapter in the default setting runs them."""
    import course.adapter_manifest as manifest
    from course.agents import live

    monkeypatch.delenv("COURSE_MODEL", raising=False)
    assert live.tuned_skip_reason() is None and live.tuned_unavailable() is None
    assert live.tuned_skip_reason(AGENT_ADAPTER) is None  # the taught agent chapter 02 runs
    assert "no-such-adapter/manifest.json: cannot read it" in live.tuned_unavailable("no-such-adapter")
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


def test_a_dummy_run_says_its_steps_to_a_machine():
    from course.agents.dummy_agent import (
        NOTE_REPLIES,
        dummy_tools,
        run_dummy_agent,
        scripted_generate,
    )

    question, _, replies = NOTE_REPLIES["weather"]
    record = run_dummy_agent(question, dummy_tools(), scripted_generate(replies)).record()
    assert record["stopped"] == "final answer" and record["answer"] == "Clear sky, around 13-16°C"
    assert record["steps"][0]["parsed"] == {"action": "web_search", "args": [],
                                            "kwargs": {"query": "current weather in Paris"}}
    assert record["steps"][2]["parsed"] == {"final_answer": "Clear sky, around 13-16°C"}
