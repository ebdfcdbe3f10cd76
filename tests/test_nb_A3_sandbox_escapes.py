"""Appendix A3, the sandbox escape suite: the outputs that carry the lesson, read from one offline
run of A3_sandbox_escapes.ipynb. The suite's own behaviour (every attempt, each layer) is unit
tested in test_sandbox.py; here the notebook must show it: nothing escapes, each kind of trick is
stopped by the layer its prose names, and the executor alone lets str.format through. Assertions
read the values of the records the cells display (``run.record``), not their printed prose."""

NOTEBOOK = "A3_sandbox_escapes.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)
LABELS = ("measured", "recorded", "reconstructed", "derived", "scripted")


def kinds(run) -> dict[str, tuple[int, int, list[str]]]:
    """The escape-suite cell's kinds of trick: kind -> (tried, escaped, the layers that stopped it)."""
    return {k["kind"]: (k["tried"], k["escaped"], k["stopped_by"])
            for k in run.record("escape-suite")["kinds"]}


def test_the_suite_is_shown_with_three_routes_to_one_secret(run):
    suite = run.record("suite")
    total, goals = suite["size"], suite["by_goal"]
    assert total >= 30 and sum(goals.values()) == total
    assert set(goals) == {"read-secret", "write-file", "run-command", "exhaust", "alter-host"}
    shown = [(a["kind"], a["name"], a["goal"]) for a in suite["shown"]]
    assert shown == [("os", "os.environ", "read-secret"),
                     ("dunder", "print.__self__", "read-secret"),
                     ("module walk", "random._os", "read-secret")]
    code = "\n".join(a["code"] for a in suite["shown"])
    assert "{SECRET_FILE}" in code and "COURSE_SANDBOX_CANARY" in code
    text = run.text("suite")  # the student reads the three programs in full
    assert all(a["code"] in text for a in suite["shown"])


def test_the_escape_suite_finds_no_escape(run):
    escapes = run.record("escape-suite")
    assert escapes["tried"] >= 30 and escapes["escaped"] == 0 and escapes["note"] == "(measured)"
    by_kind = kinds(run)
    assert sum(n for n, _, _ in by_kind.values()) == escapes["tried"]
    assert all(e == 0 for _, e, _ in by_kind.values())
    assert by_kind["format"][2] == ["process: clean environment"]
    assert len(run.text("escape-suite").splitlines()) < 20  # one line per kind, not per attempt
    assert run.record("executor-alone")["escaped"] == 2


def test_each_layer_stops_what_the_prose_says(run):
    escapes = run.record("escape-suite")
    tried, stopped = escapes["tried"], escapes["stopped_by"]
    assert sum(stopped.values()) == tried
    assert stopped["executor refused"] > tried / 2  # "most attempts never reached their trick"
    by_kind = kinds(run)
    for kind in ("os", "subprocess", "builtins", "io", "dunder", "module walk", "import hook",
                 "native"):
        assert by_kind[kind][2] == ["executor refused"], (kind, by_kind[kind])
    assert by_kind["alter-host"][2] == ["process: own copy"]
    resources = set(by_kind["resources"][2])
    assert {"process limit (memory)", "process limit (timeout)"} <= resources
    assert resources <= {"process limit (memory)", "process limit (timeout)",
                         "program failed, no effect"}, by_kind["resources"]


def test_the_prose_counts_are_the_runs(run):
    tried = run.record("escape-suite")["tried"]
    prose = {c.get("id"): c.source for c in run.nb.cells if c.cell_type == "markdown"}
    for cell_id in ("title", "what-zero-means", "summary"):
        assert f"{tried} programs" in prose[cell_id], cell_id
    words = {11: "eleven", 10: "ten", 12: "twelve"}
    assert f"{words.get(len(kinds(run)))} kinds" in prose["summary"], len(kinds(run))


def test_the_executor_alone_lets_both_format_walks_read_the_secret(run):
    leaky = run.record("executor-alone")
    assert (leaky["tried"], leaky["escaped"]) == (2, 2)
    assert leaky["note"] == "<- executor alone, environment passed to the child"
    assert [(r["name"], r["escaped"]) for r in leaky["results"]] == [
        ("str.format attribute walk", True), ("str.format_map attribute walk", True)]
    first = run.text("executor-alone").splitlines()[0]  # the setting, where the student reads it
    assert first.endswith("<- executor alone, environment passed to the child"), first


def test_no_output_is_a_wall_of_text(run):
    assert run.walls_of_text(limit=3000) == []


def test_the_suite_run_names_its_provenance_first(run):
    first = run.text("escape-suite").splitlines()[0]
    assert any(label in first for label in LABELS), first
