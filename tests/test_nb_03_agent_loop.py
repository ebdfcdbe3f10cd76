"""Notebook 03: the agent loop, its stop rules, budgets, failures with their remedies, pipelines.

The records the lesson displays (a trajectory, the stop table, a run, the measured comparison)
are read as values (``run.record``); short printouts of demonstrations are read as text."""

import re

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
    printed = re.search(r"input tokens per step: \[([\d, ]+)\]", run.text("state-grows"))
    assert [int(v) for v in printed.group(1).split(",")] == values


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
    text = run.text("plan-revision")
    assert "plan 2: rate verified: use the reference rate" in text
    conversion = run.record("plan-revision")
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
    assert "0.95^10 = 0.5987" in run.text("reliability")
    plain, retried = run.records("reliability")
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
    door = run.text("failure-wrong-args")
    assert "weather({'city': 'Paris'}): unknown_tool, executed=False" in door
    assert "units': 'kelvin'}): invalid_arguments, executed=False" in door
    assert "get_weather({'city': 'Paris'}): ok, executed=True" in door
    fabricated = run.text("failure-fabricated")
    assert "'It is 22 °C and sunny in Paris.' -> numbers no tool returned: ['22']" in fabricated
    assert "'It is 14 °C in Paris.' -> numbers no tool returned: []" in fabricated
    accumulation = run.text("failure-accumulation")
    assert "agrees with the reference 0.926: False" in accumulation
    assert "(no verification): 250 USD = 270.00 EUR" in accumulation
    assert "(with verification): 250 USD = 231.50 EUR" in accumulation
    injection = run.text("failure-injection")
    assert "send_email allowed=True" in injection and "door: ok; emails actually sent: 1" in injection
    assert "door: not_allowed; emails actually sent: 0" in injection
    cost = run.record("failure-cost")["runs"]
    full, compact = cost["full"], cost["compact"]
    assert compact["input_tokens"] < full["input_tokens"] and compact["final_answer"] == full["final_answer"]
    assert full["token_unit"] == compact["token_unit"] == "SmolLM2-135M-Instruct tokenizer"
    assert [s["input_tokens"] for s in full["steps"]] == sorted(s["input_tokens"] for s in full["steps"])
    effects = run.text("failure-side-effects")
    assert run.record("failure-side-effects")["runs"]["approval"]["steps"][1]["observation"].startswith(
        "not executed: set_stock")
    assert "'pallet-B': 0}" in effects  # the live run wrote
    assert "would have written: [\"set_stock({'item': 'pallet-B', 'units': 0})\"]" in effects
    assert "said no; stock {'pallet-A': 40, 'pallet-B': 12}" in effects


def test_pipeline_vs_agent_figures_present(run):
    text = run.text("pipeline-vs-agent")
    for figure in ("model calls per run", "tokens per run", "seconds per run",
                   "distinct outcomes", "distinct trajectories", "outcomes", "correct"):
        assert figure in text, figure
    calls = [float(v) for v in re.findall(r"model calls per run = (\S+)", text)]
    assert calls[0] == 1.0 and 1.0 <= calls[1] <= 2.0  # pipeline: one call; agent: up to its 2 steps
    assert "probe model: SmolLM2-135M-Instruct (bundled)" in text
    assert re.search(r"agent \[measured\] model: agent model \(ChatHuggingFace\)", text)
    assert "prompts continued from the first prompt's KV cache" in text  # its seconds say how
    floor = run.text("agent-floor")
    assert "label probabilities" in floor
    assert re.search(r"^agent that works \[scripted\]: 2 model calls, \d+ tokens -> billing", floor, re.M)
    pipeline_tokens = int(re.search(r"pipeline \[measured\]: 1 model call, (\d+) tokens", floor).group(1))
    floor_tokens = int(re.search(r"2 model calls, (\d+) tokens", floor).group(1))
    assert floor_tokens > 2 * pipeline_tokens  # each step re-reads instructions, ticket and history
    assert re.search(r"^live agent \[measured\]: routed right in \d of 3 runs", floor, re.M)
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
    text = run.text("tuned-routing")
    assert f"agent, base + adapter [measured] model: {TUNED} (ChatHuggingFace), prompts " \
           "continued from the first prompt's KV cache" in text, text
    assert text.count("agent, active model [measured] model: agent model (ChatHuggingFace)") == 1
    base = run.text("pipeline-vs-agent")  # the base's row is the section's own runs, unchanged
    routed = re.search(r"agent \[measured\].*?correct = (\d+)", base, re.S).group(1)
    assert f"agent, active model: routed to 'billing' in {routed} of 3 runs" in text
    tuned = re.search(r"agent, base \+ adapter \[measured\].*?correct = (\d+)", text, re.S)
    assert tuned.group(1) == "0" and "agent, base + adapter: routed to 'billing' in 0 of 3 runs" in text
    assert float(re.search(r"agent, base \+ adapter \[.*?model calls per run = (\S+)", text,
                           re.S).group(1)) == 2.0  # no reply the loop read as a call or answer
    replies = text.split("(every step of every run):\n")[1].split("\nagent, active")[0].splitlines()
    assert len(replies) == 6  # 3 runs x 2 steps
    calls = sum("CALL route_to(" in r for r in replies)
    assert calls == 2 and f"agent, base + adapter: {calls} of 6 replies hold the loop's call" in text
    said = run.text("agent-floor").split("(every step of every run):\n")[1].split("\npipeline [")[0]
    base_calls = said.count("CALL route_to(")  # the base, default setting: fewer (the prose says so)
    assert base_calls < calls and f"agent, active model: {base_calls} of 6 replies hold" in text
    assert "CALL route_to(payment=" in text  # a parameter the tool does not have
    pipeline = re.search(r"pipeline, base \+ adapter: label probabilities: billing (\S+), .*"
                         r"-> billing; routed right in 3 of 3 runs", text)
    assert pipeline and float(pipeline.group(1).rstrip(",")) > 0.9, text
    cells = [c.id for c in run.nb.cells]
    assert cells.index("exercises") < cells.index("going-further") < cells.index("tuned-routing")


def test_the_four_cases_that_need_no_agent(run):
    assert "3 of 3" in run.text("agent-floor")  # 1. the pipeline (above)
    call = run.text("not-function-call")  # 2. known arguments: a function call
    assert "function call: 0 model calls, 2 tool calls through the door -> 231.50 EUR" in call
    assert re.search(r"agent loop \[scripted\]: 4 model calls, \d+ tokens .* -> 250 USD = 231.50 EUR", call)
    shaped = run.text("not-structured-output")  # 3. a schema-shaped answer (bundled model, greedy)
    assert ("structured output [measured, SmolLM2-135M-Instruct, constrained decoding]: 1 model call "
            "-> {'department': 'billing', 'order_id': 1234}") in shaped
    assert "valid against the schema: True" in shaped
    costly = run.text("not-costly-action")  # 4. costly and unverifiable: no loop
    assert costly.startswith("[scripted: a support agent that wants to refund]")
    assert "door: not_allowed; refunds actually sent: 0" in costly
    assert "for a person to decide, outside any loop: refund(order_id=1234, amount=59.0)" in costly


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
    lines = run.text("planning-smolagents").splitlines()
    assert lines[0] == "[scripted model; smolagents CodeAgent, planning_interval=2]"
    kinds = [line.split(" (")[0].strip() for line in lines[1:-1]]
    assert kinds == ["planning step", "action step 1", "action step 2", "planning step", "action step 3"]
    assert "check it with reference_rate" in lines[1] and "use the reference rate 0.926" in lines[4]
    assert "-> 1 USD = 1.08 EUR" in lines[2] and "-> 1 USD = 0.926 EUR" in lines[3]
    prompts = [int(t) for t in re.findall(r"prompt (\d+) tokens", "\n".join(lines))]
    assert len(prompts) == 5 and prompts[0] < prompts[1] and prompts[3] < prompts[2]  # plans: own prompts
    assert lines[-1].startswith("answer: 231.50")


def test_smolagents_and_langgraph_limits(run):
    smol = run.text("smolagents-budgets")
    assert "stopped: repeat after 2 step(s)" in smol
    assert "stopped: token_budget after" in smol
    assert "stopped: max_steps after 2 step(s)" in smol
    assert "scripted" in smol
    graph = run.text("langgraph-budgets")
    assert "stopped: recursion_limit after 4 step(s)" in graph
    assert "stopped: token_budget after" in graph and "budget in state" in graph
    assert "checkpoint after the GraphRecursionError holds 8 messages" in graph
    text = run.text("model-error")
    assert "stopped: model_error after 3 step(s)" in text and "steps kept: 3" in text


def test_graphs_are_drawn_from_the_graphs(run):
    for cell in ("loop-figure", "budget-graph-drawing"):
        outputs = run.cells(cell)[0].outputs
        data = next(o["data"] for o in outputs if "data" in o)
        assert "image/png" in data and "graph TD" in data["text/vnd.mermaid"], cell
    loop = run.text("loop-figure")
    assert "model decides -.-> stop rules checked" in loop and "observation appended --> model decides" in loop
    assert "agent -.-> budget_stop" in run.text("budget-graph-drawing")


def test_limitations_are_demonstrated(run):
    knowing = run.text("limit-knowing")
    rows = re.findall(r"needs_tool=(True|False) called=(True|False) decision_right=(True|False)", knowing)
    assert len(rows) == 6 and sum(r[0] == "True" for r in rows) == 3
    assert all((r[0] == r[1]) == (r[2] == "True") for r in rows)  # "right" means called == needed
    right = int(re.search(r"decisions right: (\d+) of 6", knowing).group(1))
    assert right == sum(r[2] == "True" for r in rows)
    tools = run.text("limit-tools")
    naive = re.search(r"naive keyword search: steps=(\d+) searches=(\d+)", tools).groups()
    bm25 = re.search(r"BM25 search: steps=(\d+) searches=(\d+)", tools).groups()
    assert naive != bm25 and (naive, bm25) == (("3", "2"), ("2", "1"))
    assert "OfflineWebSearchTool, replayed step 1 saw: ['Current plan vs new plan" in tools
    assert "BM25WebSearchTool, replayed step 1 saw: ['Weather in Paris right now" in tools
    budget = run.text("limit-budget")
    row72 = re.search(r"bond_reference_72b: succeeded=(\w+) tokens=(\d+) \[recorded\] "
                      r"within_budget=(\w+) counted_as_success=(\w+)", budget).groups()
    assert row72 == ("True", "17818", "False", "False")  # a success at 1.8x the budget counts as failure
    counts = re.search(r"successes: (\d+) of 5 on outcome alone; (\d+) within the budget", budget)
    assert int(counts.group(2)) < int(counts.group(1))
    pages = run.text("limit-budget-pages")
    assert "[recorded, real web]: [2152, 5475, 10191], sum 17818" in pages
    here = [int(v) for v in re.search(r"offline pages \[measured, Qwen3 tokenizer\]: \[([\d, ]+)\]",
                                      pages).group(1).split(",")]
    assert abs(here[0] - 2152) < 50 and sum(here) < 17818 / 2  # same prompt; the pages made the cost
