"""Appendix A5, an agent run as OpenTelemetry spans, executed: each test reads the values a cell
displayed (its records, ``run.record``): the weather replay's span tree, the other two note runs,
the failure read from the spans, the OTLP JSON round trip, and the send cell with no Phoenix
running and nothing configured (tests/test_phoenix.py runs it with a Phoenix)."""

import os

import pytest

from course.phoenix import PHOENIX_URL, phoenix_version
from course.tools.spans import ENDPOINT_VARIABLES

NOTEBOOK = "A5_traces_as_spans.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_the_weather_replay_is_one_agent_three_llm_calls_and_two_searches(run):
    tree = run.record("weather-spans")
    assert tree["kinds"]["AGENT"] == 1 and tree["kinds"]["CHAIN"] == 3
    assert tree["spans"] == 12
    llm = tree["llm_calls"]
    assert len(llm) >= 3
    assert [(c["step"], c["prompt"], c["figures"]) for c in llm] == [
        (1, 2083, "recorded"), (2, 3345, "derived"), (3, 4100, "recorded")]
    assert all(c["completion"] is None for c in llm)  # the note published none per step
    assert all(isinstance(c["measured_prompt"], int) and c["measured_prompt"] > 1000 for c in llm)
    searches = [c for c in tree["tool_calls"] if c["name"] == "web_search"]
    assert [c["arguments"] for c in searches] == [
        {"query": "current weather in Paris"}, {"query": "current weather in Paris, France"}]
    assert [c["verdict"] for c in searches] == ["allowed", "allowed"]
    assert tree["tool_calls"][-1] == {"name": "final_answer", "verdict": None,
                                      "arguments": {"answer": "Clear sky, around 13-16°C"}}


def test_the_spans_carry_the_provenance_labels(run):
    tree = run.record("weather-spans")
    assert (tree["provenance"], tree["outputs"]) == (["recorded"], "reconstructed")
    assert tree["tree"].splitlines()[0] == "CodeAgent.run [AGENT] tokens 9528 in / 225 out (recorded)"
    assert "[recorded]" in tree["title"]
    text = run.text("weather-attributes")
    assert "AGENT course.provenance = recorded" in text
    assert "AGENT course.outputs = reconstructed" in text
    assert "LLM, step 1: course.token_figures = recorded" in text


def test_the_other_two_note_runs_show_their_failures(run):
    bond, debug = run.records("other-spans")
    assert bond["kinds"] == {"AGENT": 1, "CHAIN": 1, "LLM": 1, "TOOL": 3}
    assert [c["name"] for c in bond["tool_calls"]] == ["image_generator", "final_answer"]
    assert bond["llm_calls"][0]["figures"] == "recorded"
    assert debug["kinds"] == {"AGENT": 1, "CHAIN": 1, "LLM": 1, "TOOL": 1}
    assert [c["name"] for c in debug["tool_calls"]] == ["final_answer"]
    # no figures published for the debug run: its spans hold the counts made here
    assert debug["llm_calls"][0]["figures"] == "measured"
    assert bond["provenance"] == debug["provenance"] == ["recorded"]


def test_the_glued_answer_and_prompt_growth_are_read_from_the_spans(run):
    answer, glued, check = run.records("glued-answer")
    assert answer["value"] == "Clear sky, around 13-16°C"
    assert glued["value"] == ["https://meteocity.example/france/paris/now",
                              "https://skyreport.example/eu/france/paris"]
    assert check["value"] == "merged contradictions"
    recorded, measured = run.records("prompt-growth")
    assert recorded["value"] == [3345 - 2083, 4100 - 3345]
    assert len(measured["value"]) == 2 and all(g > 0 for g in measured["value"])


def test_otlp_json_round_trip_keeps_the_spans(run):
    counts, same_tree, same_attributes = run.records("round-trip")
    assert counts["value"] == [12, 12]
    assert same_tree["value"] is True and same_attributes["value"] is True
    assert "[measured] weather.otlp.json" in run.text("round-trip")


def test_with_no_phoenix_and_no_endpoint_the_send_cell_says_so_in_one_line(run):
    # the kernel inherits this process's environment and machine
    if any(os.environ.get(name) for name in ENDPOINT_VARIABLES) or phoenix_version(PHOENIX_URL):
        pytest.skip("an OTLP endpoint is set or a Phoenix answers here: the cell sends")
    assert run.shown("send").keys() == {"nothing-sent"}
    line = run.shown_one("send", "nothing-sent")
    assert line == (f"no Phoenix answers at {PHOENIX_URL}; start one in a terminal with "
                    "`python -m course phoenix`")
    assert run.text("send") == f"nothing sent: {line}\n"
