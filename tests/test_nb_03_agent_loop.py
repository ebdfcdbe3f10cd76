"""Notebook 03: the agent loop, its stop rules, budgets, failures with their remedies, pipelines.

The records the lesson displays (a trajectory, the stop table, a run, the measured comparison,
and each demonstration's ``Line``: a printed line that keeps its values) are read as values
(``run.record`` / ``run.records``); text is read only where it is what a student must see (a
provenance label, a drawn graph, the length of an output, a check's verdict)."""

import pytest

pytestmark = pytest.mark.notebook


NOTEBOOK = "03_agent_loop.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_bond_trajectory_searches_then_generates_the_searched_car(run):
    trajectory = run.record("bond-trajectory")
    assert trajectory["label"] == "reconstructed (from the note): the ideal Bond trajectory"
    calls = [s["call"] for s in trajectory["steps"]]
    assert calls == ["web_search(query='car James Bond latest movie')",
                     "text_to_image(prompt='Aston Martin DB5')", None]
    assert trajectory["steps"][-1]["final_answer"].startswith("<image")
    assert "Aston Martin DB5" in trajectory["steps"][0]["observation"]
    assert run.text("bond-trajectory").startswith("[reconstructed (from the note)")


def test_the_lesson_loop_is_a_step_in_two_halves_without_other_stops(run):
    source = run.cells("loop-step")[0].source
    assert source.startswith("# saved in course.loop.agent_loop")
    assert "def decide(" in source and "def call_and_observe(" in source
    assert "while not steps or steps[-1].final_answer is None" in run.cells("bond-trajectory")[0].source


def test_context_grows_every_step(run):
    values = [s["input_tokens"] for s in run.record("bond-trajectory")["steps"]]
    assert len(values) == 3 and values == sorted(values) and values[0] < values[-1]
    assert run.record("state-grows")["tokens"] == values


def test_no_red_log_lines_and_no_wall_of_output(run):
    for cell in run.nb.cells:
        if cell.cell_type != "code":
            continue
        streams = [o for o in cell.outputs if o.get("output_type") == "stream"]
        assert not [o for o in streams if o.name == "stderr"], cell.id
        assert "Agent interrupted" not in run.text(cell.id), cell.id
        assert len(run.text(cell.id)) <= 3000, (cell.id, len(run.text(cell.id)))


def test_each_stop_rule_is_recorded(run):
    table = run.record("stop-rules")
    assert {label: (row["stop_reason"], row["steps"]) for label, row in table.items()} == {
        "final answer only (12 steps allowed)": ("final_answer", 9),
        "max_steps=5": ("max_steps", 5),
        "token_budget=2000": ("token_budget", 4),
        "cost_budget=$0.004": ("cost_budget", 3),
        "repeat detection": ("repeat", 3),
    }
    assert table["token_budget=2000"]["total_tokens"] > 2000  # over by the step whose call never ran


def test_plan_is_revised(run):
    conversion = run.record("plan-revision")
    assert len(conversion["plan_history"]) == 2
    assert conversion["plan_history"][1][0] == "rate verified: use the reference rate"
    assert conversion["stop_reason"] == "final_answer"
    assert conversion["final_answer"] == "250 USD = 231.50 EUR"


def test_widgets_show_and_move_the_stop(run):
    assert run.has_widget("budgets-widget") and run.has_widget("recorded-widget")
    replay = run.record("recorded-widget")
    assert (replay["stop_reason"], len(replay["steps"])) == ("token_budget", 2)
    assert replay["stop_detail"] == "5428 tokens > budget 5000"
    assert [s["input_tokens"] for s in replay["steps"]] == [2083, 3345]
    assert replay["token_unit"].startswith("tokens as in the recording (recorded/derived; "
                                           "Qwen/Qwen3-4B-Instruct-2507")


def test_reliability_monte_carlo_matches_the_product(run):
    product, plain, retried, with_retry = run.records("reliability")
    assert (product["p"], product["n"], round(product["value"], 4)) == (0.95, 10, 0.5987)
    assert round(with_retry["value"], 4) == round((1 - 0.05**2) ** 10, 4)
    assert (plain["retries"], retried["retries"], plain["n"], plain["p"]) == (0, 1, 10, 0.95)
    estimates = [sim["successes"] / sim["trials"] for sim in (plain, retried)]
    assert abs(estimates[0] - 0.95**10) < 0.02
    assert abs(estimates[1] - 0.9975**10) < 0.02 and estimates[1] > estimates[0]
    assert run.has_image("reliability")


def test_the_note_tables_are_verbatim(run):
    failures = run.cells("c25")[0].source
    for row in ("| Looping | the same call, the same result, no progress | step and cost budgets, "
                "repeat detection |",
                "| Silent side effects | a write happened that should not have | confirmation, "
                "dry-run modes, reversible actions first |"):
        assert row in failures, row
    assert failures.count("\n| ") == 8  # header, rule and seven rows
    table = run.cells("c43b")[0].source
    assert "| Cost | fixed | one extra generation | unbounded without budgets |" in table
    assert "| Predictability | high | medium | low |" in table


def test_failure_rows_show_their_remedies(run):
    for cell in ("failure-fabricated", "failure-accumulation", "failure-cost", "failure-side-effects"):
        assert run.cells(cell)[0].source.startswith("# saved in course.loop.remedies"), cell
    door = [(r["name"], r["arguments"], r["status"], r["executed"])
            for r in run.records("failure-wrong-args")]
    assert door == [("weather", {"city": "Paris"}, "unknown_tool", False),
                    ("get_weather", {"city": "Paris", "units": "kelvin"}, "invalid_arguments", False),
                    ("get_weather", {"city": "Paris"}, "ok", True)]
    fabricated = [(r["answer"], r["numbers"]) for r in run.records("failure-fabricated")]
    assert fabricated == [("It is 22 °C and sunny in Paris.", ["22"]), ("It is 14 °C in Paris.", [])]
    verdict, *runs = run.records("failure-accumulation")
    assert verdict["verdict"] is False
    assert [(r["model"], r["answer"]) for r in runs] == [
        ("scripted: conversion agent (no verification)", "250 USD = 270.00 EUR"),
        ("scripted: conversion agent (with verification)", "250 USD = 231.50 EUR")]
    injection = [(r["allowed"], r["status"], r["sent"]) for r in run.records("failure-injection")]
    assert injection == [(True, "ok", 1), (False, "not_allowed", 0)]
    cost = run.record("failure-cost")["runs"]
    full, compact = cost["full"], cost["compact"]
    assert compact["input_tokens"] < full["input_tokens"] and compact["final_answer"] == full["final_answer"]
    assert full["token_unit"] == compact["token_unit"] == "SmolLM2-135M-Instruct tokenizer"
    assert [s["input_tokens"] for s in full["steps"]] == sorted(s["input_tokens"] for s in full["steps"])
    effects = run.record("failure-side-effects")
    assert effects["runs"]["approval"]["steps"][1]["observation"].startswith("not executed: set_stock")
    facts = effects["facts"]
    assert facts["stock before"] == {"pallet-A": 40, "pallet-B": 12}
    assert facts["live stock"] == {"pallet-A": 40, "pallet-B": 0}  # the live run wrote
    assert facts["dry-run stock"] == facts["stock before"]
    assert facts["would have written"] == ["set_stock({'item': 'pallet-B', 'units': 0})"]
    assert facts["asked"] == facts["would have written"]  # the person was asked, and said no:
    assert facts["approval stock"] == facts["stock before"]


def test_pipeline_vs_agent_figures_present(run):
    from course.loop.pipelines import PipelineVsAgent

    table = run.record("pipeline-vs-agent")
    assert list(table) == ["pipeline", "agent"]
    for name in table:
        assert set(table[name]["figures"]) == set(PipelineVsAgent.KEYS), name
    calls = [table[name]["figures"]["model calls per run"] for name in table]
    assert calls[0] == 1.0 and 1.0 <= calls[1] <= 2.0  # pipeline: one call; agent: up to its 2 steps
    text = run.text("pipeline-vs-agent")  # what the figures are from, as the student reads it
    assert "probe model: SmolLM2-135M-Instruct (bundled)" in text
    assert "agent [measured] model: agent model (ChatHuggingFace)" in text
    assert table["agent"]["model"] == ("agent model (ChatHuggingFace), prompts continued from the "
                                       "first prompt's KV cache")  # its seconds say how
    said, agent_said, floor = run.records("agent-floor")
    assert said["outputs"] and all(o.startswith("label probabilities:") for o in said["outputs"])
    assert len(agent_said["outputs"]) == 3 * 2  # 3 runs x 2 steps
    assert (floor["calls"], floor["outcome"]) == (2, "billing")
    pipeline_tokens = table["pipeline"]["figures"]["tokens per run"]
    assert floor["tokens"] > 2 * pipeline_tokens  # each step re-reads instructions, ticket and history
    assert abs(floor["times"] - floor["tokens"] / pipeline_tokens) < 1e-9
    assert table["agent"]["figures"]["runs"] == 3 and 0 <= table["agent"]["figures"]["correct"] <= 3
    measured = run.record("note-table")["figures"]
    assert measured["pipeline"]["runs"] == measured["agent"]["runs"] == 3
    assert measured["pipeline"]["model calls per run"] == 1
    assert measured["pipeline"]["correct"] == 3
    markdown = "".join(out.get("data", {}).get("text/markdown", "")
                       for out in run.cells("note-table")[0].outputs)
    assert "measured here (N = 3 runs each, one ticket)" in markdown


TUNED = "SmolLM2-135M-Instruct + LoRA smollm2-tools (course/data/adapters)"


def test_the_fine_tuned_model_runs_the_routing_loop_beside_the_base(run):
    """Base + the committed adapter on the same ticket, loop and sampling (measured): it learnt
    smolagents' code blocks, not this loop's call syntax, and routes no ticket."""
    table, replies, *lines = run.records("tuned-routing")
    assert list(table) == ["agent, active model", "agent, base + adapter"]
    assert table["agent, base + adapter"]["model"] == (f"{TUNED} (ChatHuggingFace), prompts continued "
                                                       "from the first prompt's KV cache")
    assert table["agent, active model"]["model"].startswith("agent model (ChatHuggingFace)")
    text = run.text("tuned-routing")  # the provenance the student reads, once per row
    assert text.count(f"agent, base + adapter [measured] model: {TUNED} (ChatHuggingFace)") == 1
    assert text.count("agent, active model [measured] model: agent model (ChatHuggingFace)") == 1
    base = run.record("pipeline-vs-agent")["agent"]  # the base's row is the section's own runs
    assert table["agent, active model"]["figures"] == base["figures"]
    tuned = table["agent, base + adapter"]["figures"]
    assert tuned["correct"] == 0
    assert tuned["model calls per run"] == 2.0  # no reply the loop read as a call or answer
    routed, formats, pipeline = lines[:2], lines[2:4], lines[4]
    assert [(r["name"], r["department"], r["correct"], r["runs"]) for r in routed] == [
        ("agent, active model", "billing", base["figures"]["correct"], 3),
        ("agent, base + adapter", "billing", 0, 3)]
    assert len(replies["replies"]) == 6  # 3 runs x 2 steps
    calls = sum("CALL route_to(" in r for r in replies["replies"])
    assert calls == 2 and (formats[1]["name"], formats[1]["calls"], formats[1]["replies"]) == (
        "agent, base + adapter", calls, 6)
    said = run.records("agent-floor")[1]["outputs"]
    base_calls = sum("CALL route_to(" in r for r in said)  # the base: fewer (the prose says so)
    assert base_calls < calls and (formats[0]["name"], formats[0]["calls"], formats[0]["replies"]) == (
        "agent, active model", base_calls, 6)
    assert any("CALL route_to(payment=" in r for r in replies["replies"])  # a parameter the tool lacks
    assert pipeline["output"].startswith("label probabilities: billing ")
    assert pipeline["output"].endswith("-> billing") and (pipeline["correct"], pipeline["runs"]) == (3, 3)
    assert pipeline["scores"]["billing"] > 0.9, pipeline
    cells = [c.id for c in run.nb.cells]
    assert cells.index("exercises") < cells.index("going-further") < cells.index("tuned-routing")


def test_the_four_cases_that_need_no_agent(run):
    pipeline = run.record("pipeline-vs-agent")["pipeline"]["figures"]  # 1. the pipeline (above)
    assert (pipeline["correct"], pipeline["runs"]) == (3, 3)
    assert run.record("not-function-call")["amount"] == "231.50"  # 2. known arguments: a function call
    loop = run.record("plan-revision")  # the agent loop the function call stands beside
    assert (len(loop["steps"]), loop["final_answer"]) == (4, "250 USD = 231.50 EUR")
    shaped, valid = run.records("not-structured-output")  # 3. a schema-shaped answer (greedy)
    assert shaped["model"] == "SmolLM2-135M-Instruct"
    assert shaped["fields"] == {"department": "billing", "order_id": 1234} and valid["valid"] is True
    assert run.text("not-structured-output").startswith("structured output [measured, SmolLM2-135M-")
    costly = run.text("not-costly-action")  # 4. costly and unverifiable: no loop
    assert costly.startswith("[scripted: a support agent that wants to refund]")
    door, decide = run.records("not-costly-action")
    assert (door["status"], door["sent"]) == ("not_allowed", 0)
    assert decide["call"] == {"name": "refund", "arguments": {"order_id": 1234, "amount": 59.0}}


def test_quiz_and_exercises_pass(run):
    assert "[passed] Quiz" in run.text("quiz-check")
    assert run.has_widget("quiz") and run.text("quiz").count("\nq") == 5
    for n, title in [(1, "first_repeat"), (2, "agent_loop"), (3, "call_with_retries"),
                     (4, "keep_last_observation"), (6, "no_progress")]:
        assert f"[passed] Exercise {n}: {title}" in run.text(f"ex{n}-check")


def test_chapter_shape(run):
    ids = [c.id for c in run.nb.cells]
    assert ids[1] == "goals" and "Learning goals" in run.nb.cells[1].source
    order = [ids.index(i) for i in ("goals", "loop-step", "c45-summary", "quiz-heading", "quiz",
                                    "quiz-check", "exercises", "ex1-solution",
                                    "going-further")]
    assert order == sorted(order)
    assert run.cells("exercises")[0].source.startswith("## Exercises")
    core = ids[:ids.index("quiz-heading")]
    for later in ("planning-smolagents", "smolagents-budgets", "langgraph-budgets", "model-error",
                  "limit-knowing", "tuned-routing"):
        assert later not in core, later  # beyond the note, or appendix A4's model: Going further


def test_smolagents_plans_every_two_steps(run):
    first = run.text("planning-smolagents").splitlines()[0]  # the provenance label
    assert first == "[scripted model; smolagents CodeAgent, planning_interval=2]"
    *steps, answer = run.records("planning-smolagents")
    kinds = ["plan" if "plan" in s else s["step"] for s in steps]
    assert kinds == ["plan", 1, 2, "plan", 3]
    assert steps[0]["plan"][1] == "2. check it with reference_rate"
    assert steps[3]["plan"][0] == "1. use the reference rate 0.926"
    assert (steps[1]["seen"], steps[2]["seen"]) == ("1 USD = 1.08 EUR", "1 USD = 0.926 EUR")
    prompts = [s["tokens"] for s in steps]
    assert prompts[0] < prompts[1] and prompts[3] < prompts[2]  # plans: own prompts
    assert str(answer["answer"]).startswith("231.50")


def test_smolagents_and_langgraph_limits(run):
    repeat, budget, steps = run.records("smolagents-budgets")
    assert (repeat["stop_reason"], repeat["steps"]) == ("repeat", 2)
    assert budget["stop_reason"] == "token_budget" and budget["total_tokens"] > 6000
    assert (steps["stop_reason"], steps["steps"]) == ("max_steps", 2)
    assert all("scripted" in r["model_name"] for r in (repeat, budget, steps))
    recursion, in_state, checkpoint = run.records("langgraph-budgets")
    assert (recursion["stop_reason"], recursion["steps"]) == ("recursion_limit", 4)
    assert in_state["stop_reason"] == "token_budget" and in_state["stop_detail"].endswith("(budget in state)")
    assert in_state["total_tokens"] > 1200
    assert checkpoint["messages"] == 8
    broken = run.record("model-error")
    assert (broken["stop_reason"], len(broken["steps"])) == ("model_error", 3)
    assert broken["steps"][-1]["note"] == "model error: ValueError: could not parse the model's output"


def test_graphs_are_drawn_from_the_graphs(run):
    for cell in ("loop-figure", "budget-graph-drawing"):
        outputs = run.cells(cell)[0].outputs
        data = next(o["data"] for o in outputs if "data" in o)
        assert "image/png" in data and "graph TD" in data["text/vnd.mermaid"], cell
    loop = run.text("loop-figure")
    assert "model decides -.-> stop rules checked" in loop and "observation appended --> model decides" in loop
    assert "agent -.-> budget_stop" in run.text("budget-graph-drawing")


def test_limitations_are_demonstrated(run):
    knowing = run.record("limit-knowing")
    rows = knowing["rows"]
    assert len(rows) == 6 and sum(r["needs_tool"] for r in rows) == 3
    assert all(r["right"] == (r["called"] == r["needs_tool"]) for r in rows)  # called == needed
    assert knowing["right"] == sum(r["right"] for r in rows)
    naive, bm25 = (run.records("limit-tools")[0][name] for name in ("naive keyword search", "BM25 search"))
    assert (len(naive["queries"]), len(bm25["queries"])) == (2, 1)
    assert (naive["steps"], bm25["steps"]) == (3, 2)
    offline, ranked = run.records("limit-tools")[1:]
    assert offline["tool"] == "OfflineWebSearchTool" and offline["titles"][0].startswith("Current plan vs new plan")
    assert ranked["tool"] == "BM25WebSearchTool" and ranked["titles"][0].startswith("Weather in Paris right now")
    budget = run.record("limit-budget")
    row72 = budget["rows"]["bond_reference_72b"]
    assert (row72["succeeded"], row72["tokens"], row72["figure"], row72["within_budget"],
            row72["counted"]) == (True, 17818, "recorded", False, False)  # 1.8x the budget: a failure
    assert len(budget["rows"]) == 5 and budget["counted"] < budget["succeeded"]
    recorded, here = run.records("limit-budget-pages")
    assert (recorded["tokens"], recorded["total"]) == ([2152, 5475, 10191], 17818)
    here = here["tokens"]
    assert abs(here[0] - 2152) < 50 and sum(here) < 17818 / 2  # same prompt; the pages made the cost
