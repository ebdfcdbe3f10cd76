"""Human confirmation as a runtime property: a LangGraph graph that stops before critical calls.

The graph has three nodes: ``agent`` (the model proposes tool calls), ``tools`` (read and write
calls go through the :class:`~course.tools.gateway.ToolGateway` at once; critical calls are queued) and
``confirm``, which calls LangGraph's ``interrupt()`` with the proposed call and its arguments.
The run stops there; the checkpointer keeps the pending call. It continues only when someone
resumes it with ``Command(resume=decision)``:

- ``approve``: the call runs with the proposed arguments;
- ``edit``: the call runs with the arguments the human wrote (validated by the registry);
- ``reject``: the call does not run and the model gets the gateway's refusal string.

Every tool message the graph appends carries the gateway's :class:`~course.tools.registry.ToolResult`
as its artifact and ``status="error"`` unless the call succeeded
(:func:`course.tools.for_libraries.tool_message`), so what became of a call is read from the message,
not from its wording.

Even then the call goes through the gateway, which refuses to run a critical tool without an
``approve()`` of its own, so no path reaches a critical tool without a decision. Every decision
goes to the ``audit`` list in the graph state (checkpointed with it) and to the gateway's audit.
With a :class:`~langgraph.checkpoint.sqlite.SqliteSaver` the pending call survives a kernel
restart: another process opens the same database and thread and resumes (the warehouse run's
command line, ``python -m course.guards.warehouse``, does it from a terminal).

The records render themselves: :class:`ApprovalRequest` (the call a run waits on) and
:class:`ApprovalAudit` (the decisions, from the graph state) have ``__str__`` and
``_repr_html_``; :mod:`widgets.approval_panel` only shows them and sends decisions.

Headless runs (CI) decide with a :class:`ScriptedApprover`; in JupyterLab the buttons of
:mod:`widgets.approval_panel` send the same decisions.

Not handled: several approvers or quorum, approval expiry, authentication of the approver (the
name is whatever the caller passes), and parallel critical calls (they are confirmed one by one).
"""

from __future__ import annotations

import html
import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from course.records import Record
from course.tools.for_libraries import tool_message
from course.tools.gateway import ToolGateway
from course.tools.registry import ToolResult, ToolStatus

__all__ = [
    "ACTIONS",
    "ApprovalAudit",
    "ApprovalDecision",
    "ApprovalRequest",
    "ScriptedApprover",
    "ScriptedPlanModel",
    "ask_approval",
    "build_approval_graph",
    "decide",
    "pending_request",
    "run_with_approver",
]

ACTIONS = ("approve", "edit", "reject")


@dataclass
class ApprovalDecision:
    """What a human (or a scripted policy) decided about one proposed call."""

    action: str
    approver: str = "human"
    arguments: dict[str, Any] | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"decision action must be one of {ACTIONS}, got {self.action!r}")
        if self.action == "edit" and not isinstance(self.arguments, dict):
            raise ValueError("an 'edit' decision needs the new arguments as a dict, "
                             "e.g. ApprovalDecision('edit', arguments={'quantity': 10})")

    def as_resume(self) -> dict[str, Any]:
        """The value to pass as ``Command(resume=...)``."""
        return asdict(self)

    @classmethod
    def parse(cls, value: Any) -> ApprovalDecision:
        """An ApprovalDecision from a resume value (a decision, a dict, or 'approve'/'reject')."""
        if isinstance(value, ApprovalDecision):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):
            unknown = set(value) - {"action", "approver", "arguments", "note"}
            if unknown or "action" not in value:
                raise ValueError(f"a decision is {{'action': one of {ACTIONS}, 'approver', "
                                 f"'arguments', 'note'}}; got keys {sorted(value)}")
            return cls(**value)
        raise ValueError(f"cannot read a decision from {type(value).__name__}: {value!r}")


@dataclass(frozen=True)
class ApprovalRequest(Record):
    """The critical call a run waits on: what the approver sees (the interrupt's value)."""

    tool: str
    arguments: dict[str, Any]
    call_id: str
    risk: str
    description: str
    subject: str

    @classmethod
    def from_interrupt(cls, value: dict[str, Any]) -> ApprovalRequest:
        """The record from the dict the ``confirm`` node passed to ``interrupt()``."""
        return cls(**{name: value[name] for name in cls.__dataclass_fields__})

    def __str__(self) -> str:
        return (f"{self.tool}({self.arguments}) risk={self.risk}, asked by {self.subject}")

    def _repr_html_(self) -> str:
        e = html.escape
        return (f"<b>Waiting for approval:</b> <code>{e(self.tool)}</code> (risk: {e(self.risk)},"
                f" asked by {e(self.subject)})<br>{e(self.description)}")


@dataclass
class ApprovalAudit(Record):
    """The approval decisions of one run, in order (the ``audit`` list of the graph state)."""

    entries: list[dict[str, Any]]

    @classmethod
    def of(cls, graph: Any, config: RunnableConfig) -> ApprovalAudit:
        """The audit saved in ``graph``'s checkpoint for the thread ``config``."""
        return cls(list(graph.get_state(config).values.get("audit", [])))

    def decisions(self) -> list[tuple[str, str]]:
        """``(tool, decision)`` for every entry."""
        return [(e["tool"], e["decision"]) for e in self.entries]

    def __len__(self) -> int:
        return len(self.entries)

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(str(self))

    def __str__(self) -> str:
        if not self.entries:
            return "(no approval decisions yet)"
        return "\n".join(
            f"{e['tool']}: {e['decision']} by {e['approver']} -> {e['status']}; executed "
            f"arguments: {e['executed_arguments']}" for e in self.entries)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in
                       ("tool", "decision", "approver", "status", "executed arguments"))
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(e[k]))}</td>" for k in
                             ("tool", "decision", "approver", "status", "executed_arguments"))
            + "</tr>" for e in self.entries)
        return f"<table><tr>{head}</tr>{rows}</table>"


class ApprovalState(TypedDict, total=False):
    """The graph's state: the conversation, critical calls waiting, and the audit trail."""

    messages: Annotated[list[AnyMessage], add_messages]
    queue: list[dict[str, Any]]
    audit: Annotated[list[dict[str, Any]], operator.add]


Model = Callable[[list[AnyMessage]], AIMessage]


def _needs_human(registry: Any, name: str, arguments: Any) -> bool:
    """True for a call that passes the door and needs confirmation: only those reach a human.

    A call the registry would refuse anyway (unknown, not allowed, bad arguments) is refused at
    once, without bothering the approver.
    """
    if name not in registry or not registry.spec(name).requires_confirmation:
        return False
    return not isinstance(registry.check(name, arguments), ToolResult)


def ask_approval(call: dict, risk: str, description: str, subject: str) -> ApprovalDecision:
    """Stop the run, show the proposed call with its arguments, and return the decision it
    resumes with (``Command(resume=...)``). An answer that is not a decision rejects.

    LangGraph runs the node again from its start when the run resumes, so nothing before this
    call may have a side effect.
    """
    request = {"tool": call["name"], "arguments": call["args"], "call_id": call["id"],
               "risk": risk, "description": description, "subject": subject}
    answer = interrupt(request)  # the run stops here; Command(resume=answer) continues it
    try:
        return ApprovalDecision.parse(answer)
    except (TypeError, ValueError) as err:  # fail closed: an unreadable answer rejects
        return ApprovalDecision("reject", "runtime", note=f"unreadable decision: {err}")


def _call_ids(message: AIMessage) -> list[str]:
    """The ids of ``message``'s tool calls; ValueError, before any call runs, if one has none
    (LangChain allows ``"id": None``, but the ``ToolMessage`` that answers a call needs its id)."""
    ids = [call["id"] for call in message.tool_calls]
    missing = [call["name"] for call in message.tool_calls if call["id"] is None]
    if missing:
        raise ValueError(f"the model's call to {', '.join(missing)} has no id (the ToolMessage "
                         "with its result needs one); no call of this reply ran. Fix: give every "
                         "tool call an id, as chat models do.")
    return [call_id for call_id in ids if call_id is not None]


def build_approval_graph(gateway: ToolGateway, model: Model, subject: str,
                         checkpointer: Any) -> Any:
    """Compile the agent -> tools -> confirm graph over ``gateway`` for ``subject``.

    ``model`` maps the messages so far to the next ``AIMessage`` (with ``tool_calls`` or a final
    answer). A checkpointer is required: ``interrupt()`` needs saved state to resume from.
    """
    if checkpointer is None:
        raise ValueError("build_approval_graph needs a checkpointer (InMemorySaver, or "
                         "SqliteSaver to survive a restart): interrupt() resumes from it.")
    registry = gateway.registry

    def agent(state: ApprovalState) -> dict:
        return {"messages": [model(state["messages"])]}

    def tools(state: ApprovalState) -> dict:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage), "after_agent routes here from a reply with tool_calls"
        messages: list[ToolMessage] = []
        queue: list[dict[str, Any]] = []
        for call, call_id in zip(last.tool_calls, _call_ids(last), strict=True):
            name = call["name"]
            if _needs_human(registry, name, call["args"]):
                queue.append({"name": name, "args": dict(call["args"]), "id": call_id})
                continue
            result = gateway.execute(name, call["args"], subject=subject)
            messages.append(tool_message(result, call_id, name))
        return {"messages": messages, "queue": queue}

    def confirm(state: ApprovalState) -> dict:
        call = state["queue"][0]
        spec = registry.spec(call["name"])
        decision = ask_approval(call, spec.risk, spec.description, subject)
        arguments = decision.arguments if decision.action == "edit" else call["args"]
        held = gateway.execute(call["name"], arguments, subject=subject)
        pending = [p for p in gateway.pending if p.tool == call["name"]]
        if held.status != ToolStatus.NEEDS_CONFIRMATION or not pending:
            result = held  # refused before confirmation (bad edited arguments, no grant)
        elif decision.action == "reject":
            result = gateway.deny(pending[-1].request_id, decision.approver)
        else:
            result = gateway.approve(pending[-1].request_id, decision.approver)
        entry = {"call_id": call["id"], "tool": call["name"], "proposed": call["args"],
                 "decision": decision.action, "executed_arguments": arguments
                 if result.ok else None, "approver": decision.approver,
                 "status": result.status, "note": decision.note}
        return {"messages": [tool_message(result, call["id"], call["name"])],
                "queue": state["queue"][1:], "audit": [entry]}

    def after_agent(state: ApprovalState) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    def after_tools(state: ApprovalState) -> str:
        return "confirm" if state.get("queue") else "agent"

    graph = StateGraph(ApprovalState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_node("confirm", confirm)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", after_agent, ["tools", END])
    graph.add_conditional_edges("tools", after_tools, ["confirm", "agent"])
    graph.add_conditional_edges("confirm", after_tools, ["confirm", "agent"])
    return graph.compile(checkpointer=checkpointer)


@dataclass
class ScriptedPlanModel:
    """A scripted model (not a language model): proposes a fixed list of calls, then reports.

    Turn 1 answers the user with ``tool_calls``; after the tool results it answers with the
    results it received, quoted, so what the model was told (including refusals) is visible.
    """

    tool_calls: list[dict[str, Any]]
    name: str = "scripted coordinator"

    def __call__(self, messages: list[AnyMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            return AIMessage("", tool_calls=[dict(c) for c in self.tool_calls])
        results = [m for m in messages if isinstance(m, ToolMessage)]
        lines = [f"- {m.name}: {m.content}" for m in results]
        return AIMessage(f"({self.name}) tool results:\n" + "\n".join(lines))


@dataclass
class ScriptedApprover:
    """A scripted approval policy for headless runs: a decision per tool, a default for the rest.

    ``ScriptedApprover({"move_stock": "approve", "amend_declaration": ApprovalDecision("edit", ...)})``
    """

    rules: dict[str, str | ApprovalDecision] = field(default_factory=dict)
    default: str = "reject"
    approver: str = "scripted:policy"
    seen: list[ApprovalRequest] = field(default_factory=list)

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.seen.append(request)
        rule = self.rules.get(request.tool, self.default)
        if isinstance(rule, ApprovalDecision):
            return rule
        return ApprovalDecision(rule, self.approver)


def pending_request(graph: Any, config: RunnableConfig) -> ApprovalRequest | None:
    """The call the graph is waiting on (from its interrupt), or None if it is not waiting."""
    state = graph.get_state(config)
    interrupts = [i for task in state.tasks for i in task.interrupts]
    return ApprovalRequest.from_interrupt(interrupts[0].value) if interrupts else None


def decide(graph: Any, config: RunnableConfig, decision: ApprovalDecision | dict | str) -> dict:
    """Resume a waiting graph with one decision; returns the graph's output of that step."""
    if pending_request(graph, config) is None:
        raise RuntimeError("this thread is not waiting for a decision: nothing to resume. "
                           "Fix: start it with graph.invoke(...) first, or check the thread_id.")
    return graph.invoke(Command(resume=ApprovalDecision.parse(decision).as_resume()), config)


def run_with_approver(graph: Any, config: RunnableConfig, request_text: str,
                      approver: Callable[[ApprovalRequest], ApprovalDecision]) -> dict:
    """Run from a user request to the end, asking ``approver`` at every interrupt.

    An approver that raises fails closed: the waiting call is rejected (the audit names the
    error) before the exception propagates, so no approval is left pending.
    """
    graph.invoke({"messages": [HumanMessage(request_text)]}, config)
    while (request := pending_request(graph, config)) is not None:
        try:
            decision = approver(request)
        except Exception as err:
            decide(graph, config, ApprovalDecision("reject", "runtime",
                                                   note=f"the approver raised {err!r}"))
            raise
        decide(graph, config, decision)
    return graph.get_state(config).values
