"""Replay a recorded agent run through the real smolagents ``CodeAgent``.

:class:`ReplayModel` is a smolagents ``Model`` whose ``generate`` returns the recorded model
outputs one step at a time, instead of sampling from a network. Everything else is real: the
``CodeAgent`` builds its prompt (system prompt with the tool list, the task, every earlier step),
parses the ``<code>`` block out of the returned text, and its own Python executor runs that code
against the tools it was given (the offline tools of :mod:`course.agents.offline_tools` by default).
The observations, errors and final answer of a replay are therefore computed here, not recorded.

While replaying, the model measures the prompt smolagents actually sends at each step: the
messages are flattened the way smolagents' chat models flatten them, rendered with the chat
template of the tokenizer at hand (the bundled SmolLM2 tokenizer by default) and counted. Those
counts are labelled "measured"; the recording's own token figures stay "recorded" (or
"reconstructed from the note"), side by side in the returned trace.

API:

- ``ReplayModel(outputs, model_id="replay", tokenizer=None)``: ``.prompt_tokens`` and
  ``.output_tokens`` (measured per call), ``.prompts`` (rendered prompt texts), ``.position``.
- ``replay_run(recording, tools=None, tokenizer="local", verbosity_level=-1) -> Replay``: run the
  recording's task (with its ``additional_args``) through a fresh ``CodeAgent``.
- ``Replay``: ``.trace`` (a :class:`~course.agents.traces.Run`: code, observations and errors from
  this execution; recorded figures in ``input_tokens``/``output_tokens``; measured ones in
  ``measured_input_tokens``/``measured_output_tokens``), ``.answer``, ``.agent``, ``.tools``,
  ``.model``; ``.token_table()`` prints recorded vs measured per step.
- ``local_tokenizer()``: the tokenizer of the active model, without loading its weights when the
  bundled model is active.

Not handled: streaming, planning steps, tool-calling (JSON) agents, multi-agent runs. A replay
that asks for more steps than were recorded raises :class:`ReplayExhausted`, which the agent
reports as a generation error in that step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from smolagents import CodeAgent, Model, Tool
from smolagents.models import (
    ChatMessage,
    MessageRole,
    get_clean_message_list,
    remove_content_after_stop_sequences,
    tool_role_conversions,
)
from smolagents.monitoring import TokenUsage

from course.agents.offline_tools import make_tools
from course.agents.traces import Run, TraceError, run_from_smolagents


class ReplayExhausted(RuntimeError):
    """The agent asked for another model output than the recording holds."""


@lru_cache(maxsize=1)
def _bundled_tokenizer():
    from transformers import AutoTokenizer

    from course.assets import bundled_model_dir

    return AutoTokenizer.from_pretrained(bundled_model_dir(progress=False))


def local_tokenizer():
    """The active model's tokenizer (the bundled one is loaded alone, without the weights)."""
    from course.settings import active_model

    if active_model().kind == "bundled":
        return _bundled_tokenizer()
    from course.models import load_local_model

    return load_local_model().tokenizer


def render_agent_prompt(messages: list[ChatMessage | dict], tokenizer: Any) -> str:
    """The text a chat model would receive for smolagents' ``messages`` (template applied)."""
    clean = get_clean_message_list(
        messages, role_conversions=tool_role_conversions, flatten_messages_as_text=True
    )
    return tokenizer.apply_chat_template(
        [{"role": m["role"], "content": m["content"]} for m in clean],
        tokenize=False, add_generation_prompt=True,
    )


class ReplayModel(Model):
    """A smolagents Model that returns recorded outputs in order and measures each prompt."""

    def __init__(self, outputs: list[str], model_id: str = "replay", tokenizer: Any = None,
                 **kwargs: Any):
        super().__init__(model_id=model_id, **kwargs)
        if not outputs or not all(isinstance(o, str) and o.strip() for o in outputs):
            raise ValueError("ReplayModel needs a non-empty list of non-empty model outputs.")
        self.outputs = list(outputs)
        self.position = 0
        self.tokenizer = tokenizer
        self.prompts: list[str] = []
        self.prompt_tokens: list[int | None] = []
        self.output_tokens: list[int | None] = []

    def _count(self, text: str) -> int | None:
        if self.tokenizer is None:
            return None
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, messages: list[ChatMessage | dict], stop_sequences: list[str] | None = None,
                 response_format: dict[str, str] | None = None,
                 tools_to_call_from: list[Tool] | None = None, **kwargs: Any) -> ChatMessage:
        """Return the next recorded output (cut at the stop sequences, as a server would)."""
        if self.position >= len(self.outputs):
            raise ReplayExhausted(
                f"the recording has {len(self.outputs)} model output(s); the agent asked for "
                f"output {self.position + 1}. The executed code did not end the run where the "
                "recorded run ended (check the tools and additional_args of this replay).")
        text = self.outputs[self.position]
        self.position += 1
        content = remove_content_after_stop_sequences(text, stop_sequences)
        prompt = render_agent_prompt(messages, self.tokenizer) if self.tokenizer is not None else ""
        self.prompts.append(prompt)
        prompt_tokens = self._count(prompt) if self.tokenizer is not None else None
        output_tokens = self._count(content or "")
        self.prompt_tokens.append(prompt_tokens)
        self.output_tokens.append(output_tokens)
        usage = TokenUsage(input_tokens=prompt_tokens or 0, output_tokens=output_tokens or 0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=content, token_usage=usage)


@dataclass
class Replay:
    """The outcome of :func:`replay_run`: the new trace, the answer, and the live objects."""

    recording: Run
    trace: Run
    answer: Any
    agent: CodeAgent
    model: ReplayModel
    tools: dict[str, Tool] = field(default_factory=dict)

    def token_table(self) -> str:
        """Per step: the recording's figures and the prompt measured here, side by side."""
        label = self.recording.source
        lines = [f"{'step':>4}  {'input (' + label + ')':>34}  {'output':>7}  "
                 f"{'prompt (measured here)':>22}  {'output (measured)':>17}"]
        for step in self.trace.steps:
            lines.append(
                f"{step.number:>4}  {_fmt(step.input_tokens):>34}  {_fmt(step.output_tokens):>7}  "
                f"{_fmt(step.measured_input_tokens):>22}  {_fmt(step.measured_output_tokens):>17}")
        measured = [s.measured_input_tokens for s in self.trace.steps]
        total_measured = sum(measured) if measured and None not in measured else None
        lines.append(f"{'all':>4}  {_fmt(self.trace.total_input_tokens):>34}  "
                     f"{_fmt(self.trace.total_output_tokens):>7}  {_fmt(total_measured):>22}")
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def replay_run(recording: Run, tools: list[Tool] | None = None, tokenizer: Any = "local",
               verbosity_level: int = -1, **agent_kwargs: Any) -> Replay:
    """Run ``recording.task`` through a real ``CodeAgent`` whose model replays the recording.

    ``tools`` default to the offline tools named in ``recording.tools``. ``tokenizer="local"``
    measures prompts with :func:`local_tokenizer`; pass ``None`` to skip measuring. The agent
    may run at most as many steps as were recorded.
    """
    if not isinstance(recording, Run):
        raise TypeError(f"replay_run needs a course.agents.traces.Run, got {type(recording).__name__}; "
                        "load one with course.agents.traces.load_run(path).")
    if not recording.steps:
        raise TraceError("field 'steps' is empty: there is nothing to replay.")
    tokenizer = local_tokenizer() if tokenizer == "local" else tokenizer
    tools = tools if tools is not None else make_tools(recording.tools)
    model = ReplayModel(recording.model_outputs(), model_id=recording.model_id, tokenizer=tokenizer)
    agent = CodeAgent(tools=tools, model=model, max_steps=len(recording.steps),
                      verbosity_level=verbosity_level, **agent_kwargs)
    answer = agent.run(recording.task, additional_args=dict(recording.additional_args) or None)
    trace = run_from_smolagents(agent, task=recording.task, figures=recording.source,
                                model_id=recording.model_id, title=recording.title)
    for i, step in enumerate(trace.steps):
        step.measured_input_tokens = step.input_tokens if tokenizer is not None else None
        step.measured_output_tokens = step.output_tokens if tokenizer is not None else None
        recorded = recording.steps[i] if i < len(recording.steps) else None
        step.input_tokens = recorded.input_tokens if recorded else None
        step.output_tokens = recorded.output_tokens if recorded else None
    trace.total_input_tokens_reported = recording.total_input_tokens_reported
    trace.total_output_tokens_reported = recording.total_output_tokens_reported
    trace.notes = recording.notes
    trace.additional_args = dict(recording.additional_args)
    return Replay(recording, trace, answer, agent, model, {t.name: t for t in tools})
