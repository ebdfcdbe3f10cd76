"""The three tasks of note 000 run live with the active agent model, through a real ``CodeAgent``.

For: running the weather, Bond and debugging tasks (their task text, tools and
``additional_args`` taken from the shipped recordings, so they are the very tasks the replays
use) with :func:`course.models.smolagents_model`, the offline tools, and the same trace format,
stepper and trajectory checks as the replays. Every figure of a live run is *measured*: the
model outputs, the token usage the model object reported, and the wall time of each step.

How long a run may be depends on the model (:func:`live_plan`): a model under a billion
parameters (the bundled SmolLM2-135M, whatever the setting that selects it) gets a short bounded
run (one model call per task, a few dozen new tokens), because on a 2-core CPU each call
re-reads a prompt of about 2,400 tokens and more steps measure nothing but time; any other
model gets full runs. The step
limit is enforced by a step callback that interrupts the agent, so a bounded run makes no extra
"final answer" call after its last step.

Not handled: the real web search and image model (the offline tools stand in; see
:mod:`course.agents.offline_tools`), planning steps, streaming, retries of a failed server call.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from typing import Any

from smolagents import CodeAgent
from smolagents.memory import ActionStep
from smolagents.utils import AgentError

from course.agents.evaluation import Flag, check_trajectory
from course.agents.offline_tools import make_tools
from course.agents.traces import RECORDINGS_DIR, Run, load_run, run_from_smolagents
from course.settings import active_model

__all__ = ["FULL_RUN_STEPS", "NOTE_TASKS", "SMALL_MODEL_PARAMETERS", "LivePlan", "LiveRun", "choice_label", "live_plan", "run_live"]

NOTE_TASKS = {"weather": "weather_note", "bond": "bond_note", "debug": "debug_note"}
"""The three tasks, by the recording that holds their task text, tools and additional_args."""

FULL_RUN_STEPS = 6
"""Step limit of a full run: the note does not state its limit; its longest run took 3 steps."""


@dataclass(frozen=True)
class LivePlan:
    """How far a live run may go with the active model, and why."""

    max_steps: int
    max_new_tokens: int
    reason: str


SMALL_MODEL_PARAMETERS = 1_000_000_000
"""Below this size a model cannot act as a code agent: it gets a short bounded run."""


def _is_small_model() -> tuple[bool, str]:
    """Whether the agent model is under a billion parameters, and what it is."""
    choice = active_model()
    if choice.kind == "bundled":
        return True, "the bundled SmolLM2-135M model"
    if choice.kind == "server":
        from course.models import server_models

        name = choice.served_model or next(iter(server_models(choice)), "")
        small = "smollm2" in name.lower() or name.rstrip("/").endswith("smollm2-135m-instruct")
        return small, f"the served model {name}"
    from course.models import load_local_model

    local = load_local_model()
    params = local.model.num_parameters()
    return params < SMALL_MODEL_PARAMETERS, f"{choice.value} ({params / 1e6:.0f}M parameters)"


def live_plan() -> LivePlan:
    """A short bounded run for a model under a billion parameters, full runs otherwise."""
    small, what = _is_small_model()
    if small:
        return LivePlan(1, 48, f"short bounded run: {what}, one model call per task of at most "
                               "48 new tokens")
    return LivePlan(FULL_RUN_STEPS, 512, f"full run with {what}: up to {FULL_RUN_STEPS} steps of "
                                         "at most 512 new tokens")


@dataclass
class LiveRun:
    """One live run: its trace (all measured), the answer if any, why it stopped, the time."""

    name: str
    trace: Run
    answer: Any
    stopped: str
    seconds: float
    plan: LivePlan

    @property
    def flags(self) -> list[Flag]:
        """The trajectory checks on this run (the same checks as for the replays)."""
        return check_trajectory(self.trace)

    def __str__(self) -> str:
        t = self.trace
        lines = [f"{self.name} [measured] model: {t.model_id}",
                 f"plan: {self.plan.reason}",
                 f"steps={len(t.steps)} stopped={self.stopped} seconds={self.seconds:.1f} "
                 f"input_tokens={t.total_input_tokens} output_tokens={t.total_output_tokens}"]
        for step in t.steps:
            output = " ".join((step.model_output or "").split())
            lines.append(f"  step {step.number}: model wrote {output[:140]!r}")
            if step.tool_calls:
                lines.append(f"    tool calls: {', '.join(str(c) for c in step.tool_calls)}")
            if step.error:
                lines.append(f"    error: {step.error.splitlines()[0][:140]}")
            if step.duration_s is not None:
                lines.append(f"    step_seconds={step.duration_s:.1f}")
        lines.append(f"answer: {self.answer!r}")
        flags = self.flags
        lines.append("flags: " + ("; ".join(str(f) for f in flags) if flags else "none"))
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"


def choice_label() -> str:
    """The active agent model, as a reader recognises it."""
    choice = active_model()
    return "SmolLM2-135M-Instruct (bundled)" if choice.kind == "bundled" else choice.describe()


def _stop_after(limit: int):
    """A step callback that interrupts the agent once ``limit`` action steps have run."""

    def callback(memory_step: Any, agent: Any = None) -> None:
        if (isinstance(memory_step, ActionStep) and not memory_step.is_final_answer
                and memory_step.step_number >= limit and agent is not None):
            agent.interrupt()

    return callback


def run_live(name: str, plan: LivePlan | None = None, model: Any = None) -> LiveRun:
    """Run note task ``name`` (``weather``, ``bond`` or ``debug``) live with the agent model."""
    if name not in NOTE_TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(NOTE_TASKS)}.")
    from course.models import smolagents_model  # the model is built only when a run is asked for

    plan = plan or live_plan()
    recording = load_run(RECORDINGS_DIR / f"{NOTE_TASKS[name]}.json")
    model = model if model is not None else smolagents_model(max_new_tokens=plan.max_new_tokens)
    agent = CodeAgent(tools=make_tools(recording.tools), model=model, max_steps=plan.max_steps + 1,
                      step_callbacks=[_stop_after(plan.max_steps)], verbosity_level=-1)
    start = time.perf_counter()
    answer, stopped = None, "final_answer"
    try:
        answer = agent.run(recording.task, additional_args=dict(recording.additional_args) or None)
    except AgentError as err:
        stopped = (f"step limit ({plan.max_steps})" if "interrupted" in str(err).lower()
                   else f"{type(err).__name__}: {err}")
    seconds = time.perf_counter() - start
    trace = run_from_smolagents(agent, task=recording.task, figures="measured",
                                source="measured", title=f"{name} (live, {plan.max_steps} step "
                                                         "limit)")
    trace.additional_args = dict(recording.additional_args)
    trace.model_id = choice_label()
    trace.measured_with = "as the model object reported"
    if answer is None and not any(s.is_final_answer for s in trace.steps) and stopped == "final_answer":
        stopped = "no final answer"
    return LiveRun(name, trace, answer, stopped, seconds, plan)
