"""Contract cases of the conversation store: a lock held by another process is waited for with a
bound and reported as a course error naming the file, the holder and the fix (never "not a SQLite
database"); the -wal/-shm files are said to belong to the database; ':memory:' is refused (nothing
would persist); a damaged file is never appended to; a thread id that cannot be stored is refused by
name; the turns a crashed writer left in the -wal file are folded in when the file is opened."""

import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

import course.checkpoints as checkpoints
from course.checkpoints import (
    LOCK_WAIT_S,
    CheckpointStoreError,
    DatabaseDamagedError,
    DatabaseLockedError,
    checkpoint_wal,
    sqlite_checkpointer,
    thread_config,
    thread_lock,
)
from course.memory.chat_graph import build_chat_graph, saved_messages
from course.memory.store import ScriptedEcho, read_thread_from_file

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


SHORT_WAIT_S = 1.0  # LOCK_WAIT_S in the tests that wait it out: read at each wait, so a shorter
# bound proves the same refusal without waiting the real 5 s


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
def test_a_lock_taken_mid_conversation_gives_a_bounded_course_error(tmp_path, hold_lock,
                                                                     monkeypatch):
    monkeypatch.setattr(checkpoints, "LOCK_WAIT_S", SHORT_WAIT_S)
    db = tmp_path / "memory.sqlite"
    app = build_chat_graph(ScriptedEcho(), checkpointer=sqlite_checkpointer(db))
    app.invoke({"messages": [HumanMessage("one")]}, thread_config("t"))
    holder = hold_lock(db)
    start = time.monotonic()
    with pytest.raises(DatabaseLockedError) as err:
        app.invoke({"messages": [HumanMessage("two")]}, thread_config("t"))
    took = time.monotonic() - start
    assert SHORT_WAIT_S <= took < SHORT_WAIT_S + 4, took  # was 60 s, then a raw OperationalError
    assert not isinstance(err.value, sqlite3.OperationalError)
    assert f"more than {SHORT_WAIT_S:g} s" in str(err.value)
    _check_locked_message(err, db, holder)


@pytest.mark.contract("hang")
def test_unguarded_saver_waits_with_the_same_bound(tmp_path, hold_lock):
    db = tmp_path / "memory.sqlite"
    saver = sqlite_checkpointer(db, guard=False)
    assert saver.conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(LOCK_WAIT_S * 1000)


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("mode", ["rollback"])
def test_a_lock_held_before_opening_is_not_called_a_broken_database(tmp_path, hold_lock, mode,
                                                                     monkeypatch):
    monkeypatch.setattr(checkpoints, "LOCK_WAIT_S", SHORT_WAIT_S)
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
@pytest.mark.parametrize("path", [":memory:", " :memory: "])
def test_a_memory_database_is_refused_naming_the_fix(path):
    with pytest.raises(CheckpointStoreError) as err:
        sqlite_checkpointer(path)
    text = str(err.value)
    assert "nothing would persist" in text and "MemorySaver" in text and "memory.sqlite" in text


@pytest.mark.contract("wrong result")
def test_a_file_database_does_not_warn(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sqlite_checkpointer(tmp_path / "m.sqlite").close()


# --- a damaged file is never appended to ----------------------------------------------------

def _appends_despite_damage(path) -> bool:
    """True when SQLite's integrity check fails on ``path`` but a plain INSERT still works:
    the damage an append would hide."""
    conn = sqlite3.connect(path)
    try:
        if conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok":
            return False
        conn.execute("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id) "
                     "VALUES ('probe', '', 'probe')")
        conn.rollback()
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def _damaged_store(tmp_path):
    """A store of six long turns with one page overwritten such that SQLite can still append to
    it (the damage is in a page an append does not read) while its integrity check fails."""
    db = tmp_path / "memory.sqlite"
    saver = sqlite_checkpointer(db)
    app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
    for i in range(6):
        app.invoke({"messages": [HumanMessage(f"turn {i} " + "x" * 3000)]}, thread_config("t"))
    saver.close()
    good = db.read_bytes()
    trial = tmp_path / "trial.sqlite"
    for page in range(2, len(good) // 4096):
        data = bytearray(good)
        data[4096 * (page - 1) + 8:4096 * (page - 1) + 200] = b"\xff" * 192
        trial.write_bytes(bytes(data))
        if _appends_despite_damage(trial):
            db.write_bytes(bytes(data))
            return db
    raise AssertionError("no page whose damage SQLite appends past")


def _check_damaged_message(text: str, db) -> None:
    assert str(db) in text and "damaged" in text and "integrity check" in text
    assert "nothing was written" in text
    assert "Fix:" in text and "restore a copy" in text and "new file name" in text


@pytest.mark.contract("data loss")
def test_a_damaged_file_is_not_appended_to(tmp_path):
    db = _damaged_store(tmp_path)
    before = db.read_bytes()
    with pytest.raises(DatabaseDamagedError) as err:
        sqlite_checkpointer(db)
    _check_damaged_message(str(err.value), db)
    assert db.read_bytes() == before
    with pytest.raises(DatabaseDamagedError):
        sqlite_checkpointer(db, guard=False)
    with pytest.raises(DatabaseDamagedError):
        sqlite_checkpointer(db, read_only=True)
    assert db.read_bytes() == before


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("command", [["append", "t", "w", "1"], ["read", "t"]])
def test_the_store_command_line_on_a_damaged_file_says_so_in_one_line(tmp_path, command):
    db = _damaged_store(tmp_path)
    before = db.read_bytes()
    verb, *rest = command
    proc = subprocess.run([sys.executable, "-m", "course.memory.store", verb, str(db), *rest],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    _check_damaged_message(proc.stderr, db)
    assert db.read_bytes() == before


# --- a thread id that is not valid Unicode --------------------------------------------------

LONE_SURROGATES = ["\ud800", "abc\udc80", "\udfff-thread"]


def _check_surrogate_message(text: str) -> None:
    assert "not valid Unicode" in text and "lone surrogate" in text
    assert "Fix:" in text and "thread_config('abc123')" in text


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("thread_id", LONE_SURROGATES)
def test_a_lone_surrogate_thread_id_is_refused_in_the_store(tmp_path, thread_id):
    db = tmp_path / "memory.sqlite"
    with pytest.raises(ValueError) as err:
        thread_config(thread_id)
    _check_surrogate_message(str(err.value))
    saver = sqlite_checkpointer(db)
    app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
    raw_config = {"configurable": {"thread_id": thread_id}}  # built by hand, not thread_config
    with pytest.raises(ValueError) as err:
        app.invoke({"messages": [HumanMessage("hi")]}, raw_config)
    _check_surrogate_message(str(err.value))
    with pytest.raises(ValueError, match="lone surrogate"):
        list(app.get_state_history(raw_config))
    with pytest.raises(ValueError):
        read_thread_from_file(db, thread_id)


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("thread_id", LONE_SURROGATES)
def test_a_lone_surrogate_thread_id_is_refused_by_the_thread_lock(tmp_path, thread_id):
    with pytest.raises(ValueError) as err, thread_lock(tmp_path / "memory.sqlite", thread_id):
        pass
    _check_surrogate_message(str(err.value))
    assert not (tmp_path / "memory.sqlite.locks").exists()


# --- the turns a crashed writer left in the -wal file ---------------------------------------

CRASHING_WRITER = """
import os, sys
from langchain_core.messages import HumanMessage
from course.checkpoints import sqlite_checkpointer, thread_config
from course.memory.chat_graph import build_chat_graph
from course.memory.store import ScriptedEcho
saver = sqlite_checkpointer(sys.argv[1])
saver.conn.execute("PRAGMA wal_autocheckpoint = 0")  # every turn stays in the -wal file
app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
for i in range(4):
    app.invoke({"messages": [HumanMessage(f"turn {i}")]}, thread_config("t"))
os._exit(0)  # a crash: no close, no checkpoint
"""


def _copy_without_wal(db, name):
    copy = db.with_name(name)
    copy.write_bytes(db.read_bytes())
    return [m["content"] for m in read_thread_from_file(copy, "t") if m["type"] == "human"]


@pytest.mark.contract("data loss")
def test_a_crashed_writers_turns_are_folded_in_when_the_file_is_opened_again(tmp_path):
    db = tmp_path / "memory.sqlite"
    subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(db)], check=True, timeout=60)
    assert Path(f"{db}-wal").stat().st_size > 0  # the crash left its turns in the -wal file
    assert _copy_without_wal(db, "early.sqlite") != [f"turn {i}" for i in range(4)]
    sqlite_checkpointer(db).close()  # opening (and closing) the store folds them in
    assert _copy_without_wal(db, "late.sqlite") == [f"turn {i}" for i in range(4)]


@pytest.mark.contract("data loss")
def test_closing_the_saver_leaves_the_main_file_complete(tmp_path):
    db = tmp_path / "memory.sqlite"
    saver = sqlite_checkpointer(db)
    saver.conn.execute("PRAGMA wal_autocheckpoint = 0")
    app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
    for i in range(3):
        app.invoke({"messages": [HumanMessage(f"turn {i}")]}, thread_config("t"))
    other = sqlite3.connect(db)  # another reader keeps the -wal file alive past the close
    other.execute("SELECT count(*) FROM checkpoints").fetchone()
    saver.close()
    assert _copy_without_wal(db, "copy.sqlite") == ["turn 0", "turn 1", "turn 2"]
    other.close()


@pytest.mark.contract("data loss")
def test_the_docstrings_say_where_a_crashed_writers_turns_live():
    assert "crashed" in checkpoints.__doc__ and "memory.sqlite-wal" in checkpoints.__doc__
    assert "folded" in sqlite_checkpointer.__doc__


@pytest.mark.contract("hang")
def test_opening_and_closing_never_wait_for_another_writer(tmp_path, hold_lock):
    """Folding the WAL in does not wait: while another process writes, what it cannot copy
    stays in the -wal file."""
    db = tmp_path / "memory.sqlite"
    sqlite_checkpointer(db).close()
    holder = hold_lock(db)  # WAL mode: another process in a write transaction
    start = time.monotonic()
    saver = sqlite_checkpointer(db)
    saver.close()
    assert time.monotonic() - start < LOCK_WAIT_S, "waited for the other writer"
    assert holder.poll() is None


@pytest.mark.contract("unclear error")
def test_damage_met_during_a_turn_is_named_as_damage(tmp_path):
    """SQLite's 'malformed' met while a turn is written becomes the same named error, saying the
    turn was not saved (a lock error stays a lock error)."""
    db = tmp_path / "memory.sqlite"
    saver = sqlite_checkpointer(db)
    with pytest.raises(DatabaseDamagedError) as err, saver._lock_bound():
        raise sqlite3.DatabaseError("database disk image is malformed")
    assert str(db) in str(err.value) and "this turn was NOT saved" in str(err.value)
    assert "Fix:" in str(err.value)
    saver.close()
