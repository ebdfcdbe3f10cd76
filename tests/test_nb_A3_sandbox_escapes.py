"""Appendix A3, the sandbox escape suite: the outputs that carry the lesson, read from one offline
run of A3_sandbox_escapes.ipynb. The suite's own behaviour (every attempt, each layer) is unit
tested in test_sandbox.py; here the notebook must show it: nothing escapes, each kind of trick is
stopped by the layer its prose names, and the executor alone lets str.format through."""

import ast
import re

NOTEBOOK = "A3_sandbox_escapes.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)
LABELS = ("measured", "recorded", "reconstructed", "derived", "scripted")


def kinds(text: str) -> dict[str, tuple[int, int, str]]:
    """The per-kind lines of the escape-suite cell: kind -> (tried, escaped, stopped by)."""
    rows = re.findall(r"^  \[([\w -]+)\] (\d+) tried, escaped (\d+); stopped by: (.*)$", text,
                      flags=re.M)
    return {kind: (int(n), int(e), by) for kind, n, e, by in rows}


def test_the_suite_is_shown_with_three_routes_to_one_secret(run):
    text = run.text("suite")
    total = int(re.match(r"the suite: (\d+) programs written by the course, not by a model",
                         text).group(1))
    goals = ast.literal_eval(re.search(r"^by goal: (\{.*\})$", text, flags=re.M).group(1))
    assert total >= 30 and sum(goals.values()) == total
    assert set(goals) == {"read-secret", "write-file", "run-command", "exhaust", "alter-host"}
    shown = re.findall(r"^\[([\w -]+)\] (.+) \(goal: ([\w-]+)\)$", text, flags=re.M)
    assert shown == [("os", "os.environ", "read-secret"),
                     ("dunder", "print.__self__", "read-secret"),
                     ("module walk", "random._os", "read-secret")]
    assert "{SECRET_FILE}" in text and "COURSE_SANDBOX_CANARY" in text


def test_the_escape_suite_finds_no_escape(run):
    escapes = run.text("escape-suite")
    summary = re.search(r"^escape attempts tried: (\d+), escaped: (\d+) \(measured\)", escapes)
    assert int(summary.group(1)) >= 30 and int(summary.group(2)) == 0
    kinds = re.findall(r"^  \[([\w -]+)\] (\d+) tried, escaped (\d+); stopped by: (.*)$", escapes,
                       flags=re.M)
    assert sum(int(n) for _, n, _, _ in kinds) == int(summary.group(1))
    assert all(e == "0" for _, _, e, _ in kinds)
    assert dict((k, by) for k, _, _, by in kinds)["format"] == "process: clean environment"
    assert len(escapes.splitlines()) < 20  # one line per kind, not one per attempt
    assert re.search(r"escaped: 2\b", run.text("executor-alone"))


def test_each_layer_stops_what_the_prose_says(run):
    text = run.text("escape-suite")
    tried = int(re.search(r"^escape attempts tried: (\d+)", text, flags=re.M).group(1))
    stopped = ast.literal_eval(re.search(r"^stopped by: (\{.*\})$", text, flags=re.M).group(1))
    assert sum(stopped.values()) == tried
    assert stopped["executor refused"] > tried / 2  # "most attempts never reached their trick"
    by_kind = kinds(text)
    for kind in ("os", "subprocess", "builtins", "io", "dunder", "module walk", "import hook",
                 "native"):
        assert by_kind[kind][2] == "executor refused", (kind, by_kind[kind])
    assert by_kind["alter-host"][2] == "process: own copy"
    resources = by_kind["resources"][2]  # the layers, joined by ", " (one holds a comma)
    assert "process limit (memory)" in resources and "process limit (timeout)" in resources
    for layer in ("process limit (memory)", "process limit (timeout)", "program failed, no effect"):
        resources = resources.replace(layer, "")
    assert resources.strip(", ") == "", by_kind["resources"]


def test_the_prose_counts_are_the_runs(run):
    text = run.text("escape-suite")
    tried = int(re.search(r"^escape attempts tried: (\d+)", text, flags=re.M).group(1))
    prose = {c.get("id"): c.source for c in run.nb.cells if c.cell_type == "markdown"}
    for cell_id in ("title", "what-zero-means", "summary"):
        assert f"{tried} programs" in prose[cell_id], cell_id
    words = {11: "eleven", 10: "ten", 12: "twelve"}
    assert f"{words.get(len(kinds(text)))} kinds" in prose["summary"], len(kinds(text))


def test_the_executor_alone_lets_both_format_walks_read_the_secret(run):
    text = run.text("executor-alone")
    assert text.splitlines()[0] == ("escape attempts tried: 2, escaped: 2 <- executor alone, "
                                    "environment passed to the child")
    assert re.findall(r"^  (.+): escaped=(\w+)$", text, flags=re.M) == [
        ("str.format attribute walk", "True"), ("str.format_map attribute walk", "True")]


def test_no_output_is_a_wall_of_text(run):
    for cell in run.nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.output_type == "stream" else out.get(
                "data", {}).get("text/plain", "")
            assert len(text) <= 3000, (cell.get("id"), len(text))
            assert not (out.output_type == "stream" and out.name == "stderr"), (cell.get("id"), text)


def test_the_suite_run_names_its_provenance_first(run):
    first = run.text("escape-suite").splitlines()[0]
    assert any(label in first for label in LABELS), first
