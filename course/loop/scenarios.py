"""Runs to apply stop rules to: a scripted search agent that gets stuck, and recorded runs.

:func:`stuck_search_model` is a *scripted* agent whose steps are written down (search, refine,
repeat six times, answer), so which rule stops it depends only on the limits.
:func:`replay_recorded_run` feeds a :class:`course.agents.traces.Run` (the note's runs) through
:func:`course.loop.agent_loop.run_loop` with its own token figures, and a registry whose tools
return the recorded observations (:func:`recorded_tools`), so nothing is searched again.

Not handled: generating anything (every decision is written down or recorded), per-step output
tokens that a recording does not publish (counted as 0, not invented).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from course.loop.agent_loop import LoopRun, ScriptedModel, StepDecision, StopRules, run_loop
from course.tools.calls import ToolCall
from course.tools.registry import ToolRegistry

__all__ = ["recorded_tools", "replay_recorded_run", "stuck_search_model"]


def stuck_search_model() -> Any:
    """A *scripted* search agent that gets stuck: it repeats one search, then answers at step 9.

    Steps 1-2 search, steps 3-8 repeat the step-2 search with the same result (a loop), step 9
    gives a final answer. Which rule stops it first depends only on the limits.
    """
    first = StepDecision("I need the current weather.",
                     ToolCall("web_search", {"query": "current weather in Paris"}))
    refine = StepDecision("The results were about a phone forum; refine the query.",
                      ToolCall("web_search", {"query": "current weather in Paris, France"}))
    again = StepDecision("Let me check the weather pages once more.",
                     ToolCall("web_search", {"query": "current weather in Paris, France"}))
    answer = StepDecision("Two pages disagree; report both.",
                      final_answer="Paris: 13-16 °C (two sources disagree)")
    return ScriptedModel([first, refine, *[again] * 6, answer],
                         name="scripted: a search agent that gets stuck")


def recorded_tools(run: Any) -> Any:
    """A registry whose tools return a recorded run's observations, in the order they came.

    For replaying a :class:`course.agents.traces.Run` through :func:`course.loop.agent_loop.run_loop`: nothing
    is searched again; each executed call returns the next recorded observation.
    """
    observations = [s.observation for s in run.steps if not s.is_final_answer]
    names = {c.name for s in run.steps for c in s.tool_calls if c.name != "final_answer"}
    registry = ToolRegistry()
    queue = iter(observations)

    def make(name: str) -> Callable[..., str]:
        def recorded(**arguments: Any) -> str:
            return next(queue, "") or "(no observation text in the recording)"

        recorded.__name__ = name
        recorded.__doc__ = f"Recorded observations of {name} (replay, nothing runs)."
        return recorded

    for name in sorted(names):
        registry.register(make(name), name=name, schema={"properties": {},
                                                          "additionalProperties": True})
    return registry


def decisions_from_trace(run: Any) -> list[StepDecision]:
    """One :class:`StepDecision` per step of a :class:`course.agents.traces.Run`, with its recorded tokens."""
    decisions = []
    for step in run.steps:
        # a recording that publishes input tokens but no per-step output tokens: count 0 output
        # tokens for the step rather than invent them (the loop would count its own otherwise)
        out = step.output_tokens
        if out is None and step.input_tokens is not None:
            out = 0
        calls = [c for c in step.tool_calls if c.name != "final_answer"]
        if step.is_final_answer:
            decisions.append(StepDecision(step.thought, final_answer=run.final_answer or "(answer)",
                                      input_tokens=step.input_tokens, output_tokens=out))
        else:
            call = ToolCall(calls[0].name, dict(calls[0].arguments)) if calls else None
            decisions.append(StepDecision(step.thought, call, input_tokens=step.input_tokens,
                                      output_tokens=out))
    return decisions


def replay_recorded_run(run: Any, limits: StopRules) -> LoopRun:
    """Apply ``limits`` to a recorded run: where would it have stopped, and why?

    The run's token figures are the recording's, with their labels (for the note's weather
    run: steps 1 and 3 recorded, step 2 derived); the returned run names that unit.
    """
    if not run.steps:
        raise ValueError("the recorded run has no steps; nothing to replay.")
    label = getattr(run, "source", "recorded")
    model = ScriptedModel(decisions_from_trace(run),
                          name=f"scripted replay of a run [{label}] ({run.model_id})")
    labels = "/".join(run.figure_labels) or "no figures"
    unit = f"tokens as in the recording ({labels}; {run.model_id} tokenizer)"
    return run_loop(run.task, model, recorded_tools(run), limits, token_unit=unit)
