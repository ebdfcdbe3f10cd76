"""The tool-calling notebook: the lesson-carrying values, read by cell id from the records the cells
display (``run.record`` / ``run.records``; the lines shown with ``course.records.show``, by key:
``run.shown`` / ``run.shown_one``), not from their printed prose. Text checks remain for what a
student must read: the provenance line, the framing of a verdict, the skip message."""

import json
import re

import pytest

NOTEBOOK = "01_tool_calling.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_probe_model_is_named(run):
    assert re.match(r"probe model: \S+", run.text("setup"))


def test_schema_from_typed_function_and_prompt(run):
    schema = json.loads(run.shown_one("schemas", "langchain"))
    assert schema["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert schema["required"] == ["city"]
    assert "additionalProperties" not in schema  # the door adds it (section 2)
    prompt = run.shown_one("prompt", "prompt")
    assert '"name": "get_weather"' in prompt and "What's the weather in Berlin?" in prompt
    assert run.shown_one("prompt", "renders_tools") is False  # so: level 1, the prompt


def test_qwen_template_renders_the_tools_and_special_tokens(run):
    if "Qwen tokenizer not prepared" in run.text("qwen-prompt"):  # the message the student reads
        pytest.skip("the Qwen tokenizer asset is not prepared on this machine")
    prompt = run.shown_one("qwen-prompt", "prompt")
    assert "<tools>" in prompt and '"name": "get_weather"' in prompt and "<tool_call>" in prompt
    assert run.shown_one("qwen-prompt", "special_ids") == {
        "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657, "</tool_call>": 151658}
    assert run.shown_one("qwen-prompt", "tools_tokens") == ["<", "tools", ">"]
    assert run.shown_one("qwen-prompt", "tool_call_tokens") == ["<tool_call>"]
    rendered = run.shown_one("qwen-call", "rendered")
    assert rendered["hybrid"] is True  # the hybrid (thinking) Qwen3 template
    assert rendered["reply"].startswith("<think>\n\n</think>")  # its empty think block
    instruct = run.shown_one("qwen-call", "instruct")
    assert instruct.startswith("<tool_call>") and "<think>" not in instruct
    parsed = run.shown_one("qwen-call", "parsed")
    assert parsed["kind"] == "call" and parsed["call"]["name"] == "get_weather"
    assert parsed["call"]["arguments"]["city"] == "Berlin"
    assert run.shown_one("qwen-call", "runs") == "Berlin: 9 °C, rain"


def test_constrained_call_is_parsed_and_executed(run):
    free = run.shown_one("call", "free_reply")  # whatever the model wrote, parsed on the next line
    assert isinstance(free, str) and run.shown_one("call", "free_parsed")["raw"] == free
    parsed = run.shown_one("call", "parsed")
    assert parsed["kind"] == "call" and parsed["call"]["name"] == "get_weather"
    arguments = parsed["call"]["arguments"]
    assert isinstance(arguments["city"], str) and arguments["units"] in ("metric", "imperial")
    message = run.shown_one("tool-message", "tool_message")
    assert (message["role"], message["name"]) == ("tool", "get_weather")
    figures = run.shown_one("tool-message", "figures")
    answer = run.shown_one("tool-message", "answer")
    repeated = figures["in the answer"]
    assert set(repeated) <= set(figures["figures"]) and all(f in answer for f in repeated)


def test_the_lessons_door_validates_and_refuses_as_a_result(run):
    shown = run.shown("door-demo")
    assert [(c["tool"], c["arguments"]) for c in shown["call"]] == [
        ("get_weather", {"city": "Berlin"}), ("get_weather", {"city": "Berlin", "units": "kelvin"}),
        ("get_weather", {"town": "Rome"}), ("delete_everything", {}), ("divide", {"a": 1, "b": 4})]
    weather, kelvin, town, delete, divide = (c["reply"] for c in shown["call"])
    assert weather == "Berlin: 9 °C, rain"
    assert "NOT run" in kelvin and "'kelvin' is not one of ['metric', 'imperial']" in kelvin
    assert "NOT run" in town
    assert delete == "Tool 'delete_everything' is not allowed, so it was NOT run."
    assert divide == "Tool 'divide' is not allowed, so it was NOT run."
    assert shown["configured"] == ["0.25"]
    assert shown["bug"] == ["ZeroDivisionError('division by zero')"]  # a bug is not a refusal


def test_registered_but_disabled_tool_is_enabled_by_configuration(run):
    shown = run.shown("single-door")
    assert shown["registered"] == [{"registered": ["debug_dump", "divide", "get_weather"],
                                    "allowed": ["get_weather"]}]
    assert shown["enabled"] == [["divide", "get_weather"]]  # by tools.json
    assert shown["shown"] == [["divide", "get_weather"]]  # the tools the model is shown
    calls = shown["call"]
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("divide", "ok"), ("debug_dump", "not_allowed"), ("divide", "bug")]
    assert float(calls[0]["content"]) == 0.25 and "'debug_dump' is not allowed" in calls[1]["content"]
    assert "ZeroDivisionError" in calls[2]["content"]
    assert shown["kept_bug"] == ["ZeroDivisionError('division by zero')"]  # kept for whoever fixes it


def test_refusal_strings_name_what_was_blocked(run):
    shown = run.shown("refusal-strings")
    assert "Only for orders that have NOT shipped yet." in run.shown_one("refusal-strings", "description")
    found = {outcome["status"]: outcome["content"] for outcome in shown["outcome"]}
    for status, words in [("unknown_tool", "'delete_everything' does not exist"),
                          ("not_allowed", "'debug_dump' is not allowed"),
                          ("invalid_arguments", "'units': 'kelvin'"),
                          ("oversized_arguments", "too large"),
                          ("refused", "order O-1 has shipped and was NOT cancelled"),
                          ("subject_not_permitted", "'guest' may not use critical tools"),
                          ("needs_confirmation", "'cancel_order' is critical and needs confirmation")]:
        assert words in found[status], (status, found.get(status))


def test_empty_result_vs_refusal_counted_over_n_replies(run):
    from course.tools.empty_result import claims_success

    text = run.text("silence-vs-refusal")
    assert run.shown_one("silence-vs-refusal", "n") == {"replies": 6, "max_new_tokens": 24}
    empty, refusal = (r for r in run.records("silence-vs-refusal") if "shown" not in r)
    assert (empty["label"], empty["tool_content"]) == ("empty tool result", "")
    assert refusal["label"] == "refusal string" and "NOT run" in refusal["tool_content"]
    for count in (empty, refusal):
        assert len(count["replies"]) == 6
        assert count["claimed"] == [claims_success(r) for r in count["replies"]]  # the rule, applied
        assert count["claims"] == sum(count["claimed"])
    verdict = text.splitlines()[-1]  # the framing follows the counts: a null result is said to be one
    if empty["claims"] > refusal["claims"]:
        assert verdict.startswith("more claims of success after the empty result")
    else:
        assert "does not show the note's failure for this model" in verdict


def test_gateway_audit_records(run):
    shown = run.shown("gateway")
    outcomes = shown["outcome"]
    assert [(o["tool"], o["arguments"].get("order_id")) for o in outcomes] == [
        ("get_weather", None), ("update_address", "O-3"), ("cancel_order", "O-3")]
    assert "Subject 'guest' may not use write tools" in outcomes[1]["content"]
    approved = run.shown_one("gateway", "approved")
    assert approved["request"]["request_id"].startswith("c")  # a human approves the held call
    assert approved["request"]["tool"] == "cancel_order"
    assert approved["result"]["content"] == "order O-3 cancelled"
    (audit,) = (r for r in run.records("gateway") if "records" in r)
    assert [(r["subject"], r["tool"], r["risk"], r["decision"]) for r in audit["records"]] == [
        ("guest", "get_weather", "read", "allowed"),
        ("guest", "update_address", "write", "refused"),
        ("agent:support", "cancel_order", "critical", "needs_confirmation"),
        ("agent:support", "cancel_order", "critical", "confirmed")]
    assert [r["seq"] for r in audit["records"]] == [1, 2, 3, 4]
    flag = run.shown("flag-only")
    assert flag["returned"] == [None]  # returned to the model
    assert flag["audit"] == [[]]  # audit records for O-4
    assert flag["pending"] == [[]]  # pending confirmation requests for O-4
    assert flag["gateway"] == ["needs_confirmation"]  # the gateway instead


def test_deterministic_veto_in_the_gateway(run):
    refunds = run.shown("veto")["refund"]
    assert [r["status"] for r in refunds] == ["ok", "vetoed"]
    assert [r["arguments"]["amount"] for r in refunds] == [40, 400]
    assert "400 EUR is over the 100 EUR limit" in refunds[1]["content"]
    assert run.shown_one("veto", "decisions") == ["allowed", "vetoed"]


def test_deterministic_sales_and_unbacked_answer(run):
    from course.tools.sales import numbers_backed_by_tool

    facts = json.loads(run.shown_one("sales", "first"))
    assert facts["revenue"] == "231.60" and facts["category"] == "coffee"
    assert run.shown_one("sales", "identical") is True  # identical on a second run
    assert "Unknown category 'cofee'" in run.shown_one("sales", "misspelt")
    no_tool = run.shown_one("sales", "no_tool_answer")
    backed, unbacked = numbers_backed_by_tool(no_tool, [])
    assert run.shown_one("sales", "no_tool_backed") == [backed, unbacked]  # the flag is the rule applied
    assert run.shown_one("sales", "tool_backed") == [True, []]


def test_catalogue_and_recall(run):
    from course.tools.catalogue import ToolRetriever, build_catalogue, recall_at_k

    catalogue = run.shown_one("catalogue", "catalogue")
    assert catalogue["tools"] == 122 and catalogue["prompt_tokens"] > 3000
    assert catalogue["context_window"] > 0
    top5 = run.shown_one("catalogue", "top5")
    assert len(top5["tools"]) == 5 and top5["prompt_tokens"] < catalogue["prompt_tokens"]
    recall, _ = recall_at_k(ToolRetriever(build_catalogue()), k=5)
    shown = run.shown_one("catalogue", "recall")
    assert shown["recall@5"] == recall and shown["requests"] == 44
    assert "'limit': 500 is greater than the maximum of 5" in run.shown_one("find-vs-database", "narrow")
    assert run.shown_one("find-vs-database", "database") == "would run SQL: DROP TABLE customers"


def test_validity_rates_free_vs_constrained(run):
    free, constrained = run.records("validity")
    assert free["label"] == "level 1, schema in the prompt" and constrained["label"] == "level 3, constrained"
    assert free["n"] == constrained["n"] == 20  # N is shown with each rate
    assert constrained["valid"] == 20 == constrained["verdicts"]["valid"]  # the format is guaranteed
    assert free["valid"] < 0.9 * 20  # the bundled model is far below the note's 95-99% (level 2)
    text = run.text("validity")
    assert "native tool calling (level 2): about 95-99% well-formed [recorded, note 003]" in text


def test_langgraph_runs_a_tool_through_toolnode(run):
    assert run.shown_one("langgraph", "agent")["native tool_calls"] == []  # the bundled model: none
    assert run.shown_one("langgraph", "graph_model") == "LocalToolCallingChat"
    messages = run.shown_one("langgraph", "messages")
    assert any(m["type"] == "ai" and any(c["name"] == "get_weather" and "city" in c["args"]
                                         for c in m["calls"]) for m in messages)
    tool_lines = [m["content"] for m in messages if m["type"] == "tool"]
    weather = re.compile(r"^(\w+: -?\d+ °[CF], .+|no weather data for '.*')$")
    assert tool_lines and all(weather.match(line) for line in tool_lines), tool_lines
    assert run.shown_one("langgraph", "tool_calls") == len(tool_lines) >= 1  # run by the ToolNode
    audit = run.shown_one("langgraph", "audit")  # the gateway's audit, agent:support
    assert len(audit) == len(tool_lines) and all(r["decision"] == "allowed" for r in audit)


def test_mcp_round_trip_and_clean_shutdown(run):
    assert run.shown_one("mcp", "tools") == ["sales_report", "find_customers", "order_status",
                                         "request_refund"]
    assert run.shown_one("mcp", "servers") == 1
    assert any(m["type"] == "tool" for m in run.shown_one("mcp", "messages"))
    assert run.shown_one("mcp", "direct") == "shipped on 2024-03-02"  # order_status(O-1)
    assert run.shown_one("mcp", "servers_after") == 0


def test_quiz_and_exercises_pass_in_the_instructor_edition(run):
    assert "[passed] Quiz" in run.text("quiz-check")  # the instructor edition's answers
    for n, title in [(1, "check_reply"), (2, "ShopDoor"), (3, "refund_rule"),
                     (4, "build_tool_graph")]:
        assert f"[passed] Exercise {n}: {title}" in run.text(f"ex{n}-check")


def test_slot_filling_calls_only_when_valid(run):
    shown = run.shown("slot-filling")
    assert shown["slots"] == [{"order_id": "O-3"}, {"order_id": "O-3", "amount": "forty"},
                              {"order_id": "O-3", "amount": 40.0, "reason": "damaged"}]
    replies = shown["graph"]
    assert "still need: amount, reason" in replies[0]
    assert "amount='forty' (expected number)" in replies[1]
    assert replies[2] == "refund request for 40.00 EUR on O-3 (damaged) filed"
    assert shown["ran"] == [True]  # the tool ran


def test_mcp_as_a_node(run):
    assert {r["order_id"]: r["status"] for r in run.shown("mcp-node")["lookup"]} == {
        "O-1": "shipped on 2024-03-02", "O-2": "waiting for payment",
        "O-9": "Order 'O-9' does not exist."}
    assert run.shown_one("mcp-node", "model_turns") >= 1  # tools bound to the model: model turns
    assert "as a node: 0 model turns" in run.text("mcp-node")  # what the student reads


def test_six_tool_kinds_through_one_door(run):
    rows = run.shown("tool-kinds")["call"]
    assert [(r["tool"], r["status"]) for r in rows] == [
        ("exchange_rate", "ok"), ("exchange_rate", "invalid_arguments"),
        ("run_command", "ok"), ("run_command", "invalid_arguments"),
        ("read_note", "ok"), ("read_note", "refused"),
        ("find_customers", "ok"), ("find_customers", "ok"),
        ("loan_payment", "ok"), ("web_search", "ok")]
    contents = [r["content"] for r in rows]
    assert contents[0] == "1.0842" and re.fullmatch(r"\d{4}-\d\d-\d\d", contents[2].strip())
    assert "outside the notes folder" in contents[5]
    assert [c["id"] for c in json.loads(contents[6])] == ["C-1001", "C-1004"]
    assert contents[7] == "[]"  # the injection is a search string, not SQL
    assert contents[8] == "299.71"
    assert contents[9].startswith("https://example.org/refunds")


def test_a_tool_is_a_contract(run):
    assert run.shown_one("contract", "does") == "Current weather for a city."
    limits = run.shown_one("contract", "limits")
    assert limits == {"cities": ["Berlin", "Madrid", "Oslo", "Paris", "Rome"],
                      "another city": "no weather data for 'Tokyo'"}
    assert run.shown_one("contract", "named") == {"named": ["Paris"], "of": 5}


def test_description_choice_is_measured_with_n(run):
    from course.tools.descriptions import REQUESTS

    text = run.text("description-choice")
    assert text.splitlines()[0].startswith("[measured, SmolLM2-135M-Instruct, N = 9 requests")
    poor, good = (r for r in run.records("description-choice") if "shown" not in r)
    assert (poor["label"], good["label"]) == ("poor descriptions", "good descriptions")
    for shown in (poor, good):
        assert shown["n"] == len(REQUESTS) == len(shown["chosen"])
        assert shown["expected"] == [tool for _, tool in REQUESTS]
        assert shown["right"] == sum(c == e for c, e in zip(shown["chosen"], shown["expected"], strict=True))
    gain = good["right"] - poor["right"]
    assert run.shown_one("description-choice", "difference") == {"gain": gain, "of": 9}
    verdict = next(line for line in text.splitlines() if line.startswith("difference:"))
    assert ("moved the choice" in verdict) == (gain >= 2)  # the framing the student reads follows the counts


def test_the_notes_registry_checks_the_name_only(run):
    shown = run.shown("note-registry")
    assert shown["allowed"] == ["Berlin: 9 °C, rain"]
    assert shown["debug_dump"] == ["ToolError: Tool 'debug_dump' is not allowed."]
    assert shown["delete_everything"] == ["ToolError: Tool 'delete_everything' is not allowed."]
    assert shown["kelvin"] == ["Berlin: 9 °C, rain"]  # units='kelvin' runs anyway
    (town,) = shown["town"]
    assert town.startswith("TypeError:")  # town='Rome' crashes the caller
