"""Agent runs as OpenTelemetry spans: the note's weather replay through OpenInference's
instrumentation and an in-memory exporter, its OTLP JSON file, and the door's verdicts."""

import dataclasses
import json

import pytest
from opentelemetry import trace as trace_api

from course.agents.replay import ReplayModel, local_tokenizer, replay_run
from course.agents.traces import RECORDINGS_DIR, load_run
from course.phoenix import PHOENIX_URL
from course.tools import spans as spans_module
from course.tools.spans import (
    OTLP_HTTP_PACKAGE,
    PHOENIX_LOCAL,
    PROVENANCE_LABELS,
    capture,
    door_verdict,
    instrument,
    load_spans,
    otlp_target,
    send_spans,
    spans_from_otlp_json,
    uninstrument,
)


@pytest.fixture(scope="module", autouse=True)
def instrumentation():
    """The instrumentation is process-wide and on by default: some tests here switch it off, so
    it is switched on again after this module."""
    yield
    instrument()


@pytest.mark.parametrize("first_import", ["course.tools.graph", "course.agents.traces"])
def test_spans_are_on_by_default_in_a_new_process(first_import):
    """Importing chapter 01's package (lesson 01's graphs) or the agent package (which imports
    it) is enough: smolagents and LangChain runs then emit spans through the course's provider,
    with no capture around them."""
    import subprocess
    import sys

    code = f"""
import {first_import}
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from langchain_core.runnables import RunnableLambda
from course.tools.spans import add_span_processor
print(SmolagentsInstrumentor().is_instrumented_by_opentelemetry,
      LangChainInstrumentor().is_instrumented_by_opentelemetry)
exporter = InMemorySpanExporter()
add_span_processor(SimpleSpanProcessor(exporter))
RunnableLambda(lambda x: x + 1, name="add_one").invoke(1)
print([s.name for s in exporter.get_finished_spans()])
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.splitlines() == ["True True", "['add_one']"], done.stderr[-2000:]


def test_a_replay_without_a_capture_has_the_spans_of_the_issue_check():
    """The note's weather replay, as a lesson runs it (no capture in the lesson): an AGENT
    span, an LLM span per step with its token counts, the two web_search TOOL spans with
    their queries; the replay's trace is read from them."""
    replay = replay_run(load_run(RECORDINGS_DIR / "weather_note.json"), tokenizer=None,
                        qwen=None)
    spans = replay.spans
    assert len(spans.agents) == 1 and len(spans.llm_calls) >= 3
    assert [(attrs(s)["llm.token_count.prompt"], attrs(s)["course.token_figures"])
            for s in spans.llm_calls] == [(2083, "recorded"), (3345, "derived"), (4100, "recorded")]
    queries = [json.loads(attrs(s)["course.tool.arguments"])["query"]
               for s in spans.tool_calls("web_search")]
    assert queries == ["current weather in Paris", "current weather in Paris, France"]
    assert replay.trace.spans is spans and len(replay.trace.steps) == len(spans.llm_calls)


@pytest.fixture(scope="module")
def weather():
    run = load_run(RECORDINGS_DIR / "weather_note.json")
    with capture(recording=run) as spans:
        replay = replay_run(run)
    return run, replay, spans


def attrs(span):
    return dict(span.attributes or {})


def test_the_weather_replay_is_one_agent_three_llm_calls_and_two_searches(weather):
    run, replay, spans = weather
    (agent,) = spans.agents
    assert agent.name == "CodeAgent.run" and agent.parent is None
    assert {s.context.trace_id for s in spans} == {agent.context.trace_id}
    steps = spans.kind("CHAIN")
    assert [s.name for s in steps] == ["Step 1", "Step 2", "Step 3"]
    assert all(spans.parent(s) is agent for s in steps)

    llm = spans.llm_calls
    assert len(llm) == 3
    assert [spans.parent(s).name for s in llm] == ["Step 1", "Step 2", "Step 3"]
    assert [attrs(s)["course.step"] for s in llm] == [1, 2, 3]
    # the recording's figures, labelled as the recording labels them
    assert [attrs(s)["llm.token_count.prompt"] for s in llm] == [2083, 3345, 4100]
    assert [attrs(s)["course.token_figures"] for s in llm] == ["recorded", "derived", "recorded"]
    assert all("llm.token_count.completion" not in attrs(s) for s in llm)  # none was published
    # what the replay's model counted, beside them: the replay's own measured prompts
    assert [attrs(s)["course.measured.prompt_tokens"] for s in llm] == \
        [step.measured_input_tokens for step in replay.trace.steps]
    assert [attrs(s)["course.measured.completion_tokens"] for s in llm] == \
        [step.measured_output_tokens for step in replay.trace.steps]
    assert all(attrs(s)["llm.model_name"] == run.model_id for s in llm)

    searches = spans.tool_calls("web_search")
    assert len(searches) == 2
    assert [json.loads(attrs(s)["course.tool.arguments"]) for s in searches] == [
        {"query": "current weather in Paris"}, {"query": "current weather in Paris, France"}]
    assert [s.name for s in searches] == ["web_search", "web_search"]
    assert [spans.parent(s).name for s in searches] == ["Step 1", "Step 2"]
    assert [(attrs(s)["course.door.verdict"], attrs(s)["course.door.status"])
            for s in searches] == [("allowed", "ok")] * 2
    assert "13 °C, partly cloudy" in attrs(searches[1])["output.value"]
    # behind the door, the tool object itself ran once per call
    inner = [s for s in spans.kind("TOOL") if s.name == "OfflineWebSearchTool"]
    assert [spans.parent(s) for s in inner] == searches

    (final,) = spans.tool_calls("final_answer")
    assert json.loads(attrs(final)["course.tool.arguments"]) == {"answer": replay.answer}

    a = attrs(agent)
    assert (a["course.provenance"], a["course.outputs"], a["course.token_figures"]) == (
        "recorded", "reconstructed", "recorded")
    assert (a["llm.token_count.prompt"], a["llm.token_count.completion"],
            a["llm.token_count.total"]) == (9528, 225, 9753)
    assert {attrs(s)["course.provenance"] for s in spans} == {"recorded"}
    assert len(spans) == 1 + 3 + 3 + 2 + 2 + 1  # agent, steps, llm, searches, inner, final


def test_the_tree_reads_as_the_run(weather):
    tree = weather[2].tree().splitlines()
    assert tree[0] == "CodeAgent.run [AGENT] tokens 9528 in / 225 out (recorded)"
    assert tree[2] == "    ReplayModel.generate [LLM] tokens 2083 in / - out (recorded)"
    assert tree[3] == ('    web_search [TOOL] {"query": "current weather in Paris"} '
                       "door: allowed")


def test_otlp_json_round_trip_keeps_spans_names_and_parents(weather, tmp_path):
    spans = weather[2]
    path = spans.save(tmp_path / "weather.otlp.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    (otlp_span, *_) = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(otlp_span["traceId"]) == 32 and len(otlp_span["spanId"]) == 16
    int(otlp_span["traceId"], 16)  # hex, as OTLP/JSON writes ids
    assert isinstance(otlp_span["kind"], int)

    back = load_spans(path)
    assert len(back) == len(spans) == 12
    assert [s.name for s in back] == [s.name for s in spans]
    assert [(s.context.span_id, s.parent.span_id if s.parent else None) for s in back] == \
        [(s.context.span_id, s.parent.span_id if s.parent else None) for s in spans]
    assert [back.parent(s).name if back.parent(s) else None for s in back] == \
        [spans.parent(s).name if spans.parent(s) else None for s in spans]
    assert [attrs(s) for s in back.llm_calls] == [attrs(s) for s in spans.llm_calls]
    assert back.tree() == spans.tree()
    assert back.to_otlp_json() == spans.to_otlp_json()


def test_bad_otlp_json_names_the_problem(tmp_path):
    with pytest.raises(ValueError, match="not OTLP JSON"):
        spans_from_otlp_json('{"resourceSpans": 3}')
    path = tmp_path / "bad.json"
    path.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}')
    with pytest.raises(ValueError, match=r"bad\.json: .*not hex"):
        load_spans(path)


def test_a_scripted_run_through_the_door_shows_its_refusal():
    from smolagents import CodeAgent

    from course.agents.offline_tools import make_tools
    from course.tools.for_libraries import smolagents_door

    outputs = ["Thought: search.\n<code>\nprint(web_search(query=3))\n</code>",
               "Thought: done.\n<code>\nfinal_answer('unknown')\n</code>"]
    model = ReplayModel(outputs, model_id="scripted", tokenizer=local_tokenizer())
    uninstrument()  # the agent and its tools are made with nothing instrumented
    agent = CodeAgent(tools=smolagents_door(make_tools(["web_search"])), model=model,
                      max_steps=2, verbosity_level=-1)
    with capture(provenance="scripted") as spans:
        assert agent.run("weather?") == "unknown"
    (search,) = spans.tool_calls("web_search")
    a = attrs(search)
    assert (a["course.door.verdict"], a["course.door.status"]) == ("refused", "invalid_arguments")
    assert json.loads(a["course.tool.arguments"]) == {"query": 3}
    assert "NOT run" in a["output.value"]
    assert spans.children(search) == []  # the door refused: the tool object never ran
    assert {attrs(s)["course.provenance"] for s in spans} == {"scripted"}
    assert [attrs(s)["course.token_figures"] for s in spans.llm_calls] == ["measured"] * 2
    prompts = [attrs(s)["llm.token_count.prompt"] for s in spans.llm_calls]
    assert prompts == model.prompt_tokens and prompts[1] > prompts[0] > 1000


def test_a_langchain_tool_on_the_gateway_carries_needs_confirmation():
    from course.tools.for_libraries import langchain_tools
    from course.tools.gateway import ToolGateway
    from course.tools.registry import ToolRegistry

    registry = ToolRegistry()

    def delete_account(user_id: str) -> str:
        """Delete a user's account."""
        return f"deleted {user_id}"

    registry.register(delete_account, risk="critical")
    gateway = ToolGateway(registry, grants={"agent": {"read", "critical"}})
    (tool,) = langchain_tools(registry, executor=lambda name, arguments: gateway.execute(
        name, arguments, subject="agent"))
    with capture(provenance="measured") as spans:
        message = tool.invoke({"type": "tool_call", "name": "delete_account",
                               "args": {"user_id": "u1"}, "id": "call_1"})
    assert message.status == "error" and message.artifact.status == "needs_confirmation"
    (span,) = spans.tool_calls("delete_account")
    a = attrs(span)
    assert (a["course.door.verdict"], a["course.door.status"]) == (
        "needs confirmation", "needs_confirmation")
    assert json.loads(a["course.tool.arguments"]) == {"user_id": "u1"}
    assert a["course.provenance"] == "measured"


def test_a_langgraph_graph_made_before_the_capture_shows_each_call_and_verdict():
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from course.tools.for_libraries import langchain_tools
    from course.tools.registry import ToolRegistry

    uninstrument()  # the graph and its tools are made with nothing instrumented
    registry = ToolRegistry()

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    registry.register(get_weather)
    calls = [{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"},
             {"name": "get_weather", "args": {"town": "Paris"}, "id": "c2"}]
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [AIMessage("", tool_calls=calls)]})
    graph.add_node("tools", ToolNode(langchain_tools(registry)))
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    with capture(provenance="scripted") as spans:
        out = app.invoke({"messages": [("user", "weather?")]})
    assert out["messages"][-2].content == "sunny in Paris"
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "LangGraph" and attrs(root)["openinference.span.kind"] == "CHAIN"
    assert [s.name for s in spans.children(root)] == ["model", "tools"]
    tools = spans.tool_calls("get_weather")
    assert [spans.parent(s).name for s in tools] == ["tools", "tools"]
    found = sorted((attrs(s)["course.tool.arguments"], attrs(s)["course.door.verdict"],
                    attrs(s)["course.door.status"]) for s in tools)
    assert found == [('{"city": "Paris"}', "allowed", "ok"),
                     ('{"town": "Paris"}', "refused", "invalid_arguments")]
    assert {attrs(s)["course.provenance"] for s in spans} == {"scripted"}


def test_verdicts_and_labels():
    assert [door_verdict(s) for s in ("ok", "no_data", "bug", "not_allowed", "vetoed",
                                      "needs_confirmation", "confirmation_denied")] == [
        "allowed", "allowed", "allowed", "refused", "refused", "needs confirmation", "refused"]
    assert PROVENANCE_LABELS == ("measured", "recorded", "reconstructed", "scripted")
    with pytest.raises(ValueError, match="must be one of"), capture(provenance="live"):
        pass
    with pytest.raises(TypeError, match=r"traces\.Run"), capture(recording={"steps": 1}):
        pass


def test_the_summary_is_a_record_of_the_tree(weather):
    summary = weather[2].summary("weather")
    record = summary.record()
    assert str(summary).splitlines()[0] == "weather: 12 spans (AGENT 1, CHAIN 3, LLM 3, TOOL 5)"
    assert str(summary).splitlines()[1:] == weather[2].tree().splitlines()
    assert (record["spans"], record["provenance"], record["outputs"]) == (
        12, ["recorded"], "reconstructed")
    assert [(c["step"], c["prompt"], c["figures"]) for c in record["llm_calls"]] == [
        (1, 2083, "recorded"), (2, 3345, "derived"), (3, 4100, "recorded")]
    assert [(c["name"], c["verdict"]) for c in record["tool_calls"]] == [
        ("web_search", "allowed"), ("web_search", "allowed"), ("final_answer", None)]
    json.dumps(record)


@pytest.fixture
def closed_url():
    """A local address where nothing listens (a port just bound and released)."""
    from live_models import free_port

    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def answering_url():
    """A local HTTP server that answers Phoenix's version question as Phoenix 20.26.1 does
    (``/arize_phoenix_version``) and 404 to anything else."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"20.26.1" if self.path == "/arize_phoenix_version" else b"not here"
            self.send_response(200 if self.path == "/arize_phoenix_version" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_otlp_target_comes_from_the_environment_without_the_network(monkeypatch):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(spans_module, "exporter_installed", lambda: False)
    base = otlp_target({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://class.example:6006/"})
    assert (base.endpoint, base.why, base.phoenix_version) == (
        "http://class.example:6006/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT is set", None)
    assert not base.ready and base.advice() == (
        f"pip install {OTLP_HTTP_PACKAGE} (the SDK's OTLP exporter), then run again")
    full = otlp_target({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c.example/x",
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored.example"})
    assert full.endpoint == "http://c.example/x"
    assert otlp_target({"PHOENIX_COLLECTOR_ENDPOINT": "http://p.example:6006"}).endpoint == \
        "http://p.example:6006/v1/traces"


def test_the_otlp_target_is_the_phoenix_that_answers_on_this_machine(answering_url):
    """With no endpoint set, the target is the Phoenix that answers its version question."""
    assert PHOENIX_LOCAL == f"{PHOENIX_URL}/v1/traces" == "http://127.0.0.1:6006/v1/traces"
    target = otlp_target({}, phoenix_url=answering_url + "/")
    assert (target.endpoint, target.why, target.phoenix_version, target.ready) == (
        f"{answering_url}/v1/traces", f"Phoenix 20.26.1 answers at {answering_url}", "20.26.1",
        True)  # the exporter is in the course's venv (the [phoenix] extra)
    named = otlp_target({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c.example"},
                       phoenix_url=answering_url)
    assert (named.endpoint, named.phoenix_version) == ("http://c.example/v1/traces", None)


def test_with_no_phoenix_answering_the_advice_is_to_start_one(closed_url, answering_url,
                                                               monkeypatch):
    nothing = otlp_target({}, phoenix_url=closed_url)
    assert (nothing.endpoint, nothing.ready, nothing.phoenix_version) == (None, False, None)
    assert nothing.why == f"no OTLP endpoint set and no Phoenix answers at {closed_url}"
    advice = ("to see the spans in a trace UI: start Phoenix in a terminal with "
              "`python -m course phoenix` (it answers at http://127.0.0.1:6006), or set "
              "OTEL_EXPORTER_OTLP_ENDPOINT to your class's collector; then run again")
    assert str(nothing) == f"nothing sent ({nothing.why}); {advice}"
    # a server that answers, but not as Phoenix, is not taken for one
    other = otlp_target({}, phoenix_url=answering_url + "/elsewhere")
    assert (other.endpoint, other.phoenix_version) == (None, None)
    monkeypatch.setattr(spans_module, "exporter_installed", lambda: False)
    assert otlp_target({}, phoenix_url=closed_url).advice() == advice.replace(
        "; then", f", and pip install {OTLP_HTTP_PACKAGE} (the SDK's OTLP exporter); then")


def test_send_spans_sends_nothing_unless_configured(weather, monkeypatch, closed_url):
    import socket

    made = []

    def factory(endpoint):
        made.append(endpoint)
        raise AssertionError("no exporter may be made")

    nowhere = otlp_target({}, phoenix_url=closed_url)
    monkeypatch.setattr(socket.socket, "connect", lambda *a, **k: pytest.fail("connected"))
    monkeypatch.setattr(spans_module, "exporter_installed", lambda: False)
    sent = send_spans(weather[2], nowhere, exporter_factory=factory)
    assert (sent.sent, sent.outcome, made) == (0, "nothing sent", [])
    # an endpoint without the exporter's package: still nothing
    sent = send_spans(weather[2], otlp_target({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}),
                      exporter_factory=factory)
    assert (sent.sent, made) == (0, [])


def test_send_spans_exports_them_and_the_later_runs(weather, monkeypatch):
    class Fake:
        def __init__(self, endpoint):
            self.endpoint, self.got = endpoint, []
            made.append(self)

        def export(self, spans):
            from opentelemetry.sdk.trace.export import SpanExportResult

            self.got += spans
            return SpanExportResult.SUCCESS

        def shutdown(self):
            pass

        def force_flush(self, timeout_millis=0):
            return True

    made: list[Fake] = []
    target = dataclasses.replace(otlp_target({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1"}),
                                 exporter_installed=True)
    before = list(spans_module._PROCESSOR.extra)
    try:
        sent = send_spans(weather[2], target, exporter_factory=Fake)
        assert (sent.sent, sent.outcome, sent.endpoint) == (12, "SUCCESS", "http://c:1/v1/traces")
        assert str(sent).startswith("sent 12 spans to http://c:1/v1/traces")
        assert [s.name for s in made[0].got] == [s.name for s in weather[2]]
        again = send_spans(weather[2], target, exporter_factory=Fake)  # follows once per endpoint
        assert again.sent == 12 and len(made) == 3
        with capture(provenance="scripted"):
            with trace_api.get_tracer("t", tracer_provider=spans_module.tracer_provider()) \
                    .start_as_current_span("later"):
                pass
        spans_module._PROCESSOR.force_flush()
        assert [s.name for s in made[1].got] == ["later"]  # the processor's exporter
    finally:
        for processor in spans_module._PROCESSOR.extra[len(before):]:
            processor.shutdown()
        spans_module._PROCESSOR.extra[:] = before
        spans_module._FOLLOWING.clear()


def test_a_failed_send_says_so_and_follows_nothing(weather):
    class Refused:
        def __init__(self, endpoint):
            pass

        def export(self, spans):
            from opentelemetry.sdk.trace.export import SpanExportResult

            return SpanExportResult.FAILURE

    target = dataclasses.replace(otlp_target({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1"}),
                                 exporter_installed=True)
    before = list(spans_module._PROCESSOR.extra)
    sent = send_spans(weather[2], target, exporter_factory=Refused)
    assert (sent.sent, sent.outcome) == (12, "FAILURE") and str(sent).endswith(
        "FAILURE; is the collector running there? (Phoenix: `python -m course phoenix`)")
    assert spans_module._PROCESSOR.extra == before and not spans_module._FOLLOWING


def test_a_long_conversation_keeps_every_attribute_of_its_span(caplog):
    """A span holds one attribute per message part (OpenInference): 300 of them are all kept,
    without OpenTelemetry's "Attributes dict is full" warning (its default keeps 128)."""
    from course.tools.spans import tracer_provider

    span = tracer_provider().get_tracer("test").start_span("long conversation")
    with caplog.at_level("WARNING"):
        span.set_attributes({f"llm.input_messages.{i}.message.content": "hi" for i in range(300)})
    span.end()
    assert len(span.attributes) == 300
    assert "Attributes dict is full" not in caplog.text
