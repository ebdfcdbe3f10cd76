"""Approve / edit / reject buttons for a LangGraph run waiting in ``interrupt()``.

A view: it shows the pending :class:`~course.guards.confirmation.ApprovalRequest` and the run's
:class:`~course.guards.confirmation.ApprovalAudit` (both render themselves), and resumes the
graph with :func:`course.guards.confirmation.decide` when a button is clicked. The graph and the
gateway decide what runs. Clicking works in pure Python too (``panel.approve_button.click()``),
which is how the tests drive it. Display it by making it a cell's last expression.

Not handled: several approvers, or two widgets driving the same thread at once.
"""

from __future__ import annotations

import html
import json
from typing import Any

import ipywidgets as w
from langchain_core.runnables import RunnableConfig

from course.guards.confirmation import ApprovalAudit, ApprovalDecision, decide, pending_request
from widgets import Displayed

__all__ = ["ApprovalPanel"]


class ApprovalPanel(Displayed, w.VBox):
    """A panel for one graph thread: the pending call and three buttons that resume it."""

    def __init__(self, graph: Any, config: RunnableConfig, approver: str = "human:notebook") -> None:
        self.graph, self.config, self.approver = graph, config, approver
        self.request_view = w.HTML()
        self.arguments = w.Textarea(layout=w.Layout(width="100%", height="120px"),
                                    description="arguments")
        self.approve_button = w.Button(description="Approve", button_style="success")
        self.edit_button = w.Button(description="Edit & approve", button_style="warning")
        self.reject_button = w.Button(description="Reject", button_style="danger")
        self.status = w.HTML()
        self.audit_view = w.HTML()
        self.decisions: list[ApprovalDecision] = []
        self.approve_button.on_click(lambda _: self._send("approve"))
        self.edit_button.on_click(lambda _: self._send("edit"))
        self.reject_button.on_click(lambda _: self._send("reject"))
        buttons = w.HBox([self.approve_button, self.edit_button, self.reject_button])
        super().__init__([self.request_view, self.arguments, buttons, self.status,
                          self.audit_view])
        self.refresh()

    @property
    def request(self):
        """The :class:`ApprovalRequest` the graph waits on, or None."""
        return pending_request(self.graph, self.config)

    def refresh(self) -> None:
        """Show the pending call, or the last message when the run is finished; and the audit."""
        request = self.request
        waiting = request is not None
        for button in (self.approve_button, self.edit_button, self.reject_button):
            button.disabled = not waiting
        self.arguments.disabled = not waiting
        if waiting:
            self.request_view.value = request._repr_html_()
            self.arguments.value = json.dumps(request.arguments, indent=1)
        else:
            messages = self.graph.get_state(self.config).values.get("messages", [])
            last = messages[-1].content if messages else "(nothing yet)"
            self.request_view.value = ("<b>Nothing is waiting.</b><pre>"
                                       f"{html.escape(str(last))}</pre>")
            self.arguments.value = ""
        self.audit_view.value = ApprovalAudit.of(self.graph, self.config)._repr_html_()

    def _send(self, action: str) -> None:
        arguments = None
        if action == "edit":
            try:
                arguments = json.loads(self.arguments.value)
            except json.JSONDecodeError as err:
                self.status.value = (f"<span style='color:#b00'>The arguments are not valid "
                                     f"JSON ({html.escape(str(err))}); fix them and click again."
                                     "</span>")
                return
        decision = ApprovalDecision(action, self.approver, arguments)
        decide(self.graph, self.config, decision)
        self.decisions.append(decision)
        self.status.value = f"sent: {html.escape(action)} by {html.escape(self.approver)}"
        self.refresh()
