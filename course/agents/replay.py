"""Replay a recorded agent run through the real smolagents ``CodeAgent``.

:class:`ReplayModel` is a smolagents ``Model`` whose ``generate`` returns the recorded model
outputs one step at a time, instead of sampling. Everything else is real: the ``CodeAgent``
builds its prompt (system prompt with the tool list, the task, every earlier step), parses the
``<code>`` block out of the returned text, and its own Python executor runs that code against the
tools it was given (the offline tools of :mod:`course.agents.offline_tools` by default), each
behind chapter 01's door (:func:`course.tools.for_libraries.smolagents_door`). The
observations and errors of a replay are computed here; the model outputs (and so the final
answers they contain) keep the recording's label, usually *reconstructed*. The replay's trace is
read from its OpenTelemetry spans (:func:`course.tools.spans.capture` with the recording:
labelled ``recorded``, its figures on the LLM spans; :func:`course.agents.traces.run_from_spans`).

While replaying, the model measures the prompt smolagents actually sends at each step: the
messages are flattened the way smolagents' chat models flatten them, rendered with a chat
template and counted, once with the active model's tokenizer (the bundled SmolLM2 one by
default) and once with the Qwen tokenizer when the course cache has it (the vocabulary and chat
template of the notes' models). Both counts are *measured*; the recording's figures keep their
own labels, side by side in the returned trace.

A smolagents ``ToolCallingAgent`` can be replayed too: when the agent offers tools
(``tools_to_call_from``) and a recorded output is JSON (one ``{"name": ..., "arguments": ...}``
or a list of them), the model returns them as native tool calls, as a server with tool calling
would (chapter 02's CodeAgent vs ToolCallingAgent comparison, :mod:`course.agents.interfaces`).

Not handled: streaming, planning steps, multi-agent runs. A replay
that asks for more steps than were recorded raises :class:`ReplayExhausted`, which the agent
reports as a generation error in that step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace as trace_api
from smolagents import CodeAgent, Model, Tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    get_clean_message_list,
    remove_content_after_stop_sequences,
    tool_role_conversions,
)
from smolagents.monitoring import TokenUsage

from course.agents.offline_tools import make_tools
from course.agents.traces import Run, TraceError, run_from_spans
from course.tools import spans as tracing
from course.tools.for_libraries import smolagents_door

__all__ = ["Replay", "ReplayExhausted", "ReplayModel", "local_tokenizer", "native_tool_calls",
           "replay_run", "tokenizer_name"]


class ReplayExhausted(RuntimeError):
    """The agent asked for another model output than the recording holds."""


def local_tokenizer():
    """The agent model's tokenizer (:func:`course.models.agent_tokenizer`: the bundled one is
    read alone, without the weights; a server's own when it is available offline, else the
    probe model's)."""
    from course.models import agent_tokenizer

    return agent_tokenizer()[0]


def _prepared_qwen() -> Any:
    """The Qwen tokenizer of the course cache (:func:`course.assets.qwen_tokenizer`), or ``None``
    when it is not prepared or does not load: the replay then counts with one tokenizer only."""
    from course.assets import AssetError, qwen_tokenizer

    try:
        return qwen_tokenizer()
    except AssetError:
        return None


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
                 qwen: Any = None, **kwargs: Any):
        super().__init__(model_id=model_id, **kwargs)
        if not outputs or not all(isinstance(o, str) and o.strip() for o in outputs):
            raise ValueError("ReplayModel needs a non-empty list of non-empty model outputs.")
        self.outputs = list(outputs)
        self.position = 0
        self.tokenizer = tokenizer
        self.prompts: list[str] = []
        self.prompt_tokens: list[int | None] = []
        self.output_tokens: list[int | None] = []
        self.qwen = qwen
        self.qwen_prompt_tokens: list[int | None] = []

    def _count(self, text: str, tokenizer: Any = "self") -> int | None:
        tokenizer = self.tokenizer if tokenizer == "self" else tokenizer
        if tokenizer is None:
            return None
        return len(tokenizer.encode(text, add_special_tokens=False))

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
        self.qwen_prompt_tokens.append(
            self._count(render_agent_prompt(messages, self.qwen), self.qwen)
            if self.qwen is not None else None)
        self.output_tokens.append(output_tokens)
        if self.qwen_prompt_tokens[-1] is not None:  # on this call's LLM span, when one is open
            trace_api.get_current_span().set_attribute(tracing.MEASURED_QWEN_PROMPT,
                                                       self.qwen_prompt_tokens[-1])
        usage = TokenUsage(input_tokens=prompt_tokens or 0, output_tokens=output_tokens or 0)
        calls = native_tool_calls(content or "", self.position) if tools_to_call_from else None
        return ChatMessage(role=MessageRole.ASSISTANT, content=content, tool_calls=calls,
                           token_usage=usage)


def native_tool_calls(text: str, position: int) -> list[ChatMessageToolCall] | None:
    """The tool calls of a recorded JSON output (one call or a list), or ``None`` for other text."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    data = data if isinstance(data, list) else [data]
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in data):
        return None
    return [ChatMessageToolCall(ChatMessageToolCallFunction(name=c["name"],
                                                            arguments=c.get("arguments", {})),
                                id=f"call_{position}_{i}", type="function")
            for i, c in enumerate(data)]


@dataclass
class Replay:
    """The outcome of :func:`replay_run`: the new trace (read from the replay's spans), the
    answer, and the live objects."""

    recording: Run
    trace: Run
    answer: Any
    agent: CodeAgent
    model: ReplayModel
    tools: dict[str, Tool] = field(default_factory=dict)

    @property
    def spans(self) -> tracing.Spans:
        """The replay's OpenTelemetry spans, labelled ``recorded`` (the trace is read from them)."""
        return self.trace.spans

    def token_table(self) -> str:
        """Per step: the recording's figures and the prompts measured here (see ``Run.token_table``)."""
        return self.trace.token_table()


def replay_run(recording: Run, tools: list[Tool] | None = None, tokenizer: Any = "local",
               verbosity_level: int = -1, qwen: Any = "cache", **agent_kwargs: Any) -> Replay:
    """Run ``recording.task`` through a real ``CodeAgent`` whose model replays the recording.

    ``tools`` default to the offline tools named in ``recording.tools``; the agent calls them
    through the registry's door, and ``Replay.tools`` holds the tools themselves (their ``calls``
    logs say what ran). ``tokenizer="local"``
    measures prompts with :func:`local_tokenizer`; pass ``None`` to skip measuring.
    ``qwen="cache"`` also counts them with the Qwen tokenizer when it is prepared (``None``
    skips it). The agent may run at most as many steps as were recorded.
    """
    if not isinstance(recording, Run):
        raise TypeError(f"replay_run needs a course.agents.traces.Run, got {type(recording).__name__}; "
                        "load one with course.agents.traces.load_run(path).")
    if not recording.steps:
        raise TraceError("field 'steps' is empty: there is nothing to replay.")
    tokenizer = local_tokenizer() if tokenizer == "local" else tokenizer
    tools = tools if tools is not None else make_tools(recording.tools)
    qwen = _prepared_qwen() if qwen == "cache" else qwen
    model = ReplayModel(recording.model_outputs(), model_id=recording.model_id, tokenizer=tokenizer,
                        qwen=qwen)
    agent = CodeAgent(tools=smolagents_door(tools), model=model, max_steps=len(recording.steps),
                      verbosity_level=verbosity_level, **agent_kwargs)
    about = {"title": recording.title, "notes": recording.notes, "model_id": recording.model_id,
             "source_detail": recording.source_detail,
             "total_input_tokens_reported": recording.total_input_tokens_reported,
             "total_output_tokens_reported": recording.total_output_tokens_reported,
             "measured_with": tokenizer_name(tokenizer)}
    with tracing.capture(recording=recording, about=about) as spans:
        answer = agent.run(recording.task, additional_args=dict(recording.additional_args) or None)
    trace = run_from_spans(spans)
    return Replay(recording, trace, answer, agent, model, {t.name: t for t in tools})


def tokenizer_name(tokenizer: Any) -> str:
    """A short name for the tokenizer that measured a replay's prompts."""
    if tokenizer is None:
        return ""
    name = str(getattr(tokenizer, "name_or_path", "") or "")
    base = name.rstrip("/").split("/")[-1] or type(tokenizer).__name__
    return f"{base} tokenizer"
