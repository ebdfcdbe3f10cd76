"""The deterministic sales tool: strict filters, exact sums, refusals that name the problem."""

from decimal import Decimal

import pytest

from course.tools.registry import ToolError, ToolRegistry
from course.tools.sales import categories, load_sales, numbers_backed_by_tool, sales_summary


def test_dataset_is_shipped():
    sales = load_sales()
    assert len(sales) == 240 and categories() == ["coffee", "equipment", "pastry", "tea"]


def test_strict_filter_and_sum_match_a_plain_reference():
    result = sales_summary("coffee", "2024-03-01", "2024-03-31")
    rows = [s for s in load_sales() if s.category == "coffee"
            and "2024-03-01" <= s.day.isoformat() <= "2024-03-31"]
    assert result["sales"] == len(rows) == 9
    assert result["units"] == sum(s.quantity for s in rows)
    assert Decimal(result["revenue"]) == sum(s.unit_price * s.quantity for s in rows)
    assert result["revenue"] == "231.60" and result["by_month"] == {"2024-03": "231.60"}


def test_same_question_same_figures():
    runs = [sales_summary("tea", "2024-01-01", "2024-06-30", group_by="region") for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert sum(Decimal(v) for v in runs[0]["by_region"].values()) == Decimal(runs[0]["revenue"])


def test_inclusive_boundaries():
    day = sales_summary("tea", "2024-01-01", "2024-01-01")
    assert day["sales"] == sum(1 for s in load_sales()
                               if s.category == "tea" and s.day.isoformat() == "2024-01-01")


@pytest.mark.parametrize("args, words", [
    (("cofee", "2024-03-01", "2024-03-31"), "Unknown category 'cofee'"),
    (("coffee", "March", "2024-03-31"), "'start_date' must be a date"),
    (("coffee", "2024-03-31", "2024-03-01"), "is before start_date"),
])
def test_bad_input_is_refused_with_a_reason(args, words):
    with pytest.raises(ToolError, match=words):
        sales_summary(*args)


def test_through_the_registry():
    reg = ToolRegistry()
    reg.register(sales_summary)
    params = reg.spec("sales_summary").parameters
    assert params["properties"]["group_by"]["enum"] == ["month", "region"]
    bad = reg.execute("sales_summary", {"category": "tea", "start_date": "2024-01-01",
                                        "end_date": "2024-01-31", "group_by": "week"})
    assert bad.status == "invalid_arguments" and "'group_by'" in bad.content
    refused = reg.execute("sales_summary", {"category": "juice", "start_date": "2024-01-01",
                                            "end_date": "2024-01-31"})
    assert refused.status == "invalid_arguments" and "juice" in refused.content


def test_unbacked_numbers_are_flagged():
    assert numbers_backed_by_tool("Revenue was 231.60.", ['{"revenue": "231.60"}']) == (True, [])
    assert numbers_backed_by_tool("Revenue was 1.25 billion.", []) == (False, ["1.25"])
    assert numbers_backed_by_tool("Revenue was 999.", ['{"revenue": "231.60"}']) == \
        (False, ["999"])
    assert numbers_backed_by_tool("I need to call the tool first.", []) == (True, [])
