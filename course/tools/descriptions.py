"""Does the description decide the model's choice? Three order tools, poor vs good descriptions.

Note 003: "a good tool description decides more than the choice of model". The tools here have
names that do not tell them apart (``order_update``, ``order_change``, ``order_info``), so only
the description can: :data:`POOR` says almost nothing, :data:`GOOD` says what each does.
:func:`choices` asks the model, for each labelled request of :data:`REQUESTS`, which tool it
calls (greedy, the name under constrained decoding, as :func:`course.tools.tool_count.choose_tool`
does; the tool list is read once per description set and kept in a
:class:`~course.tools.constrained.PrefixCache`). The result is a :class:`DescriptionRun`.

Not handled: arguments (only the tool is chosen), a second model (one model runs per call: the
"more than the choice of model" half needs a run per model, e.g. with ``COURSE_MODEL``), the
order of the tools (fixed; a model that always takes the first one shows as such).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from course.records import Record, json_safe
from course.tools.catalogue import CatalogueTool
from course.tools.constrained import PrefixCache
from course.tools.protocol import render_tool_prompt
from course.tools.tool_count import choose_tool

__all__ = ["GOOD", "POOR", "REQUESTS", "DescriptionRun", "choices", "order_tools"]

_ORDER_ID = {"type": "object", "properties": {"order_id": {"type": "string"}},
             "required": ["order_id"]}
NAMES = ("order_update", "order_change", "order_info")
POOR = {"order_update": "Updates an order.", "order_change": "Changes an order.",
        "order_info": "Order information."}
GOOD = {"order_update": "Cancel an order: it will not ship and the customer gets a refund.",
        "order_change": "Change the delivery address of an order before it ships.",
        "order_info": "Track a shipped order: where the parcel is now and when it arrives."}
#: (request, the tool that serves it): three per tool.
REQUESTS: tuple[tuple[str, str], ...] = (
    ("Please cancel order O-3, I don't want it any more.", "order_update"),
    ("Cancel my order O-8.", "order_update"),
    ("I no longer need order O-5, call it off.", "order_update"),
    ("Send order O-4 to my new address, 5 Elm Street.", "order_change"),
    ("I moved: deliver O-2 to Main St 1 instead.", "order_change"),
    ("Change the delivery address of O-6.", "order_change"),
    ("Where is my parcel O-7 now?", "order_info"),
    ("When will order O-1 arrive?", "order_info"),
    ("Track order O-9 for me.", "order_info"),
)


def order_tools(descriptions: dict[str, str]) -> list[CatalogueTool]:
    """The three order tools with the given description for each name (names fixed)."""
    missing = [n for n in NAMES if not str(descriptions.get(n, "")).strip()]
    if missing:
        raise ValueError(f"no description for {missing}: give one for each of {list(NAMES)}")
    return [CatalogueTool(name, str(descriptions[name]), _ORDER_ID) for name in NAMES]


@dataclass
class DescriptionRun(Record):
    """What the model chose for each request with one set of descriptions.

    Displayed, it shows one line; its values (:meth:`record`) add the count right and ``n``."""

    label: str
    model: str
    chosen: list[str]
    expected: list[str]

    @property
    def right(self) -> int:
        return sum(c == e for c, e in zip(self.chosen, self.expected, strict=True))

    @property
    def n(self) -> int:
        return len(self.expected)

    def __str__(self) -> str:
        spread = dict(Counter(self.chosen).most_common())
        return (f"{self.label}: {self.right}/{self.n} requests got the right tool "
                f"(chance 1/{len(NAMES)}); chosen: {spread}")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def record(self) -> dict[str, Any]:
        return {**json_safe(self), "right": self.right, "n": self.n}


def choices(local: Any, descriptions: dict[str, str], label: str,
            requests: Sequence[tuple[str, str]] = REQUESTS) -> DescriptionRun:
    """The tool the model picks for each request, with ``descriptions`` for the three tools."""
    tools = order_tools(descriptions)
    cache = PrefixCache(local)
    first = render_tool_prompt(local, [{"role": "user", "content": requests[0][0]}],
                               [t.openai_schema() for t in tools])
    cache.keep(local.tokenizer(first, add_special_tokens=False).input_ids[:-1])
    chosen = [choose_tool(local, request, tools, prefix_cache=cache)[0] for request, _ in requests]
    return DescriptionRun(label, local.short_name, chosen, [tool for _, tool in requests])
