"""The agent loop, written to be read: decide -> call -> observe, until a stop rule fires.

One run of :func:`run_loop` is a sequence of :class:`LoopStep` records. Each step the model (any
callable that takes the :class:`LoopState` and returns a :class:`StepDecision`) either calls a tool
or gives a final answer; the runtime sends the call through the single door
(:class:`course.tools.registry.ToolRegistry`: allowlist and JSON Schema validation, then the tool) and
appends the observation to the messages, which the model re-reads on the next step.

The lesson writes one step in two halves, :func:`decide` (ask the model, count the tokens;
nothing runs) and :func:`call_and_observe` (the call through the door, the observation appended),
with :func:`start_messages`; a student's loop with its stop rules is built from them, and
:func:`run_loop` is the package's fuller loop (costs, plans, compaction, model errors).

Every run ends with exactly one :class:`StopReason`, recorded in the returned :class:`LoopRun`:

- ``final_answer``: the model answered;
- ``max_steps``: the step limit was reached without an answer;
- ``token_budget`` / ``cost_budget``: the tokens (or their price) spent so far passed the
  budget; the check runs after every model call, so a run overshoots by at most one step;
- ``repeat``: the same call (name and arguments) came back with the same result as before;
- ``model_error``: the model itself raised; the trace up to that point is kept;
- ``extra_rule``: a rule of the caller's (``run_loop(..., extra_rule=...)``) said stop.

A stop is never an exception: the trace survives every way a run can end. A tool that raises,
an unknown tool or arguments that fail the schema come back to the model as an error
observation, like any other result.

What this loop does not do: parse free text from a real model (a policy turns model output into
a :class:`StepDecision`), run tools in a sandbox, or trim the context (see the memory chapters).
Token counts default to a rough word-and-punctuation count, and every run says so: its
``token_unit`` is printed wherever its numbers appear. Pass ``count_tokens`` (for example a
model's tokenizer) with a ``token_unit`` naming it for real counts.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from course.records import Record
from course.tools.calls import ToolCall
from course.tools.registry import ToolRegistry, as_registry

__all__ = [
    "APPROXIMATE_UNIT",
    "IdealBondTrajectory",
    "LoopRun",
    "LoopState",
    "LoopStep",
    "Model",
    "RunSummary",
    "ScriptedModel",
    "StepDecision",
    "StopReason",
    "StopRules",
    "StopTable",
    "Trajectory",
    "approximate_token_count",
    "as_registry",
    "call_and_observe",
    "count_messages",
    "decide",
    "describe_result",
    "loop_system_prompt",
    "run_loop",
    "start_messages",
]

# --------------------------------------------------------------------------------------------
# Records


class StopReason(StrEnum):
    """Why a run ended. Exactly one per run."""

    FINAL_ANSWER = "final_answer"
    MAX_STEPS = "max_steps"
    TOKEN_BUDGET = "token_budget"
    COST_BUDGET = "cost_budget"
    REPEAT = "repeat"
    MODEL_ERROR = "model_error"
    EXTRA_RULE = "extra_rule"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class StepDecision:
    """What the model decided on one step: a thought, then a tool call or a final answer.

    ``plan`` (optional) replaces the current plan: this is how a plan is revised on an
    observation. ``input_tokens`` / ``output_tokens`` are filled by a model that knows them
    (a recorded run, a real model); when None, the loop counts them itself.
    """

    thought: str = ""
    call: ToolCall | None = None
    final_answer: str | None = None
    plan: tuple[str, ...] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def text(self) -> str:
        """The text the model wrote for this step (what its output tokens are counted from)."""
        parts = []
        if self.plan is not None:
            parts.append("plan: " + "; ".join(self.plan))
        if self.thought:
            parts.append(f"thought: {self.thought}")
        if self.call is not None:
            parts.append(f"action: {self.call}")
        if self.final_answer is not None:
            parts.append(f"final answer: {self.final_answer}")
        return "\n".join(parts)


@dataclass(frozen=True)
class StopRules:
    """The stop rules of one run. ``None`` switches a budget off."""

    max_steps: int = 10
    token_budget: int | None = None
    cost_budget: float | None = None
    price_per_input_token: float = 0.0
    price_per_output_token: float = 0.0
    repeat_detection: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be an integer >= 1, got {self.max_steps!r}. "
                             "Fix: allow at least one step.")
        if self.token_budget is not None and self.token_budget < 0:
            raise ValueError(f"token_budget must be >= 0 or None, got {self.token_budget!r}.")
        if self.cost_budget is not None and self.cost_budget < 0:
            raise ValueError(f"cost_budget must be >= 0 or None, got {self.cost_budget!r}.")
        if self.price_per_input_token < 0 or self.price_per_output_token < 0:
            raise ValueError("token prices must be >= 0.")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Price of a number of input and output tokens."""
        return (input_tokens * self.price_per_input_token
                + output_tokens * self.price_per_output_token)


@dataclass
class LoopStep:
    """One turn of the loop: what the model decided, what the runtime observed, what it cost."""

    number: int
    thought: str = ""
    call: ToolCall | None = None
    observation: str | None = None
    final_answer: str | None = None
    plan: tuple[str, ...] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0  # cumulative over the run, including this step
    total_cost: float = 0.0  # cumulative
    error: bool = False  # the observation is an error the tool or the runtime reported
    executed: bool = False  # the runtime actually ran the tool on this step
    status: str = ""  # the door's outcome, a ToolStatus: ok, invalid_arguments, unknown_tool, ...
    note: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def line(self) -> str:
        """One readable line (used by the run's printout and the widgets)."""
        if self.final_answer is not None:
            what = f"final answer: {self.final_answer}"
        elif self.call is not None:
            obs = (_short(self.observation, 60) if self.observation
                   else "(no observation)" if self.executed else "(not executed)")
            what = f"{self.call} -> {obs}"
        else:
            what = self.note or "(no action)"
        return (f"step {self.number}: {what}  [in {self.input_tokens}, out {self.output_tokens},"
                f" total {self.total_tokens}]")


@dataclass
class LoopRun(Record):
    """A finished run: the steps, the messages the model saw, and why it stopped."""

    task: str
    model_name: str
    limits: StopRules
    steps: list[LoopStep]
    messages: list[dict[str, Any]]
    stop_reason: StopReason
    stop_detail: str
    plan_history: list[tuple[str, ...]] = field(default_factory=list)
    token_unit: str = "tokens"

    @property
    def final_answer(self) -> str | None:
        return self.steps[-1].final_answer if self.steps else None

    @property
    def total_tokens(self) -> int:
        return self.steps[-1].total_tokens if self.steps else 0

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.steps)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.steps)

    @property
    def total_cost(self) -> float:
        return self.steps[-1].total_cost if self.steps else 0.0

    @property
    def model_calls(self) -> int:
        return len(self.steps)

    def summary(self) -> str:
        """Stop reason, steps and tokens in one line."""
        cost = f", cost {self.total_cost:.4f}" if self.total_cost else ""
        return (f"stopped: {self.stop_reason} after {len(self.steps)} step(s) ({self.stop_detail});"
                f" tokens {self.total_tokens} (in {self.input_tokens}, out {self.output_tokens})"
                f"{cost} [unit: {self.token_unit}]")

    def __str__(self) -> str:
        lines = [f"task: {self.task}", f"model: {self.model_name}"]
        lines += [s.line() for s in self.steps]
        lines.append(self.summary())
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        """The values a test reads: the stop, the totals, and each step's call and figures."""
        return {"task": self.task, "model_name": self.model_name,
                "stop_reason": str(self.stop_reason), "stop_detail": self.stop_detail,
                "steps": [_step_record(s) for s in self.steps],
                "final_answer": self.final_answer, "total_tokens": self.total_tokens,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_cost": self.total_cost, "token_unit": self.token_unit,
                "plan_history": [list(plan) for plan in self.plan_history]}

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{s.number}</td><td>{html.escape(s.thought)}</td>"
            f"<td><code>{html.escape(str(s.call) if s.call else '')}</code></td>"
            f"<td>{html.escape(_short(s.observation or s.final_answer or s.note, 120))}</td>"
            f"<td>{s.input_tokens}</td><td>{s.output_tokens}</td><td>{s.total_tokens}</td>"
            f"<td>{s.total_cost:.4f}</td></tr>"
            for s in self.steps
        )
        last = len(self.steps)
        rows = rows.replace(f"<tr><td>{last}</td>",
                            f"<tr style='background:#fde2e1;font-weight:bold'><td>{last}</td>", 1) \
            if last else rows
        return (f"<p><b>{html.escape(self.task)}</b> &middot; {html.escape(self.model_name)}</p>"
                "<table><tr><th>step</th><th>thought</th><th>action</th><th>observation</th>"
                "<th>in</th><th>out</th><th>total so far</th><th>cost so far</th></tr>"
                f"{rows}</table><p><b>stops at step {last}: {self.stop_reason}</b> "
                f"({html.escape(self.stop_detail)}); tokens spent {self.total_tokens}, cost "
                f"{self.total_cost:.4f} <i>[unit: {html.escape(self.token_unit)}]</i></p>")


@dataclass
class LoopState:
    """What the model sees when it decides: the task, the messages so far, the current plan."""

    task: str
    messages: list[dict[str, Any]]
    plan: tuple[str, ...] | None
    step_number: int
    steps: list[LoopStep]
    tool_names: tuple[str, ...]

    @property
    def last_observation(self) -> str | None:
        for message in reversed(self.messages):
            if message["role"] == "tool":
                return message["content"]
        return None


class Model(Protocol):
    """A model for the loop: a callable from the state to a decision (``name`` is optional)."""

    def __call__(self, state: LoopState) -> StepDecision: ...


# --------------------------------------------------------------------------------------------
# Models that are scripted, for lessons about the runtime


class ScriptedModel:
    """A scripted model: returns the given decisions in order, then keeps repeating the last.

    It is *scripted*, not a language model: its name says so in every trace. Use it where the
    lesson is about the runtime (stop rules, budgets), never to show what a model would answer.
    """

    def __init__(self, decisions: Sequence[StepDecision], name: str = "scripted model") -> None:
        if not decisions:
            raise ValueError("ScriptedModel needs at least one StepDecision. Fix: pass a non-empty list.")
        self.decisions = list(decisions)
        self.name = name if "scripted" in name else f"scripted: {name}"

    def __call__(self, state: LoopState) -> StepDecision:
        index = min(len(state.steps), len(self.decisions) - 1)
        return self.decisions[index]


# --------------------------------------------------------------------------------------------
# Tools


APPROXIMATE_UNIT = "word-and-punctuation count, not a tokenizer"


def approximate_token_count(text: str) -> int:
    """A rough token count: words and punctuation marks (no tokenizer needed)."""
    return len(re.findall(r"\w+|[^\w\s]", text))


# --------------------------------------------------------------------------------------------
# The loop


def loop_system_prompt(registry: ToolRegistry) -> str:
    """The instructions and the tool list, re-read by the model on every step."""
    lines = ["You solve the task step by step. Before each action write a thought.",
             "Call one tool per step, or give the final answer. Tools:"]
    for schema in registry.schemas():
        fn = schema["function"]
        description = (fn["description"] or "").strip().splitlines()
        lines.append(f"- {fn['name']}{json.dumps(fn['parameters'].get('properties', {}))}: "
                     f"{description[0] if description else ''}")
    return "\n".join(lines)


def describe_result(result: Any) -> str:
    """The observation text of a tool result; an image becomes ``<image WxH>``."""
    value = getattr(result, "value", None)
    size = getattr(value, "size", None)
    if hasattr(value, "mode") and isinstance(size, tuple) and len(size) == 2:
        return f"<image {size[0]}x{size[1]}>"
    return result.content


def count_messages(messages: Iterable[dict[str, Any]],
                   count_tokens: Callable[[str], int]) -> int:
    """Tokens of the whole context: every message's role and content (the model re-reads all)."""
    return sum(count_tokens(f"{m['role']}: {m['content']}") for m in messages)


def start_messages(task, registry):
    """The messages of a new run: the system prompt that lists the tools, then the task."""
    return [{"role": "system", "content": loop_system_prompt(registry)},
            {"role": "user", "content": task}]


def decide(model, task, messages, steps, registry):
    """decide: the model re-reads every message and writes one step; nothing runs yet."""
    number = len(steps) + 1
    decision = model(LoopState(task, list(messages), None, number, list(steps),
                               tuple(registry.allowed_names())))
    input_tokens = count_messages(messages, approximate_token_count)  # the whole context
    output_tokens = approximate_token_count(decision.text())
    total = (steps[-1].total_tokens if steps else 0) + input_tokens + output_tokens
    messages.append({"role": "assistant", "content": decision.text()})
    return LoopStep(number, decision.thought, decision.call, None, decision.final_answer,
                    input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total)


def call_and_observe(step, registry, messages):
    """call the step's tool through the single door, then append the result: the observation."""
    if step.call is None:
        step.observation = "Error: no tool call and no final answer. Call a tool or give the final answer."
    else:
        result = registry.execute(step.call.name, step.call.arguments)
        step.observation, step.status, step.executed = (describe_result(result), result.status,
                                                        result.executed)
    messages.append({"role": "tool", "content": step.observation, "origin": "runtime",
                     "step": step.number})


def run_loop(
    task: str,
    model: Model,
    tools: ToolRegistry | Sequence[Any] | dict[str, Any] = (),
    limits: StopRules | None = None,
    count_tokens: Callable[[str], int] = approximate_token_count,
    plan: Sequence[str] | None = None,
    compact: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
    token_unit: str | None = None,
    extra_rule: Callable[[list[LoopStep]], bool] | None = None,
) -> LoopRun:
    """Run decide -> call -> observe until a stop rule fires; always return the full trace.

    ``compact`` (optional) rewrites the messages before each model call (the "compact state"
    remedy for cost); the trace keeps the full history. ``token_unit`` names what
    ``count_tokens`` counts (default: the word-and-punctuation count, or "tokens").
    ``extra_rule`` (optional) is a stop rule of the caller's, asked after each observation with
    the steps so far; ``True`` ends the run with ``extra_rule``.
    """
    if token_unit is None:
        token_unit = APPROXIMATE_UNIT if count_tokens is approximate_token_count else "tokens"
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty string. Fix: say what the agent should do.")
    limits = limits or StopRules()
    registry = as_registry(tools)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": loop_system_prompt(registry)},
        {"role": "user", "content": task},
    ]
    current_plan = tuple(plan) if plan else None
    plan_history = [current_plan] if current_plan else []
    steps: list[LoopStep] = []
    seen: dict[str, str] = {}  # call key -> observation
    total_tokens = 0
    total_cost = 0.0
    model_name = getattr(model, "name", type(model).__name__)

    def finish(reason: StopReason, detail: str) -> LoopRun:
        return LoopRun(task, model_name, limits, steps, messages, reason, detail, plan_history,
                       token_unit)

    for number in range(1, limits.max_steps + 1):
        visible = compact(list(messages)) if compact else messages
        state = LoopState(task, list(visible), current_plan, number, list(steps),
                          tuple(registry.allowed_names()))
        try:
            decision = model(state)
            if not isinstance(decision, StepDecision):
                raise TypeError(f"the model returned {type(decision).__name__}, not a StepDecision")
        except Exception as err:
            steps.append(LoopStep(number, note=f"model error: {type(err).__name__}: {err}",
                              total_tokens=total_tokens, total_cost=total_cost, error=True))
            return finish(StopReason.MODEL_ERROR, f"the model raised {type(err).__name__}")

        # 1. account for the tokens of this model call
        input_tokens = (decision.input_tokens if decision.input_tokens is not None
                        else count_messages(visible, count_tokens))
        output_tokens = (decision.output_tokens if decision.output_tokens is not None
                         else count_tokens(decision.text()))
        total_tokens += input_tokens + output_tokens
        total_cost += limits.cost(input_tokens, output_tokens)
        step = LoopStep(number, decision.thought, decision.call, None, decision.final_answer,
                    decision.plan, input_tokens, output_tokens, total_tokens, total_cost)
        steps.append(step)
        messages.append({"role": "assistant", "content": decision.text()})
        if decision.plan is not None:
            current_plan = tuple(decision.plan)
            plan_history.append(current_plan)

        # 2. a final answer ends the run
        if decision.final_answer is not None:
            return finish(StopReason.FINAL_ANSWER, "the model gave a final answer")

        # 3. budgets: checked after every model call, before anything is executed
        if limits.token_budget is not None and total_tokens > limits.token_budget:
            step.note = "stopped before executing: token budget spent"
            return finish(StopReason.TOKEN_BUDGET,
                          f"{total_tokens} tokens > budget {limits.token_budget}")
        if limits.cost_budget is not None and total_cost > limits.cost_budget:
            step.note = "stopped before executing: cost budget spent"
            return finish(StopReason.COST_BUDGET,
                          f"cost {total_cost:.4f} > budget {limits.cost_budget:.4f}")

        # 4. call -> observe
        if decision.call is None:
            step.note = "no action and no answer"
            step.observation = ("Error: no tool call and no final answer. Call a tool or "
                                "give the final answer.")
            step.error = True
        else:  # through the single door: allowlist, schema validation, then the tool
            result = registry.execute(decision.call.name, decision.call.arguments)
            step.observation, step.status = describe_result(result), result.status
            step.error = not result.ok
            step.executed = result.executed
        messages.append({"role": "tool", "content": step.observation,
                         "origin": "runtime", "step": number})

        # 5. repeat detection: the same call with the same result as before
        if decision.call is not None and limits.repeat_detection:
            key = decision.call.key()
            if seen.get(key) == step.observation:
                return finish(StopReason.REPEAT,
                              f"{decision.call} returned the same result as before")
            seen[key] = step.observation

        # 6. a rule of the caller's
        if extra_rule is not None and extra_rule(list(steps)):
            return finish(StopReason.EXTRA_RULE, "the caller's rule said stop")

    return finish(StopReason.MAX_STEPS, f"{limits.max_steps} steps without a final answer")


def _step_record(step: LoopStep) -> dict[str, Any]:
    return {"number": step.number, "thought": step.thought,
            "call": str(step.call) if step.call else None, "observation": step.observation,
            "final_answer": step.final_answer, "status": str(step.status),
            "executed": step.executed, "input_tokens": step.input_tokens,
            "output_tokens": step.output_tokens, "total_tokens": step.total_tokens,
            "note": step.note}


@dataclass
class Trajectory(Record):
    """A run's steps as the note writes a trajectory: thought, action, observation, answer."""

    label: str
    steps: list[LoopStep]

    def __str__(self) -> str:
        lines = [f"[{self.label}]"]
        for step in self.steps:
            lines.append(f"thought:      {step.thought}")
            if step.final_answer is not None:
                lines.append(f"final answer: {step.final_answer}")
            else:
                lines.append(f"action:       {step.call}")
                lines.append(f"observation:  {_short(step.observation or '', 110)}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {"label": self.label, "steps": [_step_record(s) for s in self.steps]}


@dataclass
class RunSummary(Record):
    """A run's one line (:meth:`LoopRun.summary`), displayed: the run's values (its record)
    beside it for a machine."""

    run: LoopRun

    def __str__(self) -> str:
        return self.run.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return self.run.record()


@dataclass
class StopTable(Record):
    """Where one run stops under several stop rules: ``{label: run}``, one line each."""

    runs: dict[str, LoopRun]

    def __str__(self) -> str:
        width = max(len(label) for label in self.runs)
        return "\n".join(f"{label:<{width}} -> {run.stop_reason} at step {len(run.steps)}, "
                         f"tokens {run.total_tokens}" for label, run in self.runs.items())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {label: {"stop_reason": str(run.stop_reason), "steps": len(run.steps),
                        "total_tokens": run.total_tokens}
                for label, run in self.runs.items()}


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


class IdealBondTrajectory:
    """The ideal ReAct trajectory for the Bond request, reconstructed from the note, as a model.

    A scripted policy (not a language model) that plays the trajectory the note writes out:
    thought "I need the car model first, then an image" -> ``web_search`` -> thought "Now
    generate the image" -> ``text_to_image`` with the car the search returned -> final answer.
    The car is read from the search observation, so the image prompt depends on what the
    (offline) search really returned.
    """

    name = "reconstructed (from the note): the ideal Bond trajectory"
    cars = ("Aston Martin DB5", "Aston Martin DBS", "Aston Martin V8", "Aston Martin Valhalla")

    def __call__(self, state: LoopState) -> StepDecision:
        if state.step_number == 1:
            return StepDecision("I need the car model first, then an image.",
                            ToolCall("web_search", {"query": "car James Bond latest movie"}))
        if state.step_number == 2:
            seen = state.last_observation or ""
            found = [(seen.find(c), c) for c in self.cars if c in seen]
            car = min(found)[1] if found else "the car James Bond drove in the latest movie"
            return StepDecision("Now generate the image.", ToolCall("text_to_image", {"prompt": car}))
        return StepDecision("The image is ready.", final_answer=state.last_observation or "")
