"""Traces of agent runs: what the model wrote, what ran, what came back, and what it cost.

A :class:`Run` is a task, the model that worked on it, the tools it had, and its
:class:`TraceStep` records. A step holds the model's output (its thought and its code), the tool
calls the code makes, the observation the runtime appended, the error if any, and token figures.

A run's one format is its OpenTelemetry spans (:mod:`course.tools.spans`): a ``Run`` is read
from the spans of an agent's run (:func:`run_from_spans`; the course's runners capture them), it
keeps them (``Run.spans``), and it is saved and loaded as OTLP JSON (:func:`save_run`,
:func:`load_run`). A run that never ran here (a recording the course wrote from a published
description, a run built by hand in an exercise) gets spans with the same attributes from
:func:`spans_from_run`. The shipped recordings (:data:`RECORDINGS_DIR`) are such files,
labelled ``recorded``; a replay reads its model outputs from them.

Provenance is kept per part, because the parts of one trace often come from different places:
``Run.source`` says who wrote the model outputs (``measured``: a model ran here; ``reconstructed``:
the course wrote them from a description, ``Run.source_detail`` says which; ``scripted``), and
each step's ``figures`` says where its token figures come from (``recorded``: published by the
source; ``derived``: computed from recorded figures; ``measured``; ``scripted``).
``Run.provenance`` puts both into one sentence. Prompt sizes that a replay measures here are kept
apart, with the tokenizer that counted them (``measured_input_tokens`` with the active model's
tokenizer, ``qwen_input_tokens`` with the Qwen tokenizer).

Not handled here: running agents (:mod:`course.agents.replay`), judging trajectories
(:mod:`course.agents.evaluation`), images (an image observation is kept as its text summary),
managed agents (a run is one AGENT span's steps), streaming runs, and a run whose spans were not
captured (every runner of the course captures its run's spans; a ``Run`` is never read from an
agent's memory beside them).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import html
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from course.drawing import safe_text
from course.tools.calls import ToolCall

__all__ = ["RECORDINGS_DIR", "Run", "TraceError", "TraceStep", "content_text", "load_run",
           "prompt_tokens_figure", "run_from_spans", "save_run",
           "spans_from_run", "split_thought_and_code", "tool_calls_in_code"]

FIGURE_LABELS = ("measured", "recorded", "derived", "reconstructed", "scripted")
"""Where a step's token figures come from (the course's provenance words)."""
OUTPUT_LABELS = ("measured", "reconstructed", "scripted")
"""Who wrote a run's model outputs: a model here, the course from a description, or a script."""


RECORDINGS_DIR = Path(__file__).resolve().parents[1] / "data" / "recordings"
"""The recorded runs shipped with the package (the note runs, the 72B references, the ideal run),
as OTLP JSON labelled ``recorded``."""


class TraceError(ValueError):
    """A trace is malformed; the message names the field (e.g. ``steps[2].code``) and the fix."""


@dataclass
class TraceStep:
    """One step of an agent: think, write code, run it, observe."""

    number: int
    thought: str = ""
    code: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    observation: str = ""
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float | None = None
    figures: str = "measured"
    model_output: str = ""
    is_final_answer: bool = False
    measured_input_tokens: int | None = None
    measured_output_tokens: int | None = None
    qwen_input_tokens: int | None = None

    def tool_names(self) -> list[str]:
        """Names of the tools this step's code calls, in order."""
        return [call.name for call in self.tool_calls]


@dataclass
class Run:
    """A task, the model that worked on it, the tools it had, and its steps."""

    task: str
    model_id: str
    steps: list[TraceStep] = field(default_factory=list, metadata={"required": True})
    tools: list[str] = field(default_factory=list)
    final_answer: str | None = None
    source: str = "measured"
    title: str = ""
    additional_args: dict[str, Any] = field(default_factory=dict)
    total_input_tokens_reported: int | None = None
    total_output_tokens_reported: int | None = None
    notes: str = ""
    source_detail: str = ""
    measured_with: str = ""
    spans: Any = field(default=None, compare=False, repr=False)
    """The spans the run was read from (:func:`run_from_spans`), which :func:`save_run` writes;
    ``None`` for a run built by hand."""

    # ----- provenance -----
    @property
    def figure_labels(self) -> list[str]:
        """The distinct labels of the steps' token figures, in step order."""
        labels: list[str] = []
        for step in self.steps:
            if (step.input_tokens is not None or step.output_tokens is not None) and \
                    step.figures not in labels:
                labels.append(step.figures)
        return labels

    @property
    def provenance(self) -> str:
        """Who wrote the model outputs and where the token figures come from, in one sentence."""
        outputs = {"measured": "model outputs measured (a model ran)",
                   "scripted": "model outputs scripted"}.get(self.source, "code reconstructed")
        if self.source == "reconstructed":
            outputs += f" {self.source_detail}" if self.source_detail else ""
        figures = self.figure_labels
        if not figures:
            tokens = "no token figures published" if self.source == "reconstructed" else "no token figures"
        else:
            parts = []
            for label in figures:
                numbers = [s.number for s in self.steps if s.figures == label and
                           (s.input_tokens is not None or s.output_tokens is not None)]
                where = "" if len(figures) == 1 else (" (step " + ", ".join(map(str, numbers)) + ")")
                parts.append({"recorded": "recorded (published)"}.get(label, label) + where)
            tokens = "token figures " + " and ".join(parts)
        return f"{outputs}; {tokens}"

    # ----- figures -----
    @property
    def total_input_tokens(self) -> int | None:
        """Input tokens of the whole run: the reported total, else the sum over steps."""
        if self.total_input_tokens_reported is not None:
            return self.total_input_tokens_reported
        values = [s.input_tokens for s in self.steps]
        return None if not values or None in values else sum(values)  # type: ignore[arg-type]

    @property
    def total_output_tokens(self) -> int | None:
        """Output tokens of the whole run: the reported total, else the sum over steps."""
        if self.total_output_tokens_reported is not None:
            return self.total_output_tokens_reported
        values = [s.output_tokens for s in self.steps]
        return None if not values or None in values else sum(values)  # type: ignore[arg-type]

    @property
    def prompt_tokens(self) -> list[int | None]:
        """Input (prompt) tokens per step, as the figures label says."""
        return [s.input_tokens for s in self.steps]

    @property
    def cumulative_input_tokens(self) -> list[int | None]:
        """Running total of input tokens after each step (None once a step has no figure)."""
        out: list[int | None] = []
        total: int | None = 0
        for step in self.steps:
            total = None if total is None or step.input_tokens is None else total + step.input_tokens
            out.append(total)
        return out

    @property
    def cumulative_measured_input_tokens(self) -> list[int | None]:
        """Running total of the prompt sizes measured here (None once a step has none)."""
        out: list[int | None] = []
        total: int | None = 0
        for step in self.steps:
            value = step.measured_input_tokens
            total = None if total is None or value is None else total + value
            out.append(total)
        return out

    def token_rows(self) -> list[dict[str, Any]]:
        """Per step: the figures with their label, and the prompt sizes measured here."""
        return [{"step": s.number, "input": s.input_tokens, "output": s.output_tokens,
                 "figures": s.figures, "measured prompt": s.measured_input_tokens,
                 "measured output": s.measured_output_tokens, "qwen prompt": s.qwen_input_tokens}
                for s in self.steps]

    def token_table(self) -> str:
        """The :meth:`token_rows` as plain lines, one ``name=value`` field per column."""
        lines = [f"{self.title or 'run'}: {self.provenance}"
                 + (f"; measured with {self.measured_with}" if self.measured_with else "")]
        for row in self.token_rows():
            lines.append(f"  step {row['step']}: input={_fmt(row['input'])} [{row['figures']}] "
                         f"output={_fmt(row['output'])} | measured here: "
                         f"prompt={_fmt(row['measured prompt'])} output={_fmt(row['measured output'])}"
                         f" qwen_prompt={_fmt(row['qwen prompt'])}")
        total_measured = self.cumulative_measured_input_tokens[-1] if self.steps else None
        lines.append(f"  all: input={_fmt(self.total_input_tokens)} output="
                     f"{_fmt(self.total_output_tokens)} | measured prompt={_fmt(total_measured)}")
        return "\n".join(lines)

    def plot(self, ax: Any = None):
        """Prompt tokens per step of this run (see :func:`prompt_tokens_figure`)."""
        return prompt_tokens_figure([self], ax=ax, title=f"Prompt tokens per step: {self.title}")

    def model_outputs(self) -> list[str]:
        """The raw model output of every step, in order (what a replay returns)."""
        return [s.model_output or _join_thought_and_code(s.thought, s.code) for s in self.steps]

    def tool_names_called(self) -> list[str]:
        """Every tool call of the run, in order (code agents: read from each step's code)."""
        return [name for step in self.steps for name in step.tool_names()]

    def summary(self) -> str:
        """A few plain lines: task, steps, tools called, tokens, answer."""
        tin, tout = self.total_input_tokens, self.total_output_tokens
        lines = [
            f"{self.title or 'run'} [{self.source}] model: {self.model_id}",
            f"provenance: {self.provenance}",
            f"task: {self.task.splitlines()[0] if self.task else ''}",
            f"steps: {len(self.steps)}; tools called: {', '.join(self.tool_names_called()) or 'none'}",
            f"tokens: {tin if tin is not None else '?'} in / {tout if tout is not None else '?'} out",
            f"final answer: {self.final_answer}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"Run(title={self.title!r}, source={self.source!r}, model_id={self.model_id!r}, "
                f"steps={len(self.steps)}, final_answer={self.final_answer!r})")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{s.number}</td><td>{html.escape(', '.join(s.tool_names()) or '-')}</td>"
            f"<td>{_fmt(s.input_tokens)}</td><td>{_fmt(s.output_tokens)}</td>"
            f"<td>{_fmt(s.measured_input_tokens)}</td><td>{'error' if s.error else ''}</td></tr>"
            for s in self.steps
        )
        return (
            f"<b>{html.escape(self.title or 'run')}</b> <i>[{html.escape(self.source)}]</i> "
            f"{html.escape(self.model_id)}<br><small>{html.escape(self.provenance)}</small><br>"
            f"task: {html.escape(self.task)}<br>"
            "<table><tr><th>step</th><th>tools</th><th>input tokens</th><th>output tokens</th>"
            f"<th>measured prompt</th><th></th></tr>{rows}</table>"
            f"final answer: {html.escape(str(self.final_answer))}"
        )

    # ----- values -----
    def to_dict(self) -> dict[str, Any]:
        """The run's values as plain data (its fields, steps and tool calls as dicts), to compare
        two runs or show one; a run is saved as spans (:func:`save_run`), not as this."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("steps",
                                                                                    "spans")}
        return {**copy.deepcopy(data), "steps": [asdict(step) for step in self.steps]}


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


# ----- spans: the one trace format -----
AGENT_ERROR_AT_STEP_LIMIT = "AgentMaxStepsError: Reached max steps."
"""The error of the step smolagents adds when a run reaches its step limit (its final answer
call is made outside any step, so its spans hold an LLM span directly under the agent)."""

_OUTPUT_TEXTS = ("llm.output_messages.0.message.content",
                 "llm.output_messages.0.message.contents.0.message_content.text")
_OUTPUT_CALLS = "llm.output_messages.0.message.tool_calls"
_RUN_FIELDS = ("title", "notes", "source_detail", "measured_with", "model_id",
               "total_input_tokens_reported", "total_output_tokens_reported")


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _json_value(text: Any, default: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else default
    except ValueError:
        return default


_PIL_REPR = re.compile(r'"?<PIL\.\w+\.\w+ image mode=\w+ size=(\d+)x(\d+) at 0x[0-9A-Fa-f]+>"?')


def _answer_text(value: Any) -> str | None:
    """A final answer as a span holds it; an image (a PIL image's repr, or the file smolagents
    writes an ``AgentImage`` to) becomes ``<image WxH>``."""
    if value is None:
        return None
    text = str(value)
    if match := _PIL_REPR.fullmatch(text):
        return f"<image {match.group(1)}x{match.group(2)}>"
    if text.endswith((".png", ".jpg", ".jpeg", ".webp")) and Path(text).is_file():
        try:
            from PIL import Image

            with Image.open(text) as image:
                return f"<image {image.size[0]}x{image.size[1]}>"
        except OSError:
            return text
    return text


def _step_error(span: Any) -> str | None:
    """``Type: message`` of the exception a step span recorded (or of its recovered error)."""
    for event in span.events or ():
        attributes = dict(event.attributes or {})
        if event.name == "exception":
            kind = str(attributes.get("exception.type", "Exception")).rsplit(".", 1)[-1]
            return f"{kind}: {attributes.get('exception.message', '')}"
        if event.name == "agent.step_recovery":
            return f"{attributes.get('type', 'AgentError')}: {attributes.get('message', '')}"
    return None


_AGENT_STOPS = ("Observation:", "Calling tools:")


def _model_output(attributes: dict[str, Any]) -> str:
    """The text the model returned, with the closing code tag smolagents' CodeAgent adds back
    when the text does not end with it (the tag is the stop sequence the agent asked for
    besides its own two)."""
    text = next((str(attributes[k]) for k in _OUTPUT_TEXTS if k in attributes), "")
    call = _json_value(attributes.get("input.value"), {})
    stops = call.get("stop_sequences") if isinstance(call, dict) else None
    closing = [s for s in stops or () if isinstance(s, str) and s not in _AGENT_STOPS]
    if text and closing and not text.strip().endswith(closing[0]):
        text += closing[0]
    return text


def _native_calls(attributes: dict[str, Any]) -> list[ToolCall]:
    """The tool calls a model returned as such: from the message OpenInference keeps as the
    LLM span's output (with their arguments), else from the output message's attributes."""
    message = _json_value(attributes.get("output.value"), {})
    listed = message.get("tool_calls") if isinstance(message, dict) else None
    if isinstance(listed, list) and listed:
        found = []
        for call in listed:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            arguments = function.get("arguments", {})
            arguments = _json_value(arguments, arguments) if isinstance(arguments, str) \
                else arguments
            found.append(ToolCall(str(function.get("name")), dict(arguments)
                                  if isinstance(arguments, dict) else {"_0": arguments}))
        return found
    calls, i = [], 0
    while f"{_OUTPUT_CALLS}.{i}.tool_call.function.name" in attributes:
        arguments = _json_value(attributes.get(f"{_OUTPUT_CALLS}.{i}.tool_call.function.arguments"),
                                {})
        calls.append(ToolCall(str(attributes[f"{_OUTPUT_CALLS}.{i}.tool_call.function.name"]),
                              arguments if isinstance(arguments, dict) else {"_0": arguments}))
        i += 1
    return calls


def run_from_spans(spans: Any, agent: Any = None) -> Run:
    """The :class:`Run` of one agent run, read from its spans (``agent``: its AGENT span, by
    default the first one). The run keeps the spans (``run.spans``), which :func:`save_run`
    writes.

    Read from OpenInference's attributes: the task and tools from the AGENT span; a step per
    ``Step N`` CHAIN span, its observation (the span's output) and error (its exception event);
    the model output, token counts and native tool calls from the step's LLM span (a code
    agent's tool calls are read from the code, as :func:`tool_calls_in_code` reads them); the
    final answer from the final-answer TOOL span of the step that gave it. From the course's
    attributes (:mod:`course.tools.spans`): who wrote the outputs, where each figure comes from,
    the prompts measured here, and ``course.run.*`` (title, notes...). Raises
    :class:`TraceError` when the spans hold no agent run.
    """
    from course.tools import spans as otel

    spans = spans if isinstance(spans, otel.Spans) else otel.Spans(list(spans))
    agent = agent if agent is not None else next(iter(spans.agents), None)
    if agent is None:
        raise TraceError("the spans hold no AGENT span: there is no agent run to read. Fix: "
                         "capture the spans of an agent's run (course.tools.spans.capture).")
    a = _attrs(agent)
    _check_labels(spans, agent)
    about = {name: a.get(otel.RUN_PREFIX + name) for name in _RUN_FIELDS}
    call = _json_value(a.get("input.value"), {})
    task = call.get("task") if isinstance(call, dict) else None
    tool_names = [str(t) for t in a.get("smolagents.tools_names") or () if t != "final_answer"]
    additional = _json_value(a.get("smolagents.additional_args"), {})
    provenance = str(a.get(otel.PROVENANCE, "measured"))
    source = str(a.get(otel.OUTPUTS) or (provenance if provenance in OUTPUT_LABELS
                                         else "measured"))
    measured_with = str(about["measured_with"] or "")
    # a replay names the tokenizer that counted its prompts; without one it reports zeros
    counted = bool(measured_with) or provenance != "recorded"
    children = spans.children(agent)
    chains = [s for s in children if _attrs(s).get(otel.KIND) == "CHAIN"
              and otel._STEP_NAME.fullmatch(s.name)]
    steps: list[TraceStep] = []
    final_answer = None
    for chain in chains:
        inner = spans.children(chain)
        llm = next((s for s in inner if _attrs(s).get(otel.KIND) == "LLM"), None)
        finals = [s for s in inner if _attrs(s).get(otel.KIND) == "TOOL"
                  and _attrs(s).get("tool.name") == "final_answer"
                  and s.status.status_code.name != "ERROR"]
        step = _step(len(steps) + 1, chain, llm, tool_names, counted)
        step.is_final_answer = bool(finals)
        if finals and final_answer is None:
            final_answer = _answer_text(_attrs(finals[0]).get("output.value"))
        steps.append(step)
    last_llm = [s for s in children if _attrs(s).get(otel.KIND) == "LLM"]
    if last_llm and not any(s.is_final_answer for s in steps):  # the step limit's answer call
        step = _step(len(steps) + 1, None, last_llm[-1], tool_names, counted)
        step.error, step.model_output, step.thought, step.code = (
            AGENT_ERROR_AT_STEP_LIMIT, "", "", "")
        steps.append(step)
    if final_answer is None and otel.RUN_PREFIX + "final_answer" in a:
        final_answer = str(a[otel.RUN_PREFIX + "final_answer"])
    model_id = about["model_id"] or next(
        (str(_attrs(s)["llm.model_name"]) for s in spans.llm_calls
         if "llm.model_name" in _attrs(s)), "")
    run = Run(task=str(task or a.get("smolagents.task") or ""), model_id=str(model_id),
              steps=steps, tools=tool_names, final_answer=final_answer, source=source,
              title=str(about["title"] or ""),
              additional_args=additional if isinstance(additional, dict) else {},
              total_input_tokens_reported=about["total_input_tokens_reported"],
              total_output_tokens_reported=about["total_output_tokens_reported"],
              notes=str(about["notes"] or ""), source_detail=str(about["source_detail"] or ""),
              measured_with=measured_with)
    run.spans = spans
    return run


def _check_labels(spans: Any, agent: Any) -> None:
    """Refuse a label the course does not use, naming the attribute and the span."""
    from course.tools import spans as otel

    checks = ((otel.OUTPUTS, OUTPUT_LABELS), (otel.TOKEN_FIGURES, FIGURE_LABELS),
              (otel.RECORDING_FIGURES, FIGURE_LABELS), (otel.PROVENANCE, otel.PROVENANCE_LABELS))
    for span in [agent, *spans]:
        attributes = _attrs(span)
        for key, labels in checks:
            if key in attributes and attributes[key] not in labels:
                raise TraceError(f"span {span.name!r}: attribute {key!r} is "
                                 f"{attributes[key]!r}; it must be one of {list(labels)}.")


def _step(number: int, chain: Any, llm: Any, tool_names: list[str],
          counted: bool) -> TraceStep:
    from course.tools import spans as otel

    c = _attrs(chain) if chain is not None else {}
    m = _attrs(llm) if llm is not None else {}
    output = _model_output(m)
    thought, code = split_thought_and_code(output)
    calls = tool_calls_in_code(code, [*tool_names, "final_answer"]) if code else _native_calls(m)
    replayed = otel.RECORDING_FIGURES in m
    measured = counted and otel.MEASURED_PROMPT in m
    duration = None
    if chain is not None and chain.end_time and chain.start_time and \
            chain.end_time > chain.start_time:
        duration = round((chain.end_time - chain.start_time) / 1e9, 3)
    return TraceStep(
        number=number, thought=thought, code=code, tool_calls=calls,
        observation=str(c.get("output.value") or ""),
        error=_step_error(chain) if chain is not None else None,
        input_tokens=None if replayed else m.get(otel.PROMPT),
        output_tokens=None if replayed else m.get(otel.COMPLETION),
        duration_s=duration,
        figures=str(m.get(otel.RECORDING_FIGURES) or m.get(otel.TOKEN_FIGURES) or "measured"),
        model_output=output,
        measured_input_tokens=m.get(otel.MEASURED_PROMPT) if measured else None,
        measured_output_tokens=m.get(otel.MEASURED_COMPLETION) if measured else None,
        qwen_input_tokens=m.get(otel.MEASURED_QWEN_PROMPT))


def _counting_ids(seed: str) -> Any:
    """An OpenTelemetry id generator counting from a number the run's text gives: the same
    run, the same ids (and so the same file)."""
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class CountingIds(_CountingIds, IdGenerator):
        pass

    return CountingIds(seed)


class _CountingIds:
    """Span and trace ids from a counter seeded by the run's text."""

    def __init__(self, seed: str):
        self.next = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:6], "big") << 16

    def generate_span_id(self) -> int:
        self.next += 1
        return self.next & 0xFFFFFFFFFFFFFFFF

    def generate_trace_id(self) -> int:
        return (self.next << 64) | 1

    def is_trace_id_random(self) -> bool:
        return False


_WRITTEN_START_NS = 1_700_000_000 * 10**9  # the clock of spans written from a Run (no run here)


def spans_from_run(run: Run, provenance: str | None = None) -> Any:
    """Spans for a :class:`Run` that has none (a recording the course wrote, a run built by
    hand), with the attributes :func:`run_from_spans` reads back and OpenInference's kinds:
    an AGENT span, a ``Step N`` CHAIN span per step with its LLM span (the model output and
    figures) and a TOOL span per tool call. ``provenance`` labels them (default: the run's
    ``source``; the shipped recordings are ``recorded``). Times are the steps' durations from
    a fixed start; ids come from the run's title, so the same run gives the same file."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode, set_span_in_context

    from course.tools import spans as otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agents-workbook"}),
                              id_generator=_counting_ids(f"{run.title}\n{run.task}"))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("course.agents.traces")
    label = provenance or run.source
    clock = _WRITTEN_START_NS
    about = {otel.RUN_PREFIX + name: getattr(run, name) for name in _RUN_FIELDS
             if getattr(run, name) not in (None, "")}
    agent_attributes: dict[str, Any] = {
        otel.KIND: "AGENT", otel.PROVENANCE: label, otel.OUTPUTS: run.source, **about,
        "input.value": json.dumps({"task": run.task,
                                   "additional_args": run.additional_args or None},
                                  ensure_ascii=False),
        "smolagents.task": run.task, "smolagents.tools_names": [*run.tools, "final_answer"]}
    if run.additional_args:
        agent_attributes["smolagents.additional_args"] = json.dumps(run.additional_args,
                                                                    ensure_ascii=False)
    if run.final_answer is not None:
        agent_attributes["output.value"] = run.final_answer
        if not any(step.is_final_answer for step in run.steps):  # no step's tool gave it
            agent_attributes[otel.RUN_PREFIX + "final_answer"] = run.final_answer
    for key, value in ((otel.PROMPT, run.total_input_tokens),
                       (otel.COMPLETION, run.total_output_tokens)):
        if value is not None:
            agent_attributes[key] = value
    agent = tracer.start_span("CodeAgent.run", attributes=agent_attributes, start_time=clock)
    for step in run.steps:
        context = set_span_in_context(agent)
        end = clock + (round(step.duration_s * 1e9) if step.duration_s else 0)
        chain = tracer.start_span(f"Step {step.number}", context=context, start_time=clock,
                                  attributes={otel.KIND: "CHAIN", otel.PROVENANCE: label})
        if step.observation:
            chain.set_attribute("output.value", step.observation)
        if step.error:
            kind, _, message = step.error.partition(": ")
            chain.add_event("exception", {"exception.type": kind, "exception.message": message},
                            timestamp=end)
            chain.set_status(StatusCode.ERROR)
        inside = set_span_in_context(chain)
        tracer.start_span("Model.generate", context=inside, start_time=clock,
                          attributes=_llm_attributes(run, step, label)).end(end_time=end)
        calls = [c for c in step.tool_calls if c.name != "final_answer"]
        if step.is_final_answer:
            calls += [c for c in step.tool_calls if c.name == "final_answer"][:1] or [
                ToolCall("final_answer", {})]
        for tool_call in calls:
            tool_attributes: dict[str, Any] = {
                otel.KIND: "TOOL", otel.PROVENANCE: label, "tool.name": tool_call.name,
                otel.TOOL_ARGUMENTS: json.dumps(tool_call.arguments, ensure_ascii=False,
                                                sort_keys=True, default=str),
                "input.value": json.dumps({"args": [], "kwargs": tool_call.arguments},
                                          ensure_ascii=False, default=str)}
            if tool_call.name == "final_answer" and run.final_answer is not None:
                tool_attributes["output.value"] = run.final_answer
            tracer.start_span(tool_call.name, context=inside, start_time=clock,
                              attributes=tool_attributes).end(end_time=end)
        chain.end(end_time=end)
        clock = end + 1
    agent.end(end_time=clock)
    provider.shutdown()
    return otel.Spans(exporter.get_finished_spans())


def _llm_attributes(run: Run, step: TraceStep, label: str) -> dict[str, Any]:
    """The LLM span of a written step: its model output, native tool calls and figures."""
    from course.tools import spans as otel

    output = step.model_output or (_join_thought_and_code(step.thought, step.code)
                                   if step.thought or step.code else "")
    attributes: dict[str, Any] = {
        otel.KIND: "LLM", otel.PROVENANCE: label, otel.STEP: step.number,
        otel.TOKEN_FIGURES: step.figures, "llm.model_name": run.model_id,
        "llm.output_messages.0.message.role": "assistant"}
    if output:
        attributes[_OUTPUT_TEXTS[0]] = output
    if not step.code:
        for i, tool_call in enumerate(step.tool_calls):
            prefix = f"{_OUTPUT_CALLS}.{i}.tool_call.function."
            attributes[prefix + "name"] = tool_call.name
            attributes[prefix + "arguments"] = json.dumps(tool_call.arguments, ensure_ascii=False)
    for key, value in ((otel.PROMPT, step.input_tokens), (otel.COMPLETION, step.output_tokens),
                       (otel.MEASURED_PROMPT, step.measured_input_tokens),
                       (otel.MEASURED_COMPLETION, step.measured_output_tokens),
                       (otel.MEASURED_QWEN_PROMPT, step.qwen_input_tokens)):
        if value is not None:
            attributes[key] = value
    return attributes


def save_run(run: Run, path: str | Path) -> Path:
    """Write ``run`` as OTLP JSON and return the path: the spans it was read from
    (:func:`run_from_spans`), or :func:`spans_from_run`'s for a run that has none."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    spans = run.spans if run.spans is not None else spans_from_run(run)
    return spans.save(path)


def load_run(path: str | Path) -> Run:
    """Read a run saved by :func:`save_run` (or any OTLP JSON of a smolagents run); errors
    name the file and what is wrong."""
    from course.tools.spans import spans_from_otlp_json

    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file. Fix: check the path "
                         f"({RECORDINGS_DIR} holds the shipped ones).")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise TraceError(f"{path.name}: not UTF-8 text (byte {err.object[err.start]:#04x} at "
                         f"offset {err.start}). Fix: save runs with "
                         "course.agents.traces.save_run(), which writes UTF-8.") from err
    try:
        spans = spans_from_otlp_json(text)
    except (ValueError, RecursionError) as err:
        raise TraceError(f"{path.name}: {err}") from err
    try:
        return run_from_spans(spans)
    except TraceError as err:
        raise TraceError(f"{path.name}: {err}") from err


# ----- code actions -----
_THOUGHT_PREFIX = re.compile(r"^\s*(Thought|Thoughts)\s*:\s*", re.IGNORECASE)
_CODE_BLOCK = re.compile(r"<code>\s*\n?(.*?)\n?\s*</code>|```(?:python|py)\s*\n(.*?)\n```", re.S)


def split_thought_and_code(text: str) -> tuple[str, str]:
    """Split a CodeAgent model output into (thought, code); code is '' when there is none."""
    match = _CODE_BLOCK.search(text or "")
    if not match:
        return _THOUGHT_PREFIX.sub("", (text or "").strip()), ""
    code = (match.group(1) if match.group(1) is not None else match.group(2)).strip("\n")
    thought = _THOUGHT_PREFIX.sub("", text[: match.start()].strip())
    return thought.strip(), code


def _join_thought_and_code(thought: str, code: str) -> str:
    """The model output format smolagents' CodeAgent parses: a thought, then a <code> block."""
    return f"Thought: {thought.strip()}\n<code>\n{code.strip()}\n</code>"


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return f"<{ast.unparse(node)}>"


def tool_calls_in_code(code: str, tool_names: list[str] | tuple[str, ...] | set[str]) -> list[ToolCall]:
    """Calls of the named tools in ``code``, in source order, with literal arguments.

    Read from the syntax tree, so a tool name inside a string is not a call. Positional
    arguments are kept under ``"_0"``, ``"_1"``...; a non-literal argument is kept as
    ``"<expression>"``. Code that does not parse gives no calls.
    """
    try:
        tree = ast.parse(code or "")
    except SyntaxError:
        return []
    names = set(tool_names)
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            args = {f"_{i}": _literal(a) for i, a in enumerate(node.args)}
            args.update({kw.arg or "**": _literal(kw.value) for kw in node.keywords})
            calls.append((node.lineno, node.col_offset, ToolCall(node.func.id, args)))
    return [call for *_, call in sorted(calls, key=lambda c: (c[0], c[1]))]


# ----- smolagents -----
def content_text(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a multimodal list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


# ----- figures -----
def prompt_tokens_figure(runs: list[Run], ax: Any = None, title: str = "Prompt tokens per step"):
    """A matplotlib figure: prompt tokens per step of each run, each series with its label.

    For every run: its token figures (labelled as the steps say), the prompt measured here with
    the run's ``measured_with`` tokenizer, and the prompt counted with the Qwen tokenizer.
    Long runs get automatic integer ticks, not one tick per step.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
    else:
        fig = ax.figure
    nan = float("nan")
    for run in runs:
        steps = [s.number for s in run.steps]
        label = safe_text(run.title or run.task[:30])
        color = None
        series = [
            ([s.input_tokens for s in run.steps], "o-", "/".join(run.figure_labels) or "figures"),
            ([s.measured_input_tokens for s in run.steps], "s--",
             f"measured, {run.measured_with or 'local tokenizer'}"),
            ([s.qwen_input_tokens for s in run.steps], "^:", "measured, Qwen3 tokenizer"),
        ]
        for values, style, what in series:
            if any(v is not None for v in values):
                line, = ax.plot(steps, [nan if v is None else v for v in values], style,
                                color=color, label=safe_text(f"{label}: {what}"),
                                markersize=4 if len(steps) < 200 else 0)
                color = line.get_color()
    ax.set_xlabel("step")
    ax.set_ylabel("prompt tokens")
    ax.set_title(safe_text(title))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=12))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
