"""The budgets widget: move the stop rules of a run and see where it would have stopped, and why.

Sliders for max steps, a token budget and a cost budget (0 switches a budget off) and a repeat
detection switch. Every change re-runs the same run through :func:`course.loop.agent_loop.run_loop` with
the new :class:`~course.loop.agent_loop.StopRules`: the loop computes the stop, the widget only renders the
:class:`~course.loop.agent_loop.LoopRun` (steps, tokens spent so far, the stop step and its reason).

The run is whatever ``run_with`` does with a ``StopRules``: a scripted model through the loop, or a
recorded run replayed with :func:`course.loop.budgets.replay_recorded_run`. It must be cheap (no
generation), because it runs on every slider move.

Works without a browser: set ``widget.max_steps.value = 3`` and read ``widget.run`` or
``widget.text()``; that is how the tests drive it. Not handled: live model runs.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as w

from course.loop.agent_loop import LoopRun, StopRules


class BudgetsWidget:
    """Sliders for the stop rules of a run; shows where the run stops, why, and the tokens."""

    def __init__(
        self,
        run_with: Callable[[StopRules], LoopRun],
        max_steps: int = 10,
        token_budget: int = 0,
        cost_budget: float = 0.0,
        repeat_detection: bool = True,
        price_per_input_token: float = 3e-6,
        price_per_output_token: float = 1.5e-5,
        steps_range: int = 15,
        token_range: int = 20_000,
        cost_range: float = 0.1,
    ) -> None:
        if not callable(run_with):
            raise TypeError("run_with must be a function StopRules -> LoopRun, e.g. "
                            "lambda limits: run_loop(task, model, tools, limits).")
        self.run_with = run_with
        self.prices = (price_per_input_token, price_per_output_token)
        style = {"description_width": "150px"}
        layout = w.Layout(width="480px")
        self.max_steps = w.IntSlider(max_steps, 1, steps_range, description="max steps",
                                     style=style, layout=layout)
        self.token_budget = w.IntSlider(token_budget, 0, token_range, step=100,
                                        description="token budget (0=off)", style=style,
                                        layout=layout)
        self.cost_budget = w.FloatSlider(cost_budget, min=0.0, max=cost_range, step=cost_range / 200,
                                         readout_format=".4f", description="cost budget (0=off)",
                                         style=style, layout=layout)
        self.repeat_detection = w.Checkbox(repeat_detection, description="repeat detection")
        self.view = w.HTML()
        for control in self.controls:
            control.observe(self._changed, names="value")
        self.run: LoopRun = self.update()

    @property
    def controls(self) -> tuple[w.ValueWidget, ...]:
        return (self.max_steps, self.token_budget, self.cost_budget, self.repeat_detection)

    def limits(self) -> StopRules:
        """The limits the controls describe now."""
        return StopRules(
            max_steps=int(self.max_steps.value),
            token_budget=int(self.token_budget.value) or None,
            cost_budget=float(self.cost_budget.value) or None,
            price_per_input_token=self.prices[0],
            price_per_output_token=self.prices[1],
            repeat_detection=bool(self.repeat_detection.value),
        )

    def _changed(self, change: dict) -> None:
        self.update()

    def update(self) -> LoopRun:
        """Re-run with the current limits and redraw."""
        self.run = self.run_with(self.limits())
        prices = (f"<p><small>prices: {self.prices[0]:g} per input token, {self.prices[1]:g} per "
                  "output token</small></p>")
        self.view.value = render_run(self.run) + prices
        return self.run

    def text(self) -> str:
        """What the widget says, as plain text (the stop line and the steps)."""
        return str(self.run)

    @property
    def box(self) -> w.VBox:
        return w.VBox([*self.controls, self.view])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)


def render_run(run: LoopRun) -> str:
    """HTML: one row per step, the stop step highlighted, then the reason and the tokens."""
    rows = []
    for step in run.steps:
        last = step.number == len(run.steps)
        what = (f"final answer: {step.final_answer}" if step.final_answer is not None
                else str(step.call) if step.call else step.note)
        observed = step.observation if step.executed else ("not executed" if step.call else "")
        style = ' style="background:#fde2e1;font-weight:bold"' if last else ""
        rows.append(
            f"<tr{style}><td>{step.number}</td><td><code>{html.escape(what)}</code></td>"
            f"<td>{html.escape(_short(observed or '', 70))}</td><td>{step.input_tokens}</td>"
            f"<td>{step.output_tokens}</td><td>{step.total_tokens}</td>"
            f"<td>{step.total_cost:.4f}</td></tr>")
    head = ("<tr><th>step</th><th>action</th><th>observation</th><th>in</th><th>out</th>"
            "<th>tokens so far</th><th>cost so far</th></tr>")
    return (f"<div><i>{html.escape(run.model_name)}</i><table>{head}{''.join(rows)}</table>"
            f"<p><b>stops at step {len(run.steps)}: {run.stop_reason}</b> "
            f"({html.escape(run.stop_detail)}); tokens spent {run.total_tokens}, "
            f"cost {run.total_cost:.4f}</p></div>")


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."
