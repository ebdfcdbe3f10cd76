"""The conversation store (course.checkpoints, course.memory.store) under adversarial use:
two real processes on one thread, kill -9 mid-run, read-only files, files that are not
checkpoint databases, pruning and growth. The model is scripted (``ScriptedEcho``): these tests
are about the store, not about what a model answers."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from langchain_core.messages import HumanMessage

from course.checkpoints import (
    CheckpointStoreError,
    GuardedSqliteSaver,
    ThreadConflictError,
    database_bytes,
    prune_checkpoints,
    sqlite_checkpointer,
    thread_config,
    thread_lock,
)
from course.memory.chat_graph import build_chat_graph, checkpoint_history, saved_messages
from course.memory.store import (
    ScriptedEcho,
    append_turns,
    measure_growth,
    read_thread_from_file,
    two_writers,
)


def _append(db, thread, writer, turns, *flags):
    return subprocess.Popen(
        [sys.executable, "-m", "course.memory.store", "append", str(db), thread, writer,
         str(turns), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcomes(proc) -> tuple[list[str], list[str]]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-2000:]
    lines = [line.split() for line in out.splitlines()]
    return ([t for kind, t in lines if kind == "committed"],
            [t for kind, t in lines if kind == "refused"])


def _humans(db, thread):
    return [m["content"] for m in read_thread_from_file(db, thread) if m["type"] == "human"]


def test_a_conflicting_write_is_refused_and_names_the_fix(tmp_path):
    db = tmp_path / "c.sqlite"
    first = build_chat_graph(ScriptedEcho(), checkpointer=sqlite_checkpointer(db))
    first.invoke({"messages": [HumanMessage("one")]}, thread_config("t"))
    # A second writer that read the thread before the first one's next turn:
    stale = sqlite_checkpointer(db)
    stale_parent = stale.get_tuple(thread_config("t"))
    first.invoke({"messages": [HumanMessage("two")]}, thread_config("t"))
    checkpoint = dict(stale_parent.checkpoint, id="ffffffff-ffff-6fff-8fff-ffffffffffff")
    with pytest.raises(ThreadConflictError, match=r"'t'.*c\.sqlite.*NOT saved.*thread_lock"):
        stale.put(stale_parent.config, checkpoint, {"source": "loop", "step": 9}, {})
    assert [m.content for m in saved_messages(first, "t")][-2:] == ["two", "noted: two"]
    # A deliberate fork (update_state's source) is not a conflict:
    stale.put(stale_parent.config, checkpoint, {"source": "update", "step": 9}, {})


def test_two_processes_on_one_thread_never_lose_a_reported_turn(tmp_path):
    db = tmp_path / "two.sqlite"
    sqlite_checkpointer(db).conn.close()
    procs = [_append(db, "shared", w, 25) for w in ("A", "B")]
    outcomes = [_outcomes(p) for p in procs]
    committed = [t for c, _ in outcomes for t in c]
    saved = _humans(db, "shared")
    assert set(committed) <= set(saved), "a turn reported committed is missing"
    assert len(committed) + sum(len(r) for _, r in outcomes) == 50
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_two_processes_with_the_lock_keep_every_turn_in_order(tmp_path):
    db = tmp_path / "locked.sqlite"
    sqlite_checkpointer(db).conn.close()
    procs = [_append(db, "shared", w, 20, "--locked") for w in ("A", "B")]
    outcomes = [_outcomes(p) for p in procs]
    assert all(not refused for _, refused in outcomes)
    saved = _humans(db, "shared")
    assert sorted(saved) == sorted(t for c, _ in outcomes for t in c) and len(saved) == 40
    for writer in ("A", "B"):  # each writer's turns in the order it sent them
        mine = [t for t in saved if t.startswith(writer)]
        assert mine == [f"{writer}-{i}" for i in range(20)]
    messages = read_thread_from_file(db, "shared")
    for human, ai in zip(messages[::2], messages[1::2], strict=True):
        assert ai["content"] == f"noted: {human['content']}", "a turn is split"


def test_without_the_guard_turns_are_lost_silently(tmp_path):
    """What chapter 04 shows: LangGraph's plain SqliteSaver forks the thread (measured here; the
    count varies, so the test runs a few rounds and needs one loss in any of them)."""
    losses = []
    for attempt in range(4):
        outcome = two_writers(tmp_path / f"u{attempt}.sqlite", "t", 20, "unguarded", delay=0.005)
        assert outcome.refused == 0 and len(outcome.committed) == 40
        losses.append(len(outcome.lost))
        if outcome.lost:
            break
    assert max(losses) > 0, f"no turn lost in {len(losses)} rounds: {losses}"
    guarded = two_writers(tmp_path / "g.sqlite", "t", 20, "guarded", delay=0.005)
    assert guarded.lost == []


def test_kill_9_never_loses_a_reported_turn(tmp_path):
    db = tmp_path / "kill.sqlite"
    sqlite_checkpointer(db).conn.close()
    reported: list[str] = []
    for round_ in range(3):
        proc = _append(db, "t", f"R{round_}", 400, "--locked")
        deadline = time.monotonic() + 60
        seen = 0
        while seen < 5 + 7 * round_ and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("committed"):
                reported.append(line.split()[1])
                seen += 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reported += [line.split()[1] for line in proc.stdout.read().splitlines()
                     if line.startswith("committed")]
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    saved = set(_humans(db, "t"))
    assert reported and set(reported) <= saved


def test_reading_never_writes_and_works_read_only(tmp_path):
    db = tmp_path / "ro.sqlite"
    app = build_chat_graph(ScriptedEcho(), checkpointer=sqlite_checkpointer(db))
    app.invoke({"messages": [HumanMessage("hi")]}, thread_config("t"))
    app.checkpointer.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    app.checkpointer.conn.execute("PRAGMA journal_mode=DELETE")
    app.checkpointer.conn.close()
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    os.chmod(db, 0o444)
    assert read_thread_from_file(db, "t") == [{"type": "human", "content": "hi"},
                                              {"type": "ai", "content": "noted: hi"}]
    saver = sqlite_checkpointer(db, read_only=True)
    assert saver.get_tuple(thread_config("t")) is not None
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        saver.conn.execute("CREATE TABLE x (a)")
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before
    assert not (tmp_path / "ro.sqlite-wal").exists()
    assert read_thread_from_file(db, "nobody") == []


@pytest.mark.parametrize("make, match", [
    (lambda p: p.write_bytes(b"this is not a database at all" * 100), "not a SQLite database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE checkpoints (name TEXT)"),
     "not LangGraph's"),
])
def test_files_that_are_not_checkpoint_databases_name_the_path_and_fix(tmp_path, make, match):
    db = tmp_path / "odd.sqlite"
    make(db)
    for open_it in (lambda: sqlite_checkpointer(db), lambda: read_thread_from_file(db, "t")):
        with pytest.raises(CheckpointStoreError, match=match) as err:
            open_it()
        assert str(db) in str(err.value) and "Fix" in str(err.value)


def test_a_parent_that_is_a_file_and_an_empty_database(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointStoreError, match=r"is a file, not a folder.*Fix"):
        sqlite_checkpointer(tmp_path / "file" / "db.sqlite")
    sqlite3.connect(tmp_path / "empty.sqlite").execute("CREATE TABLE other (a)")
    with pytest.raises(CheckpointStoreError, match="holds no LangGraph checkpoints"):
        read_thread_from_file(tmp_path / "empty.sqlite", "t")


def test_guard_off_gives_langgraphs_plain_saver(tmp_path):
    assert isinstance(sqlite_checkpointer(tmp_path / "a.sqlite"), GuardedSqliteSaver)
    assert not isinstance(sqlite_checkpointer(tmp_path / "b.sqlite", guard=False),
                          GuardedSqliteSaver)


def test_pruning_keeps_the_conversation_and_drops_history(tmp_path):
    db = tmp_path / "p.sqlite"
    saver = sqlite_checkpointer(db)
    app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
    for i in range(6):
        app.invoke({"messages": [HumanMessage(f"m{i}")]}, thread_config("t"))
    app.invoke({"messages": [HumanMessage("other")]}, thread_config("u"))
    messages = [m.content for m in saved_messages(app, "t")]
    assert len(checkpoint_history(app, "t")) == 18
    assert prune_checkpoints(saver, "t", keep=2) == 16
    assert [m.content for m in saved_messages(app, "t")] == messages
    assert len(checkpoint_history(app, "t")) == 2 and len(checkpoint_history(app, "u")) == 3
    app.invoke({"messages": [HumanMessage("after")]}, thread_config("t"))  # still appends
    assert saved_messages(app, "t")[-1].content == "noted: after"
    with pytest.raises(ValueError, match="keep"):
        prune_checkpoints(saver, "t", keep=0)


def test_growth_is_more_than_linear_and_pruning_shrinks_the_file(tmp_path):
    table = measure_growth((4, 8, 16), message_chars=100, folder=tmp_path)
    assert [r.checkpoints for r in table.rows] == [12, 24, 48]
    assert table.ratio() > 1.3
    assert all(r.bytes_pruned < r.bytes for r in table.rows)
    assert "turns=16 checkpoints=48" in str(table)
    assert database_bytes(tmp_path / "missing") == 0
    with pytest.raises(ValueError, match="turn_counts"):
        measure_growth((5,))


def test_thread_lock_serialises_threads_and_times_out(tmp_path):
    db = tmp_path / "l.sqlite"
    with thread_lock(db, "t"):
        with pytest.raises(TimeoutError, match="'t'"):
            with thread_lock(db, "t", timeout=0.2):
                pass
        with thread_lock(db, "other", timeout=0.2):  # another thread id is not blocked
            pass
    with thread_lock(db, "t", timeout=0.2):
        pass


def test_append_turns_rejects_a_bad_mode_and_the_cli_reads_json(tmp_path):
    db = tmp_path / "cli.sqlite"
    with pytest.raises(ValueError, match="mode"):
        append_turns(db, "t", "A", 1, mode="yolo")
    append_turns(db, "t", "A", 2)
    out = subprocess.run([sys.executable, "-m", "course.memory.store", "read", str(db), "t"],
                         capture_output=True, text=True, check=True)
    assert [m["content"] for m in json.loads(out.stdout)] == ["A-0", "noted: A-0", "A-1",
                                                             "noted: A-1"]
