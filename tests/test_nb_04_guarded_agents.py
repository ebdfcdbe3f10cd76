"""Chapter 4 executed headless (scripted approvals): the lesson-carrying outputs of 04_guarded_agents.ipynb."""

import re

NOTEBOOK = "04_guarded_agents.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_graph_stops_before_the_critical_call(run):
    text = run.text("graph-stops")
    assert "graph stopped before node: ('confirm',)" in text
    assert "waiting for approval: move_stock" in text
    assert "executed so far: ['book_transfer']" in text
    assert "RTM stock of SKU-100 still: 15" in text


def test_edit_changes_the_executed_arguments(run):
    text = run.text("edit")
    assert "'quantity': 30" in text and "RTM stock of SKU-100 now: 45" in text
    assert "next waiting: amend_declaration" in text


def test_rejection_reaches_the_model_as_a_refusal(run):
    text = run.text("reject")
    assert "the model was told: A human (human:dana) denied" in text and "NOT run" in text
    assert "{'SKU-100': 20}" in text  # the declaration is unchanged
    assert re.search(r"amend_declaration\s+reject\s+human:dana\s+confirmation_denied", text)


def test_widget_renders_and_scripted_policy_decides(run):
    assert run.has_widget("widget")
    text = run.text("scripted-policy")
    assert "['move_stock', 'amend_declaration']" in text
    assert re.search(r"move_stock\s+approve\s+scripted:policy\s+ok", text)


def test_pending_approval_survives_another_process(run):
    text = run.text("restart")
    assert "still waiting for: move_stock" in text
    assert "after approval, executed here: [('move_stock'" in text


def test_specialists_see_only_their_tools(run):
    text = run.text("specialists")
    assert "supply   tools=['get_stock', 'move_stock']" in text
    assert "transit  tools=['book_transfer', 'find_lane']" in text
    assert "export   tools=['amend_declaration', 'get_declaration']" in text
    isolation = run.text("isolation")
    assert "Tool 'amend_declaration' does not exist" in isolation
    assert "nobody can confirm" in isolation


def test_coordinator_detects_the_lost_context(run):
    text = run.text("lossy")
    assert "CONFLICT: supply planned for site HAM, but the order ships from RTM" in text
    assert "REJECTED by the coordinator" in text


def test_injection_side_effects_without_approval_are_zero(run):
    assert re.search(r"payloads tried (\d+)", run.text("guarded"))
    tried = int(re.search(r"payloads tried (\d+)", run.text("guarded")).group(1))
    assert tried >= 30
    assert "executed without approval 0" in run.text("guarded")
    naive = int(re.search(r"executed without approval (\d+)", run.text("naive")).group(1))
    assert naive > 0  # the payloads are real attacks: without the guards they work
    assert "executed without approval 0" in run.text("local-model")
    assert "&lt;/tool_output&gt;" in run.text("tagging")


def test_sandbox_contains_resources_and_nothing_escapes(run):
    assert "memory bomb: memory" in run.text("contained")
    assert "sleeper:     timeout" in run.text("contained")
    assert "the kernel is still here: 42" in run.text("contained")
    summary = re.search(r"escape attempts tried: (\d+), escaped: (\d+)", run.text("escape-suite"))
    assert int(summary.group(1)) >= 30 and int(summary.group(2)) == 0
    assert "escaped: 2" in run.text("executor-alone")


def test_closing_note_and_exercises(run):
    note = run.text("closing-note")
    assert "side effects executed without approval: 0" in note and "escaped: 0" in note
    for n in range(1, 5):
        assert "[passed]" in run.text(f"ex{n}-check"), run.text(f"ex{n}-check")
