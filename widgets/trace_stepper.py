"""A widget to step through an agent trace: code, observation, tokens and flags, one step at a time.

``TraceStepper(trace)`` is an ``ipywidgets.VBox``: make it the cell's last expression. It takes a
run's OpenTelemetry spans (:class:`course.tools.spans.Spans`), the
:class:`~course.agents.traces.Run` read from them (a replay's, a live run's, a recording's), or
the path of a run saved as OTLP JSON; spans and files are read with
:func:`course.agents.traces.run_from_spans`, the one reading of a trace. Previous/next buttons and a slider choose the step; the view shows the step's thought, its
code highlighted with pygments, the observation or error, the step's token figures with their
labels (and the prompt sizes measured here), and the trajectory flags that concern the step.
Under it, the run's own plot (:meth:`Run.plot <course.agents.traces.Run.plot>`).

The widget only wires controls to the record: every number comes from the ``Run``
(``cumulative_input_tokens``, ``cumulative_measured_input_tokens``, ``provenance``), and the
view is plain methods (:meth:`TraceStepper.step_html`, :meth:`TraceStepper.step_text`) so it
can be tested without a browser. A trace that is malformed, truncated or empty raises
:class:`~course.agents.traces.TraceError` naming the problem before any control is built.

Not handled: image observations (shown as their text), editing a trace, live updates while a run
is going.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import ipywidgets as w

from course.agents.evaluation import check_trajectory
from course.agents.traces import Run, TraceError, load_run, run_from_spans
from course.drawing import figure_png
from course.tools.spans import Spans
from widgets import Displayed

__all__ = ["TraceStepper", "highlight_code"]


def _validated(trace: Run | Spans | str | Path) -> Run:
    if isinstance(trace, (str, Path)):
        run = load_run(trace)
        where = Path(trace).name
    elif isinstance(trace, Spans):
        run = run_from_spans(trace)
        where = run.title or "trace"
    elif isinstance(trace, Run):
        run = trace
        where = trace.title or "trace"
    else:
        raise TraceError(f"TraceStepper needs a run's spans (course.tools.spans.Spans), a "
                         f"course.agents.traces.Run or a path to a saved run, got "
                         f"{type(trace).__name__}.")
    if not run.steps:
        raise TraceError(f"{where}: field 'steps' is empty: there is nothing to step through. "
                         "Fix: pass a trace with at least one step.")
    return run


def highlight_code(code: str) -> str:
    """Python ``code`` as HTML with inline colours (works without a stylesheet)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code or "# (no code in this step)", PythonLexer(),
                     HtmlFormatter(noclasses=True, style="default", nowrap=False))


def _f(value: Any) -> str:
    return "-" if value is None else str(value)


class TraceStepper(Displayed, w.VBox):
    """Previous/next/slider over the steps of a trace; works for any trace, recorded or live."""

    def __init__(self, trace: Run | Spans | str | Path, flags: list | None = None,
                 plot: bool = True, **kwargs: Any):
        run = _validated(trace)
        self.run = run
        self.flags = list(check_trajectory(run) if flags is None else flags)
        self.n_steps = len(run.steps)
        self._step = 1
        self.previous_button = w.Button(description="◀ previous", layout=w.Layout(width="110px"))
        self.next_button = w.Button(description="next ▶", layout=w.Layout(width="110px"))
        self.slider = w.IntSlider(value=1, min=1, max=self.n_steps, step=1, description="step",
                                  continuous_update=False)
        self.view = w.HTML()
        esc = html.escape
        self.header = w.HTML(
            f"<b>{esc(run.title or 'trace')}</b> <i>[{esc(run.source)}]</i> &mdash; "
            f"{esc(run.model_id)}<br><small>{esc(run.provenance)}</small><br>task: {esc(run.task)}")
        self.plot_view = w.HTML()
        if plot:
            png = base64.b64encode(self.plot_png()).decode("ascii")
            self.plot_view.value = f"<img src='data:image/png;base64,{png}'/>"
        self.previous_button.on_click(lambda _: self.previous())
        self.next_button.on_click(lambda _: self.next())
        self.slider.observe(self._on_slider, names="value")
        super().__init__([self.header, w.HBox([self.previous_button, self.slider,
                                               self.next_button]), self.view, self.plot_view],
                         **kwargs)
        self._refresh()

    # ----- navigation -----
    @property
    def step_number(self) -> int:
        """The step shown now (1-based)."""
        return self._step

    def go(self, number: int) -> None:
        """Show step ``number`` (clamped to 1..number of steps)."""
        self._step = max(1, min(self.n_steps, int(number)))
        if self.slider.value != self._step:
            self.slider.value = self._step  # the observer calls _refresh
        else:
            self._refresh()

    def next(self) -> None:
        """Show the next step (stays on the last one)."""
        self.go(self._step + 1)

    def previous(self) -> None:
        """Show the previous step (stays on the first one)."""
        self.go(self._step - 1)

    # ----- what is shown -----
    def flags_for(self, number: int) -> list:
        """Flags about step ``number``, plus flags about the whole run (shown on every step)."""
        return [f for f in self.flags if f.step in (None, number)]

    def token_line(self, number: int | None = None) -> str:
        """Tokens of a step and the running total, each figure with its label."""
        i = (number or self._step) - 1
        step = self.run.steps[i]
        line = (f"{step.figures}: input {_f(step.input_tokens)}, output {_f(step.output_tokens)}, "
                f"cumulative input {_f(self.run.cumulative_input_tokens[i])}")
        if step.measured_input_tokens is not None:
            line += (f" | measured here ({self.run.measured_with or 'local tokenizer'}): prompt "
                     f"{_f(step.measured_input_tokens)}, output {_f(step.measured_output_tokens)}, "
                     f"cumulative {_f(self.run.cumulative_measured_input_tokens[i])}")
        if step.qwen_input_tokens is not None:
            line += f" | measured, Qwen3 tokenizer: prompt {step.qwen_input_tokens}"
        return line

    def step_text(self, number: int | None = None) -> str:
        """The view of a step as plain text (what the widget shows, without colours)."""
        number = number or self._step
        step = self.run.steps[number - 1]
        lines = [f"step {number} of {self.n_steps} [code: {self.run.source}; figures: "
                 f"{step.figures}]", f"thought: {step.thought}", "code:", step.code or "(none)",
                 "observation:", step.observation or "(none)"]
        if step.error:
            lines += ["error:", step.error]
        lines.append("tokens: " + self.token_line(number))
        flags = self.flags_for(number)
        lines.append("flags: " + ("; ".join(str(f) for f in flags) if flags else "none"))
        return "\n".join(lines)

    def step_html(self, number: int | None = None) -> str:
        """The view of a step as HTML: thought, highlighted code, observation, tokens, flags."""
        number = number or self._step
        step = self.run.steps[number - 1]
        esc = html.escape
        pre = ("style='white-space:pre-wrap;background:#f6f6f6;padding:6px;max-height:16em;"
               "overflow:auto'")
        parts = [
            f"<b>Step {number} of {self.n_steps}</b> <i>[code: {esc(self.run.source)}; figures: "
            f"{esc(step.figures)}]</i>{' &mdash; final answer' if step.is_final_answer else ''}",
            f"<div><b>Thought:</b> {esc(step.thought) or '-'}</div>",
            "<div><b>Code</b></div>" + highlight_code(step.code),
            f"<div><b>Observation</b></div><pre {pre}>{esc(step.observation) or '(none)'}</pre>",
        ]
        if step.error:
            parts.append(f"<div style='color:#b00'><b>Error:</b> <pre {pre}>{esc(step.error)}"
                         "</pre></div>")
        parts.append(f"<div><b>Tokens</b> &mdash; {esc(self.token_line(number))}</div>")
        flags = self.flags_for(number)
        flag_html = "".join(f"<li style='color:#b00'>{esc(str(f))}</li>" for f in flags)
        parts.append("<div><b>Flags</b>: " + (f"<ul>{flag_html}</ul>" if flags else "none")
                     + "</div>")
        return "\n".join(parts)

    def plot_png(self) -> bytes:
        """The run's prompt-tokens-per-step plot as PNG bytes."""
        return figure_png(self.run.plot())

    # ----- wiring -----
    def _on_slider(self, change: dict) -> None:
        self._step = int(change["new"])
        self._refresh()

    def _refresh(self) -> None:
        self.view.value = self.step_html(self._step)
        self.previous_button.disabled = self._step <= 1
        self.next_button.disabled = self._step >= self.n_steps

    def display_text(self) -> str:
        """What a front end without widgets shows: the current step as text."""
        return self.step_text()

    def __repr__(self) -> str:
        return f"TraceStepper({self.run.title!r}, step {self._step} of {self.n_steps})"
