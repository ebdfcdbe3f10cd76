"""Stop rules in smolagents: ``max_steps`` is built in; a step callback adds the budgets.

:class:`BudgetGuard` is a step callback (``step_callbacks=[guard]``) that adds a token budget, a
cost budget and repeat detection (the same code with the same observation). When a rule fires it
records the reason and calls ``agent.interrupt()``; smolagents then raises ``AgentError("Agent
interrupted.")`` before the next step, which :func:`run_smolagents_with_budget` catches, so the
trace (read from the run's spans, chapter 02's format) is kept and the reason is data. :class:`LibraryRun` is the record
both this module and :mod:`course.loop.budget_graph` report into.

Not handled: pricing real API calls, or stopping a model in the middle of a generation (a
budget is checked between steps, so a run overshoots by at most one step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from smolagents import CodeAgent
from smolagents.memory import ActionStep
from smolagents.monitoring import LogLevel
from smolagents.utils import AgentError, AgentMaxStepsError

from course.agents.replay import ReplayModel, local_tokenizer
from course.agents.traces import run_from_spans
from course.loop.agent_loop import StopReason, StopRules
from course.records import Record, json_safe
from course.tools.for_libraries import smolagents_door
from course.tools.spans import capture

__all__ = ["BudgetGuard", "LibraryRun", "budgeted_code_agent", "run_smolagents_with_budget",
           "scripted_code_model"]


@dataclass
class LibraryRun(Record):
    """How a library run ended: the stop reason, steps and tokens, one row per step (displayed:
    the lines for the student, and these values, without the library's trace, for a machine)."""

    library: str
    model_name: str
    stop_reason: StopReason | str
    stop_detail: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    final_answer: Any = None
    trace: Any = None  # the library's own record: a course.agents.traces.Run, or LangGraph state values
    token_unit: str = "tokens"

    @property
    def steps(self) -> int:
        return len(self.rows)

    @property
    def total_tokens(self) -> int:
        return self.rows[-1]["total_tokens"] if self.rows else 0

    def __str__(self) -> str:
        lines = [f"{self.library} with {self.model_name}"]
        for row in self.rows:
            lines.append(f"  step {row['step']}: {row['action']}  [in {row['input_tokens']}, "
                         f"out {row['output_tokens']}, total {row['total_tokens']}]")
        lines.append(f"stopped: {self.stop_reason} after {self.steps} step(s) ({self.stop_detail});"
                     f" tokens {self.total_tokens} [unit: {self.token_unit}]")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {"library": self.library, "model_name": self.model_name,
                "stop_reason": str(self.stop_reason), "stop_detail": self.stop_detail,
                "steps": self.steps, "total_tokens": self.total_tokens,
                "rows": json_safe(self.rows), "final_answer": json_safe(self.final_answer),
                "token_unit": self.token_unit}


def scripted_code_model(outputs: Sequence[str], steps: int = 30, tokenizer: Any = "local",
                        name: str = "scripted code model") -> Any:
    """A *scripted* smolagents model: the given code-agent outputs in order, then the last again.

    Built on :class:`course.agents.replay.ReplayModel` (the code-agent chapter's replay model), padded
    to ``steps`` outputs so that a loop can go on until a stop rule ends it. Token usage is
    measured: the prompt smolagents really sends, rendered with the local model's chat template
    and counted by its tokenizer (``tokenizer=None`` skips counting).
    """
    if not outputs:
        raise ValueError("scripted_code_model needs at least one output. Fix: pass a list of "
                         "'Thought: ...\\n<code>...</code>' texts.")
    padded = list(outputs) + [outputs[-1]] * max(0, steps - len(outputs))
    tokenizer = local_tokenizer() if tokenizer == "local" else tokenizer
    model_id = name if "scripted" in name else f"scripted: {name}"
    return ReplayModel(padded, model_id=model_id, tokenizer=tokenizer)


class BudgetGuard:
    """A smolagents step callback: token budget, cost budget and repeat detection.

    ``step_callbacks=[guard]``; after each action step it adds the step's tokens, checks the
    limits and, if one is passed, records ``reason`` / ``detail`` and interrupts the agent.
    ``max_steps`` stays the agent's own setting.
    """

    def __init__(self, limits: StopRules) -> None:
        self.limits = limits
        self.reason: StopReason | None = None
        self.detail = ""
        self.rows: list[dict[str, Any]] = []
        self._seen: dict[str, str] = {}
        self.total_tokens = 0
        self.total_cost = 0.0

    def __call__(self, memory_step: Any, agent: Any = None) -> None:
        if not isinstance(memory_step, ActionStep) or self.reason is not None:
            return
        usage = memory_step.token_usage
        tokens_in = usage.input_tokens if usage else 0
        tokens_out = usage.output_tokens if usage else 0
        self.total_tokens += tokens_in + tokens_out
        self.total_cost += self.limits.cost(tokens_in, tokens_out)
        code = (memory_step.code_action or "").strip()
        observation = memory_step.observations or ""
        self.rows.append({"step": memory_step.step_number,
                          "action": " ".join(code.split())[:70] or "(no code)",
                          "input_tokens": tokens_in, "output_tokens": tokens_out,
                          "total_tokens": self.total_tokens})
        if memory_step.is_final_answer:
            return
        limits = self.limits
        if limits.token_budget is not None and self.total_tokens > limits.token_budget:
            self._stop(agent, StopReason.TOKEN_BUDGET,
                       f"{self.total_tokens} tokens > budget {limits.token_budget}")
        elif limits.cost_budget is not None and self.total_cost > limits.cost_budget:
            self._stop(agent, StopReason.COST_BUDGET,
                       f"cost {self.total_cost:.4f} > budget {limits.cost_budget:.4f}")
        elif limits.repeat_detection and code:
            if self._seen.get(code) == observation:
                self._stop(agent, StopReason.REPEAT,
                           "the same code returned the same observation as before")
            self._seen[code] = observation

    def _stop(self, agent: Any, reason: StopReason, detail: str) -> None:
        self.reason, self.detail = reason, detail
        if agent is not None:
            agent.interrupt()


def run_smolagents_with_budget(agent: Any, task: str, guard: BudgetGuard) -> LibraryRun:
    """Run a smolagents agent that has ``guard`` among its step callbacks; never lose the trace."""
    answer = None
    source = "scripted" if "scripted" in str(agent.model.model_id) else "measured"
    with capture(provenance=source) as spans:  # the trace is read from the run's spans
        try:
            answer = agent.run(task)
        except AgentError as err:
            if guard.reason is None:  # not our interruption: a real failure, keep it as the reason
                guard.reason, guard.detail = StopReason.MODEL_ERROR, f"{type(err).__name__}: {err}"
    if guard.reason is not None:
        reason, detail = guard.reason, guard.detail
    elif any(isinstance(getattr(s, "error", None), AgentMaxStepsError)
             for s in agent.memory.steps):
        reason, detail = StopReason.MAX_STEPS, f"max_steps={agent.max_steps} reached"
        guard.rows = [r for r in guard.rows if r["step"] <= agent.max_steps]
    else:
        reason, detail = StopReason.FINAL_ANSWER, "final_answer() was called"
    trace = run_from_spans(spans)
    tokenizer = getattr(agent.model, "tokenizer", None)
    unit = (f"{getattr(tokenizer, 'name_or_path', '').rstrip('/').split('/')[-1] or 'model'} "
            "tokenizer over the prompt smolagents sent") if tokenizer is not None else \
        "as the model object reported"
    return LibraryRun("smolagents CodeAgent", str(agent.model.model_id), reason, detail,
                      guard.rows, answer, trace, unit)


def budgeted_code_agent(tools: Sequence[Any], model: Any, limits: StopRules) -> tuple[Any, BudgetGuard]:
    """A real ``CodeAgent`` with ``max_steps`` from ``limits`` and a :class:`BudgetGuard`.

    The agent calls ``tools`` through chapter 01's door (:func:`course.tools.for_libraries.smolagents_door`).
    Its logger is off (``LogLevel.OFF``): at ``verbosity_level=0`` smolagents still prints
    "Agent interrupted." and "Reached max steps." in red, which a notebook shows as an error wall;
    the stop reason is in the returned :class:`LibraryRun` instead.
    """
    guard = BudgetGuard(limits)
    agent = CodeAgent(tools=smolagents_door(list(tools)), model=model, max_steps=limits.max_steps,
                      step_callbacks=[guard], verbosity_level=LogLevel.OFF)
    return agent, guard
