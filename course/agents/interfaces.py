"""Code as the interface: one task for smolagents' ``CodeAgent`` and ``ToolCallingAgent``.

Note 000: when the model writes a program instead of one JSON call, "a loop, a condition or a
call whose arguments depend on an earlier result take one step instead of several" (the CodeAct
paper, Wang et al., ICML 2024, measures the same). The task here needs all three: the weather
of five cities (a loop), the warmest of them (a condition), and its temperature in Fahrenheit
(a call whose argument depends on the earlier results). The tool is the course's
``get_weather`` (:mod:`course.tools.examples`), behind chapter 01's door.

- :func:`scripted_pair`: both agents driven by model outputs the course wrote (*scripted*: no
  LLM), each the shortest run its interface allows: the code agent's one program; the
  tool-calling agent's five calls in one message (smolagents runs them in parallel), then the
  dependent call, then ``final_answer``. Everything else is real: the agents parse, call the tool
  and build every prompt, whose size is *measured* with the active model's tokenizer.
- :func:`live_pair`: the same task, both agents, the active model (*measured*), with the plan
  of :func:`course.agents.live.live_plan` (one bounded call each for a small model).

Not handled: the step counts of a capable model are not fixed by the interface (it may take
more steps than the minimum, or answer from memory); the scripted pair shows the minimum each
interface needs, not what a given model does. Prompts are counted as the chat template renders
the messages; tool schemas an engine adds to the template are not counted.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from smolagents import CodeAgent, ToolCallingAgent
from smolagents.utils import AgentError

from course.agents.live import (
    LivePlan,
    choice_label,
    live_plan,
    reusing_kept_prefix,
    stop_after_steps,
)
from course.agents.replay import ReplayModel, local_tokenizer, tokenizer_name
from course.agents.traces import Run, run_from_spans
from course.records import Record
from course.tools import spans as tracing
from course.tools.examples import get_weather
from course.tools.for_libraries import smolagents_door

__all__ = ["AGENTS", "CITIES", "SCRIPTED_OUTPUTS", "TASK", "InterfaceComparison", "InterfaceRun",
           "live_pair", "scripted_pair"]

CITIES = ("Paris", "Berlin", "Madrid", "Oslo", "Rome")
TASK = (f"Which of these cities is the warmest right now: {', '.join(CITIES)}? Answer with the "
        "city and its temperature in Fahrenheit.")
AGENTS = {"CodeAgent": CodeAgent, "ToolCallingAgent": ToolCallingAgent}

_CODE = '''Thought: I get the weather of every city in a loop, keep the warmest, then ask for its temperature in Fahrenheit.
<code>
import re
celsius = {}
for city in ["Paris", "Berlin", "Madrid", "Oslo", "Rome"]:
    report = get_weather(city=city)
    celsius[city] = int(re.search(r"(-?\\d+) °C", report).group(1))
warmest = max(celsius, key=celsius.get)
final_answer(get_weather(city=warmest, units="imperial"))
</code>'''

SCRIPTED_OUTPUTS: dict[str, list[str]] = {
    "CodeAgent": [_CODE],
    "ToolCallingAgent": [
        json.dumps([{"name": "get_weather", "arguments": {"city": c}} for c in CITIES]),
        json.dumps({"name": "get_weather", "arguments": {"city": "Madrid", "units": "imperial"}}),
        json.dumps({"name": "final_answer", "arguments": {"answer": "Madrid: 70 °F, clear sky"}}),
    ],
}
"""The scripted model outputs: one per step, the fewest each interface allows."""


@dataclass
class InterfaceRun:
    """One agent on the task: its trace, answer, why it stopped, and the wall time."""

    agent: str
    trace: Run
    answer: Any
    stopped: str
    seconds: float
    executions: list[dict[str, Any]] = field(default_factory=list)
    """Every call that reached ``get_weather`` (its arguments), in order: a loop in code runs
    one written call several times."""

    def row(self) -> str:
        t = self.trace
        return (f"{self.agent}: steps={len(t.steps)} get_weather_runs={len(self.executions)} "
                f"input_tokens={t.total_input_tokens} output_tokens={t.total_output_tokens} "
                f"stopped={self.stopped} answer={self.answer!r}")


@dataclass
class InterfaceComparison(Record):
    """The two agents on one task, with the provenance of their model outputs and figures."""

    label: str
    runs: dict[str, InterfaceRun]

    def record(self) -> dict[str, Any]:
        """Per agent: steps, tool runs, tokens, why it stopped, the answer."""
        return {"label": self.label, "runs": {name: {
            "steps": len(r.trace.steps), "get_weather_runs": len(r.executions),
            "input_tokens": r.trace.total_input_tokens, "output_tokens": r.trace.total_output_tokens,
            "stopped": r.stopped, "answer": None if r.answer is None else str(r.answer),
            "errors": [s.error for s in r.trace.steps if s.error]} for name, r in self.runs.items()}}

    def __str__(self) -> str:
        return "\n".join([self.label, *(r.row() for r in self.runs.values())])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def _run(agent_name: str, model: Any, max_steps: int, stop_after: int | None,
         source: str, **about: Any) -> InterfaceRun:
    callbacks = [stop_after_steps(stop_after)] if stop_after else []
    executions: list[dict[str, Any]] = []

    @functools.wraps(get_weather)
    def counted(*args: Any, **kwargs: Any) -> str:
        executions.append({**dict(zip(("city", "units"), args, strict=False)), **kwargs})
        return get_weather(*args, **kwargs)

    agent = AGENTS[agent_name](tools=smolagents_door([counted]), model=model,
                               max_steps=max_steps, step_callbacks=callbacks, verbosity_level=-1)
    start = time.perf_counter()
    answer, stopped = None, "final_answer"
    with tracing.capture(provenance=source,
                         about={"title": f"{agent_name}, {source}", **about}) as spans:
        try:
            answer = agent.run(TASK)
        except AgentError as err:
            stopped = (f"step limit ({stop_after})" if "interrupted" in str(err).lower()
                       else f"{type(err).__name__}")
    seconds = time.perf_counter() - start
    trace = run_from_spans(spans)
    if answer is None and stopped == "final_answer":
        stopped = "no final answer"
    return InterfaceRun(agent_name, trace, answer, stopped, seconds, executions)


def scripted_pair(tokenizer: Any = "local") -> InterfaceComparison:
    """Both agents replaying :data:`SCRIPTED_OUTPUTS`; prompts measured with ``tokenizer``."""
    tokenizer = local_tokenizer() if tokenizer == "local" else tokenizer
    runs = {}
    for name, outputs in SCRIPTED_OUTPUTS.items():
        model = ReplayModel(outputs, model_id="scripted", tokenizer=tokenizer)
        runs[name] = _run(name, model, len(outputs), None, "scripted",
                          measured_with=tokenizer_name(tokenizer))
    return InterfaceComparison(
        "[scripted] model outputs written by the course (no LLM); steps, tool calls and answers "
        "computed by the real agents; input/output tokens measured with the active model's "
        "tokenizer", runs)


def live_pair(plan: LivePlan | None = None,
              agents: tuple[str, ...] = tuple(AGENTS)) -> InterfaceComparison:
    """The ``agents`` (both by default) with the active model (measured), as far as
    :func:`live_plan` allows; one agent per call keeps each notebook cell short."""
    from course.models import smolagents_model
    from course.settings import active_model

    unknown = sorted(set(agents) - set(AGENTS))
    if unknown:
        raise ValueError(f"unknown agent(s) {unknown}; choose from {sorted(AGENTS)}.")
    plan = plan or live_plan()
    runs = {}
    for name in agents:
        model = smolagents_model(max_new_tokens=plan.max_new_tokens)
        if active_model().in_kernel:
            model = reusing_kept_prefix(model, LivePlan(plan.max_steps, plan.max_new_tokens,
                                                    plan.reason, plan.first_block and name == "CodeAgent"))
        runs[name] = _run(name, model, plan.max_steps + 1, plan.max_steps, "measured",
                          model_id=choice_label())
    return InterfaceComparison(f"[measured] model: {choice_label()}; {plan.reason}; tokens as the "
                               "model object reported them", runs)
