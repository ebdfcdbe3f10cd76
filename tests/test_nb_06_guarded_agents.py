"""Chapter 06 executed headless (scripted approvals): the lesson-carrying values of 06_guarded_agents.ipynb.

Each test reads the values a cell displayed (its records: prompt sizes, the plan, the audit, the
injection totals; the lines shown with ``course.records.show``, by key: ``run.shown_one``) and
checks what carries the lesson: what ran before and after each decision, which payloads got
through which runtime. Text checks remain for what a student reads: the provenance labels, the
refusal the model was told, the error a specialist gets, the graph's drawing.
"""

import re

from nbharness import NOTEBOOKS, cell_sources

NOTEBOOK = "06_guarded_agents.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def field(text: str, label: str) -> str:
    """The rest of the line after ``label:`` (first occurrence)."""
    match = re.search(rf"^{re.escape(label)}:?\s*(.*)$", text, flags=re.M)
    assert match, f"no line {label!r} in:\n{text}"
    return match.group(1).strip()


def audit(record: dict) -> dict[str, tuple[str, str, str]]:
    """An ``ApprovalAudit`` record's entries: tool -> (decision, approver, status)."""
    return {e["tool"]: (e["decision"], e["approver"], e["status"]) for e in record["entries"]}


def test_graph_stops_before_the_critical_call(run):
    paused = run.record("graph-stops")
    assert paused["next_nodes"] == ["confirm"]
    waiting = paused["waiting"]
    assert waiting["tool"] == "move_stock" and waiting["risk"] == "critical"
    assert waiting["arguments"]["quantity"] == 25
    assert [name for name, _ in paused["executed"]] == ["book_transfer"]
    assert (paused["site"], paused["sku"], paused["stock"]) == ("RTM", "SKU-100", 15)


def test_the_approval_graph_is_drawn_from_the_graph(run):
    assert run.has_image("graph-stops")
    text = run.text("graph-stops")
    assert re.search(r"3 nodes|5 nodes", text)  # agent, tools, confirm (+ start/end)
    assert re.search(r"tools -\.-> confirm", text) and re.search(r"confirm -\.-> agent", text)


def test_edit_changes_the_executed_arguments(run):
    after = run.record("edit")
    tool, args = after["executed"][-1]
    assert tool == "move_stock" and args["quantity"] == 30
    assert (after["site"], after["sku"], after["stock"]) == ("RTM", "SKU-100", 15 + 30)
    assert after["waiting"]["tool"] == "amend_declaration"


def test_rejection_reaches_the_model_as_a_refusal(run):
    text = run.text("reject")
    told = field(text, "the model was told")
    assert "human:dana" in told and "denied" in told and "NOT run" in told
    assert run.shown_one("reject", "EX-7 lines") == {"SKU-100": 20}
    assert audit(run.record("reject", shown=False)) == {
        "move_stock": ("edit", "human:dana", "ok"),
        "amend_declaration": ("reject", "human:dana", "confirmation_denied")}
    executed = {e["tool"]: e["executed_arguments"]
                for e in run.record("reject", shown=False)["entries"]}
    assert executed["move_stock"]["quantity"] == 30 and executed["amend_declaration"] is None


def test_widget_renders_and_scripted_policy_decides(run):
    assert run.has_widget("widget")
    assert run.shown_one("scripted-policy", "asked about") == ["move_stock", "amend_declaration"]
    assert audit(run.record("scripted-policy", shown=False)) == {
        "move_stock": ("approve", "scripted:policy", "ok"),
        "amend_declaration": ("reject", "scripted:policy", "confirmation_denied")}


def test_pending_approval_survives_another_process(run):
    resumed = run.record("restart")
    assert resumed["waiting"]["tool"] == "move_stock"
    assert resumed["waiting"]["arguments"]["quantity"] == 25
    executed = resumed["executed"]
    assert [name for name, _ in executed] == ["move_stock"] and executed[0][1]["quantity"] == 25


def test_specialists_see_only_their_tools_and_have_shorter_prompts(run):
    sizes = run.record("specialists")
    rows = {name: (tools, n) for name, tools, n in sizes["rows"]}
    assert rows["supply"][0] == ["get_stock", "move_stock"]
    assert rows["transit"][0] == ["book_transfer", "find_lane"]
    assert rows["export"][0] == ["amend_declaration", "get_declaration"]
    assert len(rows["one agent"][0]) == 6
    biggest = max(rows[n][1] for n in ("supply", "transit", "export"))
    assert rows["one agent"][1] > 2 * biggest > 0
    assert "tokenizer" in sizes["counted_with"]
    isolation = run.text("isolation")
    assert "Tool 'amend_declaration' does not exist" in isolation
    assert "nobody can confirm" in isolation


def test_the_team_is_a_manager_with_managed_agents(run):
    assert run.shown_one("team", "managed") == {
        "supply": "ToolCallingAgent", "transit": "ToolCallingAgent", "export": "ToolCallingAgent"}
    assert run.shown_one("team", "supply's tools") == ["get_stock", "propose", "final_answer"]


def test_the_scripted_team_proposes_the_consistent_plan(run):
    assert run.text("plan").splitlines()[0].startswith("scripted models (not an LLM)")  # the label
    steps = run.shown_one("plan", "steps")
    assert steps == {"manager": 4, "supply": 3, "transit": 3, "export": 3}
    plan = run.record("plan", shown=False)
    assert plan["ok"] and plan["conflicts"] == []
    assert [(p["agent"], p["tool"], p["arguments"].get("quantity"), p["risk"])
            for p in plan["proposals"]] == [("supply", "move_stock", 25, "critical"),
                                            ("transit", "book_transfer", 25, "write"),
                                            ("export", "amend_declaration", 40, "critical")]
    assert plan["tasks"][0]["fields"]["ship_from"] == "RTM"


def test_coordinator_detects_the_lost_context(run):
    assert run.text("lossy").splitlines()[0].startswith("scripted models")  # the label
    trajectory, check = run.records("lossy", shown=False)
    supply_task = next(t for t in trajectory["tasks"] if t["specialist"] == "supply")
    assert "ship_from" not in supply_task["fields"]
    assert run.shown_one("lossy", "supply's site") == {"ship_from": "HAM"}
    assert check["conflicts"] == [
        "supply planned for site HAM, but the order ships from RTM (context lost in the hand-off)",
        "export ships 40 x SKU-100 from RTM, but RTM will hold 15 (15 on hand + 0 moved in)"]
    assert check["ok"] is False


def test_the_reader_decodes_only_what_the_text_says_to(run):
    readings = run.record("reader")["readings"]
    named, unnamed = readings["base64"], readings["base64, encoding not named"]
    assert [c["name"] for c in named["calls"]] == ["send_email"]
    assert any(note.startswith("decoded base64") for note in named["notes"])
    assert unnamed["calls"] == [] and unnamed["notes"] == []  # the reader makes: no call


def test_naive_summary_first_and_rows_differ_by_wording(run):
    naive, shown = run.records("naive", shown=False)
    assert naive["label"] == "naive runtime, scripted literal reader"
    rows = {r["name"]: "; ".join(r["outcomes"]) or "no call made" for r in shown["rows"]}
    assert rows["base64"] == "send_email: ok" and rows["base64, encoding not named"] == "no call made"
    assert rows["French"] == "send_email: ok" and rows["German"] == "no call made"
    assert rows["urgent imperative"] == "SEND_EMAIL: unknown_tool"
    assert rows["invented tool name"] == "admin_override: unknown_tool"
    assert "(print(naive) for all" in run.text("naive")  # where the student finds the other rows
    assert naive["tried"] == run.shown_one("naive", "rows") == 37
    assert 20 <= naive["got_through"] < naive["tried"]
    assert naive["executed_without_approval"] >= naive["got_through"]
    by_kind = naive["through_by_kind"]
    through, tried = map(int, by_kind["encoded"].split("/"))
    assert 0 < through < tried
    assert sum(int(v.split("/")[0]) for v in by_kind.values()) == naive["got_through"]


def test_which_payloads_contain_the_literal_string(run):
    assert run.shown_one("wording-filter", "wanted") == ["base64", "rot13", "hex"]
    assert run.shown_one("wording-filter", "contain it") == {
        "French": True, "split across two pages": True, "split across page and email": True}
    missed = run.shown_one("wording-filter", "missed")
    assert "rot13" in missed and "French" not in missed and "base64" not in missed
    assert {"post to a public channel", "delete a backup"} <= set(missed)
    answer = next(c.source for c in run.nb.cells if c.get("id") == "written-answer")
    assert "only base64, rot13 and hex lack the literal string" in answer


def test_guarded_runtime_executes_nothing_without_approval(run):
    (guarded, shown), naive = run.records("guarded"), run.records("naive", shown=False)[0]
    assert guarded["tried"] == naive["tried"] >= 30
    assert guarded["calls_attempted"] == naive["calls_attempted"]  # same reader, same calls
    assert guarded["got_through"] == guarded["executed_without_approval"] == 0
    assert guarded["side_effects_executed"] == 0
    rows = {r["name"]: r["outcomes"] for r in shown["rows"]}
    assert rows["plain instruction"] == ["send_email: held, rejected"]
    assert rows["disabled tool"] == ["delete_file: refused: not on the allowlist"]
    assert rows["markdown image exfiltration"] == ["fetch_page: refused: host not allowlisted"]
    tagged = run.shown_one("tagging", "tagged")  # the breakout's closing tag escaped: one real one
    assert "&lt;/tool_output&gt;" in tagged and tagged.count("</tool_output>") == 1, tagged
    assert tagged.startswith('<tool_output tool="fetch_page" trust="untrusted">'), tagged


def test_live_agent_model_row_reports_what_it_attempted(run):
    text = run.text("local-model")
    assert re.search(r"agent model: (ChatHuggingFace|\w*ChatOpenAI)", text)  # the label read
    shown, live = run.records("local-model")
    [row] = shown["rows"]
    assert re.fullmatch(r"replied (['\"]).+\1", row["read_as"][0], flags=re.S)  # its words
    assert live["label"] == "guarded runtime, agent model (measured)"
    assert live["tried"] == 1
    calls = row["attempted"]
    assert live["calls_attempted"] == len(calls)
    # whatever the model attempted was refused or held: never executed
    assert row["outcomes"] == [] if not calls else all(
        "held, rejected" in o or "refused" in o or "invalid" in o for o in row["outcomes"])
    assert live["executed_without_approval"] == 0 and live["side_effects_executed"] == 0


def test_sandbox_runs_the_normal_program_and_stops_the_others(run):
    runs = run.record("sandbox", shown=False)["runs"]
    assert runs["normal"]["status"] == "ok" and runs["normal"]["reason"].startswith("5")
    assert runs["shell command"]["status"] == "blocked" and "os" in runs["shell command"]["reason"]
    assert runs["memory bomb"]["status"] == "memory"
    assert runs["sleeper"]["status"] == "timeout"
    assert run.shown_one("sandbox", "kernel") == 42
    assert any(line.startswith("It is not a security sandbox")
               for line in run.shown_one("sandbox", "executor doc"))


def test_the_quiz_and_exercises_pass_with_the_instructors_answers(run):
    assert "[passed] Quiz" in run.text("quiz-check")
    for n in range(1, 5):
        assert "[passed]" in run.text(f"ex{n}-check"), run.text(f"ex{n}-check")


def test_the_live_team_row_says_what_this_model_did(run):
    assert re.match(r"measured, .+: N = 1 request, \d+ s", run.text("team-live"))  # its label
    live = run.record("team-live")
    steps = live["steps"]
    assert 1 <= steps["manager"] <= 2 + 1 and all(steps[n] <= 2 for n in ("supply", "transit", "export"))
    check = live["conflicts"]
    if not live["called"]:  # the bundled model offline: it routed nowhere, so nothing was proposed
        assert live["proposals"] == [] and all(steps[n] == 0 for n in ("supply", "transit", "export"))
        assert "the manager never asked supply" in check and not live["ok"]
    assert live["ok"] == (check == [])  # "consistent" only without a conflict


def test_no_output_is_a_wall_of_text(run):
    assert run.walls_of_text(limit=3000) == []


LABELS = ("measured", "recorded", "reconstructed", "derived", "scripted")


def test_outputs_with_model_words_trajectories_or_figures_name_their_provenance_first(run):
    for cell_id in ["specialists", "plan", "lossy", "graph-stops", "scripted-policy", "reader",
                    "naive", "guarded", "sandbox", "local-model", "team-live"]:
        first = run.text(cell_id).splitlines()[0]
        assert any(label in first for label in LABELS), (cell_id, first)


def test_going_further_points_to_the_escape_suite_appendix():
    sources = cell_sources(NOTEBOOK)
    assert not {"escape-suite", "executor-alone"} & set(sources)  # they run in appendix A3
    name = re.search(r"`(A3_\w+)`", sources["to-appendix-a3"]).group(1)
    assert (NOTEBOOKS / f"{name}.ipynb").is_file(), sources["to-appendix-a3"]
