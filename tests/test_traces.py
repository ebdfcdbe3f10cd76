"""The trace format: JSON round trip, clear errors for bad files, conversion from smolagents."""

import json

import pytest

from course.agents.traces import (
    RECORDINGS_DIR,
    Run,
    TraceError,
    TraceStep,
    load_run,
    run_from_json,
    run_from_smolagents,
    save_run,
    split_thought_and_code,
    tool_calls_in_code,
)
from course.tools.calls import ToolCall

RECORDINGS = RECORDINGS_DIR


def small_run() -> Run:
    return Run(task="t", model_id="m", tools=["web_search"], steps=[
        TraceStep(1, thought="search", code='print(web_search(query="x"))',
             tool_calls=[ToolCall("web_search", {"query": "x"})], input_tokens=10, output_tokens=3),
        TraceStep(2, code='final_answer("y")', input_tokens=20, output_tokens=4, is_final_answer=True),
    ], final_answer="y")


def test_round_trip(tmp_path):
    run = small_run()
    loaded = load_run(save_run(run, tmp_path / "r.json"))
    assert loaded == run
    assert loaded.total_input_tokens == 30 and loaded.cumulative_input_tokens == [10, 30]
    assert loaded.tool_names_called() == ["web_search"]


def test_every_shipped_recording_loads():
    names = {p.stem for p in RECORDINGS.glob("*.json")}
    assert {"weather_note", "bond_note", "debug_note", "bond_reference_72b",
            "debug_reference_72b", "bond_ideal_react"} <= names
    for path in RECORDINGS.glob("*.json"):
        assert load_run(path).steps


def test_note_figures_are_in_the_recordings():
    weather = load_run(RECORDINGS / "weather_note.json")
    assert (weather.total_input_tokens, weather.total_output_tokens) == (9528, 225)
    assert [s.input_tokens for s in weather.steps] == [2083, 3345, 4100]
    assert weather.source == "reconstructed from the note"
    bond = load_run(RECORDINGS / "bond_note.json")
    assert (bond.steps[0].input_tokens, bond.steps[0].output_tokens) == (2159, 124)
    bond72 = load_run(RECORDINGS / "bond_reference_72b.json")
    assert [s.input_tokens for s in bond72.steps] == [2152, 5475, 10191]
    assert [s.output_tokens for s in bond72.steps] == [73, 164, 247]
    debug72 = load_run(RECORDINGS / "debug_reference_72b.json")
    assert [s.input_tokens for s in debug72.steps] == [2059, 4370, 6885]
    assert [s.output_tokens for s in debug72.steps] == [100, 210, 286]
    assert bond72.source == debug72.source == "recorded"


def test_debug_script_is_the_published_one():
    script = load_run(RECORDINGS / "debug_note.json").additional_args["code"]
    assert script.splitlines()[0] == "numbers=[0, 1, 2]"
    assert "for i in range(4):\n    print(numbers(i))" in script


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("task"), "'task'"),
    (lambda d: d["steps"][1].update(input_tokens="many"), "steps[1].input_tokens"),
    (lambda d: d["steps"][0].update(number=5), "steps[0].number"),
    (lambda d: d["steps"][0].update(figures="guessed"), "steps[0].figures"),
    (lambda d: d["steps"][0]["tool_calls"][0].pop("name"), "steps[0].tool_calls[0].name"),
    (lambda d: d.update(steps={"a": 1}), "'steps'"),
    (lambda d: d["steps"][0].update(colour="red"), "colour"),
    (lambda d: d["steps"][1].update(output_tokens=-3), "steps[1].output_tokens"),
])
def test_bad_field_is_named(mutate, field):
    data = small_run().to_dict()
    mutate(data)
    with pytest.raises(TraceError, match=field.replace("[", r"\[").replace("]", r"\]")):
        run_from_json(json.dumps(data))


def test_truncated_file_names_the_file(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(small_run().to_dict())[:80])
    with pytest.raises(TraceError, match=r"cut\.json: not valid JSON.*truncated"):
        load_run(path)
    with pytest.raises(TraceError, match="no such trace file"):
        load_run(tmp_path / "missing.json")
    with pytest.raises(TraceError, match="must be a JSON object"):
        run_from_json("[1, 2]")


def test_tool_calls_are_read_from_the_syntax_tree():
    code = 'x = "web_search(query=1)"\nr = web_search(query="paris")\nimage_generator(prompt=r)'
    calls = tool_calls_in_code(code, ["web_search", "image_generator"])
    assert [c.name for c in calls] == ["web_search", "image_generator"]
    assert calls[0].arguments == {"query": "paris"} and calls[1].arguments == {"prompt": "<r>"}
    assert tool_calls_in_code("def (", ["web_search"]) == []


def test_split_thought_and_code():
    assert split_thought_and_code("Thought: go\n<code>\nprint(1)\n</code>") == ("go", "print(1)")
    assert split_thought_and_code("no code here") == ("no code here", "")


def test_conversion_from_a_real_smolagents_run():
    from smolagents import CodeAgent
    from smolagents.models import ChatMessage, MessageRole, Model
    from smolagents.monitoring import TokenUsage

    class TwoSteps(Model):  # scripted: the lesson here is the conversion, not the model
        def __init__(self, **kw):
            super().__init__(**kw)
            self.outputs = ["Thought: a\n<code>\nprint(6 * 7)\n</code>",
                            "Thought: b\n<code>\nfinal_answer(42)\n</code>"]

        def generate(self, messages, **kw):
            return ChatMessage(role=MessageRole.ASSISTANT, content=self.outputs.pop(0),
                               token_usage=TokenUsage(input_tokens=100, output_tokens=7))

    agent = CodeAgent(tools=[], model=TwoSteps(model_id="scripted"), max_steps=3, verbosity_level=-1)
    agent.run("compute")
    run = run_from_smolagents(agent)
    assert run.task == "compute" and run.model_id == "scripted" and run.final_answer == "42"
    assert [s.code for s in run.steps] == ["print(6 * 7)", "final_answer(42)"]
    assert "42" in run.steps[0].observation and run.steps[1].is_final_answer
    assert run.total_input_tokens == 200 and run.steps[0].figures == "measured"

