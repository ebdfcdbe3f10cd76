"""The trimming explorer: move a token budget and the trimming options, see what is kept and why.

Controls: the message list (the worked example, the original 11 messages, or your own lines
``role: text``), a budget slider, strategy (last/first), include_system, start_on (human or
none) and the counter (toy / GPT-2 fallback / the model's tokenizer). Every change calls
:func:`course.trimming.policy.trim_and_explain`: LangChain's ``trim_messages`` decides what is kept,
the widget only renders the :class:`~course.trimming.policy.TrimReport` (each message kept or dropped
with its reason, and the token total).

With strategy ``first``, ``trim_messages`` refuses include_system and start_on, so those two
controls are switched off (and disabled) while it is selected.

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

from course.trimming.policy import (
    TrimReport,
    eleven_messages,
    parse_conversation,
    trim_and_explain,
    worked_example_counter,
    worked_example_messages,
)

OWN = "your own (type below)"
TOY, GPT2, MODEL = "toy", "GPT-2 fallback", "model tokenizer"
EXAMPLE_TEXT = "system: You are a helpful assistant.\nuser: Hi! I'm Bob.\nassistant: Hi Bob!\n" \
               "user: What's my name?"


def default_counters() -> dict[str, Callable[[], Any]]:
    """Counter factories, built on first use: toy, LangChain's GPT-2 fallback, the model's."""

    def gpt2():
        from course.models import chat_model

        return chat_model()  # LangChain's own fallback: pass the chat model itself

    def model():
        from course.trimming.policy import ModelTokenCounter

        return ModelTokenCounter()

    return {TOY: worked_example_counter, GPT2: gpt2, MODEL: model}


class TrimExplorer:
    """Controls for ``trim_messages`` and a table of kept/dropped messages with the reasons."""

    def __init__(
        self,
        examples: Mapping[str, list[BaseMessage]] | None = None,
        counters: Mapping[str, Callable[[], Any]] | None = None,
        budget: int = 52,
        max_budget: int = 150,
        strategy: str = "last",
        include_system: bool = True,
        start_on: str | None = "human",
        counter: str = TOY,
    ) -> None:
        self.examples = dict(examples) if examples is not None else {
            "worked example (note)": worked_example_messages(),
            "11 messages (original notebook)": eleven_messages(),
        }
        if not self.examples:
            raise ValueError("examples is empty: give at least one named message list")
        self._factories = dict(counters) if counters is not None else default_counters()
        if counter not in self._factories:
            raise ValueError(f"counter {counter!r} is not one of {sorted(self._factories)}")
        self._built: dict[str, Any] = {}
        style = {"description_width": "110px"}
        self.source = w.Dropdown(options=[*self.examples, OWN], description="messages",
                                 style=style)
        self.own_text = w.Textarea(EXAMPLE_TEXT, description="your messages",
                                   layout=w.Layout(width="480px", height="110px"), style=style)
        self.budget = w.IntSlider(budget, 0, max_budget, description="max_tokens", style=style,
                                  layout=w.Layout(width="480px"))
        self.strategy = w.ToggleButtons(options=["last", "first"], value=strategy,
                                        description="strategy", style=style)
        self.include_system = w.Checkbox(include_system, description="include_system")
        self.start_on = w.Dropdown(options=[("human", "human"), ("none", None)], value=start_on,
                                   description="start_on", style=style)
        self.counter = w.Dropdown(options=list(self._factories), value=counter,
                                  description="counter", style=style)
        self.view = w.HTML()
        for control in self.controls:
            control.observe(self._changed, names="value")
        self.report: TrimReport | None = None
        self.error: str | None = None
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
        """Trim with the current settings; show the table, or the error in plain words."""
        first = self.strategy.value == "first"
        self.include_system.disabled = first
        self.start_on.disabled = first
        self.own_text.layout.display = None if self.source.value == OWN else "none"
        try:
            self.report = trim_and_explain(
                self.messages(), max_tokens=int(self.budget.value),
                token_counter=self.token_counter(), strategy=self.strategy.value,
                include_system=False if first else bool(self.include_system.value),
                start_on=None if first else self.start_on.value,
            )
            self.error = None
            self.view.value = self.report._repr_html_()
        except ValueError as err:
            self.report, self.error = None, str(err)
            self.view.value = f"<p style='color:#b00'>{html.escape(self.error)}</p>"
        return self.report

    def text(self) -> str:
        """The current table as plain text (or the error)."""
        return self.report.table() if self.report is not None else f"error: {self.error}"

    def widget(self) -> w.Widget:
        return w.VBox([*self.controls, self.view])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget())


__all__ = ["GPT2", "MODEL", "OWN", "TOY", "TrimExplorer", "default_counters"]
