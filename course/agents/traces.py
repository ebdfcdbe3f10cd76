"""Traces of agent runs: what the model wrote, what ran, what came back, and what it cost.

A :class:`Run` is a task, the model that worked on it, the tools it had, and its
:class:`TraceStep` records. A step holds the model's output (its thought and its code), the tool
calls the code makes, the observation the runtime appended, the error if any, and token figures.
Traces are saved as JSON and loaded back with checks that name the file and the field; the file
format is the dataclasses' own fields (:func:`file_fields`), for the writer and the reader alike.

Provenance is kept per part, because the parts of one trace often come from different places:
``Run.source`` says who wrote the model outputs (``measured``: a model ran here; ``reconstructed``:
the course wrote them from a description, ``Run.source_detail`` says which; ``scripted``), and
each step's ``figures`` says where its token figures come from (``recorded``: published by the
source; ``derived``: computed from recorded figures; ``measured``; ``scripted``).
``Run.provenance`` puts both into one sentence. Prompt sizes that a replay measures here are kept
apart, with the tokenizer that counted them (``measured_input_tokens`` with the active model's
tokenizer, ``qwen_input_tokens`` with the Qwen tokenizer).

Not handled here: running agents (:mod:`course.agents.replay`), judging trajectories
(:mod:`course.agents.evaluation`), images (an image observation is kept as its text summary).
"""

from __future__ import annotations

import ast
import html
import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from course.drawing import safe_text
from course.tools.calls import ToolCall

__all__ = ["RECORDINGS_DIR", "Run", "TraceError", "TraceStep", "content_text", "file_fields",
           "load_run", "prompt_tokens_figure", "run_from_json", "run_from_smolagents", "save_run",
           "split_thought_and_code", "tool_calls_in_code"]

FIGURE_LABELS = ("measured", "recorded", "derived", "reconstructed", "scripted")
"""Where a step's token figures come from (the course's provenance words)."""
OUTPUT_LABELS = ("measured", "reconstructed", "scripted")
"""Who wrote a run's model outputs: a model here, the course from a description, or a script."""
TRACE_FORMAT_VERSION = 2


RECORDINGS_DIR = Path(__file__).resolve().parents[1] / "data" / "recordings"
"""The traces shipped with the package (the note runs, the 72B references, the ideal run)."""


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

    # ----- JSON -----
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the file format of :func:`save_run`)."""
        data = asdict(self)
        data["format_version"] = TRACE_FORMAT_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> Run:
        """Build a Run from :meth:`to_dict` output; raise :class:`TraceError` naming a bad field."""
        return _run_from_dict(data, where)


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


# ----- validation -----
def _json_types(hint: Any) -> tuple[type, ...]:
    """The JSON value types a field of type ``hint`` accepts (``float`` takes an integer too)."""
    if get_origin(hint) in (Union, UnionType):
        return tuple(t for part in get_args(hint) for t in _json_types(part))
    hint = get_origin(hint) or hint
    return (int, float) if hint is float else (hint,)


@cache
def file_fields(record: type) -> dict[str, tuple[tuple[type, ...], bool]]:
    """The file format of a trace record, read off its dataclass: ``name -> (types, required)``.

    The writer (:meth:`Run.to_dict`, ``dataclasses.asdict``) and the reader
    (:func:`run_from_json`) both go by the dataclass fields, so the format is defined once. A
    field is required when it has no default, or when its metadata says ``required`` (a run's
    ``steps``).
    """
    hints = get_type_hints(record)
    return {f.name: (_json_types(hints[f.name]), f.metadata.get("required", False) or (
        f.default is MISSING and f.default_factory is MISSING)) for f in fields(record)}


def _type_name(types: tuple[type, ...]) -> str:
    names = {"str": "a string", "int": "an integer", "list": "a list", "dict": "an object",
             "float": "a number", "bool": "true/false", "NoneType": "null"}
    return " or ".join(names.get(t.__name__, t.__name__) for t in types)


def _check_fields(data: Any, spec: dict[str, tuple[tuple[type, ...], bool]], path: str,
                  where: str) -> None:
    prefix = f"{where}: " if where else ""
    if not isinstance(data, dict):
        raise TraceError(f"{prefix}{path or 'the trace'} must be a JSON object, got "
                         f"{type(data).__name__}. Fix: save it with course.agents.traces.save_run().")
    for name, (types, required) in spec.items():
        key = f"{path}.{name}" if path else name
        if name not in data:
            if required:
                raise TraceError(f"{prefix}field '{key}' is missing. Fix: add it (the trace may "
                                 "be truncated; re-save it with course.agents.traces.save_run()).")
            continue
        value = data[name]
        bad = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        if bad:
            raise TraceError(f"{prefix}field '{key}' must be {_type_name(types)}, got "
                             f"{type(value).__name__} {value!r:.60}. Fix: correct that field.")
    unknown = set(data) - set(spec) - {"format_version"}
    if unknown:
        raise TraceError(f"{prefix}unknown field(s) {sorted(unknown)} in {path or 'the trace'}. "
                         "Fix: remove them or check the spelling.")


def _run_from_dict(data: Any, where: str = "") -> Run:
    prefix = f"{where}: " if where else ""
    _check_fields(data, file_fields(Run), "", where)
    steps: list[TraceStep] = []
    for i, raw in enumerate(data["steps"]):
        path = f"steps[{i}]"
        _check_fields(raw, file_fields(TraceStep), path, where)
        calls = []
        for j, call in enumerate(raw.get("tool_calls", [])):
            cpath = f"{path}.tool_calls[{j}]"
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise TraceError(f"{prefix}field '{cpath}.name' must be a string. Fix: each tool "
                                 "call is {\"name\": ..., \"arguments\": {...}}.")
            if not isinstance(call.get("arguments", {}), dict):
                raise TraceError(f"{prefix}field '{cpath}.arguments' must be an object.")
            calls.append(ToolCall(call["name"], dict(call.get("arguments", {}))))
        figures = raw.get("figures", "measured")
        if figures not in FIGURE_LABELS:
            raise TraceError(f"{prefix}field '{path}.figures' is {figures!r}; it must be one of "
                             f"{list(FIGURE_LABELS)}.")
        for name in ("input_tokens", "output_tokens", "measured_input_tokens",
                     "measured_output_tokens", "qwen_input_tokens"):
            if raw.get(name) is not None and raw[name] < 0:
                raise TraceError(f"{prefix}field '{path}.{name}' is negative ({raw[name]}).")
        if raw["number"] != i + 1:
            raise TraceError(f"{prefix}field '{path}.number' is {raw['number']}, expected {i + 1}: "
                             "steps are numbered 1, 2, 3... in order. Fix: renumber them.")
        kwargs = {k: v for k, v in raw.items() if k != "tool_calls"}
        steps.append(TraceStep(tool_calls=calls, **kwargs))
    source = data.get("source", "measured")
    if source not in OUTPUT_LABELS:
        raise TraceError(f"{prefix}field 'source' is {source!r}; it must be one of "
                         f"{list(OUTPUT_LABELS)} (who wrote the model outputs).")
    if not all(isinstance(t, str) for t in data.get("tools", [])):
        raise TraceError(f"{prefix}field 'tools' must be a list of tool names (strings).")
    kwargs = {k: v for k, v in data.items() if k not in ("steps", "format_version")}
    return Run(steps=steps, **kwargs)


def save_run(run: Run, path: str | Path) -> Path:
    """Write ``run`` as indented JSON (UTF-8) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def run_from_json(text: str, where: str = "") -> Run:
    """Parse a trace from JSON text; a syntax error or a bad field raises :class:`TraceError`."""
    prefix = f"{where}: " if where else ""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceError(f"{prefix}not valid JSON ({err.msg} at line {err.lineno}, column "
                         f"{err.colno}); the file may be truncated. Fix: re-save the trace with "
                         "course.agents.traces.save_run().") from err
    except RecursionError as err:
        raise TraceError(f"{prefix}the JSON is nested too deeply to be a trace (a trace is at "
                         "most 4 levels deep). Fix: re-save the trace with "
                         "course.agents.traces.save_run().") from err
    except ValueError as err:  # e.g. an integer with more digits than Python converts
        raise TraceError(f"{prefix}the JSON holds a value that cannot be read ({err}). Fix: "
                         "correct that value or re-save the trace.") from err
    return _run_from_dict(data, where)


def load_run(path: str | Path) -> Run:
    """Read a trace saved by :func:`save_run`; errors name the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file. Fix: check the path "
                         f"({RECORDINGS_DIR} holds the shipped ones).")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise TraceError(f"{path.name}: not UTF-8 text (byte {err.object[err.start]:#04x} at "
                         f"offset {err.start}). Fix: save traces with "
                         "course.agents.traces.save_run(), which writes UTF-8.") from err
    return run_from_json(text, where=str(path.name))


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


def run_from_smolagents(agent: Any, task: str | None = None, figures: str = "measured",
                        model_id: str | None = None, title: str = "",
                        source: str = "measured") -> Run:
    """Convert a smolagents agent's memory (``agent.memory.steps``) into a :class:`Run`.

    Token figures come from each step's ``token_usage`` (what the model object reported);
    ``figures`` labels them and ``source`` labels the model outputs. Tool calls are read from each
    step's code (a ``CodeAgent``) or are the step's native tool calls (a ``ToolCallingAgent``);
    planning steps are skipped. Works after ``agent.run(...)`` for a live model or a replay.
    """
    from smolagents.memory import ActionStep, TaskStep

    if figures not in FIGURE_LABELS:
        raise TraceError(f"figures={figures!r}: must be one of {list(FIGURE_LABELS)}.")
    if source not in OUTPUT_LABELS:
        raise TraceError(f"source={source!r}: must be one of {list(OUTPUT_LABELS)}.")
    tool_names = [name for name in getattr(agent, "tools", {}) if name != "final_answer"]
    all_tools = [*tool_names, "final_answer"]
    steps: list[TraceStep] = []
    found_task = task
    final_answer = None
    for memory_step in agent.memory.steps:
        if isinstance(memory_step, TaskStep) and found_task is None:
            found_task = memory_step.task
        if not isinstance(memory_step, ActionStep):
            continue
        output = memory_step.model_output if isinstance(memory_step.model_output, str) else content_text(
            memory_step.model_output)
        thought, code = split_thought_and_code(output or "")
        code = memory_step.code_action or code
        usage = memory_step.token_usage
        timing = memory_step.timing
        duration = getattr(timing, "duration", None) if timing is not None else None
        error = None
        if memory_step.error is not None:
            error = f"{type(memory_step.error).__name__}: {memory_step.error.message}" if hasattr(
                memory_step.error, "message") else str(memory_step.error)
        if memory_step.is_final_answer:
            final_answer = _describe_output(memory_step.action_output)
        calls = tool_calls_in_code(code or "", all_tools)
        if not code and memory_step.tool_calls:  # a ToolCallingAgent: its native tool calls
            calls = [ToolCall(c.name, dict(c.arguments) if isinstance(c.arguments, dict)
                              else {"_0": c.arguments}) for c in memory_step.tool_calls]
        steps.append(TraceStep(
            number=len(steps) + 1,
            thought=thought,
            code=code or "",
            tool_calls=calls,
            observation=memory_step.observations or "",
            error=error,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            duration_s=round(duration, 3) if duration is not None else None,
            figures=figures,
            model_output=output or "",
            is_final_answer=bool(memory_step.is_final_answer),
        ))
    model = getattr(agent, "model", None)
    return Run(
        task=found_task or "",
        model_id=model_id or str(getattr(model, "model_id", None) or type(model).__name__),
        steps=steps,
        tools=tool_names,
        final_answer=final_answer,
        source=source,
        title=title,
    )


def _describe_output(value: Any) -> str | None:
    """A final answer as text; an image becomes a short description naming its size."""
    if value is None:
        return None
    try:
        from PIL import Image

        image = value if isinstance(value, Image.Image) else getattr(value, "_raw", None)
        if isinstance(image, Image.Image) or type(value).__name__ == "AgentImage":
            raw = value.to_raw() if hasattr(value, "to_raw") else image
            size = getattr(raw, "size", None)
            path = getattr(value, "_path", None)
            return f"<image {size[0]}x{size[1]}{' ' + str(path) if path else ''}>" if size else "<image>"
    except ImportError:  # pragma: no cover - pillow comes with smolagents
        pass
    return str(value)


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
