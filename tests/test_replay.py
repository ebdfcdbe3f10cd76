"""Replays run through the real CodeAgent and executor; measured prompts grow every step."""

import itertools
import json
import re

import pytest
from smolagents.models import ChatMessage, MessageRole

from course.agents.replay import ReplayExhausted, ReplayModel, replay_run
from course.agents.traces import RECORDINGS_DIR, Run, TraceError, TraceStep, load_run


def test_weather_replay_takes_three_steps_and_glues_the_sources(replays):
    weather = replays["weather_note"]
    assert len(weather.trace.steps) == 3
    assert weather.answer == "Clear sky, around 13-16°C" == weather.trace.final_answer
    queries = [c["query"] for c in weather.tools["web_search"].calls]
    assert queries == ["current weather in Paris", "current weather in Paris, France"]
    first, second = (s.observation for s in weather.trace.steps[:2])
    assert "Orbit Mobile Community" in first and "weather" not in first.lower().split("current")[0]
    assert "13 °C, partly cloudy" in second and "clear sky, +16°" in second


def test_bond_replay_draws_once_and_never_searches(replays):
    bond = replays["bond_note"]
    assert len(bond.trace.steps) == 1
    assert bond.tools["web_search"].calls == []
    (call,) = bond.tools["image_generator"].calls
    assert call["prompt"].startswith("James Bond's car from the latest Bond movie, high-res, photorealistic")
    assert bond.trace.final_answer.startswith("<image 512x320")


def test_debug_replay_passes_the_script_and_never_runs_it(replays):
    debug = replays["debug_note"]
    assert debug.agent.state["code"].startswith("numbers=[0, 1, 2]")  # additional_args reached the executor
    assert len(debug.trace.steps) == 1 and debug.trace.steps[0].error is None
    assert "numbers[i]" in debug.answer and "range(len(numbers))" in debug.answer
    assert "0\n1\n2" not in debug.trace.steps[0].observation  # nothing printed the list


def test_72b_debug_reference_fails_then_fixes_for_real(replays):
    ref = replays["debug_reference_72b"]
    assert len(ref.trace.steps) == 3
    assert "IndexError" in ref.trace.steps[0].error and ref.trace.steps[1].error is None
    assert "0\n1\n2" in ref.trace.steps[1].observation


def test_measured_prompts_grow_and_sit_beside_recorded(replays):
    for name, replay in replays.items():
        measured = [s.measured_input_tokens for s in replay.trace.steps]
        assert all(isinstance(m, int) and m > 1000 for m in measured), name
        assert all(b > a for a, b in itertools.pairwise(measured)), name
    weather = replays["weather_note"]
    assert [s.input_tokens for s in weather.trace.steps] == [2083, 3345, 4100]
    table = weather.token_table()
    assert "code reconstructed" in table and "measured" in table and "9528" in table
    assert re.search(r"step 2: input=3345 \[derived\]", table)
    assert re.search(r"step 1: input=2083 \[recorded\]", table)


def test_replay_model_cuts_at_stop_sequences_and_runs_out_clearly():
    model = ReplayModel(["Thought: x\n<code>\nprint(1)\n</code>"])
    message = model.generate([ChatMessage(role=MessageRole.USER, content="hi")], stop_sequences=["</code>"])
    assert message.content == "Thought: x\n<code>\nprint(1)\n"
    with pytest.raises(ReplayExhausted, match="has 1 model output"):
        model.generate([], stop_sequences=None)
    with pytest.raises(ValueError, match="non-empty"):
        ReplayModel([])


def test_replay_rejects_bad_input():
    with pytest.raises(TypeError, match=r"course\.agents\.traces\.Run"):
        replay_run({"task": "x"})
    with pytest.raises(TraceError, match="'steps' is empty"):
        replay_run(Run("t", "m", []))


def test_replay_without_tokenizer_measures_nothing():
    run = Run("t", "m", [TraceStep(1, thought="done", code="final_answer(3)", is_final_answer=True)])
    replay = replay_run(run, tokenizer=None)
    assert replay.answer == 3 and replay.trace.steps[0].measured_input_tokens is None


# ----- the offline tools -----
def test_search_interface_and_naive_ranking():
    from course.agents.offline_tools import OfflineWebSearchTool, load_corpus

    tool = OfflineWebSearchTool()
    assert (tool.name, tool.inputs["query"]["type"], tool.output_type) == ("web_search", "string", "string")
    first = tool("current weather in Paris")
    assert first.startswith("## Search Results\n\n[") and first.count("Orbit Mobile Community") == 3
    titles = [p.title for p in tool.search("current weather in Paris, France")]
    assert "MeteoCity" in titles[0] and "SkyReport" in titles[1]
    assert any("Aston Martin DB5" in p.description for p in tool.search("car James Bond latest movie"))
    assert tool.calls == [{"query": "current weather in Paris"}]
    with pytest.raises(Exception, match="No results found"):
        tool("zzzz qqqq")
    with pytest.raises(ValueError, match="non-empty"):
        tool("  ")
    assert len(load_corpus()) >= 8


def test_bad_corpus_names_the_field(tmp_path):
    from course.agents.offline_tools import load_corpus

    path = tmp_path / "c.json"
    path.write_text('{"pages": [{"title": "t", "link": "l"}]}')
    with pytest.raises(ValueError, match=r"pages\[0\]\.description"):
        load_corpus(path)


def test_image_tool_draws_a_real_png(tmp_path):
    from PIL import Image

    from course.agents.offline_tools import OfflineImageTool, make_tools

    tool = OfflineImageTool(out_dir=tmp_path)
    image = tool("Aston Martin DB5")
    (call,) = tool.calls
    with Image.open(call["path"]) as saved:
        assert saved.format == "PNG" and saved.size == image.size == (512, 320)
    assert call["prompt"] == "Aston Martin DB5"
    assert [t.name for t in make_tools(["web_search", "text_to_image"])] == ["web_search", "text_to_image"]
    with pytest.raises(ValueError, match="no tool named"):
        make_tools(["calculator"])
    with pytest.raises(ValueError, match="non-empty prompt"):
        tool("")


def test_a_live_run_is_bounded_by_its_plan_and_measured():
    from course.agents.live import LivePlan, run_live

    outputs = ["Thought: search.\n<code>\nprint(web_search(query='current weather in Paris'))\n</code>",
               "Thought: again.\n<code>\nprint(web_search(query='current weather in Paris'))\n</code>",
               "Thought: done.\n<code>\nfinal_answer('sunny')\n</code>"]
    model = ReplayModel(outputs, model_id="scripted stand-in for the agent model")
    live = run_live("weather", LivePlan(1, 48, "test plan"), model=model)
    assert model.position == 1  # one model call: no extra "final answer" call after the limit
    assert live.stopped == "step limit (1)" and live.answer is None and len(live.trace.steps) == 1
    assert live.trace.source == "measured" and live.trace.steps[0].figures == "measured"
    assert live.trace.tool_names_called() == ["web_search"]
    assert "steps=1 stopped=step limit (1)" in str(live)
    record = live.record()  # what the chapter's tests read
    assert (record["steps"], record["stopped"], record["tools_called"]) == (1, "step limit (1)", ["web_search"])
    model = ReplayModel(outputs, model_id="scripted stand-in for the agent model")
    full = run_live("weather", LivePlan(6, 48, "test plan"), model=model)
    assert full.stopped == "final_answer" and full.answer == "sunny" and len(full.trace.steps) == 3
    with pytest.raises(ValueError, match="unknown task"):
        run_live("poem", LivePlan(1, 1, ""), model=model)


def test_first_code_block_end_finds_the_first_complete_block():
    from course.agents.live import first_code_block_end

    assert first_code_block_end("Thought: x\n<code>\nprint(1)\n</code> more") == len("Thought: x\n<code>\nprint(1)\n</code>")
    fenced = "Here:\n\n```python\nprint(1)\n```"
    assert first_code_block_end(fenced + "\ntrailing") == len(fenced)
    assert first_code_block_end("```python\ndef f(a, b") is None  # the block never closed
    assert first_code_block_end("The weather in Paris is quite unique.</code>") is None


# ----- the recordings, converted to OTLP JSON, replay as the old JSON files did -----
_BEFORE = json.loads((RECORDINGS_DIR.parents[2] / "tests" / "fixtures" /
                      "recorded_replays.json").read_text(encoding="utf-8"))
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+>")


@pytest.mark.parametrize("name", sorted(_BEFORE))
def test_a_converted_recording_replays_to_the_same_steps_outputs_and_figures(name):
    """The fixture holds each replay of the old JSON recordings, made just before they were
    converted (scripts/convert_recordings.py): the same steps, code, tool calls, observations
    (an image's memory address aside), errors, recorded figures with their labels, answer."""
    before = _BEFORE[name]["replay"]
    replay = replay_run(load_run(RECORDINGS_DIR / f"{name}.json"), tokenizer=None, qwen=None)
    data = replay.trace.to_dict()
    for key, value in before.items():
        if key != "steps":
            assert data[key] == value, key
    steps = [{**{k: s[k] for k in before["steps"][0]},
              "observation": _ADDRESS.sub(" at 0x…>", s["observation"])} for s in data["steps"]]
    assert steps == before["steps"]
    assert {dict(s.attributes)["course.provenance"] for s in replay.spans} == {"recorded"}
