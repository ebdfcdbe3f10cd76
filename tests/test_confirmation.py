"""The approval graph: no critical call before approval, edit, reject, audit, restart, bad input."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from course.checkpoints import thread_config
from course.guards.confirmation import (
    ApprovalAudit,
    ApprovalDecision,
    ScriptedApprover,
    ScriptedPlanModel,
    build_approval_graph,
    decide,
    pending_request,
    run_with_approver,
)
from course.guards.warehouse import build_warehouse_graph
from course.tools.gateway import ToolGateway
from course.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]


def start(graph, thread="t"):
    config = thread_config(thread)
    graph.invoke({"messages": [HumanMessage("Prepare order ORD-1.")]}, config)
    return config


def test_no_critical_call_executes_before_approval():
    graph, warehouse = build_warehouse_graph()
    config = start(graph)
    assert pending_request(graph, config).tool == "move_stock"
    assert [name for name, _ in warehouse.executed] == ["book_transfer"]  # the write only
    assert warehouse.stock_of("RTM", "SKU-100") == 15
    # invoking again without a decision does not run it either
    graph.invoke(None, config)
    assert "move_stock" not in [name for name, _ in warehouse.executed]
    decide(graph, config, ApprovalDecision("approve", "human:test"))
    assert warehouse.executed[-1][0] == "move_stock"
    assert warehouse.stock_of("RTM", "SKU-100") == 40


def test_edit_changes_the_executed_arguments():
    graph, warehouse = build_warehouse_graph()
    config = start(graph)
    args = dict(pending_request(graph, config).arguments, quantity=10)
    decide(graph, config, ApprovalDecision("edit", "human:test", args))
    assert warehouse.executed[-1] == ("move_stock", args)
    audit = graph.get_state(config).values["audit"]
    assert audit[-1]["decision"] == "edit" and audit[-1]["executed_arguments"]["quantity"] == 10
    assert audit[-1]["proposed"]["quantity"] == 25


def test_rejection_returns_a_refusal_string_to_the_model():
    graph, warehouse = build_warehouse_graph()
    config = start(graph)
    decide(graph, config, "reject")
    decide(graph, config, ApprovalDecision("reject", "human:test"))
    state = graph.get_state(config).values
    tool_messages = {m.name: m.content for m in state["messages"] if m.type == "tool"}
    assert "denied" in tool_messages["move_stock"] and "NOT run" in tool_messages["move_stock"]
    assert "amend_declaration" in tool_messages
    assert [n for n, _ in warehouse.executed] == ["book_transfer"]
    # the scripted coordinator's final turn quotes what it was told
    assert "NOT run" in state["messages"][-1].content
    assert [e["decision"] for e in state["audit"]] == ["reject", "reject"]


def test_edit_with_bad_arguments_is_refused_not_run():
    graph, warehouse = build_warehouse_graph()
    config = start(graph)
    decide(graph, config, ApprovalDecision("edit", "human:test", {"sku": "SKU-100", "quantity": "lots"}))
    state = graph.get_state(config).values
    assert state["audit"][-1]["status"] == "invalid_arguments"
    assert "move_stock" not in [n for n, _ in warehouse.executed]


def test_unreadable_resume_value_fails_closed():
    graph, warehouse = build_warehouse_graph()
    config = start(graph)
    from langgraph.types import Command

    graph.invoke(Command(resume={"whatever": 1}), config)
    audit = graph.get_state(config).values["audit"]
    assert audit[-1]["decision"] == "reject" and audit[-1]["approver"] == "runtime"
    assert "move_stock" not in [n for n, _ in warehouse.executed]


def test_scripted_approver_and_audit():
    graph, _ = build_warehouse_graph()
    approver = ScriptedApprover({"move_stock": "approve"}, default="reject")
    final = run_with_approver(graph, thread_config("p"), "go", approver)
    assert [r.tool for r in approver.seen] == ["move_stock", "amend_declaration"]
    assert [(e["tool"], e["decision"], e["status"]) for e in final["audit"]] == [
        ("move_stock", "approve", "ok"), ("amend_declaration", "reject", "confirmation_denied")]


def test_critical_tool_never_runs_without_a_decision_even_with_a_gateway():
    runs = []

    def wipe(target: str) -> str:
        """Wipe something.

        Args:
            target: what to wipe
        """
        runs.append(target)
        return "wiped"

    registry = ToolRegistry()
    registry.register(wipe, risk="critical")
    gateway = ToolGateway(registry, grants={"agent": {"critical"}})
    model = ScriptedPlanModel([{"name": "wipe", "args": {"target": "db"}, "id": "c1"}])
    graph = build_approval_graph(gateway, model, "agent", InMemorySaver())
    config = thread_config("w")
    graph.invoke({"messages": [HumanMessage("wipe it")]}, config)
    assert runs == [] and pending_request(graph, config).tool == "wipe"
    decide(graph, config, "approve")
    assert runs == ["db"]
    assert gateway.audit.decisions() == ["needs_confirmation", "confirmed"]


def test_a_call_without_an_id_is_refused_before_anything_runs():
    runs = []

    def look(target: str) -> str:
        """Look at something.

        Args:
            target: what to look at
        """
        runs.append(target)
        return "seen"

    registry = ToolRegistry()
    registry.register(look, risk="read")
    gateway = ToolGateway(registry, grants={"agent": {"read"}})
    model = ScriptedPlanModel([{"name": "look", "args": {"target": "a"}, "id": "c1"},
                               {"name": "look", "args": {"target": "b"}, "id": None}])
    graph = build_approval_graph(gateway, model, "agent", InMemorySaver())
    with pytest.raises(ValueError, match="has no id"):
        graph.invoke({"messages": [HumanMessage("look")]}, thread_config("no-id"))
    assert runs == []  # no call of that reply ran (the one with an id neither)


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="one of"):
        ApprovalDecision("maybe")
    with pytest.raises(ValueError, match="needs the new arguments"):
        ApprovalDecision("edit")
    with pytest.raises(ValueError, match="checkpointer"):
        build_approval_graph(None, None, "x", None)
    graph, _ = build_warehouse_graph()
    with pytest.raises(RuntimeError, match="not waiting"):
        decide(graph, thread_config("never-started"), "approve")


def test_pending_approval_survives_a_restart(tmp_path):
    db = tmp_path / "approvals.sqlite"
    cli = [sys.executable, "-m", "course.guards.warehouse", "--db", str(db), "--thread", "T"]
    first = subprocess.run([*cli, "start"], capture_output=True, text=True, cwd=ROOT, check=True)
    assert re.search(r"waiting for: move_stock\(\{.*'quantity': 25", first.stdout)
    # a second process, like a restarted kernel, finds the call still waiting and approves it
    second = subprocess.run([*cli, "--approver", "human:later", "approve"], capture_output=True,
                            text=True, cwd=ROOT, check=True)
    assert "executed in this process: [('move_stock'" in second.stdout
    assert "waiting for: amend_declaration(" in second.stdout
    # and this process sees the audit written by the other one
    graph, _ = build_warehouse_graph(str(db))
    audit = graph.get_state(thread_config("T")).values["audit"]
    assert audit[0]["approver"] == "human:later" and audit[0]["status"] == "ok"


def test_audit_record_renders_its_values():
    graph, _ = build_warehouse_graph()
    config = thread_config("audit")
    run_with_approver(graph, config, "go", ScriptedApprover({"move_stock": "approve"}))
    audit = ApprovalAudit.of(graph, config)
    assert audit.decisions() == [("move_stock", "approve"), ("amend_declaration", "reject")]
    lines = str(audit).splitlines()
    assert lines[0].startswith("move_stock: approve by scripted:policy -> ok")
    assert "'quantity': 25" in lines[0] and lines[1].endswith("executed arguments: None")
    html = audit._repr_html_()
    assert html.count("<tr>") == 3 and "confirmation_denied" in html
    assert str(ApprovalAudit([])) == "(no approval decisions yet)"


def test_an_approver_that_raises_leaves_nothing_pending():
    graph, warehouse = build_warehouse_graph()
    config = thread_config("raises")

    def broken(request):
        raise KeyError("quantity")

    with pytest.raises(KeyError):
        run_with_approver(graph, config, "go", broken)
    assert pending_request(graph, config).tool == "amend_declaration"  # the next call, not this
    audit = graph.get_state(config).values["audit"]
    assert audit[0]["decision"] == "reject" and "approver raised" in audit[0]["note"]
    assert "move_stock" not in [n for n, _ in warehouse.executed]
