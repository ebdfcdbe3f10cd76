"""The warehouse: specialists see only their own tools, the coordinator detects lost context."""

import pytest

from course.guards.warehouse import (
    SPECIALIST_TOOLS,
    Coordinator,
    Warehouse,
    load_systems,
    monolithic_prompt,
    prompt_sizes,
)
from course.tools.registry import ToolError


def test_systems_ship_with_the_package():
    systems = load_systems()
    assert set(systems) == {"stock", "transit", "export", "orders"}
    assert systems["orders"]["orders"]["ORD-1"]["ship_from"] == "RTM"


def test_specialists_never_see_each_others_tools():
    coordinator = Coordinator()
    seen = {name: set(s.tool_names()) for name, s in coordinator.specialists.items()}
    assert seen == {name: set(tools) for name, tools in SPECIALIST_TOOLS.items()}
    for name, specialist in coordinator.specialists.items():
        prompt = specialist.prompt()
        others = {t for other, tools in SPECIALIST_TOOLS.items() if other != name for t in tools}
        assert not any(f'"name":"{tool}"' in prompt for tool in others), name
        for tool in others:
            result = specialist.registry.execute(tool, {})
            assert result.status == "unknown_tool", (name, tool)
        assert len(prompt) < len(monolithic_prompt(coordinator.warehouse)) / 2


def test_specialists_cannot_execute_their_own_critical_tools():
    supply = Coordinator().specialists["supply"]
    result = supply.registry.execute(
        "move_stock", {"sku": "SKU-100", "quantity": 1, "from_site": "HAM", "to_site": "RTM"})
    assert result.status == "confirmation_unavailable"
    with pytest.raises(ToolError):
        supply.read("move_stock", sku="SKU-100", quantity=1, from_site="HAM", to_site="RTM")


def test_structured_plan_is_consistent():
    plan = Coordinator().plan("ORD-1")
    assert plan.ok, plan.conflicts
    assert [(p.agent, p.tool) for p in plan.proposals] == [
        ("supply", "move_stock"), ("transit", "book_transfer"), ("export", "amend_declaration")]
    assert plan.proposals[0].arguments["quantity"] == 25  # 40 ordered - 15 on hand at RTM
    assert [c["name"] for c in plan.tool_calls()] == ["move_stock", "book_transfer",
                                                      "amend_declaration"]


def test_lossy_hand_off_is_detected_and_rejected():
    plan = Coordinator().plan("ORD-1", hand_off="lossy")
    assert not plan.ok
    assert any("context lost" in c and "HAM" in c for c in plan.conflicts)
    assert any("will hold 15" in c for c in plan.conflicts)
    assert "REJECTED" in str(plan)


def test_tools_change_state_and_refuse_bad_input():
    warehouse = Warehouse()
    assert warehouse.get_stock("SKU-100") == {"HAM": 120, "RTM": 15}
    warehouse.move_stock("SKU-100", 5, "HAM", "RTM")
    assert warehouse.stock_of("RTM", "SKU-100") == 20
    with pytest.raises(ToolError, match="holds only"):
        warehouse.move_stock("SKU-100", 999, "HAM", "RTM")
    with pytest.raises(ToolError, match="unknown site"):
        warehouse.move_stock("SKU-100", 1, "XXX", "RTM")
    with pytest.raises(ToolError, match="unknown SKU"):
        warehouse.get_stock("SKU-999")
    with pytest.raises(ToolError, match="no lane"):
        warehouse.find_lane("HAM", "HAM")
    assert Warehouse().stock_of("RTM", "SKU-100") == 15  # each Warehouse starts from the files


def test_bad_requests_name_the_problem():
    with pytest.raises(ValueError, match="known orders"):
        Coordinator().plan("ORD-404")
    with pytest.raises(ValueError, match="hand_off"):
        Coordinator().plan("ORD-1", hand_off="telepathy")


def test_prompt_sizes_record_counts_each_prompt():
    coordinator = Coordinator()
    sizes = prompt_sizes(coordinator, lambda text: len(text), "characters")
    assert sizes.tokens("supply") == len(coordinator.specialists["supply"].prompt())
    assert sizes.tokens("one agent") == len(monolithic_prompt(coordinator.warehouse))
    assert sizes.tokens("one agent") > 2 * max(sizes.tokens(n) for n in SPECIALIST_TOOLS)
    assert "supply: tools=['get_stock', 'move_stock']; prompt=" in str(sizes)
    assert sizes._repr_html_().count("<tr>") == 5


def test_plans_render_themselves():
    plan = Coordinator().plan("ORD-1")
    html = plan._repr_html_()
    assert html.count("<tr>") == len(plan.proposals) + 1 and "ready for confirmation" in html
    lossy = Coordinator().plan("ORD-1", hand_off="lossy")
    assert lossy._repr_html_().count("CONFLICT:") == len(lossy.conflicts) > 0
    assert str(lossy).count("CONFLICT:") == len(lossy.conflicts)
