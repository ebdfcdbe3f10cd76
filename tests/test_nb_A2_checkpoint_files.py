"""Appendix A2, a conversation's checkpoint file, two writers and prefix reuse, executed: each test
reads the values a cell computed (its displayed records, ``run.record``), not the constants it
prints. The sections came from chapter 04's Going further, with their tests."""


import nbformat

from nbharness import NOTEBOOKS

NOTEBOOK = "A2_checkpoint_files.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)
MEASURED = "measured, SmolLM2-135M-Instruct (bundled)"


def test_sqlite_conversation_survives_a_new_process(run):
    assert run.record("sqlite-write")["messages"] == 4
    read = run.record("sqlite-restart")
    assert (read["written"], read["read"], read["identical"], read["lost"]) == (4, 4, True, 0)


def test_concurrent_threads_are_isolated(run):
    check = run.record("concurrent")
    assert [t["exactly_sent"] for t in check["threads"]] == [True, True]
    assert (check["calls"], check["mixed"]) == (4, 0)


def test_two_writers_lose_turns_only_without_the_guard(run):
    assert run.text("two-writers").startswith("scripted model (ScriptedEcho)")
    rows = {r["mode"]: r for r in run.records("two-writers")}
    assert list(rows) == ["unguarded", "guarded", "locked"]
    assert all(r["sent"] == 30 for r in rows.values())
    # Without the guard every turn is reported saved; the thread keeps what it keeps, and the
    # difference is lost with no error (counted, not assumed: 0 is possible on a quiet run).
    unguarded = rows["unguarded"]
    assert (unguarded["reported_saved"], unguarded["refused"]) == (30, 0)
    assert unguarded["lost_silently"] == 30 - unguarded["kept"]
    assert rows["guarded"]["lost_silently"] == 0
    assert rows["guarded"]["reported_saved"] + rows["guarded"]["refused"] == 30
    assert rows["locked"] == {"mode": "locked", "sent": 30, "reported_saved": 30, "refused": 0,
                              "refused_but_kept": 0, "kept": 30, "lost_silently": 0}


def test_database_grows_faster_than_the_turns_and_pruning_shrinks_it(run):
    assert run.text("growth").startswith("scripted model (ScriptedEcho)")
    growth = run.record("growth")
    rows = growth["rows"]
    assert [r["turns"] for r in rows] == [5, 10, 20]
    assert [r["checkpoints"] for r in rows] == [15, 30, 60]
    per_turn = [r["bytes"] / r["turns"] for r in rows]
    assert per_turn[0] < per_turn[1] < per_turn[2] and growth["ratio"] > 1  # more than linear
    assert all(r["bytes_pruned"] < r["bytes"] / 2 for r in rows[1:])
    assert run.has_image("growth")


def test_prefix_reuse_outputs_identical_on_every_turn(run):
    assert run.text("prefix-reuse").startswith("probe model: ")
    reuse = run.record("prefix-reuse")
    turns = reuse["turns"]
    assert [t["turn"] for t in turns] == list(range(1, 5))  # DEFAULT_TURNS[:4] in the cell
    assert all(t["identical"] for t in turns)
    cached = [t["reused_tokens"] for t in turns]
    prompts = [t["prompt_tokens"] for t in turns]
    assert cached[0] == 0 and all(0 < c < p for c, p in zip(cached[1:], prompts[1:], strict=True))
    assert prompts == sorted(prompts)
    assert reuse["identical"] == len(turns) == 4
    assert run.has_image("prefix-plot")


def test_outputs_that_show_the_models_words_name_their_provenance(run):
    assert MEASURED in run.text("runtime")
    for cell in ("sqlite-restart", "concurrent"):
        assert MEASURED in run.text(cell), cell
    for cell in ("two-writers", "growth"):
        assert run.text(cell).startswith("scripted model (ScriptedEcho)"), cell


def test_the_sections_moved_out_of_chapter_04_with_their_ids(run):
    moved = ("c27", "sqlite-write", "sqlite-restart", "c30", "concurrent", "c-two-writers",
             "two-writers", "c-growth", "growth", "c32", "prefix-reuse", "prefix-plot", "c35")
    ids = [c.id for c in run.nb.cells]
    assert [i for i in ids if i in moved] == list(moved)  # all here, in the lesson's order
    lesson = {c.id for c in nbformat.read(NOTEBOOKS / "04_memory.ipynb", as_version=4).cells}
    assert not lesson & set(moved)  # moved, not copied
