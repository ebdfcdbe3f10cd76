"""The tool-calling notebook: the lesson-carrying outputs, asserted by cell id."""

import re

NOTEBOOK = "01_tool_calling.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_schema_from_typed_function_and_prompt(run):
    assert '"enum": ["metric", "imperial"]' in run.text("schemas")
    assert '"additionalProperties": false' in run.text("registry")
    prompt = run.text("prompt")
    assert '"name": "get_weather"' in prompt and "<|im_start|>assistant" in prompt
    assert "parsed as:" in run.text("free-reply")


def test_constrained_call_is_parsed_and_executed(run):
    assert "parsed as: call get_weather(" in run.text("constrained-call")
    text = run.text("tool-message")
    assert "'role': 'tool', 'name': 'get_weather'" in text and "model continues:" in text


def test_validation_errors_are_caught_before_execution(run):
    text = run.text("validation")
    assert text.count("[invalid_arguments]") == 4
    for words in ["'kelvin' is not one of ['metric', 'imperial']",
                  "missing required argument 'city'", "unexpected argument(s) 'country'",
                  "42 is not of type 'string'"]:
        assert words in text
    assert "times the function ran: 0" in text


def test_disabled_tool_is_unreachable(run):
    text = run.text("single-door")
    assert "registered: ['debug_dump', 'divide', 'get_weather']" in text
    assert "tools the model is shown: ['divide', 'get_weather']" in text
    assert "debug_dump -> Tool 'debug_dump' is not allowed" in text
    errors = run.text("tool-error")
    assert "ToolError (a refusal): Tool 'debug_dump' is not allowed" in errors
    assert "the bug surfaced: ZeroDivisionError" in errors and "status=bug, is_bug=True" in errors


def test_refusal_strings_name_what_was_blocked(run):
    text = run.text("refusal-strings")
    for status, words in [("unknown_tool", "'delete_everything' does not exist"),
                          ("not_allowed", "'debug_dump' is not allowed"),
                          ("invalid_arguments", "'units': 'kelvin'"),
                          ("oversized_arguments", "too large"),
                          ("subject_not_permitted", "'guest' may not use critical tools"),
                          ("needs_confirmation", "'cancel_order' is critical and needs confirmation")]:
        assert f"[{status}]: " in text and words in text
    silence = run.text("silence-vs-refusal")
    assert silence.count("model replied:") == 2 and "tool said ''" in silence


def test_gateway_audit_records(run):
    text = run.text("gateway")
    assert "Subject 'guest' may not use write tools" in text
    assert "a human approves c" in text and "order O-3 cancelled" in text
    lines = [line.split() for line in text.splitlines() if line.startswith("#") and line[1:2].isdigit()]
    assert [(r[1], r[2], r[3], r[4]) for r in lines] == [
        ("guest", "get_weather", "read", "allowed"),
        ("guest", "update_address", "write", "refused"),
        ("agent:support", "cancel_order", "critical", "needs_confirmation"),
        ("agent:support", "cancel_order", "critical", "confirmed")]
    flag = run.text("flag-only")
    assert "returned to the model: None" in flag and "audit records for O-4: []" in flag
    assert "pending confirmation requests for O-4: []" in flag
    assert "the gateway instead: needs_confirmation" in flag


def test_deterministic_sales_and_unbacked_answer(run):
    text = run.text("sales")
    assert '"revenue": "231.60"' in text and "identical on a second run: True" in text
    assert "Unknown category 'cofee'" in text
    unbacked = run.text("unbacked")
    first, second = re.findall(r"backed by a tool result: (\(.*\))", unbacked)
    no_tool = re.search(r"model without the tool: (.*)", unbacked).group(1)
    if re.search(r"\d", no_tool):
        assert first.startswith("(False")
    assert second == "(True, [])"


def test_catalogue_and_recall(run):
    from course.tools.catalogue import ToolRetriever, build_catalogue, recall_at_k

    assert "122 tools in the catalogue" in run.text("catalogue")
    recall, _ = recall_at_k(ToolRetriever(build_catalogue()), k=5)
    assert f"recall@5 = {recall:.2f} on 44 labelled requests" in run.text("recall")
    text = run.text("find-vs-database")
    assert "'limit': 500 is greater than the maximum of 5" in text
    assert "would run SQL: DROP TABLE customers" in text


def test_validity_rates_free_vs_constrained(run):
    text = run.text("validity")
    free = re.search(r"free \(schema in the prompt\): (\d+)/50 valid", text)
    assert free and 0 <= int(free.group(1)) <= 50
    assert "constrained: 50/50 valid = 100%" in text


def test_langgraph_runs_a_tool_through_toolnode(run):
    assert "ChatHuggingFace tool_calls: []" in run.text("chathf")  # the bundled model: none
    text = run.text("langgraph")
    assert re.search(r"^\s+ai: .*'name': 'get_weather'", text, re.M)
    assert re.search(r"^\s*tool: '.*degrees", text, re.M)
    assert re.search(r"audit: #\d+ agent:support\s+get_weather\s+read\s+allowed", text)
    assert "the graph ended because the last reply parsed as:" in text


def test_mcp_round_trip_and_clean_shutdown(run):
    text = run.text("mcp")
    assert "MCP tools: ['sales_report', 'find_customers', 'order_status', 'request_refund']" in text
    assert "server processes running: 1" in text
    assert re.search(r"^\s*tool: ", text, re.M)
    assert "direct MCP call order_status(O-1): shipped on 2024-03-02" in text
    assert "server processes after the block: 0" in text


def test_closing_figures_and_exercises(run):
    assert re.search(r"recall@5 = 0\.\d\d; validity free = \d+%, constrained = 100%",
                     run.text("closing"))
    for n, title in [(1, "check_reply"), (2, "best_region"), (3, "a description the retriever")]:
        assert f"[passed] Exercise {n}: {title}" in run.text(f"ex{n}-check")
