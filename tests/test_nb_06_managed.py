"""Chapter 06's coordinator as smolagents agents, without running the notebook: the cell's
``check_consistency`` and the package's agree on the chapter's cases (one truth), and the
managed-agent team driven by scripted policies gives the plans the chapter shows."""

from dataclasses import replace

import pytest

from course.guards.managed import ScriptedPolicyModel, build_team, run_team, scripted_models
from course.guards.warehouse import Coordinator, check_consistency
from nbharness import cell_sources

NOTEBOOK = "06_guarded_agents.ipynb"


def _cell_check():
    namespace: dict = {}
    exec(compile(cell_sources(NOTEBOOK)["coordinator-check"], "coordinator-check", "exec",
                 dont_inherit=True), namespace)
    return namespace["check_consistency"]


def _cases():
    """(order, reports, stock) for the chapter's plans and for variants of them."""
    coordinator = Coordinator()
    order = coordinator.order("ORD-1")
    stock = coordinator.warehouse.get_stock(order["sku"])
    good = Coordinator().plan("ORD-1").reports
    lossy = Coordinator().plan("ORD-1", hand_off="lossy").reports
    supply, transit, export = good
    cases = {"structured": good, "lossy": lossy,
             "no booking": [supply, replace(transit, proposals=[]), export],
             "no move": [replace(supply, proposals=[]), transit, export],
             "export planned elsewhere": [supply, transit,
                                          replace(export, assumptions={"ship_from": "HAM"})],
             "nothing proposed": [replace(r, proposals=[], assumptions={}) for r in good]}
    return {name: (order, reports, stock) for name, reports in cases.items()}


@pytest.mark.parametrize("case", list(_cases()))
def test_the_cells_check_is_the_packages(case):
    order, reports, stock = _cases()[case]
    assert _cell_check()(order, reports, stock) == check_consistency(order, reports, stock)


def test_the_cases_cover_every_kind_of_conflict():
    cases = _cases()
    found = {name: check_consistency(*args) for name, args in cases.items()}
    assert found["structured"] == []
    assert any("context lost" in c for c in found["lossy"])
    assert any("will hold 15" in c for c in found["lossy"])
    assert found["no booking"] == ["1 stock move(s) but 0 transfer booking(s)"]
    assert any("export planned for site HAM" in c for c in found["export planned elsewhere"])


def test_the_scripted_team_gives_the_rule_based_plan():
    team = build_team(scripted_models("structured"))
    run = run_team(team, "ORD-1", hand_off="structured")
    assert run.plan.ok and run.errors == []
    rule_based = Coordinator().plan("ORD-1")
    assert [p.line() for p in run.plan.proposals] == [p.line() for p in rule_based.proposals]
    assert [(t.specialist, t.fields) for t in run.plan.tasks] == [
        (t.specialist, t.fields) for t in rule_based.tasks]
    assert run.steps == {"manager": 4, "supply": 3, "transit": 3, "export": 3}
    assert team.coordinator.warehouse.executed == []  # proposals only: nothing ran


def test_the_lossy_hand_off_is_caught_in_the_agents_outputs():
    run = run_team(build_team(scripted_models("lossy")), "ORD-1", hand_off="lossy")
    assert "ship_from" not in run.plan.tasks[0].fields
    assert run.plan.reports[0].assumptions == {"ship_from": "HAM"}
    assert run.plan.conflicts == Coordinator().plan("ORD-1", hand_off="lossy").conflicts
    assert not run.plan.ok


def test_each_specialist_holds_only_its_tools_and_propose_checks_at_the_door():
    team = build_team(scripted_models())
    assert {n: sorted(a.tools) for n, a in team.specialists.items()} == {
        "supply": ["final_answer", "get_stock", "propose"],
        "transit": ["final_answer", "find_lane", "propose"],
        "export": ["final_answer", "get_declaration", "propose"]}
    assert sorted(team.manager.managed_agents) == ["export", "supply", "transit"]
    assert all(a.description for a in team.manager.managed_agents.values())
    propose = team.specialists["supply"].tools["propose"]
    refused = propose(tool="amend_declaration", arguments={"declaration_id": "EX-7"})
    assert refused.startswith("nothing proposed") and "amend_declaration" in refused
    bad = propose(tool="move_stock", arguments={"sku": "SKU-100"})
    assert bad.startswith("nothing proposed") and team.proposals["supply"] == []
    ok = propose(tool="move_stock", arguments={"sku": "SKU-100", "quantity": 1,
                                               "from_site": "HAM", "to_site": "RTM"})
    assert "not run" in ok and team.proposals["supply"][0].risk == "critical"
    assert team.coordinator.warehouse.executed == []


def test_a_manager_that_asks_nobody_is_a_conflict():
    models = scripted_models()
    models["manager"] = ScriptedPolicyModel(lambda task, seen: ("final_answer", {"answer": "done"}),
                                            "scripted:lazy")
    run = run_team(build_team(models), "ORD-1")
    assert run.plan.tasks == [] and not run.plan.ok
    assert run.plan.conflicts[:3] == [f"the manager never asked {n}"
                                      for n in ("supply", "transit", "export")]
