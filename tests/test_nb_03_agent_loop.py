"""Notebook 03: the agent loop, its stop rules, budgets in the libraries, failures, pipelines."""

import re

import pytest

pytestmark = pytest.mark.notebook


NOTEBOOK = "03_agent_loop.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_bond_trajectory_searches_then_generates_the_searched_car(run):
    text = run.text("bond-trajectory")
    assert "action:      web_search(query='car James Bond latest movie')" in text
    assert "action:      text_to_image(prompt='Aston Martin DB5')" in text
    assert "stopped: final_answer after 3 step(s)" in text
    assert "the image tool was asked for: ['Aston Martin DB5']" in text


def test_context_grows_every_step(run):
    numbers = re.search(r"input tokens per step: \[([\d, ]+)\]", run.text("state-grows"))
    values = [int(v) for v in numbers.group(1).split(",")]
    assert len(values) == 3 and values == sorted(values) and values[0] < values[-1]


def test_each_stop_rule_is_recorded(run):
    lines = run.text("stop-rules").splitlines()
    reasons = {line.split("->")[0].strip(): line.split("->")[1].split()[0] for line in lines}
    assert reasons == {
        "no limits but 12 steps, repeats allowed": "final_answer",
        "max_steps=5, repeats allowed": "max_steps",
        "token_budget=2000, repeats allowed": "token_budget",
        "cost_budget=$0.004, repeats allowed": "cost_budget",
        "repeat detection on": "repeat",
    }
    assert "at step 9" in lines[0] and "at step 5" in lines[1] and "at step 3" in lines[4]
    text = run.text("model-error")
    assert "stopped: model_error after 3 step(s)" in text and "steps kept: 3" in text


def test_plan_is_revised(run):
    text = run.text("plan-revision")
    assert "plan 2: rate verified: use the reference rate" in text
    assert "stopped: final_answer" in text


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


def test_widgets_show_and_move_the_stop(run):
    assert run.has_widget("budgets-widget")
    moved = run.text("widget-moved").splitlines()
    assert moved[0].startswith("stopped: final_answer after 9 step(s)")
    assert moved[1].startswith("stopped: token_budget after")
    recorded = run.text("recorded-widget")
    assert "stopped: token_budget after 2 step(s) (5428 tokens > budget 5000)" in recorded
    assert "unit: tokens as in the recording (recorded/derived; Qwen/Qwen3-4B-Instruct-2507" in recorded
    assert "word-and-punctuation count" in moved[0]  # the scripted run names its unit


def test_reliability_monte_carlo_matches_the_product(run):
    text = run.text("reliability")
    assert "0.95^10 = 0.5987" in text
    estimates = [float(x) for x in re.findall(r"runs succeeded = ([\d.]+)", text)]
    assert abs(estimates[0] - 0.95**10) < 0.02
    assert abs(estimates[1] - 0.9975**10) < 0.02 and estimates[1] > estimates[0]
    assert run.has_image("reliability-plot")


def test_failure_table_demonstrations(run):
    assert "unknown_tool (not executed)" in run.text("failure-wrong-args")
    assert "invalid_arguments (not executed)" in run.text("failure-wrong-args")
    fabricated = run.text("failure-fabricated")
    assert "final answer states 22, which no tool returned" in fabricated
    assert "fabricated tool message" in fabricated and "no problems" in fabricated
    looping = run.text("failure-looping")
    assert "repeat detection off: stopped: max_steps" in looping
    assert "repeat detection on:  stopped: repeat after 3" in looping
    accumulation = run.text("failure-accumulation")
    assert "without verification: 250 USD = 270.00 EUR" in accumulation
    assert "with verification:    250 USD = 231.50 EUR" in accumulation
    injection = run.text("failure-injection")
    assert re.search(r"send_email allowed\): the model called send_email 1 time\(s\); emails actually sent: 1", injection)
    assert re.search(r"not allowed: the model called send_email 1 time\(s\); emails actually sent: 0 \(not_allowed\)",
                     injection)
    cost = run.text("failure-cost")
    saved = re.search(r"input tokens: (\d+) -> (\d+) \((\d+)% fewer\); same answer: True", cost)
    assert saved and int(saved.group(2)) < int(saved.group(1))
    effects = run.text("failure-side-effects")
    assert "'pallet-B': 0" in effects and "would have written: ['set pallet-B from 12 to 0']" in effects


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
    assert "label probabilities" in run.text("pipeline-outputs")
    table = "".join(out.get("data", {}).get("text/markdown", "")
                    for out in run.cells("note-table")[0].outputs)
    assert "(measured)" in table and "who decides the steps" in table


def test_exercises_pass(run):
    for n, title in [(1, "first_repeat"), (2, "token_budget_for"), (3, "success_with_retries"),
                     (4, "keep_last_observation")]:
        assert f"[passed] Exercise {n}: {title}" in run.text(f"ex{n}-check")


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
