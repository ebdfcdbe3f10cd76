"""The tool-calling notebook: the lesson-carrying values, read from the outputs by cell id (the
displayed records' values where the cell shows a record)."""

import json
import re

import pytest

NOTEBOOK = "01_tool_calling.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def _field(text: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}\s*(.*)$", text, re.M)
    assert match, f"no line starting with {label!r} in:\n{text}"
    return match.group(1)


def test_probe_model_is_named(run):
    assert re.match(r"probe model: \S+", run.text("setup"))


def test_schema_from_typed_function_and_prompt(run):
    schema = json.loads(_field(run.text("schemas"), "LangChain:"))
    assert schema["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert schema["required"] == ["city"]
    assert "additionalProperties" not in schema  # the door adds it (section 2)
    prompt = run.text("prompt")
    assert '"name": "get_weather"' in prompt and "What's the weather in Berlin?" in prompt
    assert _field(prompt, "chat template renders tools=:") == "False"  # so: level 1, the prompt


def test_qwen_template_renders_the_tools_and_special_tokens(run):
    text = run.text("qwen-prompt")
    if "Qwen tokenizer not prepared" in text:
        pytest.skip("the Qwen tokenizer asset is not prepared on this machine")
    assert "<tools>" in text and '"name": "get_weather"' in text and "<tool_call>" in text
    special = eval(_field(text, "special tokens as ids:"))  # a dict literal printed by the cell
    assert special == {"<|im_start|>": 151644, "<|im_end|>": 151645,
                       "<tool_call>": 151657, "</tool_call>": 151658}
    assert eval(_field(text, "'<tools>' as Qwen tokens:")) == ["<", "tools", ">"]
    assert eval(_field(text, "'<tool_call>' as Qwen tokens:")) == ["<tool_call>"]
    call = run.text("qwen-call")
    rendered = eval(_field(call, "rendered by the hybrid (thinking) Qwen3 template:"))
    assert rendered.startswith("<think>\n\n</think>")  # the hybrid template's empty think block
    instruct = eval(_field(call, "the call part, as Qwen3-4B-Instruct-2507 writes it (no think block):"))
    assert instruct.startswith("<tool_call>") and "<think>" not in instruct
    assert "parsed as: call get_weather(" in call and '"city": "Berlin"' in call
    assert _field(call, "the registry runs it:") == "Berlin: 9 °C, rain"


def test_constrained_call_is_parsed_and_executed(run):
    text = run.text("call")
    assert _field(text, "free reply:")  # whatever the model wrote, parsed on the next line
    parsed = re.findall(r"^parsed as: (.*)$", text, re.M)[-1]
    assert parsed.startswith("call get_weather(")
    arguments = json.loads(parsed[len("call get_weather("):-1])
    assert isinstance(arguments["city"], str) and arguments["units"] in ("metric", "imperial")
    text = run.text("tool-message")
    assert "'role': 'tool', 'name': 'get_weather'" in text
    figures, repeated = (eval(x) for x in re.search(
        r"figures in the tool result: (\[.*?\]) of which in the answer: (\[.*?\])$", text, re.M).groups())
    answer = eval(_field(text, "model continues:"))
    assert set(repeated) <= set(figures) and all(f in answer for f in repeated)


def test_the_lessons_door_validates_and_refuses_as_a_result(run):
    rows = dict(re.findall(r"^(\w+\{.*\}) -> (.*)$", run.text("door-demo"), re.M))
    assert eval(rows["get_weather{'city': 'Berlin'}"]) == "Berlin: 9 °C, rain"
    kelvin = eval(rows["get_weather{'city': 'Berlin', 'units': 'kelvin'}"])
    assert "NOT run" in kelvin and "'kelvin' is not one of ['metric', 'imperial']" in kelvin
    assert "NOT run" in eval(rows["get_weather{'town': 'Rome'}"])
    assert eval(rows["delete_everything{}"]) == "Tool 'delete_everything' is not allowed, so it was NOT run."
    assert eval(rows["divide{'a': 1, 'b': 4}"]) == "Tool 'divide' is not allowed, so it was NOT run."
    assert _field(run.text("door-demo"), "after configuration, divide ->") == "0.25"
    assert "a bug is not a refusal: ZeroDivisionError surfaced: division by zero" in run.text("door-demo")


def test_registered_but_disabled_tool_is_enabled_by_configuration(run):
    text = run.text("single-door")
    assert _field(text, "registered:") == ("['debug_dump', 'divide', 'get_weather'] "
                                           "allowed: ['get_weather']")
    assert eval(_field(text, "enabled by tools.json:")) == ["divide", "get_weather"]
    assert eval(_field(text, "tools the model is shown:")) == ["divide", "get_weather"]
    rows = re.findall(r"^(\w+)\{.*\} -> \[(\w+)\] (.*)$", text, re.M)
    assert [(name, status) for name, status, _ in rows] == [
        ("divide", "ok"), ("debug_dump", "not_allowed"), ("divide", "bug")]
    assert float(rows[0][2]) == 0.25 and "'debug_dump' is not allowed" in rows[1][2]
    assert "ZeroDivisionError" in rows[2][2]
    assert _field(text, "the bug is kept for whoever fixes it:") == "ZeroDivisionError('division by zero')"


def test_refusal_strings_name_what_was_blocked(run):
    text = run.text("refusal-strings")
    assert "Only for orders that have NOT shipped yet." in _field(
        text, "what @tool makes of the promise, for the model:")
    found = dict(re.findall(r"^[\w ()]+ \[(\w+)\]: (.*)$", text, re.M))
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
    assert re.match(r"N = 6 sampled replies per tool message, at most 24 tokens", text)
    empty, refusal = run.records("silence-vs-refusal")
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
    text = run.text("gateway")
    assert "Subject 'guest' may not use write tools" in text
    assert "a human approves c" in text and "order O-3 cancelled" in text
    lines = [line.split() for line in text.splitlines() if re.match(r"#\d", line)]
    assert [(r[1], r[2], r[3], r[4]) for r in lines] == [
        ("guest", "get_weather", "read", "allowed"),
        ("guest", "update_address", "write", "refused"),
        ("agent:support", "cancel_order", "critical", "needs_confirmation"),
        ("agent:support", "cancel_order", "critical", "confirmed")]
    flag = run.text("flag-only")
    assert _field(flag, "returned to the model:") == "None"
    assert _field(flag, "audit records for O-4:") == "[]"
    assert _field(flag, "pending confirmation requests for O-4:") == "[]"
    assert _field(flag, "the gateway instead:") == "needs_confirmation"


def test_deterministic_veto_in_the_gateway(run):
    text = run.text("veto")
    statuses = re.findall(r"-> \[(\w+)\]", text)
    assert statuses == ["ok", "vetoed"]
    assert "400 EUR is over the 100 EUR limit" in text
    assert eval(_field(text, "decisions:")) == ["allowed", "vetoed"]


def test_deterministic_sales_and_unbacked_answer(run):
    from course.tools.sales import numbers_backed_by_tool

    text = run.text("sales")
    facts = json.loads(text.splitlines()[0])
    assert facts["revenue"] == "231.60" and facts["category"] == "coffee"
    assert _field(text, "identical on a second run:") == "True"
    assert "Unknown category 'cofee'" in text
    no_tool = eval(_field(text, "model without the tool:"))
    first, second = re.findall(r"backed by a tool result: (\(.*\))", text)
    assert eval(first) == numbers_backed_by_tool(no_tool, [])  # the flag is the rule applied
    assert eval(second) == (True, [])


def test_catalogue_and_recall(run):
    from course.tools.catalogue import ToolRetriever, build_catalogue, recall_at_k

    text = run.text("catalogue")
    tools, tokens, window = map(int, re.search(
        r"(\d+) tools in the catalogue: (\d+) prompt tokens .*: (\d+) tokens", text).groups())
    assert tools == 122 and tokens > 3000 and window > 0
    recall, _ = recall_at_k(ToolRetriever(build_catalogue()), k=5)
    shown = re.search(r"recall@5 = (\d\.\d\d) on (\d+) labelled requests", run.text("catalogue"))
    assert float(shown.group(1)) == round(recall, 2) and int(shown.group(2)) == 44
    text = run.text("find-vs-database")
    assert "'limit': 500 is greater than the maximum of 5" in text
    assert "would run SQL: DROP TABLE customers" in text


def test_validity_rates_free_vs_constrained(run):
    free, constrained = run.records("validity")
    assert free["label"] == "level 1, schema in the prompt" and constrained["label"] == "level 3, constrained"
    assert free["n"] == constrained["n"] == 20  # N is shown with each rate
    assert constrained["valid"] == 20 == constrained["verdicts"]["valid"]  # the format is guaranteed
    assert free["valid"] < 0.9 * 20  # the bundled model is far below the note's 95-99% (level 2)
    text = run.text("validity")
    assert "native tool calling (level 2): about 95-99% well-formed [recorded, note 003]" in text


def test_langgraph_runs_a_tool_through_toolnode(run):
    text = run.text("langgraph")
    assert _field(text, "agent model:").endswith("| native tool_calls: []")  # the bundled model: none
    assert _field(text, "graph model:") == "LocalToolCallingChat"
    assert re.search(r"^\s+ai: .* calls get_weather\(\{\"city\": ", text, re.M)
    tool_lines = [eval(t) for t in re.findall(r"^\s*tool: (['\"].*['\"])$", text, re.M)]
    weather = re.compile(r"^(\w+: -?\d+ °[CF], .+|no weather data for '.*')$")
    assert tool_lines and all(weather.match(line) for line in tool_lines), tool_lines
    assert int(_field(text, "tool calls run by the ToolNode:")) == len(tool_lines) >= 1
    audit = eval(_field(text, "gateway audit, agent:support:"))
    assert len(audit) == len(tool_lines) and all("allowed" in line for line in audit)


def test_mcp_round_trip_and_clean_shutdown(run):
    text = run.text("mcp")
    assert eval(_field(text, "MCP tools:")) == ["sales_report", "find_customers", "order_status",
                                                "request_refund"]
    assert int(_field(text, "server processes running:")) == 1
    assert re.search(r"^\s*tool: ", text, re.M)
    assert _field(text, "direct MCP call order_status(O-1):") == "shipped on 2024-03-02"
    assert int(_field(text, "server processes after the block:")) == 0


def test_quiz_and_exercises_pass_in_the_instructor_edition(run):
    assert "[passed] Quiz" in run.text("quiz-check")  # the instructor edition's answers
    for n, title in [(1, "check_reply"), (2, "ShopDoor"), (3, "refund_rule"),
                     (4, "build_tool_graph")]:
        assert f"[passed] Exercise {n}: {title}" in run.text(f"ex{n}-check")


def test_slot_filling_calls_only_when_valid(run):
    text = run.text("slot-filling")
    slots = [eval(s) for s in re.findall(r"slots: (\{.*\})", text)]
    assert slots == [{"order_id": "O-3"}, {"order_id": "O-3", "amount": "forty"},
                     {"order_id": "O-3", "amount": 40.0, "reason": "damaged"}]
    replies = re.findall(r"graph: (.*)", text)
    assert "still need: amount, reason" in replies[0]
    assert "amount='forty' (expected number)" in replies[1]
    assert replies[2] == "refund request for 40.00 EUR on O-3 (damaged) filed"
    assert _field(text, "the tool ran:") == "True"


def test_mcp_as_a_node(run):
    text = run.text("mcp-node")
    assert dict(re.findall(r"node lookup (O-\d): (.*)", text)) == {
        "O-1": "shipped on 2024-03-02", "O-2": "waiting for payment",
        "O-9": "Order 'O-9' does not exist."}
    assert "as a node: 0 model turns" in text


def test_six_tool_kinds_through_one_door(run):
    text = run.text("tool-kinds")
    rows = re.findall(r"^(\w+) (\{.*\}) -> \[(\w+)\] (.*)$", text, re.M)
    assert [(name, status) for name, _, status, _ in rows] == [
        ("exchange_rate", "ok"), ("exchange_rate", "invalid_arguments"),
        ("run_command", "ok"), ("run_command", "invalid_arguments"),
        ("read_note", "ok"), ("read_note", "refused"),
        ("find_customers", "ok"), ("find_customers", "ok"),
        ("loan_payment", "ok"), ("web_search", "ok")]
    contents = [content for *_, content in rows]
    assert contents[0] == "1.0842" and re.fullmatch(r"\d{4}-\d\d-\d\d", contents[2])
    assert "outside the notes folder" in contents[5]
    assert re.findall(r'"id": "(C-\d+)"', contents[6]) == ["C-1001", "C-1004"]
    assert contents[7] == "[]"  # the injection is a search string, not SQL
    assert contents[8] == "299.71"
    assert contents[9].startswith("https://example.org/refunds")


def test_a_tool_is_a_contract(run):
    text = run.text("contract")
    assert _field(text, "what it does:") == "Current weather for a city."
    assert _field(text, "limits:").startswith("5 cities ['Berlin', 'Madrid', 'Oslo', 'Paris', 'Rome']")
    assert _field(text, "cities named in what the model reads:") == "['Paris'] of 5"


def test_description_choice_is_measured_with_n(run):
    from course.tools.descriptions import REQUESTS

    text = run.text("description-choice")
    assert text.splitlines()[0].startswith("[measured, SmolLM2-135M-Instruct, N = 9 requests")
    poor, good = run.records("description-choice")
    assert (poor["label"], good["label"]) == ("poor descriptions", "good descriptions")
    for shown in (poor, good):
        assert shown["n"] == len(REQUESTS) == len(shown["chosen"])
        assert shown["expected"] == [tool for _, tool in REQUESTS]
        assert shown["right"] == sum(c == e for c, e in zip(shown["chosen"], shown["expected"], strict=True))
    gain = good["right"] - poor["right"]
    verdict = _field(text, "difference:")
    assert verdict.startswith(f"{gain:+d} of 9:")
    assert ("moved the choice" in verdict) == (gain >= 2)  # the framing follows the counts


def test_the_notes_registry_checks_the_name_only(run):
    text = run.text("note-registry")
    assert _field(text, "allowed:") == "Berlin: 9 °C, rain"
    assert _field(text, "debug_dump:") == "ToolError: Tool 'debug_dump' is not allowed."
    assert _field(text, "delete_everything:") == "ToolError: Tool 'delete_everything' is not allowed."
    assert _field(text, "units='kelvin' runs anyway:") == "Berlin: 9 °C, rain"
    assert "town='Rome' crashes the caller: TypeError:" in text
