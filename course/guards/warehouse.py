"""The warehouse example of the note: a coordinator with supply, transit and export specialists.

The internal "systems" are small JSON files shipped in ``course/data/warehouse/`` (inventory,
transport, customs, order book), loaded into a :class:`Warehouse` that the tools read and change.

- Each :class:`Specialist` has short instructions and its OWN :class:`~course.tools.registry.ToolRegistry`
  holding only its tools: supply (``get_stock``, ``move_stock``), transit (``find_lane``,
  ``book_transfer``), export (``get_declaration``, ``amend_declaration``). It reads its system
  through its registry and *proposes* actions in its area; it executes nothing that writes.
- The :class:`Coordinator` receives a request (an order), hands each specialist a task, collects
  the proposals and assembles one :class:`CoordinatedPlan`, after checking the proposals against
  the order and against each other (:func:`check_consistency`).
- Moving stock and changing an export declaration are ``critical``: the plan is executed through
  :mod:`course.guards.confirmation`, which stops before each of them for a human decision.

The specialists' decisions are rule-based (scripted): the lesson here is the structure (who sees
which tools and instructions, what is handed over, how a lost field is detected), not the quality
of a model's reasoning. ``hand_off="lossy"`` reproduces the coordination failure the note names:
context lost between agents (the shipping site is dropped from the supply task), which leads to
contradicting proposals that the coordinator detects.

Command line: ``python -m course.guards.warehouse --db FILE --thread T start|show|approve|reject|edit``
starts the confirmed run of ``ORD-1`` in a SQLite checkpoint, or resumes it from another process.

Not handled: concurrency, partial shipments, more than one SKU per order, real carriers or customs.
"""

from __future__ import annotations

import argparse
import copy
import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from course.checkpoints import sqlite_checkpointer, thread_config
from course.guards.confirmation import (
    ACTIONS,
    ApprovalDecision,
    ApprovalRequest,
    ScriptedPlanModel,
    build_approval_graph,
    decide,
    pending_request,
)
from course.records import Record, json_safe
from course.tools.gateway import ToolGateway
from course.tools.registry import ToolError, ToolRegistry

__all__ = [
    "SPECIALIST_TOOLS",
    "ConsistencyCheck",
    "CoordinatedPlan",
    "Coordinator",
    "PausedOrder",
    "PromptSizes",
    "Proposal",
    "ResumedRun",
    "Specialist",
    "SpecialistReport",
    "Task",
    "Warehouse",
    "build_warehouse_graph",
    "check_consistency",
    "load_systems",
    "monolithic_prompt",
    "prompt_sizes",
    "registry_for",
]

DATA_PACKAGE = "course.data"
SYSTEM_FILES = ("stock.json", "transit.json", "export.json", "orders.json")
COORDINATOR = "agent:coordinator"
HandOff = Literal["structured", "lossy"]


def load_systems() -> dict[str, dict]:
    """The four internal systems as fresh dicts (inventory, transit, export, orders)."""
    folder = resources.files(DATA_PACKAGE) / "warehouse"
    return {name.removesuffix(".json"): json.loads((folder / name).read_text(encoding="utf-8"))
            for name in SYSTEM_FILES}


class Warehouse:
    """The systems' state in memory, and the tools that read and change it."""

    def __init__(self, systems: dict[str, dict] | None = None) -> None:
        self.systems = copy.deepcopy(systems) if systems is not None else load_systems()
        self.executed: list[tuple[str, dict]] = []  # every write that really happened

    # -- supply ---------------------------------------------------------------------------
    def get_stock(self, sku: str) -> dict:
        """Units of one SKU on hand at every site.

        Args:
            sku: the stock-keeping unit, e.g. "SKU-100"
        """
        sites = self.systems["stock"]["sites"]
        if not any(sku in site["stock"] for site in sites.values()):
            raise ToolError(f"unknown SKU {sku!r}; known: {self._skus()}")
        return {code: site["stock"].get(sku, 0) for code, site in sites.items()}

    def move_stock(self, sku: str, quantity: int, from_site: str, to_site: str) -> str:
        """Move units of a SKU from one site to another (critical: changes inventory).

        Args:
            sku: the stock-keeping unit
            quantity: how many units to move (positive)
            from_site: site code to take the units from, e.g. "HAM"
            to_site: site code to put the units in, e.g. "RTM"
        """
        sites = self.systems["stock"]["sites"]
        for code in (from_site, to_site):
            if code not in sites:
                raise ToolError(f"unknown site {code!r}; sites: {sorted(sites)}")
        if quantity <= 0:
            raise ToolError(f"quantity must be positive, got {quantity}")
        have = sites[from_site]["stock"].get(sku, 0)
        if have < quantity:
            raise ToolError(f"{from_site} holds only {have} x {sku}; cannot move {quantity}")
        sites[from_site]["stock"][sku] = have - quantity
        sites[to_site]["stock"][sku] = sites[to_site]["stock"].get(sku, 0) + quantity
        self.executed.append(("move_stock", {"sku": sku, "quantity": quantity,
                                             "from_site": from_site, "to_site": to_site}))
        return (f"moved {quantity} x {sku} from {from_site} to {to_site}; now {from_site}="
                f"{sites[from_site]['stock'][sku]}, {to_site}={sites[to_site]['stock'][sku]}")

    # -- transit --------------------------------------------------------------------------
    def find_lane(self, from_site: str, to_site: str) -> dict:
        """The transport lane between two sites: carrier and days in transit.

        Args:
            from_site: origin site code
            to_site: destination site code
        """
        for lane in self.systems["transit"]["lanes"]:
            if lane["from"] == from_site and lane["to"] == to_site:
                return dict(lane)
        raise ToolError(f"no lane from {from_site} to {to_site}")

    def book_transfer(self, sku: str, quantity: int, from_site: str, to_site: str,
                      carrier: str) -> str:
        """Book a truck for a stock transfer (write: a booking can be cancelled).

        Args:
            sku: the stock-keeping unit
            quantity: units to carry
            from_site: origin site code
            to_site: destination site code
            carrier: carrier name from find_lane
        """
        booking = {"id": f"BK-{len(self.systems['transit']['bookings']) + 1}", "sku": sku,
                   "quantity": quantity, "from": from_site, "to": to_site, "carrier": carrier}
        self.systems["transit"]["bookings"].append(booking)
        self.executed.append(("book_transfer", dict(booking)))
        return f"booked {booking['id']}: {quantity} x {sku} {from_site}->{to_site} with {carrier}"

    # -- export ---------------------------------------------------------------------------
    def get_declaration(self, declaration_id: str) -> dict:
        """An export declaration: order, destination, shipping site, lines, status.

        Args:
            declaration_id: e.g. "EX-7"
        """
        declarations = self.systems["export"]["declarations"]
        if declaration_id not in declarations:
            raise ToolError(f"unknown declaration {declaration_id!r}; known: {sorted(declarations)}")
        return copy.deepcopy(declarations[declaration_id])

    def amend_declaration(self, declaration_id: str, sku: str, quantity: int) -> str:
        """Change the declared quantity of a SKU on an export declaration (critical).

        Args:
            declaration_id: e.g. "EX-7"
            sku: the stock-keeping unit on the declaration
            quantity: the new declared quantity
        """
        declaration = self.systems["export"]["declarations"].get(declaration_id)
        if declaration is None:
            raise ToolError(f"unknown declaration {declaration_id!r}")
        old = declaration["lines"].get(sku, 0)
        declaration["lines"][sku] = quantity
        self.executed.append(("amend_declaration", {"declaration_id": declaration_id,
                                                    "sku": sku, "quantity": quantity}))
        return f"declaration {declaration_id}: {sku} {old} -> {quantity}"

    def stock_of(self, site: str, sku: str) -> int:
        """Units on hand (for checks; not a tool)."""
        return self.systems["stock"]["sites"][site]["stock"].get(sku, 0)

    def _skus(self) -> list[str]:
        return sorted({s for site in self.systems["stock"]["sites"].values() for s in site["stock"]})


#: Which tools belong to which specialist, and their risk classes.
SPECIALIST_TOOLS: dict[str, dict[str, str]] = {
    "supply": {"get_stock": "read", "move_stock": "critical"},
    "transit": {"find_lane": "read", "book_transfer": "write"},
    "export": {"get_declaration": "read", "amend_declaration": "critical"},
}

#: Every warehouse tool with its risk class (what one agent without specialists would hold).
ALL_TOOLS: dict[str, str] = {n: r for tools in SPECIALIST_TOOLS.values() for n, r in tools.items()}

INSTRUCTIONS: dict[str, str] = {
    "supply": ("You are the supply agent. Make the ordered units available at the shipping "
               "site. Read stock with your tools; propose a stock move if the site is short. "
               "If no site is given, plan from the main DC, HAM."),
    "transit": ("You are the transit agent. For each stock move, find the lane and propose a "
                "transfer booking."),
    "export": ("You are the export agent. Make the export declaration match the order: "
               "read it and propose an amendment if a quantity differs."),
}


def registry_for(warehouse: Warehouse, names: dict[str, str]) -> ToolRegistry:
    """A registry holding exactly ``names`` (tool -> risk class) over ``warehouse``."""
    registry = ToolRegistry()
    for name, risk in names.items():
        registry.register(getattr(warehouse, name), name=name, risk=risk)
    return registry


def warehouse_gateway(warehouse: Warehouse) -> ToolGateway:
    """The coordinator's gateway: every warehouse tool, critical ones held for confirmation."""
    return ToolGateway(registry_for(warehouse, ALL_TOOLS),
                       grants={COORDINATOR: {"read", "write", "critical"}})


@dataclass
class Task:
    """What the coordinator hands one specialist: a sentence and the fields it passes on."""

    specialist: str
    text: str
    fields: dict[str, Any]


@dataclass
class Proposal:
    """One action a specialist proposes (not executed), with its reason and assumptions."""

    agent: str
    tool: str
    arguments: dict[str, Any]
    risk: str
    reason: str

    def line(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"[{self.agent}] {self.tool}({args})  risk={self.risk}  - {self.reason}"


@dataclass
class SpecialistReport:
    """A specialist's answer: its proposals, what it read, and what it assumed."""

    agent: str
    proposals: list[Proposal]
    observations: list[str]
    assumptions: dict[str, Any]


@dataclass
class Specialist:
    """A narrow agent: short instructions, its own registry, a rule-based (scripted) policy."""

    name: str
    instructions: str
    registry: ToolRegistry

    def tool_names(self) -> list[str]:
        """The only tools this specialist can see or call."""
        return self.registry.names()

    def prompt(self) -> str:
        """The text a model playing this specialist would receive: instructions and tools."""
        return f"{self.instructions}\nTools:\n{_tool_lines(self.registry)}"

    def read(self, tool: str, **arguments: Any) -> Any:
        """Call one of its own read tools through its registry (other tools are refused)."""
        result = self.registry.execute(tool, arguments)
        if not result.ok:
            raise ToolError(result.content, result.status, tool)
        return result.value

    def propose(self, task: Task) -> SpecialistReport:
        """Read this specialist's system and propose actions for ``task`` (rule-based)."""
        return getattr(self, f"_propose_{self.name}")(task)

    def _proposal(self, tool: str, arguments: dict, reason: str) -> Proposal:
        return Proposal(self.name, tool, arguments, self.registry.spec(tool).risk, reason)

    def _propose_supply(self, task: Task) -> SpecialistReport:
        stock = self.read("get_stock", sku=task.fields["sku"])
        site, actions = supply_rule(task.fields, stock)
        return SpecialistReport(self.name, [self._proposal(*a) for a in actions],
                                [f"get_stock({task.fields['sku']!r}) -> {stock}"],
                                {"ship_from": site})

    def _propose_transit(self, task: Task) -> SpecialistReport:
        proposals, seen = [], []
        for move in task.fields.get("moves", []):
            lane = self.read("find_lane", from_site=move["from_site"], to_site=move["to_site"])
            seen.append(f"find_lane({move['from_site']!r}, {move['to_site']!r}) -> {lane}")
            proposals.append(self._proposal(*transit_rule(move, lane)))
        return SpecialistReport(self.name, proposals, seen, {"moves": len(proposals)})

    def _propose_export(self, task: Task) -> SpecialistReport:
        declaration_id = task.fields["declaration"]
        declaration = self.read("get_declaration", declaration_id=declaration_id)
        return SpecialistReport(self.name,
                                [self._proposal(*a) for a in export_rule(task.fields, declaration)],
                                [f"get_declaration({declaration_id!r}) -> {declaration}"],
                                {"ship_from": declaration["ship_from"]})


# -- the specialists' rules: what each proposes from what it read (one truth for the rule-based
# specialists above and the scripted models of course.guards.managed) -------------------------
Action = tuple[str, dict[str, Any], str]  # (tool, arguments, reason)


def supply_rule(fields: dict[str, Any], stock: dict[str, int]) -> tuple[str, list[Action]]:
    """The site supply plans for (``ship_from``, else HAM) and the stock move it proposes, if any."""
    sku, quantity = fields["sku"], fields["quantity"]
    site = fields.get("ship_from", "HAM")
    short = quantity - stock.get(site, 0)
    if short <= 0:
        return site, []
    donor = max((s for s in stock if s != site), key=lambda s: stock[s])
    return site, [("move_stock", {"sku": sku, "quantity": short, "from_site": donor,
                                  "to_site": site},
                   f"{site} holds {stock.get(site, 0)}, the order needs {quantity}")]


def transit_rule(move: dict[str, Any], lane: dict[str, Any]) -> Action:
    """The transfer booking transit proposes for one stock move over ``lane``."""
    return ("book_transfer", {**move, "carrier": lane["carrier"]},
            f"{lane['days']} days with {lane['carrier']}")


def export_rule(fields: dict[str, Any], declaration: dict[str, Any]) -> list[Action]:
    """The amendment export proposes when the declared quantity differs from the order's."""
    sku, quantity = fields["sku"], fields["quantity"]
    declared = declaration["lines"].get(sku, 0)
    if declared == quantity:
        return []
    return [("amend_declaration", {"declaration_id": fields["declaration"], "sku": sku,
                                   "quantity": quantity},
             f"declared {declared}, the order ships {quantity}")]


def make_specialists(warehouse: Warehouse) -> dict[str, Specialist]:
    """Supply, transit and export, each with only its own tools and instructions."""
    return {name: Specialist(name, INSTRUCTIONS[name], registry_for(warehouse, tools))
            for name, tools in SPECIALIST_TOOLS.items()}


def monolithic_prompt(warehouse: Warehouse) -> str:
    """The one prompt a single agent would need: every instruction and every tool."""
    tools = _tool_lines(registry_for(warehouse, ALL_TOOLS))
    return "\n".join(INSTRUCTIONS.values()) + f"\nTools:\n{tools}"


def _tool_lines(registry: ToolRegistry) -> str:
    """The registry's tool schemas, one compact JSON line each (as a prompt lists them)."""
    return "\n".join(json.dumps(s["function"], separators=(",", ":")) for s in registry.schemas())


@dataclass
class PromptSizes(Record):
    """How long each specialist's prompt is, beside the one prompt of a single agent."""

    rows: list[tuple[str, list[str], int]]  # (agent, its tools, prompt tokens)
    counted_with: str

    def tokens(self, agent: str) -> int:
        """The prompt size of ``agent`` ("supply", ..., or "one agent")."""
        return next(n for name, _, n in self.rows if name == agent)

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(str(self))

    def __str__(self) -> str:
        lines = [f"{name}: tools={tools}; prompt={n} tokens" for name, tools, n in self.rows]
        return "\n".join([f"prompt sizes (measured; tokens counted with {self.counted_with})",
                          *lines])

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(name)}</td><td>{html.escape(', '.join(tools))}"
                       f"</td><td>{n}</td></tr>" for name, tools, n in self.rows)
        return (f"<table><tr><th>agent</th><th>tools</th><th>prompt tokens</th></tr>{rows}"
                f"</table><small>tokens counted with {html.escape(self.counted_with)}</small>")


def prompt_sizes(coordinator: Coordinator, count_tokens: Callable[[str], int],
                 counted_with: str) -> PromptSizes:
    """Each specialist's prompt and the single agent's prompt, counted with ``count_tokens``."""
    rows = [(name, s.tool_names(), count_tokens(s.prompt()))
            for name, s in coordinator.specialists.items()]
    rows.append(("one agent", sorted(ALL_TOOLS), count_tokens(monolithic_prompt(
        coordinator.warehouse))))
    return PromptSizes(rows, counted_with)


@dataclass
class CoordinatedPlan(Record):
    """The coordinator's one proposal: hand-offs, every specialist's report, and conflicts."""

    order_id: str
    hand_off: str
    tasks: list[Task]
    reports: list[SpecialistReport]
    conflicts: list[str] = field(default_factory=list)

    @property
    def proposals(self) -> list[Proposal]:
        return [p for r in self.reports for p in r.proposals]

    @property
    def ok(self) -> bool:
        """True when no conflict was found: the plan may go to execution (with confirmation)."""
        return not self.conflicts

    def record(self) -> dict[str, Any]:
        """The plan's values for a machine: hand-offs, proposals, conflicts and the verdict."""
        return json_safe({"order_id": self.order_id, "hand_off": self.hand_off,
                          "tasks": self.tasks, "proposals": self.proposals,
                          "assumptions": {r.agent: r.assumptions for r in self.reports},
                          "conflicts": self.conflicts, "ok": self.ok})

    def tool_calls(self) -> list[dict[str, Any]]:
        """The proposals as tool calls for the approval graph (LangChain ``tool_calls``)."""
        return [{"name": p.tool, "args": dict(p.arguments), "id": f"call_{i}"}
                for i, p in enumerate(self.proposals, 1)]

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(str(self))

    def __str__(self) -> str:
        lines = [f"plan for {self.order_id} (hand-off: {self.hand_off})"]
        for task in self.tasks:
            lines.append(f"  -> {task.specialist}: {task.text}  fields={task.fields}")
        lines += [f"  {p.line()}" for p in self.proposals] or ["  (no actions proposed)"]
        lines += [f"  CONFLICT: {c}" for c in self.conflicts]
        lines.append("  verdict: " + ("consistent, ready for confirmation" if self.ok
                                      else "REJECTED by the coordinator, not executed"))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        tasks = "".join(f"<li><b>{e(t.specialist)}</b>: {e(t.text)} <code>{e(str(t.fields))}"
                        "</code></li>" for t in self.tasks)
        rows = "".join(f"<tr><td>{e(p.agent)}</td><td><code>{e(p.tool)}</code></td><td>"
                       f"{e(str(p.arguments))}</td><td>{e(p.risk)}</td><td>{e(p.reason)}</td></tr>"
                       for p in self.proposals)
        conflicts = "".join(f"<li style='color:#b00'>CONFLICT: {e(c)}</li>"
                            for c in self.conflicts)
        verdict = ("consistent, ready for confirmation" if self.ok
                   else "REJECTED by the coordinator, not executed")
        return (f"<b>plan for {e(self.order_id)}</b> (hand-off: {e(self.hand_off)})<ul>{tasks}"
                "</ul><table><tr><th>agent</th><th>tool</th><th>arguments</th><th>risk</th>"
                f"<th>reason</th></tr>{rows}</table><ul>{conflicts}</ul>verdict: {verdict}")


@dataclass
class ConsistencyCheck(Record):
    """The conflicts :func:`check_consistency` found, one ``CONFLICT:`` line each, and the
    coordinator's verdict."""

    conflicts: list[str]

    @property
    def ok(self) -> bool:
        return not self.conflicts

    def record(self) -> dict[str, Any]:
        return {"conflicts": list(self.conflicts), "ok": self.ok}

    def __str__(self) -> str:
        verdict = "consistent" if self.ok else "REJECTED by the coordinator, not executed"
        return "\n".join([*(f"CONFLICT: {c}" for c in self.conflicts), f"verdict: {verdict}"])

    __repr__ = __str__


def check_consistency(order: dict, reports: list, stock: dict[str, int]) -> list[str]:
    """Conflicts between the specialists' reports, the order and each other ([] if none).

    Finds context lost in a hand-off (a specialist planned for a site the order does not ship
    from) and contradicting proposals (units declared for export from a site that will not hold
    them after the proposed moves; stock moves without their transfer bookings).
    """
    conflicts = []
    site = order["ship_from"]
    for report in reports:  # context lost: a specialist planned for another site
        assumed = report.assumptions.get("ship_from")
        if assumed is not None and assumed != site:
            conflicts.append(f"{report.agent} planned for site {assumed}, but the order ships "
                             f"from {site} (context lost in the hand-off)")
    proposals = [p for r in reports for p in r.proposals]
    moved_in = sum(p.arguments["quantity"] for p in proposals
                   if p.tool == "move_stock" and p.arguments["to_site"] == site)
    declared = [p.arguments["quantity"] for p in proposals if p.tool == "amend_declaration"]
    needed = declared[-1] if declared else order["quantity"]
    available = stock.get(site, 0) + moved_in
    if available < needed:  # contradicting proposals: export ships what supply does not bring
        conflicts.append(f"export ships {needed} x {order['sku']} from {site}, but {site} will "
                         f"hold {available} ({stock.get(site, 0)} on hand + {moved_in} moved in)")
    moves = [p for p in proposals if p.tool == "move_stock"]
    bookings = [p for p in proposals if p.tool == "book_transfer"]
    if len(moves) != len(bookings):
        conflicts.append(f"{len(moves)} stock move(s) but {len(bookings)} transfer booking(s)")
    return conflicts


def supply_task(order_id: str, order: dict, hand_off: HandOff = "structured") -> Task:
    """The hand-off to supply: ``structured`` passes the shipping site, ``lossy`` drops it."""
    fields = {"sku": order["sku"], "quantity": order["quantity"]}
    if hand_off == "structured":
        fields["ship_from"] = order["ship_from"]
    return Task("supply", f"make {order['quantity']} x {order['sku']} available for {order_id}",
                fields)


def transit_task(moves: list[dict[str, Any]]) -> Task:
    """The hand-off to transit: the stock moves supply proposed."""
    return Task("transit", f"carry {len(moves)} stock move(s)", {"moves": moves})


def export_task(order: dict) -> Task:
    """The hand-off to export: the declaration, SKU and quantity of the order."""
    return Task("export", f"declare {order['quantity']} x {order['sku']} on {order['declaration']}",
                {"declaration": order["declaration"], "sku": order["sku"],
                 "quantity": order["quantity"]})


class Coordinator:
    """Receives the request, routes tasks to specialists, assembles and checks one plan."""

    def __init__(self, warehouse: Warehouse | None = None) -> None:
        self.warehouse = warehouse or Warehouse()
        self.specialists = make_specialists(self.warehouse)

    def order(self, order_id: str) -> dict:
        """Look up an order in the order book (ValueError naming the known orders if absent)."""
        orders = self.warehouse.systems["orders"]["orders"]
        if order_id not in orders:
            raise ValueError(f"unknown order {order_id!r}; known orders: {sorted(orders)}")
        return orders[order_id]

    def plan(self, order_id: str, hand_off: HandOff = "structured") -> CoordinatedPlan:
        """Route the order to supply, then transit (with supply's moves), then export.

        ``structured`` passes the order's fields on; ``lossy`` passes only what fits in a short
        sentence, and the shipping site is lost on the way to supply.
        """
        if hand_off not in ("structured", "lossy"):
            raise ValueError(f"hand_off must be 'structured' or 'lossy', got {hand_off!r}")
        order = self.order(order_id)
        tasks = [supply_task(order_id, order, hand_off)]
        reports = [self.specialists["supply"].propose(tasks[0])]
        moves = [dict(p.arguments) for p in reports[0].proposals if p.tool == "move_stock"]
        tasks.append(transit_task(moves))
        reports.append(self.specialists["transit"].propose(tasks[1]))
        tasks.append(export_task(order))
        reports.append(self.specialists["export"].propose(tasks[2]))
        stock = self.specialists["supply"].read("get_stock", sku=order["sku"])
        return CoordinatedPlan(order_id, hand_off, tasks, reports,
                               check_consistency(order, reports, stock))


@dataclass
class PausedOrder(Record):
    """An approval run on the warehouse as it stands after a step: the nodes it runs next, the
    call it waits on (None if none), the writes the warehouse executed, and ``site``'s stock of
    ``sku``. Shown ``when`` it has ``"stopped"`` (where, and what has not run yet) or when a
    decision was ``"decided"`` (what it ran, and what waits next)."""

    next_nodes: tuple[str, ...]
    waiting: ApprovalRequest | None
    executed: list[tuple[str, dict]]
    site: str
    sku: str
    stock: int
    when: str = "stopped"
    label: str = ""

    @classmethod
    def of(cls, graph: Any, config: RunnableConfig, warehouse: Warehouse, when: str = "stopped",
           label: str = "", site: str = "RTM", sku: str = "SKU-100") -> PausedOrder:
        """The run of ``graph`` on the thread ``config``, over ``warehouse``, as it stands."""
        return cls(tuple(graph.get_state(config).next), pending_request(graph, config),
                   list(warehouse.executed), site, sku, warehouse.stock_of(site, sku), when, label)

    def record(self) -> dict[str, Any]:
        return json_safe({"next_nodes": self.next_nodes,
                          "waiting": self.waiting.record() if self.waiting else None,
                          "executed": [[name, args] for name, args in self.executed],
                          "site": self.site, "sku": self.sku, "stock": self.stock,
                          "label": self.label})

    def __str__(self) -> str:
        if self.when == "decided":
            return "\n".join([f"executed: {self.executed[-1] if self.executed else None}",
                              f"{self.site} stock of {self.sku} now: {self.stock}",
                              f"next waiting: {self.waiting.tool if self.waiting else None}"])
        lines = [self.label] if self.label else []
        return "\n".join([*lines, f"graph stopped before node: {self.next_nodes}",
                          f"waiting for approval: {self.waiting}",
                          f"executed so far: {[name for name, _ in self.executed]}",
                          f"{self.site} stock of {self.sku} still: {self.stock}"])

    __repr__ = __str__


@dataclass
class ResumedRun(Record):
    """A run another process started, resumed here from its checkpoint file: the call it was
    waiting on when this kernel opened the file, and the writes executed here after the decision."""

    file: str
    waiting: ApprovalRequest | None
    executed: list[tuple[str, dict]]

    def record(self) -> dict[str, Any]:
        return json_safe({"file": self.file,
                          "waiting": self.waiting.record() if self.waiting else None,
                          "executed": [[name, args] for name, args in self.executed]})

    def __str__(self) -> str:
        return (f"this kernel, from {self.file} -> still waiting for: {self.waiting}\n"
                f"after approval, executed here: {self.executed}")

    __repr__ = __str__


def build_warehouse_graph(db_path: str | None = None, order_id: str = "ORD-1",
                          checkpointer: Any = None) -> tuple[Any, Warehouse]:
    """The coordinator's consistent plan for ``order_id`` as an approval graph.

    The scripted coordinator proposes the plan's calls; reads and writes run through the
    gateway, critical calls wait for a decision. With ``db_path`` the graph checkpoints to
    SQLite, so another process can resume it. Returns the graph and its warehouse.
    """
    warehouse = Warehouse()
    plan = Coordinator(warehouse).plan(order_id)
    if not plan.ok:
        raise ValueError(f"the coordinator rejected the plan: {plan.conflicts}")
    if checkpointer is None:
        checkpointer = InMemorySaver() if db_path is None else sqlite_checkpointer(db_path)
    graph = build_approval_graph(warehouse_gateway(warehouse),
                                 ScriptedPlanModel(plan.tool_calls()), COORDINATOR, checkpointer)
    return graph, warehouse


def main(argv: list[str] | None = None) -> None:
    """``python -m course.guards.warehouse --db F --thread T start|show|approve|reject|edit``;
    a bad argument or store ends in one line naming it and the fix (exit status 2)."""
    from course.cli import json_object

    parser = argparse.ArgumentParser(prog="python -m course.guards.warehouse",
                                     description="Start or resume the warehouse approval run.")
    parser.add_argument("--db", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--approver", default="human:cli")
    parser.add_argument("--arguments", type=json_object, default={},
                        help="JSON arguments for 'edit'")
    parser.add_argument("step", choices=["start", "show", *ACTIONS])
    args = parser.parse_args(argv)
    try:
        graph, warehouse = build_warehouse_graph(args.db)
        config = thread_config(args.thread)
        if args.step == "start":
            graph.invoke({"messages": [HumanMessage("Prepare order ORD-1.")]}, config)
        elif args.step != "show":
            decision = ApprovalDecision(args.step, args.approver,
                                        args.arguments if args.step == "edit" else None)
            decide(graph, config, decision)
        request = pending_request(graph, config)
    except (RuntimeError, ValueError) as err:  # course errors (a CheckpointStoreError, "not waiting
        # for a decision") name the input and the fix
        parser.exit(2, f"{parser.prog} {args.step}: {err}\n")
    print("waiting for:", "nothing" if request is None else request)
    print("executed in this process:", warehouse.executed)


if __name__ == "__main__":
    main()
