"""Appendix A1, tool calling on a public benchmark (BFCL) and accuracy against the number of tools
shown: the values that carry the appendix, read from what the student sees under each cell of one
offline run (the displayed records' values where the cell shows a record), against the committed
full runs (course/data/bfcl_bundled.json, course/data/tool_count_accuracy.json)."""

from dataclasses import asdict

NOTEBOOK = "A1_tool_benchmarks.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def test_probe_model_is_named(run):
    assert run.text("setup").startswith("probe model: ")


def test_bfcl_sample_and_the_committed_run(run):
    from course.tools.bfcl import BFCL_LAST_RUN, BfclRun

    text = run.text("bfcl-sample")
    assert text.startswith("BFCL v4 (measured here, a sample; model SmolLM2-135M-Instruct; judge: "
                           "bfcl-eval 2026.3.23 bfcl_eval/eval_checker/ast_eval/ast_checker.py")
    sample, full = run.records("bfcl-sample")
    assert (sample["provenance"], sample["model"]) == ("measured here, a sample", "SmolLM2-135M-Instruct")
    assert [(r["category"], r["mode"], r["n"]) for r in sample["rows"]] == [
        ("simple", "free", 2), ("simple", "constrained", 2)]
    constrained = sample["rows"][1]
    assert constrained["well_formed"] == constrained["n"]  # the format is guaranteed
    assert "native tool calling (level 2): about 95-99% well-formed [recorded, note 003]" in text
    saved = BfclRun.from_json(BFCL_LAST_RUN)
    assert full["provenance"] == ("measured (committed result of an earlier run: "
                                  "course/data/bfcl_bundled.json)") and full["when"] == saved.when
    assert "python -m course.tools.bfcl" in saved.when
    assert full["rows"] == [asdict(row) for row in saved.rows]
    assert len(text) < 3000


def test_tool_count_accuracy_is_measured(run):
    curve = run.record("tool-count")
    assert (curve["model"], curve["provenance"]) == ("SmolLM2-135M-Instruct", "measured")
    rows = curve["rows"]
    assert [r["shown"] for r in rows] == [5, 10]  # the live sample: one list of each size
    for r in rows:
        assert r["low"] == r["accuracy"] == r["high"] and r["draws"] == 1
        correct = r["accuracy"] * r["asked"]  # a share of the requests asked
        assert 1 <= r["asked"] <= 10 and abs(correct - round(correct)) < 1e-9
    assert rows[1]["prompt_tokens"] > rows[0]["prompt_tokens"]  # 10 tools cost more prompt than 5
    head = run.text("tool-count").splitlines()[0]
    assert "[measured]" in head and "SmolLM2-135M-Instruct" in head
    assert run.has_image("tool-count-plot")


def test_the_last_full_tool_count_run_is_shown_with_its_provenance(run):
    from course.tools.tool_count import LAST_FULL_RUN, ToolCountCurve

    shown = run.record("tool-count-plot")
    assert shown["provenance"] == ("measured (committed result of an earlier run: "
                                  "course/data/tool_count_accuracy.json)")
    assert shown["when"].startswith("20") and "python -m course.tools.tool_count" in shown["when"]
    assert ("[measured (committed result of an earlier run: course/data/tool_count_accuracy.json), 20"
            in run.text("tool-count-plot").splitlines()[0])
    sizes = [r["shown"] for r in shown["rows"]]
    assert sizes[:4] == [5, 10, 25, 50] and 50 < sizes[4] <= 122 and sizes[5] == "BM25 top-5"
    assert all(r["draws"] == 3 and r["asked"] == 3 * 44 for r in shown["rows"][:5])  # 3 x 44
    assert shown["rows"][5]["asked"] == 44
    assert "tools do not fit the model's context window of 8192 tokens" in shown["note"]  # 122 -> cut
    saved = ToolCountCurve.from_json(LAST_FULL_RUN).summary()  # the shown figures are the file's
    assert [saved[s][0] for s in sizes] == [r["accuracy"] for r in shown["rows"]]


def test_the_catalogue_is_chapter_01s(run):
    from course.tools.catalogue import LABELLED_REQUESTS, build_catalogue

    shown = {r["shown"]: r["value"] for r in run.records("tool-catalogue") if set(r) == {"shown", "value"}}
    catalogue = shown["catalogue"]
    assert (catalogue["tools"], catalogue["requests"]) == (len(build_catalogue()), len(LABELLED_REQUESTS))
    assert catalogue["example"] == list(LABELLED_REQUESTS[0])
    assert (len(build_catalogue()), len(LABELLED_REQUESTS)) == (122, 44)
    assert shown["context_window"] == 8192  # the probe model's, which 122 tools overflow
