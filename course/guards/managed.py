"""The warehouse coordinator as real smolagents agents: a manager with three managed agents.

:func:`build_team` makes supply, transit and export ``ToolCallingAgent``\\ s, each with a ``name``,
a ``description``, its own instructions and only its own tools (its read tools through the
door of chapter 1, and ``propose``, which records an action without running it), and a
``ToolCallingAgent`` manager that receives the order and has them as ``managed_agents``: it
calls a specialist like a tool, with a ``task`` string it writes itself (the hand-off), and reads
the specialist's final answer. :func:`run_team` runs the manager on one order and assembles a
:class:`~course.guards.warehouse.CoordinatedPlan` from what the agents really did: the tasks the
manager wrote, the proposals each specialist recorded, and the coordinator's check
(:func:`~course.guards.warehouse.check_consistency`) over them.

The models are either a language model (``smolagents_model()``: *measured*) or
:class:`ScriptedPolicyModel`\\ s (*scripted*, not an LLM): a Python policy reads the task and the
observations smolagents puts in the prompt and returns the next tool call, using the same rules
as the rule-based specialists (:func:`~course.guards.warehouse.supply_rule` and the others). With
scripted models everything but the decisions is smolagents' own: the prompts, the managed-agent
call, the tool dispatch, the memory.

Not handled: more than one order per run, a specialist that calls another specialist, planning
steps, streaming; a live model's free-text proposals (only ``propose`` calls count).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from smolagents import Model, Tool, ToolCallingAgent
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
)
from smolagents.monitoring import LogLevel, TokenUsage

from course.guards.warehouse import (
    CoordinatedPlan,
    Coordinator,
    HandOff,
    Proposal,
    Specialist,
    SpecialistReport,
    Task,
    check_consistency,
    export_rule,
    export_task,
    registry_for,
    supply_rule,
    supply_task,
    transit_rule,
    transit_task,
)
from course.records import Record, json_safe
from course.tools.for_libraries import smolagents_door
from course.tools.registry import ToolResult

__all__ = ["DESCRIPTIONS", "MANAGER_INSTRUCTIONS", "ScriptedPolicyModel", "Team", "TeamRun",
           "TeamSummary", "Trajectory", "build_team", "hand_off_text", "propose_tool", "run_team",
           "scripted_models"]

#: What the manager's prompt says about each managed agent (smolagents requires one).
DESCRIPTIONS: dict[str, str] = {
    "supply": "Checks stock of a SKU at every site and proposes a stock move if the shipping "
              "site is short. Give it the SKU, the quantity and the shipping site.",
    "transit": "Finds the lane for each stock move and proposes a transfer booking. Give it "
               "the stock moves.",
    "export": "Reads the export declaration and proposes an amendment if the declared "
              "quantity differs from the order. Give it the declaration id, SKU and quantity.",
}
MANAGER_INSTRUCTIONS = ("You are the warehouse coordinator. Prepare the order: ask supply, then "
                        "transit (with supply's stock moves), then export; then give a final "
                        "answer that lists every proposed action. You run nothing yourself.")
Policy = Callable[[str, list[str]], tuple[str, dict[str, Any]]]


def hand_off_text(task: Task) -> str:
    """The ``task`` string a manager passes to a specialist: a sentence, then its fields."""
    return f"{task.text}\nfields: {json.dumps(task.fields)}"


def _fields(text: str) -> dict[str, Any]:
    """The JSON object after the last ``fields:`` in ``text`` ({} when there is none)."""
    found = re.findall(r"fields: (\{.*\})", text)
    return json.loads(found[-1]) if found else {}


def _answer_json(observation: str) -> dict[str, Any]:
    """The JSON object in an observation (a tool's result or a managed agent's report)."""
    start = observation.find("{")
    return json.loads(observation[start:observation.rindex("}") + 1]) if start >= 0 else {}


def _text(message: ChatMessage | dict) -> str:
    content: str | list[dict[str, Any]] | None = (
        message.content if isinstance(message, ChatMessage) else message.get("content"))
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def _role(message: ChatMessage | dict) -> str | None:  # None: a dict without a role
    role = message.role if isinstance(message, ChatMessage) else message.get("role")
    return getattr(role, "value", role)


class ScriptedPolicyModel(Model):
    """A smolagents ``Model`` whose next tool call a Python policy computes (scripted, not an LLM).

    ``policy(task, observations)`` gets the task text and the observation texts smolagents put in
    the prompt (oldest first) and returns ``(tool name, arguments)``; the model answers with that
    one native tool call. Every call it made is kept in :attr:`calls`.
    """

    def __init__(self, policy: Policy, model_id: str) -> None:
        super().__init__(model_id=model_id)
        self.policy = policy
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def generate(self, messages: list[ChatMessage | dict], stop_sequences: list[str] | None = None,
                 response_format: dict[str, str] | None = None,
                 tools_to_call_from: list[Tool] | None = None, **kwargs: Any) -> ChatMessage:
        task = next((_text(m) for m in messages if _role(m) == MessageRole.USER.value), "")
        observations = [_text(m).removeprefix("Observation:\n") for m in messages
                        if _role(m) == MessageRole.TOOL_RESPONSE.value]
        name, arguments = self.policy(task, observations)
        self.calls.append((name, arguments))
        call = ChatMessageToolCall(ChatMessageToolCallFunction(name=name, arguments=arguments),
                                   id=f"call_{len(self.calls)}", type="function")
        return ChatMessage(MessageRole.ASSISTANT, content=f"(scripted) {name}", tool_calls=[call],
                           token_usage=TokenUsage(0, 0))


def _final(answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "final_answer", {"answer": json.dumps(answer)}


def _propose(action: tuple[str, dict, str]) -> tuple[str, dict[str, Any]]:
    tool, arguments, reason = action
    return "propose", {"tool": tool, "arguments": arguments, "reason": reason}


def _supply_policy(task: str, observations: list[str]) -> tuple[str, dict[str, Any]]:
    fields = _fields(task)
    if not observations:
        return "get_stock", {"sku": fields["sku"]}
    site, actions = supply_rule(fields, _answer_json(observations[0]))
    if len(observations) <= len(actions):
        return _propose(actions[len(observations) - 1])
    return _final({"ship_from": site, "proposals": [
        {"tool": t, "arguments": a} for t, a, _ in actions]})


def _transit_policy(task: str, observations: list[str]) -> tuple[str, dict[str, Any]]:
    moves = _fields(task).get("moves", [])
    done, step = divmod(len(observations), 2)
    if done >= len(moves):
        return _final({"bookings": done})
    move = moves[done]
    if step == 0:
        return "find_lane", {"from_site": move["from_site"], "to_site": move["to_site"]}
    return _propose(transit_rule(move, _answer_json(observations[-1])))


def _export_policy(task: str, observations: list[str]) -> tuple[str, dict[str, Any]]:
    fields = _fields(task)
    if not observations:
        return "get_declaration", {"declaration_id": fields["declaration"]}
    declaration = _answer_json(observations[0])
    actions = export_rule(fields, declaration)
    if len(observations) <= len(actions):
        return _propose(actions[len(observations) - 1])
    return _final({"ship_from": declaration["ship_from"], "amendments": len(actions)})


def _manager_policy(hand_off: HandOff) -> Policy:
    def policy(task: str, observations: list[str]) -> tuple[str, dict[str, Any]]:
        order = _fields(task)
        if not observations:
            return "supply", {"task": hand_off_text(supply_task(order["id"], order, hand_off))}
        if len(observations) == 1:
            moves = [p["arguments"] for p in _answer_json(observations[0]).get("proposals", [])
                     if p["tool"] == "move_stock"]
            return "transit", {"task": hand_off_text(transit_task(moves))}
        if len(observations) == 2:
            return "export", {"task": hand_off_text(export_task(order))}
        return "final_answer", {"answer": "proposals collected from supply, transit and export"}

    return policy


def scripted_models(hand_off: HandOff = "structured") -> dict[str, ScriptedPolicyModel]:
    """One scripted model per agent: the manager (writing ``hand_off`` tasks) and the specialists."""
    policies = {"supply": _supply_policy, "transit": _transit_policy, "export": _export_policy,
                "manager": _manager_policy(hand_off)}
    return {name: ScriptedPolicyModel(policy, f"scripted:{name}")
            for name, policy in policies.items()}


def propose_tool(specialist: Specialist, box: list[Proposal]) -> Tool:
    """``propose(tool, arguments, reason)``: records an action in the specialist's area, runs nothing.

    The door checks the tool and its arguments (:meth:`ToolRegistry.check`) without running
    it; a refusal (another specialist's tool, a wrong argument) comes back as text.
    """

    class Propose(Tool):
        name = "propose"
        description = ("Propose one action in your area for the coordinator to assemble; it is "
                       "NOT run. tool: one of your tools; arguments: its arguments; reason: why.")
        inputs: ClassVar[dict] = {"tool": {"type": "string", "description": "the tool to propose"},
                  "arguments": {"type": "object", "description": "the tool's arguments"},
                  "reason": {"type": "string", "description": "why", "nullable": True}}
        output_type = "string"

        def forward(self, tool: str, arguments: dict, reason: str | None = None) -> str:
            checked = specialist.registry.check(tool, arguments)
            if isinstance(checked, ToolResult):
                return f"nothing proposed: {checked.content}"
            box.append(Proposal(specialist.name, tool, checked.arguments, checked.spec.risk,
                                reason or ""))
            return f"proposal {len(box)} recorded: {tool}({arguments}); it was not run"

    return Propose()


@dataclass
class Team:
    """The manager, its managed agents, and the proposals each specialist recorded."""

    coordinator: Coordinator
    manager: ToolCallingAgent
    specialists: dict[str, ToolCallingAgent]
    proposals: dict[str, list[Proposal]]


def build_team(models: dict[str, Model] | Model, coordinator: Coordinator | None = None,
               max_steps: int = 6) -> Team:
    """A manager whose managed agents are supply, transit and export, over one warehouse.

    ``models``: one model for every agent, or ``{"manager": ..., "supply": ..., ...}``.
    Each specialist gets its read tools through the door (:func:`smolagents_door`) and
    ``propose``; the manager has no tools of its own, only the managed agents.
    """
    coordinator = coordinator or Coordinator()
    model_for = models if isinstance(models, dict) else dict.fromkeys(
        ["manager", *coordinator.specialists], models)
    proposals: dict[str, list[Proposal]] = {}
    agents: dict[str, ToolCallingAgent] = {}
    for name, specialist in coordinator.specialists.items():
        reads = {n: "read" for n in specialist.tool_names()
                 if specialist.registry.spec(n).risk == "read"}
        proposals[name] = []
        agents[name] = ToolCallingAgent(  # its read tools and `propose`, nothing else
            tools=[*smolagents_door(registry_for(coordinator.warehouse, reads)),
                   propose_tool(specialist, proposals[name])],
            model=model_for[name], name=name, description=DESCRIPTIONS[name],
            instructions=specialist.instructions, max_steps=max_steps,
            verbosity_level=LogLevel.OFF)
    manager = ToolCallingAgent(  # no tools of its own: only the three managed agents
        tools=[], model=model_for["manager"], managed_agents=list(agents.values()),
        instructions=MANAGER_INSTRUCTIONS, max_steps=max_steps, verbosity_level=LogLevel.OFF)
    return Team(coordinator, manager, agents, proposals)


@dataclass
class TeamRun:
    """One run of the team on an order: the plan built from the agents' outputs, and the steps."""

    plan: CoordinatedPlan
    answer: Any
    steps: dict[str, int]  # agent -> action steps taken (the manager and each specialist)
    errors: list[str] = field(default_factory=list)  # step errors (parsing, tool), short

    def trajectory(self) -> Trajectory:
        """The hand-offs the manager wrote and what each specialist proposed, one line each."""
        return Trajectory(self.plan)

    def summary(self, label: str) -> TeamSummary:
        """The run under ``label`` (its provenance): steps, calls, proposals, errors, the check."""
        return TeamSummary(label, self)


@dataclass
class Trajectory(Record):
    """A plan's hand-offs and proposals, one line each; its values: each hand-off's specialist,
    text and fields, and each proposal."""

    plan: CoordinatedPlan

    def record(self) -> dict[str, Any]:
        return json_safe({"tasks": self.plan.tasks, "proposals": self.plan.proposals})

    def __str__(self) -> str:
        lines = [f"manager -> {t.specialist}: {t.text!r} fields={t.fields}" for t in self.plan.tasks]
        lines += [f"  {p.line()}" for p in self.plan.proposals] or ["  (no proposals recorded)"]
        return "\n".join(lines)

    __repr__ = __str__


@dataclass
class TeamSummary(Record):
    """A team run in a few lines under ``label``: the steps per agent, the managed agents the
    manager called, the proposals, the step errors, the final answer, the coordinator's check."""

    label: str
    run: TeamRun

    def record(self) -> dict[str, Any]:
        plan = self.run.plan
        return json_safe({"label": self.label, "steps": self.run.steps,
                          "called": [t.specialist for t in plan.tasks],
                          "proposals": [p.line() for p in plan.proposals],
                          "errors": self.run.errors, "answer": str(self.run.answer),
                          "conflicts": plan.conflicts, "ok": plan.ok})

    def __str__(self) -> str:
        run, plan = self.run, self.run.plan
        called = [t.specialist for t in plan.tasks]
        return "\n".join([
            self.label,
            f"steps per agent: {run.steps}",
            f"managed agents the manager called: {called or 'none'}",
            f"proposals recorded: {[p.line() for p in plan.proposals] or 'none'}",
            f"step errors: {len(run.errors)} | first: {run.errors[0] if run.errors else 'none'}",
            f"the manager's final answer (first 200 characters): {str(run.answer)[:200]!r}",
            f"coordinator's check: {plan.conflicts or 'no conflict'} -> "
            f"{'consistent' if plan.ok else 'REJECTED, not executed'}"])

    __repr__ = __str__


def _steps(agent: ToolCallingAgent) -> list[Any]:
    return [s for s in agent.memory.steps if hasattr(s, "step_number")]


def _final_field(agent: ToolCallingAgent, key: str) -> Any:
    """``key`` of the JSON object in the agent's final answer (None if it gave none or no JSON)."""
    for step in reversed(_steps(agent)):
        for call in step.tool_calls or []:
            if call.name == "final_answer" and isinstance(call.arguments, dict):
                try:
                    return _answer_json(str(call.arguments.get("answer", ""))).get(key)
                except (ValueError, AttributeError):
                    return None
    return None


def run_team(team: Team, order_id: str = "ORD-1", hand_off: str = "") -> TeamRun:
    """Run the manager on ``order_id`` and assemble the plan from what the agents did.

    The manager's task is the request and the order's fields. The plan's tasks are the hand-offs
    the manager wrote (its calls of managed agents), its reports the proposals each specialist
    recorded with ``propose`` and the site its final answer names (``ship_from``, when it gives
    one); its conflicts name every specialist the manager never asked, then
    :func:`check_consistency` over the reports, with the stock read from the supply system.
    ``hand_off`` only labels the plan.
    """
    order = team.coordinator.order(order_id)
    request = f"Prepare order {order_id}.\nfields: {json.dumps({'id': order_id, **order})}"
    answer = team.manager.run(request)
    tasks, errors = [], []
    for step in _steps(team.manager):
        for call in step.tool_calls or []:
            if call.name in team.specialists:
                text = str((call.arguments or {}).get("task", "")) if isinstance(
                    call.arguments, dict) else str(call.arguments)
                tasks.append(Task(call.name, text.split("\nfields:")[0], _fields(text)))
    reports = []
    for name, agent in team.specialists.items():
        assumptions = {}
        site = _final_field(agent, "ship_from")
        if site:
            assumptions["ship_from"] = site
        observations = [str(s.observations)[:200] for s in _steps(agent) if s.observations]
        reports.append(SpecialistReport(name, list(team.proposals[name]), observations,
                                        assumptions))
    for agent in [team.manager, *team.specialists.values()]:
        errors += [f"{agent.name or 'manager'}: {str(s.error).splitlines()[0][:120]}"
                   for s in _steps(agent) if s.error]
    stock = team.coordinator.specialists["supply"].read("get_stock", sku=order["sku"])
    asked = {t.specialist for t in tasks}
    never = [f"the manager never asked {name}" for name in team.specialists if name not in asked]
    plan = CoordinatedPlan(order_id, hand_off or "as the manager wrote it", tasks, reports,
                           never + check_consistency(order, reports, stock))
    steps = {"manager": len(_steps(team.manager)),
             **{n: len(_steps(a)) for n, a in team.specialists.items()}}
    return TeamRun(plan, answer, steps, errors)
