"""Issue 26, the conversation store: a lock held by another process is waited for with a bound
and reported as a course error naming the file, the holder and the fix (never "not a SQLite
database"); the -wal/-shm files are said to belong to the database; ':memory:' warns once."""

import sqlite3
import subprocess
import sys
import time
import warnings

import pytest
from langchain_core.messages import HumanMessage

import course.checkpoints as checkpoints
from course.checkpoints import (
    LOCK_WAIT_S,
    CheckpointStoreError,
    DatabaseLockedError,
    checkpoint_wal,
    sqlite_checkpointer,
    thread_config,
)
from course.memory.chat_graph import build_chat_graph, saved_messages
from course.memory.store import ScriptedEcho

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "rollback":
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("CREATE TABLE IF NOT EXISTS held (x)")
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def hold_lock():
    procs = []

    def start(db, mode="wal"):
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), mode],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=10)


@pytest.mark.contract("hang")
def test_the_wait_is_bounded_by_a_named_constant():
    assert 1 <= LOCK_WAIT_S <= 10
    assert issubclass(DatabaseLockedError, CheckpointStoreError)
    assert issubclass(DatabaseLockedError, RuntimeError)


def _check_locked_message(err, db, holder):
    text = str(err.value)
    assert str(db) in text
    assert f"pid {holder.pid}" in text, text       # which process holds it
    assert "Fix:" in text and "another process" in text
    assert "not a SQLite database" not in text and "new file name" not in text
    assert "-wal" in text


@pytest.mark.contract("hang")
def test_a_lock_taken_mid_conversation_gives_a_bounded_course_error(tmp_path, hold_lock):
    db = tmp_path / "memory.sqlite"
    app = build_chat_graph(ScriptedEcho(), checkpointer=sqlite_checkpointer(db))
    app.invoke({"messages": [HumanMessage("one")]}, thread_config("t"))
    holder = hold_lock(db)
    start = time.monotonic()
    with pytest.raises(DatabaseLockedError) as err:
        app.invoke({"messages": [HumanMessage("two")]}, thread_config("t"))
    took = time.monotonic() - start
    assert took < LOCK_WAIT_S + 4, took  # was 60 s, then a raw OperationalError
    assert not isinstance(err.value, sqlite3.OperationalError)
    _check_locked_message(err, db, holder)


@pytest.mark.contract("hang")
def test_unguarded_saver_waits_with_the_same_bound(tmp_path, hold_lock):
    db = tmp_path / "memory.sqlite"
    saver = sqlite_checkpointer(db, guard=False)
    assert saver.conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(LOCK_WAIT_S * 1000)


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("mode", ["rollback"])
def test_a_lock_held_before_opening_is_not_called_a_broken_database(tmp_path, hold_lock, mode):
    db = tmp_path / "memory.sqlite"
    holder = hold_lock(db, mode)
    with pytest.raises(DatabaseLockedError) as err:
        sqlite_checkpointer(db)
    _check_locked_message(err, db, holder)


@pytest.mark.contract("unclear error")
def test_a_real_broken_file_still_gets_the_new_file_advice(tmp_path):
    db = tmp_path / "memory.sqlite"
    db.write_bytes(b"\x89PNG not a database" * 100)
    with pytest.raises(CheckpointStoreError) as err:
        sqlite_checkpointer(db)
    assert not isinstance(err.value, DatabaseLockedError)
    assert "not a SQLite database" in str(err.value)


@pytest.mark.contract("data loss")
def test_the_docstring_says_wal_and_shm_belong_to_the_database():
    doc = sqlite_checkpointer.__doc__
    assert "-wal" in doc and "-shm" in doc and "together" in doc
    assert "-wal" in checkpoints.__doc__


@pytest.mark.contract("data loss")
def test_checkpoint_wal_makes_the_main_file_alone_complete(tmp_path):
    db = tmp_path / "memory.sqlite"
    saver = sqlite_checkpointer(db)
    app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
    for i in range(5):
        app.invoke({"messages": [HumanMessage(f"turn {i}")]}, thread_config("t"))
    want = saved_messages(app, "t")
    assert len(want) == 10
    checkpoint_wal(db)
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(db.read_bytes())  # the main file alone, no -wal
    again = build_chat_graph(ScriptedEcho(), checkpointer=sqlite_checkpointer(copy))
    assert saved_messages(again, "t") == want


@pytest.mark.contract("data loss")
def test_memory_database_warns_once(monkeypatch):
    monkeypatch.setattr(checkpoints, "_MEMORY_WARNED", False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sqlite_checkpointer(":memory:")
        sqlite_checkpointer(":memory:")
    said = [w for w in seen if "persists" in str(w.message)]
    assert len(said) == 1 and "MemorySaver" in str(said[0].message)


@pytest.mark.contract("wrong result")
def test_a_file_database_does_not_warn(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "_MEMORY_WARNED", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sqlite_checkpointer(tmp_path / "m.sqlite")
