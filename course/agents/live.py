"""The three tasks of note 000 run live with the active agent model, through a real ``CodeAgent``.

For: running the weather, Bond and debugging tasks (their task text, tools and
``additional_args`` taken from the shipped recordings, so they are the very tasks the replays
use) with :func:`course.models.smolagents_model`, the offline tools (behind chapter 01's door,
:func:`course.tools.for_libraries.smolagents_door`), and the same trace format (the run's
OpenTelemetry spans, labelled ``measured``, from which its ``Run`` is read), stepper and
trajectory checks as the replays. Every figure of a live run is *measured*: the
model outputs, the token usage the model object reported, and the wall time of each step.

How long a run may be depends on the model (:func:`live_plan`): a model under a billion
parameters (the bundled SmolLM2-135M, whatever the setting that selects it) gets a short bounded
run: one model call per task that ends with the model's first complete code block (or a cap on
new tokens), because on a 2-core CPU each call re-reads a prompt of about 2,400 tokens and more
steps measure nothing but time; any other model gets full runs. The step limit is enforced by a
step callback that interrupts the agent, so a bounded run makes no extra "final answer" call
after its last step.

A model loaded in the kernel keeps the key/value cache of the first prompt it read
(:class:`course.tools.constrained.PrefixCache`): the three tasks share smolagents' system prompt
up to the tool list (about 1,750 tokens), so the second and third runs compute only the tokens
after it; and a run's later step starts from its previous step's prompt, which it repeats whole
(:class:`course.models.for_smolagents.SharedTransformersModel`). The outputs are the model's own
greedy continuations either way; each run reports how many prompt tokens came from a cache.

:func:`run_live_tuned` runs the same tasks with the bundled base + a LoRA adapter of appendix
A4, whatever the setting, when its manifest checks (:func:`tuned_unavailable` says why not;
:func:`tuned_skip_reason` also skips them in chapters run with another model): by default the
course's tools adapter (``smollm2-tools``, what ``bundled+tools`` loads), and in chapter 02 the
taught agent (:data:`course.adapter_manifest.AGENT_ADAPTER`), each with the system prompt its
adapter was taught with (:func:`course.agents.prompts.templates_for`). The runs are the
held-out evaluation's: up to :data:`TUNED_STEPS` steps, each ending at its first complete code
block or after :data:`course.adapter_manifest.STEP_TOKENS` new tokens, reusing one kept prefix
cache across the three tasks.

Not handled: the real web search and image model (the offline tools stand in; see
:mod:`course.agents.offline_tools`), planning steps, streaming, retries of a failed server call;
prefix reuse and the first-block stop for a server (it decides both itself; a bounded run there
caps the new tokens only).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from smolagents import CodeAgent
from smolagents.memory import ActionStep
from smolagents.utils import AgentError

from course.adapter_manifest import DEFAULT_ADAPTER
from course.agents.evaluation import Flag, check_trajectory
from course.agents.offline_tools import make_tools
from course.agents.traces import RECORDINGS_DIR, Run, load_run, run_from_spans
from course.models.local import common_prefix_length
from course.records import Record
from course.settings import MODEL_SETTING, active_model
from course.tools import spans as tracing
from course.tools.constrained import PrefixCache, StopWhenReply
from course.tools.for_libraries import smolagents_door

__all__ = ["TUNED_STEPS", "LivePlan", "LiveRun", "choice_label", "first_code_block_end",
           "live_plan", "reusing_kept_prefix", "run_live", "run_live_tuned", "tuned_label", "tuned_plan",
           "tuned_skip_reason", "tuned_unavailable"]

NOTE_TASKS = {"weather": "weather_note", "bond": "bond_note", "debug": "debug_note"}
"""The three tasks, by the recording that holds their task text, tools and additional_args."""

FULL_RUN_STEPS = 6
"""Step limit of a full run: the note does not state its limit; its longest run took 3 steps."""


BOUNDED_MAX_NEW_TOKENS = 64
"""Cap on new tokens of a bounded run's one call; the call ends earlier at its first code block."""


@dataclass(frozen=True)
class LivePlan:
    """How far a live run may go with the active model, and why.

    ``first_block`` ends each model call as soon as its text holds a complete code block (what
    smolagents parses and runs), for a model loaded in the kernel.
    """

    max_steps: int
    max_new_tokens: int
    reason: str
    first_block: bool = False


def live_plan() -> LivePlan:
    """A short bounded run for a model under a billion parameters, full runs otherwise."""
    from course.models import agent_is_small

    small, what = agent_is_small()
    if small and not active_model().in_kernel:  # the server decides when a call ends
        return LivePlan(1, BOUNDED_MAX_NEW_TOKENS, f"short bounded run: {what}, one model call "
                                                   f"per task of at most {BOUNDED_MAX_NEW_TOKENS} new tokens")
    if small:
        return LivePlan(1, BOUNDED_MAX_NEW_TOKENS,
                        f"short bounded run: {what}, one model call per task, ending at its first "
                        f"code block or after {BOUNDED_MAX_NEW_TOKENS} new tokens", first_block=True)
    return LivePlan(FULL_RUN_STEPS, 512, f"full run with {what}: up to {FULL_RUN_STEPS} steps of "
                                         "at most 512 new tokens")


@dataclass
class LiveRun(Record):
    """One live run: its trace (all measured), the answer if any, why it stopped, the time."""

    name: str
    trace: Run
    answer: Any
    stopped: str
    seconds: float
    plan: LivePlan
    cached_tokens: int = 0
    """Prompt tokens whose keys and values came from the kept prefix cache (not recomputed)."""

    @property
    def flags(self) -> list[Flag]:
        """The trajectory checks on this run (the same checks as for the replays)."""
        return check_trajectory(self.trace)

    @property
    def parsed_steps(self) -> tuple[int, int]:
        """(steps whose output smolagents parsed into code, steps the model wrote)."""
        wrote = [s for s in self.trace.steps if s.model_output or s.code or s.error]
        parsed = [s for s in wrote
                  if s.code and not (s.error or "").startswith("AgentParsingError")]
        return len(parsed), len(wrote)

    @property
    def tools_called(self) -> list[str]:
        """Every tool the run's code called, in order (``final_answer`` included)."""
        return [call.name for step in self.trace.steps for call in step.tool_calls]

    def answer_text(self, limit: int | None = None) -> str:
        """The answer's repr (cut at ``limit`` characters); an image is named as one (its repr
        holds a memory address)."""
        if type(self.answer).__name__ == "AgentImage":
            return "an image (AgentImage)"
        return repr(self.answer)[:limit]

    def summary(self) -> str:
        """One line: parsed steps, tools called, the checks' flags, the answer."""
        parsed, wrote = self.parsed_steps
        flags = ", ".join(f.label for f in self.flags) or "none"
        return (f"{self.name}: parsed {parsed} of {wrote} steps; tools called: "
                f"{', '.join(self.tools_called) or 'none'}; stopped: {self.stopped}; "
                f"flags: {flags}; answer: {self.answer_text(80)}")

    def __str__(self) -> str:
        t = self.trace
        lines = [f"{self.name} [measured] model: {t.model_id}",
                 f"plan: {self.plan.reason}",
                 f"steps={len(t.steps)} stopped={self.stopped} seconds={self.seconds:.1f} "
                 f"input_tokens={t.total_input_tokens} output_tokens={t.total_output_tokens} "
                 f"cached_prompt_tokens={self.cached_tokens}"]
        for step in t.steps:
            output = " ".join((step.model_output or "").split())
            lines.append(f"  step {step.number}: model wrote {output[:140]!r}")
            ended = self._ended(step)
            if ended:
                lines.append(f"    the call ended at {ended}")
            if step.code:
                lines.append(f"    code run: {' '.join(step.code.split())[:160]!r}")
            if step.tool_calls:
                lines.append(f"    tool calls: {', '.join(str(c) for c in step.tool_calls)}")
            if step.error:
                lines.append(f"    error: {step.error.splitlines()[0][:140]}")
            if step.duration_s is not None:
                lines.append(f"    step_seconds={step.duration_s:.1f}")
        lines.append(f"answer: {self.answer_text()}")
        flags = self.flags
        lines.append("flags: " + ("; ".join(str(f) for f in flags) if flags else "none"))
        return "\n".join(lines)

    def _ended(self, step: Any) -> str | None:
        """Where a bounded call ended (its first code block, the token cap), when the plan says."""
        if not self.plan.first_block or step.output_tokens is None:
            return None
        if step.output_tokens >= self.plan.max_new_tokens:
            return f"the {self.plan.max_new_tokens}-token cap"
        if first_code_block_end(step.model_output or ""):
            return "its first complete code block"
        return "a stop sequence or the end of its text"

    def record(self) -> dict[str, Any]:
        """The run's figures, per step and in all, the checks' flags and the answer."""
        t = self.trace
        parsed = self.parsed_steps[0]
        return {"name": self.name, "model": t.model_id, "plan": self.plan.reason,
                "steps": len(t.steps), "parsed_steps": parsed, "stopped": self.stopped,
                "seconds": self.seconds, "input_tokens": t.total_input_tokens,
                "output_tokens": t.total_output_tokens, "cached_prompt_tokens": self.cached_tokens,
                "tools_called": self.tools_called, "answer": self.answer_text(),
                "flags": [f.label for f in self.flags],
                "step_records": [{"output_tokens": s.output_tokens, "seconds": s.duration_s,
                                  "code": s.code, "error": s.error, "ended": self._ended(s)}
                                 for s in t.steps]}

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def choice_label() -> str:
    """The active agent model, as a reader recognises it."""
    return active_model().label


def stop_after_steps(limit: int):
    """A step callback that interrupts the agent once ``limit`` action steps have run."""

    def callback(memory_step: Any, agent: Any = None) -> None:
        if (isinstance(memory_step, ActionStep) and not memory_step.is_final_answer
                and memory_step.step_number >= limit and agent is not None):
            agent.interrupt()

    return callback


_BLOCK = re.compile(r"<code>.*?</code>|```(?:python|py)\n.*?\n```", re.DOTALL)


def first_code_block_end(text: str) -> int | None:
    """Where the first complete code block of ``text`` ends (``<code>`` or a Python fence)."""
    match = _BLOCK.search(text)
    return match.end() if match else None


if TYPE_CHECKING:  # the class the mix-in goes before (prefix_reusing), as the type checker's base
    from course.models.for_smolagents import SharedTransformersModel as _MixedInto
else:
    _MixedInto = object


class _PrefixReuse(_MixedInto):
    """For :class:`course.models.for_smolagents.SharedTransformersModel` over the kernel's model:
    start each prompt from the kept prefix cache, or from the previous prompt when that shares
    more (a run's later step), and (``first_block``) stop at the first complete code block."""

    prefix: PrefixCache
    first_block: bool

    def start_cache(self, ids: list[int]) -> tuple[Any, int, int]:
        first = not self.prefix.ids
        if first:  # the first prompt is kept: computed once, here
            self.prefix.keep(ids[:-1])
        cache, shared = self.start_from_previous(ids)
        if shared > common_prefix_length(self.prefix.ids, ids[:-1]):
            return cache, shared, len(ids)
        reused = self.prefix.reused
        cache = self.prefix.start(ids)  # holds all but the last token, which generate reads
        return cache, 0 if first else self.prefix.reused - reused, len(ids) - 1

    def _prepare_completion_args(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        from transformers import StoppingCriteriaList

        completion = super()._prepare_completion_args(*args, **kwargs)
        if self.first_block:
            first_block = StopWhenReply(self.tokenizer, completion["inputs"].shape[1],
                                        lambda reply: first_code_block_end(reply) is not None)
            completion["stopping_criteria"] = StoppingCriteriaList(
                [*(completion.get("stopping_criteria") or []), first_block])
        return completion


_KEPT: list[PrefixCache] = []


def _kept_prefix(local: Any) -> PrefixCache:
    """One prefix cache for the model loaded in the kernel, shared by the runs of a notebook."""
    if not _KEPT or _KEPT[0].local.model is not local.model:
        _KEPT[:] = [PrefixCache(local)]
    return _KEPT[0]


def reusing_kept_prefix(model: Any, plan: LivePlan) -> Any:
    """``model`` (a kernel model for smolagents) made to reuse the kept prefix cache."""
    from course.models import load_local_model

    local = load_local_model()
    if getattr(model, "model", None) is not local.model:
        return model
    return prefix_reusing(model, _kept_prefix(local), plan.first_block)


def prefix_reusing(model: Any, prefix: Any, first_block: bool) -> Any:
    """``model`` (a :class:`course.models.for_smolagents.SharedTransformersModel`) made to reuse
    ``prefix`` (a :class:`course.tools.constrained.PrefixCache`), and with ``first_block`` to end
    each call at its first complete code block."""
    model.__class__ = type(f"PrefixReuse{type(model).__name__}", (_PrefixReuse, type(model)), {})
    model.prefix, model.first_block = prefix, first_block
    return model


def run_live(name: str, plan: LivePlan | None = None, model: Any = None,
             model_id: str | None = None) -> LiveRun:
    """Run note task ``name`` (``weather``, ``bond`` or ``debug``) live with the agent model
    (or with ``model``, named ``model_id`` in the trace)."""
    if name not in NOTE_TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(NOTE_TASKS)}.")
    from course.agents.prompts import templates_for
    from course.models import smolagents_model  # the model is built only when a run is asked for

    plan = plan or live_plan()
    recording = load_run(RECORDINGS_DIR / f"{NOTE_TASKS[name]}.json")
    if model is None:
        model = smolagents_model(max_new_tokens=plan.max_new_tokens)
        if active_model().in_kernel:
            model = reusing_kept_prefix(model, plan)
    cached_before = getattr(model, "reused_tokens", 0)
    agent = CodeAgent(tools=smolagents_door(make_tools(recording.tools)), model=model,
                      max_steps=plan.max_steps + 1, prompt_templates=templates_for(model),
                      step_callbacks=[stop_after_steps(plan.max_steps)], verbosity_level=-1)
    about = {"title": f"{name} (live, {plan.max_steps} step limit)",
             "model_id": model_id or choice_label(),
             "measured_with": "the token counts the model object reported"}
    start = time.perf_counter()
    answer, stopped = None, "final_answer"
    with tracing.capture(provenance="measured", about=about) as spans:
        try:
            answer = agent.run(recording.task,
                               additional_args=dict(recording.additional_args) or None)
        except AgentError as err:
            stopped = (f"step limit ({plan.max_steps})" if "interrupted" in str(err).lower()
                       else f"{type(err).__name__}: {err}")
    seconds = time.perf_counter() - start
    trace = run_from_spans(spans)
    if answer is None and not any(s.is_final_answer for s in trace.steps) and stopped == "final_answer":
        stopped = "no final answer"
    return LiveRun(name, trace, answer, stopped, seconds, plan,
                   getattr(model, "reused_tokens", 0) - cached_before)


TUNED_STEPS = 3
"""Step limit of the fine-tuned model's live runs, its held-out evaluation's: enough to run a
script, fix it, run into a second bug and fix that (or search, draw and answer)."""

_TUNED: dict[tuple[str, int, bool], Any] = {}  # (adapter, max_new_tokens, first_block) -> the model


def tuned_label(adapter: str = DEFAULT_ADAPTER) -> str:
    """The bundled base + ``adapter`` (default the course's tools adapter), as the live runs name it."""
    from course.adapter_manifest import adapter_label

    return adapter_label(adapter)


def tuned_unavailable(adapter: str = DEFAULT_ADAPTER) -> str | None:
    """Why the fine-tuned model cannot run here (its adapter's manifest check fails), else None."""
    from course.adapter_manifest import AdapterError, adapter_dir, check_adapter

    try:
        check_adapter(adapter_dir(adapter))
    except AdapterError as err:
        return str(err)
    return None


def tuned_skip_reason(adapter: str = DEFAULT_ADAPTER) -> str | None:
    """Why a chapter skips its fine-tuned runs, else None: the adapter does not check, or
    ``COURSE_MODEL`` selects a model that is not the bundled one (the runs would be the same
    greedy runs of the bundled base + adapter the default setting shows;
    :func:`run_live_tuned` still runs them when called)."""
    problem = tuned_unavailable(adapter)
    if problem:
        return f"the fine-tuned model's adapter does not check: {problem}"
    choice = active_model()
    if not choice.is_bundled:
        return (f"{MODEL_SETTING} selects {choice.label}, not the bundled model: the fine-tuned "
                "runs are the bundled base + adapter's, the same in every setting; unset "
                f"{MODEL_SETTING} (or set it to bundled) to see them here")
    return None


def tuned_plan(adapter: str = DEFAULT_ADAPTER) -> LivePlan:
    """The fine-tuned model's bounded run: :data:`TUNED_STEPS`, the held-out evaluation's cap."""
    from course.adapter_manifest import STEP_TOKENS as MAX_NEW_TOKENS

    return LivePlan(TUNED_STEPS, MAX_NEW_TOKENS,
                    f"bounded run of {tuned_label(adapter)}: up to {TUNED_STEPS} steps, each ending at "
                    f"its first complete code block or after {MAX_NEW_TOKENS} new tokens (the "
                    "held-out evaluation's limits)", first_block=True)


def run_live_tuned(name: str, plan: LivePlan | None = None, adapter: str = DEFAULT_ADAPTER) -> LiveRun:
    """Note task ``name`` run live with the bundled base + ``adapter`` (default the course's tools
    adapter), whatever ``COURSE_MODEL`` says, with the prompt the adapter was taught with (loaded
    in this kernel; one kept prefix cache for every task)."""
    from course.adapter_manifest import adapter_dir
    from course.models import smolagents_model
    from course.settings import BUNDLED_TOOLS, parse_model_setting

    plan = plan or tuned_plan(adapter)
    problem = tuned_unavailable(adapter)
    if problem:
        raise RuntimeError(f"the fine-tuned model cannot run: {problem}")
    model = _TUNED.get((adapter, plan.max_new_tokens, plan.first_block))
    if model is None:
        if adapter == DEFAULT_ADAPTER:  # the loader's bundled+tools: shared with the chapters
            from course.models import load_local_model

            choice = parse_model_setting(BUNDLED_TOOLS)
            local = load_local_model(choice)
            model = smolagents_model(choice, max_new_tokens=plan.max_new_tokens)
        else:  # another adapter over a base of its own (the same weights file, mapped again)
            from course.models import load_with_adapter
            from course.models.for_smolagents import SharedTransformersModel

            local = load_with_adapter(adapter_dir(adapter))
            model = SharedTransformersModel(local, max_new_tokens=plan.max_new_tokens)
        model = prefix_reusing(model, PrefixCache(local), plan.first_block)
        _TUNED[(adapter, plan.max_new_tokens, plan.first_block)] = model
    return run_live(name, plan, model=model, model_id=tuned_label(adapter))
