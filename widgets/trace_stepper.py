"""A widget to step through an agent trace: code, observation, tokens and flags, one step at a time.

``TraceStepper(trace)`` takes a :class:`~course.agents.traces.Run` (recorded, replayed or live) or the
path of a saved trace. Previous/next buttons and a slider (range 1..number of steps) choose the
step; the view shows the step's thought, its code highlighted with pygments, the observation or
error, the step's input/output tokens and the cumulative input total (recorded and measured
side by side when the trace has both), and the trajectory flags that concern the step. Under
it, a matplotlib plot of prompt tokens per step.

The view is computed by plain methods (:meth:`TraceStepper.step_html`,
:meth:`TraceStepper.step_text`), so it can be tested without a browser; the widget only renders
them. A trace that is malformed or truncated raises :class:`~course.agents.traces.TraceError` naming the
field before any widget is built.

Not handled: image observations (shown as their text), editing a trace, live updates while a run
is going.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from course.agents.traces import Run, TraceError, load_run


def _validated(trace: Run | str | Path) -> Run:
    if isinstance(trace, (str, Path)):
        return load_run(trace)
    if not isinstance(trace, Run):
        raise TraceError(f"TraceStepper needs a course.agents.traces.Run or a path to a saved trace, got "
                         f"{type(trace).__name__}.")
    run = Run.from_dict(trace.to_dict(), where=trace.title or "trace")  # same checks as a file
    if not run.steps:
        raise TraceError(f"{trace.title or 'trace'}: field 'steps' is empty: there is nothing to "
                         "step through.")
    return trace


def highlight_code(code: str) -> str:
    """Python ``code`` as HTML with inline colours (works without a stylesheet)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code or "# (no code in this step)", PythonLexer(),
                     HtmlFormatter(noclasses=True, style="default", nowrap=False))


def prompt_tokens_figure(runs: list[Run], ax: Any = None, title: str = "Prompt tokens per step"):
    """A matplotlib figure: input (prompt) tokens per step of each run, recorded and measured."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
    else:
        fig = ax.figure
    for run in runs:
        steps = [s.number for s in run.steps]
        recorded = [s.input_tokens for s in run.steps]
        measured = [s.measured_input_tokens for s in run.steps]
        label = run.title or run.task[:30]
        if any(v is not None for v in recorded):
            line, = ax.plot(steps, [v if v is not None else float("nan") for v in recorded], "o-",
                            label=f"{label}: {run.source}")
            color = line.get_color()
        else:
            color = None
        if any(v is not None for v in measured):
            ax.plot(steps, [v if v is not None else float("nan") for v in measured], "s--",
                    color=color, label=f"{label}: measured here")
    ax.set_xlabel("step")
    ax.set_ylabel("prompt tokens")
    ax.set_title(title)
    ax.set_xticks(sorted({s.number for run in runs for s in run.steps}))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def figure_png(fig: Any, dpi: int = 80) -> bytes:
    """A matplotlib figure as PNG bytes, closed afterwards (shows the same under any backend)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


class TraceStepper:
    """Previous/next/slider over the steps of a trace; works for any trace, recorded or live."""

    def __init__(self, trace: Run | str | Path, flags: list | None = None, plot: bool = True):
        self.run = _validated(trace)
        if flags is None:
            from course.agents.evaluation import check_trajectory

            flags = check_trajectory(self.run)
        self.flags = list(flags)
        self.n_steps = len(self.run.steps)
        self._step = 1
        self._plot = plot
        self._widget: Any = None
        self._build()

    # ----- navigation (pure Python) -----
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

    def _tokens(self, number: int) -> dict[str, Any]:
        i = number - 1
        step = self.run.steps[i]
        cumulative = self.run.cumulative_input_tokens[i]
        measured = [s.measured_input_tokens for s in self.run.steps[: i + 1]]
        cum_measured = None if None in measured else sum(measured)  # type: ignore[arg-type]
        return {"input": step.input_tokens, "output": step.output_tokens,
                "cumulative": cumulative, "label": step.figures,
                "measured_input": step.measured_input_tokens,
                "measured_output": step.measured_output_tokens,
                "measured_cumulative": cum_measured if measured else None}

    def token_line(self, number: int | None = None) -> str:
        """Tokens of a step and the running total, recorded and measured side by side."""
        t = self._tokens(number or self._step)

        def f(v: Any) -> str:
            return "-" if v is None else str(v)

        line = (f"{t['label']}: input {f(t['input'])}, output {f(t['output'])}, "
                f"cumulative input {f(t['cumulative'])}")
        if t["measured_input"] is not None:
            line += (f" | measured here: prompt {f(t['measured_input'])}, output "
                     f"{f(t['measured_output'])}, cumulative {f(t['measured_cumulative'])}")
        return line

    def step_text(self, number: int | None = None) -> str:
        """The view of a step as plain text (what the widget shows, without colours)."""
        number = number or self._step
        step = self.run.steps[number - 1]
        lines = [f"step {number} of {self.n_steps} [{step.figures}]",
                 f"thought: {step.thought}", "code:", step.code or "(none)",
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
        pre = "style='white-space:pre-wrap;background:#f6f6f6;padding:6px;max-height:16em;overflow:auto'"
        parts = [
            f"<b>Step {number} of {self.n_steps}</b> <i>[{esc(step.figures)}]</i>"
            f"{' &mdash; final answer' if step.is_final_answer else ''}",
            f"<div><b>Thought:</b> {esc(step.thought) or '-'}</div>",
            "<div><b>Code</b></div>" + highlight_code(step.code),
            f"<div><b>Observation</b></div><pre {pre}>{esc(step.observation) or '(none)'}</pre>",
        ]
        if step.error:
            parts.append(f"<div style='color:#b00'><b>Error:</b> <pre {pre}>{esc(step.error)}</pre></div>")
        parts.append(f"<div><b>Tokens</b> &mdash; {esc(self.token_line(number))}</div>")
        flags = self.flags_for(number)
        flag_html = "".join(f"<li style='color:#b00'>{esc(str(f))}</li>" for f in flags)
        parts.append("<div><b>Flags</b>: " + (f"<ul>{flag_html}</ul>" if flags else "none") + "</div>")
        return "\n".join(parts)

    def plot_png(self) -> bytes:
        """The prompt-tokens-per-step plot of this trace as PNG bytes."""
        fig = prompt_tokens_figure([self.run], title=f"Prompt tokens per step: {self.run.title}")
        return figure_png(fig)

    # ----- the widget -----
    def _build(self) -> None:
        import ipywidgets as w

        self.previous_button = w.Button(description="◀ previous", layout=w.Layout(width="110px"))
        self.next_button = w.Button(description="next ▶", layout=w.Layout(width="110px"))
        self.slider = w.IntSlider(value=1, min=1, max=self.n_steps, step=1, description="step",
                                  continuous_update=False)
        self.view = w.HTML()
        header = (f"<b>{html.escape(self.run.title or 'trace')}</b> <i>[{html.escape(self.run.source)}]"
                  f"</i> &mdash; {html.escape(self.run.model_id)}<br>task: {html.escape(self.run.task)}")
        self.header = w.HTML(header)
        self.plot_view = w.HTML()
        if self._plot:
            png = base64.b64encode(self.plot_png()).decode("ascii")
            self.plot_view.value = f"<img src='data:image/png;base64,{png}'/>"
        self.previous_button.on_click(lambda _: self.previous())
        self.next_button.on_click(lambda _: self.next())
        self.slider.observe(self._on_slider, names="value")
        self._widget = w.VBox([self.header, w.HBox([self.previous_button, self.slider,
                                                    self.next_button]), self.view, self.plot_view])
        self._refresh()

    def _on_slider(self, change: dict) -> None:
        self._step = int(change["new"])
        self._refresh()

    def _refresh(self) -> None:
        self.view.value = self.step_html(self._step)
        self.previous_button.disabled = self._step <= 1
        self.next_button.disabled = self._step >= self.n_steps

    @property
    def widget(self):
        """The ipywidgets VBox to display."""
        return self._widget

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = self._widget._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            bundle["text/plain"] = self.step_text()
        return bundle

    def __repr__(self) -> str:
        return f"TraceStepper({self.run.title!r}, step {self._step} of {self.n_steps})"
