"""The trace format: JSON round trip, clear errors for bad files, conversion from smolagents."""

import json

import pytest

from course.agents.traces import (
    RECORDINGS_DIR,
    Run,
    TraceError,
    TraceStep,
    file_fields,
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


def test_the_writer_and_the_reader_share_one_format():
    """save_run writes exactly the fields the reader checks, of the types it accepts."""
    run = small_run()
    run.steps[0].duration_s = 1.5
    written = run.to_dict()
    run_spec, step_spec = file_fields(Run), file_fields(TraceStep)
    assert set(written) - {"format_version"} == set(run_spec)
    for step in written["steps"]:
        assert set(step) == set(step_spec)
        assert all(isinstance(step[name], types) for name, (types, _) in step_spec.items())
    assert all(isinstance(written[name], types) for name, (types, _) in run_spec.items())
    # required: the fields without a default, and a run's steps
    assert [n for n, (_, required) in run_spec.items() if required] == ["task", "model_id", "steps"]
    assert [n for n, (_, required) in step_spec.items() if required] == ["number"]
    assert step_spec["duration_s"][0] == (int, float, type(None))
    for name in run_spec:  # every field the writer writes is checked by the reader
        with pytest.raises(TraceError, match=f"'{name}'"):
            run_from_json(json.dumps({**written, name: 0.5}))


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
    assert weather.source == "reconstructed"
    assert [s.figures for s in weather.steps] == ["recorded", "derived", "recorded"]
    bond = load_run(RECORDINGS / "bond_note.json")
    assert (bond.steps[0].input_tokens, bond.steps[0].output_tokens) == (2159, 124)
    bond72 = load_run(RECORDINGS / "bond_reference_72b.json")
    assert [s.input_tokens for s in bond72.steps] == [2152, 5475, 10191]
    assert [s.output_tokens for s in bond72.steps] == [73, 164, 247]
    debug72 = load_run(RECORDINGS / "debug_reference_72b.json")
    assert [s.input_tokens for s in debug72.steps] == [2059, 4370, 6885]
    assert [s.output_tokens for s in debug72.steps] == [100, 210, 286]
    assert bond72.source == debug72.source == "reconstructed"
    assert bond72.provenance == ("code reconstructed from the published step descriptions; "
                                 "token figures recorded (published)")


# Which parts of each shipped recording the course wrote, and which figures a source published.
# A figure is "recorded" only if it is one of the published numbers below.
PUBLISHED_FIGURES = {
    "weather_note": {2083, 4100},  # note 000 (and the totals 9528 / 225)
    "bond_note": {2159, 124},
    "debug_note": set(),
    "bond_reference_72b": {2152, 5475, 10191, 73, 164, 247},
    "debug_reference_72b": {2059, 4370, 6885, 100, 210, 286},
    "bond_ideal_react": set(),
}


def test_a_part_written_by_the_course_is_never_labelled_recorded():
    for path in sorted(RECORDINGS.glob("*.json")):
        run = load_run(path)
        # model outputs: "recorded" is not even a valid label for them
        assert run.source in ("measured", "reconstructed", "scripted"), path.name
        if path.stem not in PUBLISHED_FIGURES:
            assert run.source == "measured" and all(s.figures == "measured" for s in run.steps)
            continue
        assert run.source == "reconstructed", path.name  # no source published their code
        assert "reconstructed" in run.provenance and "recorded" not in run.provenance.split(";")[0]
        published = PUBLISHED_FIGURES[path.stem]
        for step in run.steps:
            figures = {v for v in (step.input_tokens, step.output_tokens) if v is not None}
            if step.figures == "recorded":
                assert figures and figures <= published, (path.name, step.number, figures)
            else:  # a figure the course computed or wrote must not hide among published ones
                assert not (figures - published) or step.figures == "derived", (
                    path.name, step.number, step.figures)
    weather = load_run(RECORDINGS / "weather_note.json")
    assert weather.steps[1].input_tokens == 9528 - 2083 - 4100 and weather.steps[1].figures == "derived"


def test_old_or_unknown_labels_are_refused():
    data = load_run(RECORDINGS / "bond_note.json").to_dict()
    data["source"] = "recorded"  # model outputs are never "recorded" here
    with pytest.raises(TraceError, match="field 'source'"):
        Run.from_dict(data)


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


@pytest.mark.parametrize("name, content, message", [
    ("latin1.json", b'{"task": "caf\xe9"}', r"latin1\.json: not UTF-8 text \(byte 0xe9"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, r"deep\.json: the JSON is nested too deeply"),
    ("digits.json", b'{"task": "t", "model_id": "m", "steps": [], "total_input_tokens_reported": '
     + b"9" * 5000 + b"}", r"digits\.json: the JSON holds a value that cannot be read"),
    ("cut.json", b'{"task": "t", "model_id": ', r"cut\.json: not valid JSON"),
    ("list.json", b"[1, 2]", r"list\.json: the trace must be a JSON object"),
])
def test_hostile_trace_files_give_a_trace_error_naming_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_run(path)


def test_a_lone_surrogate_title_and_a_long_trace_still_plot():
    from matplotlib.ticker import MaxNLocator

    from course.agents.traces import prompt_tokens_figure
    from course.drawing import figure_png

    steps = [TraceStep(i, input_tokens=1000 + i, figures="measured") for i in range(1, 20_001)]
    run = Run("t", "m", steps, title="bad \udc80 title")
    fig = prompt_tokens_figure([run], title=run.title)
    assert isinstance(fig.axes[0].xaxis.get_major_locator(), MaxNLocator)
    assert len(fig.axes[0].get_xticks()) < 20  # not one tick per step
    assert figure_png(fig).startswith(b"\x89PNG")

