"""The trace format is a run's spans: a Run read from them, saved and loaded as OTLP JSON, the
shipped recordings in it (labelled recorded) with the values they had, clear errors for bad files."""

import json

import pytest

from course.agents.traces import (
    RECORDINGS_DIR,
    Run,
    TraceError,
    TraceStep,
    load_run,
    run_from_spans,
    save_run,
    spans_from_run,
    split_thought_and_code,
    tool_calls_in_code,
)
from course.tools.calls import ToolCall
from course.tools.spans import capture, load_spans

RECORDINGS = RECORDINGS_DIR
BEFORE = json.loads((RECORDINGS.parents[2] / "tests" / "fixtures" /
                     "recorded_replays.json").read_text(encoding="utf-8"))
"""The recordings' values and their replays, taken from the course's old trace JSON files just
before they were converted to OTLP JSON (scripts/convert_recordings.py)."""


def small_run() -> Run:
    return Run(task="t", model_id="m", tools=["web_search"], steps=[
        TraceStep(1, thought="search", code='print(web_search(query="x"))',
                  tool_calls=[ToolCall("web_search", {"query": "x"})], input_tokens=10,
                  output_tokens=3, duration_s=1.5, observation="results: x"),
        TraceStep(2, code='final_answer("y")', input_tokens=20, output_tokens=4,
                  tool_calls=[ToolCall("final_answer", {"_0": "y"})], is_final_answer=True,
                  figures="recorded"),
    ], final_answer="y", title="small", notes="n", additional_args={"code": "a\nb"})


def as_read(run: Run) -> dict:
    """``run``'s values as its spans give them back: a step written as a thought and code has
    the model output they make (what a replay returns)."""
    data = run.to_dict()
    for step, output in zip(data["steps"], run.model_outputs(), strict=True):
        if step["thought"] or step["code"]:
            step["model_output"] = output
    return data


def test_round_trip_through_otlp_json(tmp_path):
    run = small_run()
    path = save_run(run, tmp_path / "r.json")
    assert "resourceSpans" in json.loads(path.read_text(encoding="utf-8"))  # OTLP JSON
    loaded = load_run(path)
    assert loaded.to_dict() == as_read(run)
    assert loaded.total_input_tokens == 30 and loaded.cumulative_input_tokens == [10, 30]
    assert loaded.tool_names_called() == ["web_search", "final_answer"]
    assert loaded.steps[0].duration_s == 1.5 and loaded.steps[1].duration_s is None
    # a run read from spans keeps them: saving it again writes the same spans
    again = load_run(save_run(loaded, tmp_path / "again.json"))
    assert again.to_dict() == loaded.to_dict()
    assert len(loaded.spans) == len(again.spans) == 1 + 2 * 2 + 2  # agent, steps+LLM, 2 tools


def test_a_written_run_has_openinference_kinds_and_its_labels():
    spans = spans_from_run(small_run(), provenance="recorded")
    kinds = [dict(s.attributes)["openinference.span.kind"] for s in spans]
    assert sorted(kinds) == ["AGENT", "CHAIN", "CHAIN", "LLM", "LLM", "TOOL", "TOOL"]
    assert {dict(s.attributes)["course.provenance"] for s in spans} == {"recorded"}
    (search,) = spans.tool_calls("web_search")
    assert json.loads(dict(search.attributes)["course.tool.arguments"]) == {"query": "x"}
    llm = [dict(s.attributes) for s in spans.llm_calls]
    assert [(a["course.step"], a["llm.token_count.prompt"], a["course.token_figures"])
            for a in llm] == [(1, 10, "measured"), (2, 20, "recorded")]


def test_errors_native_calls_and_measured_prompts_survive_the_spans():
    run = Run("t", "m", tools=["get_weather"], measured_with="a tokenizer", steps=[
        TraceStep(1, tool_calls=[ToolCall("get_weather", {"city": "Oslo"}),
                                 ToolCall("get_weather", {"city": "Rome"})],
                  thought='[{"name": "get_weather"}]', model_output='[{"name": "get_weather"}]',
                  measured_input_tokens=900,
                  measured_output_tokens=12, qwen_input_tokens=950),
        TraceStep(2, error="AgentExecutionError: Code execution failed: boom",
                  figures="reconstructed"),
    ])
    back = run_from_spans(spans_from_run(run))
    assert back.to_dict() == run.to_dict()


def test_every_shipped_recording_is_otlp_json_labelled_recorded():
    names = {p.stem for p in RECORDINGS.glob("*.json")}
    assert names == set(BEFORE)
    for path in RECORDINGS.glob("*.json"):
        spans = load_spans(path)
        assert {dict(s.attributes)["course.provenance"] for s in spans} == {"recorded"}, path
        assert len(spans.agents) == 1 and load_run(path).steps


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_a_converted_recording_holds_the_values_it_had(name):
    before = BEFORE[name]["recording"]
    run = load_run(RECORDINGS / f"{name}.json")
    assert run.model_outputs() == before["model_outputs"]  # what a replay returns
    data = run.to_dict()
    for key, value in before.items():
        if key == "steps":
            assert [{k: s[k] for k in value[0]} for s in data["steps"]] == value
        elif key != "model_outputs":
            assert data[key] == value, key


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


def test_unknown_labels_are_refused_by_name():
    run = load_run(RECORDINGS / "bond_note.json")
    run.source = "recorded"  # model outputs are never "recorded" here
    with pytest.raises(TraceError, match=r"'course\.outputs' is 'recorded'"):
        run_from_spans(spans_from_run(run))
    run = small_run()
    run.steps[0].figures = "guessed"
    with pytest.raises(TraceError, match=r"'course\.token_figures' is 'guessed'"):
        run_from_spans(spans_from_run(run))


def test_debug_script_is_the_published_one():
    script = load_run(RECORDINGS / "debug_note.json").additional_args["code"]
    assert script.splitlines()[0] == "numbers=[0, 1, 2]"
    assert "for i in range(4):\n    print(numbers(i))" in script


def test_tool_calls_are_read_from_the_syntax_tree():
    code = 'x = "web_search(query=1)"\nr = web_search(query="paris")\nimage_generator(prompt=r)'
    calls = tool_calls_in_code(code, ["web_search", "image_generator"])
    assert [c.name for c in calls] == ["web_search", "image_generator"]
    assert calls[0].arguments == {"query": "paris"} and calls[1].arguments == {"prompt": "<r>"}
    assert tool_calls_in_code("def (", ["web_search"]) == []


def test_split_thought_and_code():
    assert split_thought_and_code("Thought: go\n<code>\nprint(1)\n</code>") == ("go", "print(1)")
    assert split_thought_and_code("no code here") == ("no code here", "")


def test_a_real_smolagents_run_reads_the_same_from_its_spans_as_from_its_memory():
    from smolagents import CodeAgent
    from smolagents.models import ChatMessage, MessageRole, Model
    from smolagents.monitoring import TokenUsage

    class TwoSteps(Model):  # scripted: the lesson here is the reading, not the model
        def __init__(self, **kw):
            super().__init__(**kw)
            self.outputs = ["Thought: a\n<code>\nprint(6 * 7)\n</code>",
                            "Thought: b\n<code>\nfinal_answer(42)\n</code>"]

        def generate(self, messages, **kw):
            return ChatMessage(role=MessageRole.ASSISTANT, content=self.outputs.pop(0),
                               token_usage=TokenUsage(input_tokens=100, output_tokens=7))

    agent = CodeAgent(tools=[], model=TwoSteps(model_id="scripted"), max_steps=3,
                      verbosity_level=-1)
    with capture(provenance="scripted") as spans:
        agent.run("compute")
    run = run_from_spans(spans)
    assert run.task == "compute" and run.model_id == "scripted" and run.final_answer == "42"
    assert [s.code for s in run.steps] == ["print(6 * 7)", "final_answer(42)"]
    assert "42" in run.steps[0].observation and run.steps[1].is_final_answer
    assert run.total_input_tokens == 200 and run.steps[0].figures == "measured"
    assert run.source == "scripted"
    assert [s.output_tokens for s in run.steps] == [7, 7]
    assert [[c.name for c in s.tool_calls] for s in run.steps] == [[], ["final_answer"]]


@pytest.mark.parametrize("name, content, message", [
    ("latin1.json", b'{"task": "caf\xe9"}', r"latin1\.json: not UTF-8 text \(byte 0xe9"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, r"deep\.json: .*recursion"),
    ("digits.json", b'{"resourceSpans": [], "x": ' + b"9" * 5000 + b"}",
     r"digits\.json: .*digits"),
    ("cut.json", b'{"resourceSpans": [', r"cut\.json: not OTLP JSON trace data"),
    ("list.json", b"[1, 2]", r"list\.json: not OTLP JSON trace data \(the top level is a JSON list"),
    ("empty.json", b'{"resourceSpans": []}', r"empty\.json: the spans hold no AGENT span"),
])
def test_hostile_trace_files_give_a_trace_error_naming_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_run(path)
    with pytest.raises(TraceError, match="no such trace file"):
        load_run(tmp_path / "missing.json")


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
