"""The trimming explorer: move a token budget and the trimming options, see what is kept and why.

A view: the widget is an ``ipywidgets.VBox`` (make it the cell's last expression to show it).
Controls: the message list (the worked example, the original 11 messages, or your own lines
``role: text``), a budget slider, strategy (last/first), include_system, start_on (human or
none) and the counter (toy / GPT-2 fallback / the model's tokenizer). Every change calls
:func:`course.trimming.rules.trim_and_explain`; the :class:`~course.trimming.rules.TrimReport`
it returns renders itself (each message kept or dropped with its reason, and the total).

With strategy ``first``, ``trim_messages`` refuses include_system and start_on, so those two
controls are switched off (and disabled) while it is selected. Any error (a bad line typed, a
model setting that cannot be used, a tokenizer that cannot be loaded offline) is shown in the
widget in place of the table, never left behind a stale one.

Works without a browser: set ``explorer.budget.value = 40`` and read ``explorer.report`` or
``explorer.text()``; that is how the tests drive it. Not handled: allow_partial (rule 3),
end_on, tool messages.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w
from langchain_core.messages import BaseMessage

from course.trimming.counters import Gpt2FallbackCounter, ModelTokenCounter, worked_example_counter
from course.trimming.examples import (
    WORKED_BUDGET,
    eleven_messages,
    parse_conversation,
    worked_example_messages,
)
from course.trimming.rules import TrimReport, refused_options, trim_and_explain
from widgets import Displayed

__all__ = ["GPT2", "MODEL", "OWN", "TOY", "TrimExplorer", "default_counters"]

OWN = "your own (type below)"
TOY, GPT2, MODEL = "toy", "GPT-2 fallback", "model tokenizer"
EXAMPLE_TEXT = "system: You are a helpful assistant.\nuser: Hi! I'm Bob.\nassistant: Hi Bob!\n" \
               "user: What's my name?"


def default_counters() -> dict[str, Callable[[], Any]]:
    """Counter factories, built on first use: toy, LangChain's GPT-2 fallback, the model's."""
    return {TOY: worked_example_counter, GPT2: Gpt2FallbackCounter, MODEL: ModelTokenCounter}


class TrimExplorer(Displayed, w.VBox):
    """Controls for ``trim_messages`` above the self-rendering table of kept/dropped messages."""

    def __init__(
        self,
        examples: Mapping[str, list[BaseMessage]] | None = None,
        counters: Mapping[str, Callable[[], Any]] | None = None,
        budget: int = WORKED_BUDGET,
        max_budget: int = 150,
        strategy: str = "last",
        include_system: bool = True,
        start_on: str | None = "human",
        counter: str = TOY,
    ) -> None:
        examples = dict(examples) if examples is not None else {
            "worked example (note)": worked_example_messages(),
            "11 messages (original notebook)": eleven_messages(),
        }
        if not examples:
            raise ValueError("examples is empty: give at least one named message list")
        factories = dict(counters) if counters is not None else default_counters()
        if counter not in factories:
            raise ValueError(f"counter {counter!r} is not one of {sorted(factories)}")
        style = {"description_width": "110px"}
        source = w.Dropdown(options=[*examples, OWN], description="messages", style=style)
        own_text = w.Textarea(EXAMPLE_TEXT, description="your messages",
                              layout=w.Layout(width="480px", height="110px"), style=style)
        budget_slider = w.IntSlider(budget, 0, max_budget, description="max_tokens",
                                    style=style, layout=w.Layout(width="480px"))
        strategy_buttons = w.ToggleButtons(options=["last", "first"], value=strategy,
                                           description="strategy", style=style)
        system_box = w.Checkbox(include_system, description="include_system")
        start_on_menu = w.Dropdown(options=[("human", "human"), ("none", None)], value=start_on,
                                   description="start_on", style=style)
        counter_menu = w.Dropdown(options=list(factories), value=counter, description="counter",
                                  style=style)
        view = w.HTML()
        super().__init__([source, own_text, budget_slider, strategy_buttons, system_box,
                          start_on_menu, counter_menu, view])
        self.examples, self._factories = examples, factories
        self._built: dict[str, Any] = {}
        self.source, self.own_text, self.budget = source, own_text, budget_slider
        self.strategy, self.include_system = strategy_buttons, system_box
        self.start_on, self.counter, self.view = start_on_menu, counter_menu, view
        self.report: TrimReport | None = None
        self.error: str | None = None
        for control in self.controls:
            control.observe(self._changed, names="value")
        self.update()

    @property
    def controls(self) -> tuple[w.ValueWidget, ...]:
        return (self.source, self.own_text, self.budget, self.strategy, self.include_system,
                self.start_on, self.counter)

    def messages(self) -> list[BaseMessage]:
        """The message list the controls select."""
        if self.source.value == OWN:
            return parse_conversation(self.own_text.value)
        return self.examples[self.source.value]

    def token_counter(self) -> Any:
        """The selected counter (built once, on first use)."""
        name = self.counter.value
        if name not in self._built:
            self._built[name] = self._factories[name]()
        return self._built[name]

    def _changed(self, change: dict) -> None:
        self.update()

    def update(self) -> TrimReport | None:
        """Trim with the current settings; show the report, or the error in plain words."""
        refused = refused_options(self.strategy.value)  # switched off: trim_messages refuses them
        self.include_system.disabled = "include_system" in refused
        self.start_on.disabled = "start_on" in refused
        self.own_text.layout.display = None if self.source.value == OWN else "none"
        try:
            self.report = trim_and_explain(
                self.messages(), max_tokens=int(self.budget.value),
                token_counter=self.token_counter(), strategy=self.strategy.value,
                include_system=bool(self.include_system.value) and not self.include_system.disabled,
                start_on=None if self.start_on.disabled else self.start_on.value,
            )
            self.error = None
            self.view.value = self.report._repr_html_()
        except Exception as err:  # any failure replaces the table: never a stale one
            self.report = None
            self.error = f"{type(err).__name__}: {err}"
            self.view.value = f"<p style='color:#b00'>{html.escape(self.error)}</p>"
        return self.report

    def text(self) -> str:
        """The current report as plain text (or the error)."""
        return str(self.report) if self.report is not None else f"error: {self.error}"
