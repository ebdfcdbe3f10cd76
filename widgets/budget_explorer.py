"""The budgets widget: move the stop rules of a run and see where it would have stopped, and why.

Sliders for max steps, a token budget and a cost budget (0 switches a budget off) and a repeat
detection switch. Every change re-runs the same run through :func:`course.loop.agent_loop.run_loop` with
the new :class:`~course.loop.agent_loop.StopRules`: the loop computes the stop, the widget only renders the
:class:`~course.loop.agent_loop.LoopRun` (steps, tokens spent so far, the stop step and its reason).

The run is whatever ``run_with`` does with a ``StopRules``: a scripted model through the loop, or a
recorded run replayed with :func:`course.loop.scenarios.replay_recorded_run`. It must be cheap (no
generation), because it runs on every slider move. The widget is an ``ipywidgets.VBox`` (make it
the cell's last expression) and shows the run's own ``_repr_html_``: the table, the stop and the
token unit are the record's, not the widget's.

Works without a browser: set ``widget.max_steps.value = 3`` and read ``widget.run`` or
``widget.text()``; that is how the tests drive it. Not handled: live model runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as w

from course.loop.agent_loop import LoopRun, StopRules
from widgets import Displayed

__all__ = ["BudgetExplorer"]


class BudgetExplorer(Displayed, w.VBox):
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
        **kwargs: Any,
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
        super().__init__([*self.controls, self.view], **kwargs)
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
        self.view.value = self.run._repr_html_() + prices
        return self.run

    def text(self) -> str:
        """What the widget says, as plain text (the stop line and the steps)."""
        return str(self.run)
