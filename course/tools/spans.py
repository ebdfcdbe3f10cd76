"""Agent runs as OpenTelemetry spans, through OpenInference's own instrumentation.

:func:`instrument` switches on OpenInference's smolagents and LangChain instrumentors (the
packages ``openinference-instrumentation-smolagents`` and ``-langchain``) with a
``TracerProvider`` of the course's own: no server, no global provider, nothing sent out. Every
smolagents run (an AGENT span, a CHAIN span per step, an LLM span per model call, a TOOL span per
tool call) and every LangChain / LangGraph run then emits spans. :func:`capture` is what a lesson
uses; it instruments on first use and yields the spans of the runs inside it, kept by the SDK's
``InMemorySpanExporter``.

Spans are on by default: importing the package :mod:`course.agents` calls :func:`instrument`
(lessons 02 and 03 import it, 04 and 05 through :mod:`course.memory.recorded`, 06 through
:mod:`course.guards`), so every smolagents and LangGraph run a lesson makes emits spans through
this provider without a ``capture()`` around it. With no capture open the finished spans go
nowhere (no exporter, no buffer), and the cost is that of making them: 6-25 ms on a replay of
60-120 ms, and nothing measurable on a live step of 20-60 s on a shared 2-core CPU
(``benchmarks/tracing.py``). The course's
runners (:func:`course.agents.replay.replay_run`, :func:`course.agents.live.run_live`, the pairs
of :mod:`course.agents.interfaces`) capture their own run's spans and read its
:class:`course.agents.traces.Run` from them::

    with capture(recording=run) as spans:      # a replay: labelled "recorded"
        replay = replay_run(run)
    spans.agents, spans.llm_calls, spans.tool_calls("web_search")
    spans.save("weather.otlp.json"); load_spans("weather.otlp.json")

OpenInference's attributes stay as they are (``openinference.span.kind``, ``llm.token_count.*``,
``tool.name``, ``input.value``...). The course adds what the lessons teach and OpenInference
does not carry (:data:`COURSE_ATTRIBUTES`):

- ``course.provenance`` on every span: the run's label (measured, recorded, reconstructed,
  scripted); ``course.outputs`` on the AGENT span of a replay: who wrote its model outputs;
- ``course.step`` on a step's LLM span, and ``course.token_figures``: where that span's
  ``llm.token_count.*`` come from. A replay's LLM and AGENT spans hold the recording's figures
  (``recorded`` or ``derived``, as the recording labels each step; a figure the recording lacks
  is left out, not filled in), and the counts the model object reported while replaying move
  to ``course.measured.prompt_tokens`` / ``course.measured.completion_tokens`` (a step the
  recording has no figures for keeps the counts made here, labelled ``measured``, with the
  recording's own label in ``course.recording.figures``); the replay's model adds the prompt
  counted with the Qwen tokenizer as ``course.measured.qwen_prompt_tokens``;
- ``course.run.*`` on an AGENT span: what a capture says about its run (title, notes, the
  tokenizer that measured it...), for :func:`course.agents.traces.run_from_spans`;
- ``course.tool.arguments`` on a TOOL span: the call's arguments as JSON, by parameter name;
- ``course.door.verdict`` (allowed, refused, needs confirmation) and ``course.door.status``
  (the :class:`course.tools.registry.ToolStatus`) on a TOOL span whose call went through the
  door (:class:`~course.tools.registry.ToolRegistry` or :class:`~course.tools.gateway.ToolGateway`).

The course's smolagents ``Model`` subclasses that define their own ``generate`` (the replay's
model among them) are wrapped with OpenInference's model wrapper too, since its instrumentor
wraps only the models smolagents exports; a door tool's TOOL span is named after its tool.
Spans are saved and loaded as OTLP JSON (:meth:`Spans.save`, :func:`load_spans`), encoded by
OpenTelemetry's own OTLP protobuf encoder, with ids in hex as OTLP/JSON asks.

A lesson displays :meth:`Spans.summary` (:class:`SpanTree`: the tree for the student, the counts,
token figures and tool calls as a record for the tests). Sending spans to a trace UI is opt-in:
:func:`otlp_target` reads where they would go from the environment (``OTEL_EXPORTER_OTLP_*``,
``PHOENIX_COLLECTOR_ENDPOINT``), else asks whether a Phoenix answers on this machine (the one
``python -m course phoenix`` starts, :mod:`course.phoenix`; only that local address is asked,
within a second), and :func:`send_spans` exports them with the SDK's OTLP/HTTP exporter
(``opentelemetry-exporter-otlp-proto-http``, the ``[phoenix]`` extra) only when there is a
target; otherwise it sends nothing and says how to start Phoenix or what to set.

Not handled: metrics and logs; sampling (every span is kept); OTLP over gRPC (HTTP only); the
AGENT span of a run that raised outside a capture (OpenInference leaves it open; a capture ends
it);
streaming runs' recorded figures; recorded figures of managed agents (one agent per
recording).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from course.phoenix import PHOENIX_URL, exporter_installed, phoenix_version
from course.records import Record

if TYPE_CHECKING:
    from smolagents.models import Model

__all__ = ["COURSE_ATTRIBUTES", "ENDPOINT_VARIABLES", "MAX_SPAN_ATTRIBUTES", "OTLP_HTTP_PACKAGE", "PHOENIX_LOCAL",
           "PROVENANCE_LABELS", "OtlpTarget", "SpanTree", "Spans", "add_span_processor", "capture",
           "door_verdict", "instrument", "load_spans", "otlp_target", "send_spans",
           "spans_from_otlp_json", "tracer_provider", "uninstrument"]

PROVENANCE_LABELS = ("measured", "recorded", "reconstructed", "scripted")
"""A run's label: a model ran here, a replay of a recording, written by the course, a script."""

KIND = "openinference.span.kind"
PROMPT, COMPLETION, TOTAL = ("llm.token_count.prompt", "llm.token_count.completion",
                             "llm.token_count.total")
PROVENANCE = "course.provenance"
OUTPUTS = "course.outputs"
STEP = "course.step"
TOKEN_FIGURES = "course.token_figures"
MEASURED_PROMPT = "course.measured.prompt_tokens"
MEASURED_COMPLETION = "course.measured.completion_tokens"
TOOL_ARGUMENTS = "course.tool.arguments"
DOOR_VERDICT = "course.door.verdict"
DOOR_STATUS = "course.door.status"
RECORDING_FIGURES = "course.recording.figures"
MEASURED_QWEN_PROMPT = "course.measured.qwen_prompt_tokens"
RUN_PREFIX = "course.run."
COURSE_ATTRIBUTES = (PROVENANCE, OUTPUTS, STEP, TOKEN_FIGURES, MEASURED_PROMPT,
                     MEASURED_COMPLETION, TOOL_ARGUMENTS, DOOR_VERDICT, DOOR_STATUS,
                     RECORDING_FIGURES, MEASURED_QWEN_PROMPT)
"""The attributes the course adds to OpenInference's (and ``course.run.*``, see :func:`capture`)."""

MAX_SPAN_ATTRIBUTES = 4096
"""Attributes a span may hold. OpenInference writes one attribute per message part of an LLM
call (``llm.input_messages.<i>.message.content``...), so a call with a long conversation passes
OpenTelemetry's default of 128, which drops the oldest attributes with a warning in the cell."""

_STEP_NAME = re.compile(r"Step (\d+)")
_DOOR_TOOL_CLASS = "DoorTool"  # course.tools.for_libraries.smolagents_tools' class, one per tool


# ----- the provider and its processor ----------------------------------------------------------
class _Capture:
    """One :func:`capture` block: its labels, its recording, and its in-memory exporter."""

    def __init__(self, provenance: str, recording: Any, about: Mapping[str, Any]):
        self.provenance = provenance
        self.recording = recording
        self.about = {RUN_PREFIX + key: value for key, value in about.items()
                      if value is not None}
        self.exporter = InMemorySpanExporter()
        self.processor = SimpleSpanProcessor(self.exporter)
        self.agents: list[Any] = []  # the AGENT spans started inside the block


class _CourseProcessor(SpanProcessor):
    """Adds the course's attributes, then hands each finished span to the active captures and to
    the processors added with :func:`add_span_processor`.

    At a span's start it writes the labels of the innermost active capture (the span is still
    open then); at its end it writes what is known only then (a replay's recorded figures) on a
    copy of the finished span, which is what the exporters receive.
    """

    def __init__(self) -> None:
        self.captures: list[_Capture] = []
        self.extra: list[SpanProcessor] = []
        self.steps: dict[int, int] = {}  # span id of a "Step N" CHAIN span -> N
        self.labels: dict[int, _Capture] = {}  # span id -> the capture active at its start
        self.lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        attributes = span.attributes or {}
        kind = attributes.get(KIND)
        span_id = span.context.span_id
        with self.lock:
            active = self.captures[-1] if self.captures else None
            if active is not None:
                self.labels[span_id] = active
            if kind == "CHAIN" and (match := _STEP_NAME.fullmatch(span.name)):
                self.steps[span_id] = int(match.group(1))
            step = self.steps.get(span.parent.span_id) if span.parent is not None else None
        if active is not None:
            span.set_attribute(PROVENANCE, active.provenance)
            if kind == "AGENT":
                active.agents.append(span)
                if active.about:
                    span.set_attributes(active.about)
        if kind == "LLM" and step is not None:
            span.set_attribute(STEP, step)
        if kind == "TOOL":
            if span.name == _DOOR_TOOL_CLASS and attributes.get("tool.name"):
                span.update_name(str(attributes["tool.name"]))
            arguments = _tool_arguments(attributes)
            if arguments is not None:
                span.set_attribute(TOOL_ARGUMENTS, arguments)
        for processor in self._downstream():
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        span_id = span.context.span_id
        with self.lock:
            self.steps.pop(span_id, None)
            capture = self.labels.pop(span_id, None)
        extra = _figures(span, capture.recording if capture is not None else None)
        if extra:
            span = _with_attributes(span, extra)
        for processor in self._downstream():
            processor.on_end(span)

    def _downstream(self) -> list[SpanProcessor]:
        with self.lock:
            return [c.processor for c in self.captures] + list(self.extra)

    def shutdown(self) -> None:
        for processor in self._downstream():
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(p.force_flush(timeout_millis) for p in self._downstream())


_PROVIDER: TracerProvider | None = None
_PROCESSOR: _CourseProcessor | None = None
_LANGCHAIN: Any = None
_WRAPPED_MODELS: dict[type[Model], Any] = {}  # a smolagents Model class -> its own generate
_WRAPPED_DOORS: list[tuple[type, str, Any]] = []
_STATE_LOCK = threading.RLock()


def tracer_provider() -> TracerProvider:
    """The course's ``TracerProvider`` (made on first use; not set as OpenTelemetry's global)."""
    global _PROVIDER, _PROCESSOR
    with _STATE_LOCK:
        if _PROVIDER is None:
            _PROCESSOR = _CourseProcessor()
            _PROVIDER = TracerProvider(resource=Resource.create(
                {"service.name": "agents-workbook"}), span_limits=SpanLimits(
                max_span_attributes=MAX_SPAN_ATTRIBUTES))
            _PROVIDER.add_span_processor(_PROCESSOR)
        return _PROVIDER


def add_span_processor(processor: SpanProcessor) -> None:
    """Send every span, the course's attributes included, to ``processor`` as well (e.g. a
    ``BatchSpanProcessor`` over an OTLP exporter pointed at a Phoenix or any collector)."""
    tracer_provider()
    assert _PROCESSOR is not None
    with _PROCESSOR.lock:
        _PROCESSOR.extra.append(processor)


def instrument() -> TracerProvider:
    """Switch on OpenInference's smolagents and LangChain instrumentation, the course's model
    classes and the door's verdicts; idempotent. Returns the provider the spans go to."""
    global _LANGCHAIN
    provider = tracer_provider()
    with _STATE_LOCK:
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from openinference.instrumentation.smolagents import SmolagentsInstrumentor

        smol = SmolagentsInstrumentor()
        if not smol.is_instrumented_by_opentelemetry:
            smol.instrument(tracer_provider=provider)
        langchain = LangChainInstrumentor()
        if not langchain.is_instrumented_by_opentelemetry:
            langchain.instrument(tracer_provider=provider)
        _LANGCHAIN = langchain
        _wrap_course_models(smol)
        _wrap_doors()
    return provider


def uninstrument() -> None:
    """Undo :func:`instrument`: the frameworks', the models' and the door's methods as before."""
    global _LANGCHAIN
    with _STATE_LOCK:
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from openinference.instrumentation.smolagents import SmolagentsInstrumentor

        for cls, original in _WRAPPED_MODELS.items():
            cls.generate = original
        _WRAPPED_MODELS.clear()
        for owner, name, original in _WRAPPED_DOORS:
            setattr(owner, name, original)
        _WRAPPED_DOORS.clear()
        for instrumentor in (SmolagentsInstrumentor(), LangChainInstrumentor()):
            if instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.uninstrument()
        _LANGCHAIN = None


def _wrap_course_models(smol: Any) -> None:
    """Wrap ``generate`` of every loaded smolagents ``Model`` subclass that defines its own and
    that OpenInference's instrumentor left alone (it wraps only the classes smolagents exports)."""
    from openinference.instrumentation.smolagents._wrappers import _ModelWrapper
    from smolagents.models import Model
    from wrapt import FunctionWrapper

    stack, seen = [Model], set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        own = cls.__dict__.get("generate")
        if own is None or isinstance(own, FunctionWrapper) or cls in _WRAPPED_MODELS:
            continue
        _WRAPPED_MODELS[cls] = own
        cls.generate = FunctionWrapper(own, _ModelWrapper(tracer=smol._tracer))


def _wrap_doors() -> None:
    """Wrap the door's steps so that a TOOL span learns the door's verdict.

    The steps are the methods a call looks up when it is made (the registry's ``check``, which
    returns a refusal, and ``run``; the gateway's ``_record`` of every outcome), so tools made
    before :func:`instrument` report their verdicts too. The last verdict of a call is the one
    its span keeps: the gateway's, after the registry's."""
    if _WRAPPED_DOORS:
        return
    from wrapt import FunctionWrapper

    from course.tools.gateway import ToolGateway
    from course.tools.registry import ToolRegistry

    for owner, name in ((ToolRegistry, "check"), (ToolRegistry, "run"),
                        (ToolGateway, "_record")):
        original = owner.__dict__[name]
        _WRAPPED_DOORS.append((owner, name, original))
        setattr(owner, name, FunctionWrapper(original, _door_wrapper))


def _door_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        _mark_door(result)
    except Exception:  # a span attribute must never break a tool call
        pass
    return result


def door_verdict(status: str) -> str:
    """The door's verdict for a :class:`~course.tools.registry.ToolStatus` value: ``allowed``
    (the tool's code ran, whatever came of it), ``needs confirmation`` (held for a human), or
    ``refused`` (the door, a policy, a grant or a human stopped it before it ran)."""
    from course.tools.registry import ToolStatus

    status = ToolStatus(status)
    if status.executed:
        return "allowed"
    if status == ToolStatus.NEEDS_CONFIRMATION:
        return "needs confirmation"
    return "refused"


def _mark_door(result: Any) -> None:
    from course.tools.registry import ToolResult

    if not isinstance(result, ToolResult):
        return
    span = _current_tool_span()
    if span is None:
        return
    span.set_attribute(DOOR_STATUS, result.status)
    span.set_attribute(DOOR_VERDICT, door_verdict(result.status))
    span.set_attribute(TOOL_ARGUMENTS, _json(result.arguments))


def _current_tool_span() -> Any:
    """The open TOOL span of the call being made: smolagents' (the current span), or the span of
    the LangChain tool run whose callbacks the current runnable config holds."""
    span = trace_api.get_current_span()
    if span.is_recording() and isinstance(span, ReadableSpan) and \
            (span.attributes or {}).get(KIND) == "TOOL":
        return span
    if _LANGCHAIN is None:
        return None
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get() or {}
    run_id = getattr(config.get("callbacks"), "parent_run_id", None)
    tool_span = _LANGCHAIN.get_span(run_id) if run_id is not None else None
    if tool_span is not None and tool_span.is_recording():
        return tool_span
    return None


# ----- the course's attributes -----------------------------------------------------------------
def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _tool_arguments(attributes: Any) -> str | None:
    """A smolagents TOOL span's arguments by parameter name, read from its ``input.value``
    (``{"args": [...], "kwargs": {...}}``; positional arguments take the tool's inputs in order,
    as the door's tools map them)."""
    try:
        call = json.loads(attributes.get("input.value") or "")
        names = list(json.loads(attributes.get("tool.parameters") or "{}"))
    except (TypeError, ValueError):
        return None
    if not isinstance(call, dict) or not isinstance(call.get("kwargs", {}), dict):
        return None
    args = call.get("args") or []
    arguments = {names[i] if i < len(names) else f"_{i}": value for i, value in enumerate(args)}
    arguments.update(call.get("kwargs") or {})
    return _json(arguments)


def _figures(span: ReadableSpan, recording: Any) -> dict[str, Any]:
    """The token attributes of a finished LLM or AGENT span: their label and, for a replay, the
    recording's figures in OpenInference's attributes with the reported counts beside them."""
    attributes = span.attributes or {}
    kind = attributes.get(KIND)
    if kind not in ("LLM", "AGENT") or PROMPT not in attributes:
        return {}
    if recording is None:
        return {TOKEN_FIGURES: "measured"}
    if kind == "AGENT":
        recorded: tuple[Any, Any, str] = (recording.total_input_tokens,
                                          recording.total_output_tokens, "recorded")
        extra: dict[str, Any] = {OUTPUTS: recording.source}
    else:
        step = attributes.get(STEP)
        steps = recording.steps
        if not isinstance(step, int) or not 1 <= step <= len(steps):
            return {TOKEN_FIGURES: "measured"}
        found = steps[step - 1]
        recorded, extra = (found.input_tokens, found.output_tokens, found.figures), {}
    prompt, completion, label = recorded
    if prompt is None and completion is None:  # the counts made here stay, labelled measured
        if kind == "AGENT":
            return {**extra, TOKEN_FIGURES: "measured"}
        return {**extra, TOKEN_FIGURES: "measured", RECORDING_FIGURES: label,
                MEASURED_PROMPT: attributes.get(PROMPT),
                MEASURED_COMPLETION: attributes.get(COMPLETION)}
    extra.update({TOKEN_FIGURES: label, MEASURED_PROMPT: attributes.get(PROMPT),
                  MEASURED_COMPLETION: attributes.get(COMPLETION),
                  PROMPT: prompt, COMPLETION: completion,
                  TOTAL: None if prompt is None or completion is None else prompt + completion})
    return extra


def _with_attributes(span: ReadableSpan, extra: dict[str, Any]) -> ReadableSpan:
    """A copy of a finished span with ``extra`` attributes (``None`` removes one)."""
    attributes = {k: v for k, v in {**dict(span.attributes or {}), **extra}.items()
                  if v is not None}
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=attributes, events=span.events, links=span.links, kind=span.kind,
        status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)


# ----- capturing -------------------------------------------------------------------------------
@contextlib.contextmanager
def capture(provenance: str | None = None, recording: Any = None,
            about: Mapping[str, Any] | None = None) -> Iterator[Spans]:
    """Instrument (once) and collect the spans of the runs inside the block.

    ``provenance`` labels every span (one of :data:`PROVENANCE_LABELS`); it defaults to
    ``recorded`` when ``recording`` (the :class:`course.agents.traces.Run` being replayed) is
    given, else ``measured``. With a recording, each step's LLM span and the AGENT span carry
    its figures (see the module's text). ``about`` is written on every AGENT span as
    ``course.run.<key>`` (a run's title, notes, the tokenizer that measured it...: what
    :func:`course.agents.traces.run_from_spans` reads back). The yielded :class:`Spans` fills
    as spans end; it is complete when the block exits. Blocks nest: a span is labelled by the
    innermost block and collected by every open one.
    """
    provenance = provenance or ("recorded" if recording is not None else "measured")
    if provenance not in PROVENANCE_LABELS:
        raise ValueError(f"provenance={provenance!r}: must be one of {list(PROVENANCE_LABELS)}.")
    if recording is not None and not hasattr(recording, "steps"):
        raise TypeError(f"recording must be a course.agents.traces.Run, got "
                        f"{type(recording).__name__}; load one with load_run(path).")
    instrument()
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    with _STATE_LOCK:
        _wrap_course_models(SmolagentsInstrumentor())  # classes defined since
    assert _PROCESSOR is not None
    block = _Capture(provenance, recording, about or {})
    spans = Spans(exporter=block.exporter)
    with _PROCESSOR.lock:
        _PROCESSOR.captures.append(block)
    context = otel_context.attach(otel_context.get_current())
    try:
        yield spans
    finally:
        # A run that raised (a step limit's interrupt, an error) leaves OpenInference's AGENT
        # span open and its context attached: end the span (it holds the exception) and put
        # back the context the block started with.
        for agent in block.agents:
            if agent.is_recording():
                agent.end()
        otel_context.detach(context)
        with _PROCESSOR.lock:
            _PROCESSOR.captures.remove(block)


class Spans(Sequence):
    """Finished spans, in start order, with the look-ups a lesson needs.

    Built by :func:`capture` (live: it reads its in-memory exporter) or from a list of
    ``ReadableSpan`` (:func:`load_spans`). Kinds are OpenInference's (``AGENT``, ``CHAIN``,
    ``LLM``, ``TOOL``).
    """

    def __init__(self, spans: Sequence[ReadableSpan] = (), exporter: Any = None):
        self._spans = list(spans)
        self._exporter = exporter

    @property
    def spans(self) -> list[ReadableSpan]:
        found = list(self._exporter.get_finished_spans()) if self._exporter else self._spans
        return sorted(found, key=lambda s: (s.start_time or 0, s.end_time or 0))

    def __getitem__(self, index: Any) -> Any:
        return self.spans[index]

    def __len__(self) -> int:
        return len(self.spans)

    def __repr__(self) -> str:
        counts: dict[object, int] = {}  # by the kind attribute, whatever its value
        for span in self.spans:
            kind = (span.attributes or {}).get(KIND, "?")
            counts[kind] = counts.get(kind, 0) + 1
        return f"Spans({len(self)}: {', '.join(f'{k}={v}' for k, v in counts.items())})"

    def kind(self, kind: str) -> list[ReadableSpan]:
        """The spans of one OpenInference kind."""
        return [s for s in self.spans if (s.attributes or {}).get(KIND) == kind]

    @property
    def agents(self) -> list[ReadableSpan]:
        return self.kind("AGENT")

    @property
    def llm_calls(self) -> list[ReadableSpan]:
        return self.kind("LLM")

    def tool_calls(self, name: str | None = None) -> list[ReadableSpan]:
        """The tool calls the agent made: TOOL spans not inside another TOOL span, of the tool
        ``name`` when given (``final_answer`` is a tool too). A door tool's span holds the span
        of the tool object the door ran; :meth:`kind` ("TOOL") lists both."""
        tools = self.kind("TOOL")
        inner = {s.context.span_id for s in tools for t in tools
                 if s.parent is not None and s.parent.span_id == t.context.span_id}
        return [s for s in tools if s.context.span_id not in inner
                and (name is None or (s.attributes or {}).get("tool.name") == name)]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        """The span's parent among these spans, or ``None``."""
        if span.parent is None:
            return None
        return next((s for s in self.spans if s.context.span_id == span.parent.span_id), None)

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in self.spans
                if s.parent is not None and s.parent.span_id == span.context.span_id]

    def tree(self) -> str:
        """One line per span, indented under its parent: name, kind and the taught figures."""
        ids = {s.context.span_id for s in self.spans}
        lines: list[str] = []

        def walk(span: ReadableSpan, depth: int) -> None:
            a = span.attributes or {}
            facts = [f"[{a.get(KIND, '?')}]"]
            if PROMPT in a or COMPLETION in a:
                facts.append(f"tokens {a.get(PROMPT, '-')} in / {a.get(COMPLETION, '-')} out"
                             f" ({a.get(TOKEN_FIGURES, '?')})")
            if TOOL_ARGUMENTS in a:
                facts.append(str(a[TOOL_ARGUMENTS]))
            if DOOR_VERDICT in a:
                facts.append(f"door: {a[DOOR_VERDICT]!s}")
            lines.append("  " * depth + f"{span.name} " + " ".join(facts))
            for child in self.children(span):
                walk(child, depth + 1)

        for root in self.spans:
            if root.parent is None or root.parent.span_id not in ids:
                walk(root, 0)
        return "\n".join(lines)

    def summary(self, title: str = "") -> SpanTree:
        """The spans as a displayed record: :meth:`tree` under ``title`` for the student; the
        counts by kind, the provenance labels, each LLM call's step and token figures and each
        tool call's name, arguments and door verdict as values."""
        counts: dict[str, int] = {}
        for span in self.spans:
            kind = str((span.attributes or {}).get(KIND, "?"))
            counts[kind] = counts.get(kind, 0) + 1
        agents = self.agents
        agent = agents[0] if agents else None
        outputs = None if agent is None else (agent.attributes or {}).get(OUTPUTS)
        llm = [{"step": a.get(STEP), "prompt": a.get(PROMPT), "completion": a.get(COMPLETION),
                "figures": a.get(TOKEN_FIGURES), "measured_prompt": a.get(MEASURED_PROMPT)}
               for a in (dict(s.attributes or {}) for s in self.llm_calls)]
        tools = [{"name": a.get("tool.name", s.name),
                  "arguments": json.loads(str(a[TOOL_ARGUMENTS])) if TOOL_ARGUMENTS in a else None,
                  "verdict": a.get(DOOR_VERDICT)}
                 for s in self.tool_calls() for a in [dict(s.attributes or {})]]
        return SpanTree(
            title=title, tree=self.tree(), spans=len(self), kinds=counts,
            provenance=sorted({str((s.attributes or {}).get(PROVENANCE)) for s in self.spans
                               if PROVENANCE in (s.attributes or {})}),
            outputs=None if outputs is None else str(outputs),
            llm_calls=llm, tool_calls=tools)

    # ----- OTLP JSON -----
    def to_otlp_json(self, indent: int | None = None) -> str:
        """The spans as OTLP JSON (an ``ExportTraceServiceRequest``, ids in hex)."""
        from google.protobuf import json_format
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        data = json_format.MessageToDict(encode_spans(self.spans), use_integers_for_enums=True)
        return json.dumps(_ids(data, _b64_to_hex), indent=indent, ensure_ascii=False)

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_otlp_json` to ``path`` (UTF-8); returns the path."""
        path = Path(path)
        path.write_text(self.to_otlp_json(indent=1), encoding="utf-8")
        return path


@dataclasses.dataclass
class SpanTree(Record):
    """A run's spans as the student reads them (the indented tree under a title) and as a test
    reads them (counts by kind, labels, token figures, tool calls with arguments and verdicts)."""

    title: str
    tree: str
    spans: int
    kinds: dict[str, int]
    provenance: list[str]
    outputs: str | None
    llm_calls: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]

    def __str__(self) -> str:
        counts = ", ".join(f"{kind} {n}" for kind, n in self.kinds.items())
        head = f"{self.title}: " if self.title else ""
        return f"{head}{self.spans} spans ({counts})\n{self.tree}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def load_spans(path: str | Path) -> Spans:
    """The spans of an OTLP JSON file (:meth:`Spans.save`, or any OTLP/JSON trace export)."""
    path = Path(path)
    try:
        return spans_from_otlp_json(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{path.name}: {err}") from err


def spans_from_otlp_json(text: str) -> Spans:
    """Spans from OTLP JSON text; raises ``ValueError`` saying what is wrong."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise json_format.ParseError(f"the top level is a JSON {type(data).__name__}, "
                                         "not an object with resourceSpans")
        request = json_format.ParseDict(_ids(data, _hex_to_b64), ExportTraceServiceRequest())
    except (json.JSONDecodeError, json_format.ParseError) as err:
        raise ValueError(f"not OTLP JSON trace data ({err}). Fix: save spans with "
                         "Spans.save().") from err
    spans = []
    for resource_spans in request.resource_spans:
        resource = Resource(_attributes(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            scope = InstrumentationScope(scope_spans.scope.name,
                                         scope_spans.scope.version or None)
            for s in scope_spans.spans:
                trace_id = int.from_bytes(s.trace_id, "big")
                flags = TraceFlags(s.flags & 0xFF if s.flags else TraceFlags.SAMPLED)
                spans.append(ReadableSpan(
                    name=s.name,
                    context=SpanContext(trace_id, int.from_bytes(s.span_id, "big"), False, flags),
                    parent=SpanContext(trace_id, int.from_bytes(s.parent_span_id, "big"), False,
                                       flags) if s.parent_span_id else None,
                    resource=resource,
                    attributes=_attributes(s.attributes),
                    events=[Event(e.name, _attributes(e.attributes), e.time_unix_nano)
                            for e in s.events],
                    links=[Link(SpanContext(int.from_bytes(link.trace_id, "big"),
                                            int.from_bytes(link.span_id, "big"), False),
                                _attributes(link.attributes)) for link in s.links],
                    kind=SpanKind(s.kind - 1) if s.kind else SpanKind.INTERNAL,
                    status=Status(StatusCode(s.status.code), s.status.message or None),
                    start_time=s.start_time_unix_nano,
                    end_time=s.end_time_unix_nano,
                    instrumentation_scope=scope,
                ))
    return Spans(spans)


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _ids(data: Any, convert: Any) -> Any:
    """``data`` with every trace/span id converted (protobuf's JSON has base64, OTLP hex)."""
    if isinstance(data, dict):
        return {k: convert(v) if k in _ID_KEYS and isinstance(v, str) else _ids(v, convert)
                for k, v in data.items()}
    if isinstance(data, list):
        return [_ids(v, convert) for v in data]
    return data


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _hex_to_b64(value: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except ValueError as err:
        raise ValueError(f"id {value!r:.40} is not hex (OTLP JSON writes ids in hex)") from err


def _any_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    return None if which is None else getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in pairs}


# ----- sending spans to a trace UI ------------------------------------------------------------
OTLP_HTTP_PACKAGE = "opentelemetry-exporter-otlp-proto-http"
PHOENIX_LOCAL = f"{PHOENIX_URL}/v1/traces"
"""Where the Phoenix ``python -m course phoenix`` starts on this machine takes OTLP over HTTP."""
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                      "PHOENIX_COLLECTOR_ENDPOINT")
"""Read in this order: the first is the traces URL as it is (OpenTelemetry's rule), the other
two a collector's base URL, to which ``/v1/traces`` is added."""


@dataclasses.dataclass
class OtlpTarget(Record):
    """Where :func:`send_spans` sends spans (``endpoint``; ``None``: nowhere), why, whether the
    exporter is installed, the version of the Phoenix that answered on this machine (``None``:
    none did, or none was asked), and, once sent, how many spans went and the exporter's
    answer."""

    endpoint: str | None
    why: str
    exporter_installed: bool
    phoenix_version: str | None = None
    sent: int = 0
    outcome: str = "nothing sent"

    @property
    def ready(self) -> bool:
        return self.endpoint is not None and self.exporter_installed

    def advice(self) -> str:
        """What to start, set or install, in one line."""
        install = f"pip install {OTLP_HTTP_PACKAGE} (the SDK's OTLP exporter)"
        if self.endpoint is not None and not self.exporter_installed:
            return f"{install}, then run again"
        return ("to see the spans in a trace UI: start Phoenix in a terminal with "
                f"`python -m course phoenix` (it answers at {PHOENIX_URL}), or set "
                "OTEL_EXPORTER_OTLP_ENDPOINT to your class's collector"
                + ("" if self.exporter_installed else f", and {install}") + "; then run again")

    def __str__(self) -> str:
        if self.sent:
            line = f"sent {self.sent} spans to {self.endpoint} ({self.why}): {self.outcome}"
            if self.outcome != "SUCCESS":
                line += "; is the collector running there? (Phoenix: `python -m course phoenix`)"
            return line
        where = f"to {self.endpoint} " if self.endpoint else ""
        return f"nothing sent {where}({self.why}); {self.advice()}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def otlp_target(environ: Mapping[str, str] | None = None, *, phoenix_url: str = PHOENIX_URL,
                timeout: float = 1.0) -> OtlpTarget:
    """Where spans would go; nothing is sent. An endpoint variable in ``environ`` (default
    ``os.environ``; :data:`ENDPOINT_VARIABLES`) wins, and then nothing is opened; else, when a
    Phoenix answers at ``phoenix_url`` within ``timeout`` seconds
    (:func:`course.phoenix.phoenix_version`; by default the one ``python -m course phoenix``
    starts), its OTLP/HTTP address (:data:`PHOENIX_LOCAL`); else none."""
    environ = os.environ if environ is None else environ
    exporter = exporter_installed()
    for name in ENDPOINT_VARIABLES:
        value = (environ.get(name) or "").strip()
        if value:
            endpoint = value if name == ENDPOINT_VARIABLES[0] else \
                value.rstrip("/") + "/v1/traces"
            return OtlpTarget(endpoint, f"{name} is set", exporter)
    url = phoenix_url.rstrip("/")
    version = phoenix_version(url, timeout=timeout)
    if version is not None:
        return OtlpTarget(f"{url}/v1/traces", f"Phoenix {version} answers at {url}", exporter,
                          version)
    return OtlpTarget(None, f"no OTLP endpoint set and no Phoenix answers at {url}", exporter)


_FOLLOWING: set[str] = set()  # endpoints that every later span goes to as well


def send_spans(spans: Sequence[ReadableSpan], target: OtlpTarget | None = None, *,
               follow: bool = True,
               exporter_factory: Callable[[str], Any] | None = None) -> OtlpTarget:
    """Export ``spans`` to ``target`` (default :func:`otlp_target`) with the SDK's OTLP/HTTP
    exporter, and with ``follow``, once that export succeeded, send every later span there too
    (:func:`add_span_processor` with a ``BatchSpanProcessor``, once per endpoint). With no
    endpoint, or without the exporter's package, nothing is imported or sent: the target comes
    back with ``sent=0`` and its :meth:`OtlpTarget.advice`. ``exporter_factory(endpoint)``
    replaces the OTLP exporter (a test's fake)."""
    target = target or otlp_target()
    if not target.ready or not spans:
        return target
    assert target.endpoint is not None
    if exporter_factory is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        def exporter_factory(endpoint: str) -> Any:
            return OTLPSpanExporter(endpoint=endpoint, timeout=5)

    result = exporter_factory(target.endpoint).export(list(spans))
    outcome = str(getattr(result, "name", result))
    if follow and outcome == "SUCCESS" and target.endpoint not in _FOLLOWING:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        _FOLLOWING.add(target.endpoint)
        add_span_processor(BatchSpanProcessor(exporter_factory(target.endpoint)))
    return dataclasses.replace(target, sent=len(spans), outcome=outcome)
