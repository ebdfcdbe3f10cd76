"""The approval panel: clicking approve / edit / reject in pure Python resumes the graph."""

import json

from langchain_core.messages import HumanMessage

from course.checkpoints import thread_config
from course.guards.warehouse import build_warehouse_graph
from widgets.approval_panel import ApprovalPanel


def started_panel(thread: str):
    graph, warehouse = build_warehouse_graph()
    config = thread_config(thread)
    graph.invoke({"messages": [HumanMessage("Prepare order ORD-1.")]}, config)
    return ApprovalPanel(graph, config, approver="human:test"), warehouse


def test_shows_the_pending_call():
    panel, warehouse = started_panel("show")
    assert "move_stock" in panel.request_view.value and "critical" in panel.request_view.value
    assert json.loads(panel.arguments.value)["quantity"] == 25
    assert not panel.approve_button.disabled
    assert "move_stock" not in [n for n, _ in warehouse.executed]


def test_approve_click_resumes_and_runs_the_call():
    panel, warehouse = started_panel("approve")
    panel.approve_button.click()
    assert warehouse.executed[-1][0] == "move_stock"
    assert "amend_declaration" in panel.request_view.value
    assert panel.decisions[-1].action == "approve"


def test_reject_click_resumes_without_running():
    panel, warehouse = started_panel("reject")
    panel.reject_button.click()
    panel.reject_button.click()
    assert [n for n, _ in warehouse.executed] == ["book_transfer"]
    assert "Nothing is waiting" in panel.request_view.value
    assert "denied" in panel.request_view.value
    assert panel.approve_button.disabled
    assert panel.audit_view.value.count("<tr>") == 3  # header + two decisions
    assert panel.audit_view.value.count("reject") == 2


def test_edit_click_runs_the_edited_arguments_and_bad_json_is_refused():
    panel, warehouse = started_panel("edit")
    panel.arguments.value = "{oops"
    panel.edit_button.click()
    assert "not valid JSON" in panel.status.value and panel.decisions == []
    panel.arguments.value = json.dumps(
        {"sku": "SKU-100", "quantity": 12, "from_site": "HAM", "to_site": "RTM"})
    panel.edit_button.click()
    assert warehouse.executed[-1] == ("move_stock", {"sku": "SKU-100", "quantity": 12,
                                                     "from_site": "HAM", "to_site": "RTM"})


def test_renders_as_a_jupyter_widget():
    panel, _ = started_panel("render")
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id
