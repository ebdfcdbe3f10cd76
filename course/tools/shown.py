"""One shown value: a line of text for the student, the value itself for a machine.

``show`` is ``print`` for a line that carries a value a lesson is about (a count, a verdict, a
tool's reply): the student sees the same line ``print`` would write, and the cell's output holds
the value under ``key`` as a record (:mod:`course.records`), which a test or a grader reads
instead of matching the printed words::

    show("allowed:", registry.call("get_weather", city="Berlin"), key="allowed")

prints ``allowed: Berlin: 9 °C, rain`` and records ``{"shown": "allowed", "value": "Berlin: 9 °C,
rain"}``. The value is the last thing printed unless ``value=`` names another (the object behind
a formatted string, say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from course.records import Record, json_safe

_LAST = object()


@dataclass
class Shown(Record):
    """One line a cell shows, and the value it stands for under ``key``."""

    key: str
    text: str
    value: Any = None

    def record(self) -> dict[str, Any]:
        return {"shown": self.key, "value": json_safe(self.value)}

    def __str__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)


def show(*parts: Any, key: str, value: Any = _LAST, sep: str = " ") -> None:
    """Display ``parts`` as ``print`` would write them, recording ``value`` (by default the last
    part) under ``key``; outside a notebook, print the line. Returns nothing, like ``print`` (a
    cell that ends in ``show(...)`` shows the line once)."""
    shown = Shown(key, sep.join(map(str, parts)), parts[-1] if value is _LAST and parts else
                  (None if value is _LAST else value))
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - IPython is installed with the course
        shell = None
    if shell is None:
        print(shown.text)
    else:
        from IPython.display import display

        display(shown)
