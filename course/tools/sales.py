"""The tool as the source of truth: a deterministic sales tool over a small shipped dataset.

``course/data/sales.csv`` holds 240 invented sales (January-June 2024; categories coffee, tea,
pastry, equipment; regions north/south/east/west). :func:`sales_summary` filters STRICTLY (one
category, an inclusive date range) and groups, sums and rounds with ``Decimal`` (half-up, to
cents), so the same question gives the same figures on every run and every machine.
:func:`numbers_backed_by_tool` flags an answer whose figures did not come from a tool result.

Not handled: currencies, time zones, returns or refunds, fuzzy category names (an unknown
category is refused with the list of known ones, never guessed).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from importlib import resources
from typing import Literal

from course.tools.registry import ToolError, ToolStatus

__all__ = ["Sale", "categories", "load_sales", "numbers_backed_by_tool", "sales_summary"]

CENT = Decimal("0.01")


@dataclass(frozen=True)
class Sale:
    """One row of the dataset."""

    sale_id: str
    day: date
    category: str
    region: str
    quantity: int
    unit_price: Decimal

    @property
    def revenue(self) -> Decimal:
        return self.unit_price * self.quantity


@cache
def load_sales() -> tuple[Sale, ...]:
    """All sales from the packaged CSV, in file order (cached)."""
    text = resources.files("course").joinpath("data/sales.csv").read_text(encoding="utf-8")
    return tuple(
        Sale(r["sale_id"], date.fromisoformat(r["date"]), r["category"], r["region"],
             int(r["quantity"]), Decimal(r["unit_price"]))
        for r in csv.DictReader(text.splitlines())
    )


def categories() -> list[str]:
    """The categories present in the data, sorted."""
    return sorted({s.category for s in load_sales()})


def _parse_day(value: str, field_name: str) -> date:
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ToolError(f"'{field_name}' must be a date like 2024-03-01, got {value!r}.",
                        ToolStatus.INVALID_ARGUMENTS) from None


def sales_summary(
    category: str,
    start_date: str,
    end_date: str,
    group_by: Literal["month", "region"] = "month",
) -> dict:
    """Revenue and units sold for ONE category between two dates (inclusive), grouped.

    Args:
        category: One of coffee, tea, pastry, equipment.
        start_date: First day, ISO format (2024-01-01).
        end_date: Last day, ISO format, inclusive.
        group_by: Group the totals by month or by region.
    """
    if category not in categories():
        raise ToolError(f"Unknown category {category!r}; known categories: "
                        f"{', '.join(categories())}.", ToolStatus.INVALID_ARGUMENTS)
    start, end = _parse_day(start_date, "start_date"), _parse_day(end_date, "end_date")
    if end < start:
        raise ToolError(f"end_date {end_date} is before start_date {start_date}.",
                        ToolStatus.INVALID_ARGUMENTS)
    if group_by not in ("month", "region"):
        raise ToolError(f"group_by must be 'month' or 'region', got {group_by!r}.",
                        ToolStatus.INVALID_ARGUMENTS)
    rows = [s for s in load_sales() if s.category == category and start <= s.day <= end]
    groups: dict[str, list[Sale]] = {}
    for s in rows:
        key = s.day.strftime("%Y-%m") if group_by == "month" else s.region
        groups.setdefault(key, []).append(s)
    total = sum((s.revenue for s in rows), Decimal(0)).quantize(CENT, ROUND_HALF_UP)
    return {
        "category": category,
        "start_date": start.isoformat(),
        "end_date": end.isoformat(),
        "sales": len(rows),
        "units": sum(s.quantity for s in rows),
        "revenue": str(total),
        "by_" + group_by: {
            key: str(sum((s.revenue for s in group), Decimal(0)).quantize(CENT, ROUND_HALF_UP))
            for key, group in sorted(groups.items())
        },
    }


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def numbers_backed_by_tool(answer: str, tool_outputs: list[str]) -> tuple[bool, list[str]]:
    """Are all figures in ``answer`` present in some tool output? Returns (ok, unbacked).

    An answer with figures but no tool output at all is never backed: the model answered from
    its weights. Years, single digits and other small numbers are checked like any other.
    """
    found = _NUMBER.findall(answer)
    evidence = " ".join(tool_outputs)
    available = set(_NUMBER.findall(evidence))
    unbacked = [n for n in found if n.replace(",", ".") not in available]
    return (not unbacked and (bool(tool_outputs) or not found)), unbacked
