"""Where a LangGraph conversation is kept: the thread config and the one SQLite checkpointer.

Every chapter that checkpoints a graph (04's approvals, 05's memory, 06's trimming) selects a
conversation with :func:`thread_config` and, when the state must outlive the process, stores it
with :func:`sqlite_checkpointer`. In-memory checkpointing is LangGraph's own ``MemorySaver``.

Two writers on one thread. LangGraph appends a turn by reading the thread's latest checkpoint
and writing children of it. Two processes that read the same checkpoint both write children:
the thread forks, the later branch becomes "the latest", and the other writer's turn is gone,
with no error. The checkpointer made here refuses that: before it saves a checkpoint that
continues a thread (LangGraph's ``input`` and ``loop`` checkpoints) it checks, inside one SQLite
write transaction, that the parent is still the thread's latest checkpoint, and otherwise raises
:class:`ThreadConflictError` (the turn is not saved, and the caller is told). Deliberate forks
(``update_state``, a replay from an older checkpoint) are not checked. :func:`thread_lock` makes a
second writer wait instead (an OS lock per thread, released when its process dies).

Also here: reading a database that may be read-only (no WAL set-up, no table created),
:func:`prune_checkpoints` (the checkpoints of a thread grow with the square of its turns: each
one stores the whole state), and errors that name the path and the fix for a file that is not
a checkpoint database, or one that is damaged (SQLite's integrity check runs when a file is
opened, before anything is appended: :class:`DatabaseDamagedError`).

What a database is made of. The checkpointer runs SQLite in WAL mode: ``memory.sqlite`` holds
the checkpoints written up to the last WAL checkpoint, and ``memory.sqlite-wal`` (with its index
``memory.sqlite-shm``) holds the turns written since. The three files are one database: copy or
move them together (with no writer running), or run ``PRAGMA wal_checkpoint(TRUNCATE)`` first
(:func:`checkpoint_wal`); a copy of ``memory.sqlite`` alone loses the latest turns. The saver
folds the WAL into the main file when it is opened and when it is closed
(:meth:`GuardedSqliteSaver.close`); a writer that crashed (killed, out of memory) never
closed, so the turns it wrote since then live in ``memory.sqlite-wal`` until the file is opened
again with :func:`sqlite_checkpointer` (or :func:`checkpoint_wal` runs).

Locks. Another process writing the same file holds SQLite's write lock; a write here waits for
it at most :data:`LOCK_WAIT_S` seconds, then raises :class:`DatabaseLockedError`, which names
the file, the processes that have it open (read from ``/proc`` on Linux) and the fix. A locked
database is a good database: it is never reported as "not a SQLite database".

``':memory:'`` would keep the checkpoints in this connection only, so nothing would persist:
:func:`sqlite_checkpointer` refuses it (LangGraph's ``MemorySaver`` is the in-memory choice). A
thread id must be text that can be stored (UTF-8): one holding a lone surrogate is refused.

Not handled: damage done to the file while a saver has it open (SQLite may go on from its
cache; the check finds it when the file is opened again), a new input sent on an explicit
older checkpoint (it looks exactly like a conflict: fork with ``update_state`` first), locks
on Windows (:func:`thread_lock` uses POSIX ``fcntl``), network file systems whose locks do not
work, and async savers.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.sqlite import SqliteSaver

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )

__all__ = [
    "LOCK_WAIT_S",
    "CheckpointStoreError",
    "DatabaseDamagedError",
    "DatabaseLockedError",
    "GuardedSqliteSaver",
    "ThreadConflictError",
    "checkpoint_wal",
    "close_saver",
    "database_bytes",
    "prune_checkpoints",
    "sqlite_checkpointer",
    "thread_config",
    "thread_lock",
]

CONTINUING_SOURCES = ("input", "loop")
"""LangGraph checkpoint sources that continue a thread from its latest checkpoint."""

_TABLE_COLUMNS = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                    "type", "checkpoint", "metadata"},
    "writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel",
               "type", "value"},
}


LOCK_WAIT_S = 5.0
"""Seconds a write waits for another process's SQLite write lock before DatabaseLockedError."""

WAL_NOTE = ("memory.sqlite-wal and memory.sqlite-shm beside the file belong to the database: copy "
            "them together, or checkpoint first (course.checkpoints.checkpoint_wal)")

_LOCAL_LOCKS: dict[tuple[str, int], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class CheckpointStoreError(RuntimeError):
    """A checkpoint database that cannot be used; the message names the path and the fix."""


class ThreadConflictError(CheckpointStoreError):
    """Another writer saved a checkpoint on this thread after this turn read it."""


class DatabaseLockedError(CheckpointStoreError):
    """Another process held the database's write lock for longer than LOCK_WAIT_S."""


class DatabaseDamagedError(CheckpointStoreError):
    """SQLite's integrity check fails on the file: nothing is appended to it."""


def _is_lock_error(err: BaseException) -> bool:
    if not isinstance(err, sqlite3.OperationalError):
        return False
    name = getattr(err, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(err)


def _is_damage_error(err: BaseException) -> bool:
    """A SQLite error that means the file's pages are damaged (not a lock, not a bad query)."""
    if not isinstance(err, sqlite3.DatabaseError) or _is_lock_error(err):
        return False
    name = getattr(err, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in str(err)


def _damaged_error(path: Path | str | None, detail: str, found: str = "SQLite's integrity check",
                   outcome: str = "nothing was written to it") -> DatabaseDamagedError:
    where = path or "the checkpoint database"
    first = next((line for line in detail.splitlines() if not line.startswith("***")), "?")[:200]
    return DatabaseDamagedError(
        f"{where} is damaged ({found}: {first}); {outcome}. "
        "Fix: restore a copy of the file (with its -wal file, if it has one), or give the "
        "checkpointer a new file name to start a new store; keep the damaged file, "
        f"`sqlite3 {where} .recover` may rescue its turns.")


def _check_intact(conn: sqlite3.Connection, path: Path) -> None:
    """Raise :class:`DatabaseDamagedError` unless SQLite's integrity check passes."""
    try:
        rows = conn.execute("PRAGMA integrity_check(3)").fetchall()
    except sqlite3.DatabaseError as err:
        if _is_lock_error(err):
            raise _locked_error(path, err) from err
        raise _damaged_error(path, str(err)) from err
    problems = [str(row[0]) for row in rows if row[0] != "ok"]
    if problems:
        raise _damaged_error(path, problems[0])


def _fold_wal(conn: sqlite3.Connection) -> None:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` without waiting: while another connection writes or
    reads, SQLite copies what it can into the main file (as PASSIVE) and the rest stays in the
    -wal file, which is never lost (see the module docstring)."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:  # locked or damaged: the -wal file keeps the turns
        pass
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT_S * 1000)}")


def _holders(path: Path) -> list[str]:
    """Other processes that have the database (or its -wal/-shm) open: 'pid (command)'."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    try:
        wanted = {str(Path(f"{path}{suffix}").resolve()) for suffix in ("", "-wal", "-shm")}
    except OSError:
        return []
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = list((entry / "fd").iterdir())
            if any(os.readlink(fd) in wanted for fd in fds):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    "utf-8", "replace").strip()
                found.append(f"pid {entry.name} ({cmd[:120] or '?'})")
        except OSError:
            continue
    return found


def _locked_error(path: Path | str | None, err: BaseException) -> DatabaseLockedError:
    where = path or "the checkpoint database"
    holders = _holders(Path(path)) if path else []
    who = (f"held by another process: {', '.join(holders)}" if holders else
           "held by another process (or another connection of this one)")
    return DatabaseLockedError(
        f"{where} is locked ({err}): its write lock stayed {who} for more than {LOCK_WAIT_S:g} s. "
        "The database itself is fine; this turn was NOT saved. Fix: let that process finish or "
        "stop it (one writer at a time: course.checkpoints.thread_lock), then send the turn "
        f"again. Note: {WAL_NOTE}.")


def thread_config(thread_id: str) -> RunnableConfig:
    """The config that selects a conversation: ``{"configurable": {"thread_id": ...}}``.

    The id must be non-empty text that can be stored (UTF-8): a lone surrogate is refused.
    """
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise ValueError(
            f"thread_id must be a non-empty string, got {thread_id!r}. Fix: name the "
            "conversation, e.g. thread_config('abc123')."
        )
    try:
        thread_id.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"thread_id {thread_id[:80]!r} is not valid Unicode text: it holds a lone surrogate "
            f"({thread_id[err.start]!r} at position {err.start}), which cannot be stored. Fix: "
            "name the conversation with ordinary text, e.g. thread_config('abc123'); a name "
            "read from bytes should be decoded with errors='replace'."
        ) from None
    return {"configurable": {"thread_id": thread_id}}


def _checked_thread(config: Any) -> None:
    """Refuse a config whose thread id could not be stored (see :func:`thread_config`)."""
    conf = (config or {}).get("configurable", {}) if isinstance(config, dict) else {}
    if isinstance(conf.get("thread_id"), str):
        thread_config(conf["thread_id"])


class GuardedSqliteSaver(SqliteSaver):
    """``SqliteSaver`` that refuses to fork a thread silently (see the module docstring)."""

    path: Path | None = None

    _fail_fast_until: float = 0.0

    @contextmanager
    def _lock_bound(self) -> Iterator[None]:
        """Translate SQLite's lock errors; one turn waits LOCK_WAIT_S once, not per write.

        After a write gave up on a lock, the writes LangGraph makes right after it (the error
        it records, the next step) wait only a moment, so one ``invoke`` fails in about
        LOCK_WAIT_S seconds rather than a multiple of it.
        """
        fast = time.monotonic() < self._fail_fast_until
        if fast:
            self.conn.execute("PRAGMA busy_timeout = 100")
        try:
            yield
        except sqlite3.DatabaseError as err:
            if _is_lock_error(err):
                self._fail_fast_until = time.monotonic() + LOCK_WAIT_S
                raise _locked_error(self.path, err) from err
            if _is_damage_error(err):  # damage in a page the opening check could not see
                raise _damaged_error(self.path, str(err), "SQLite",
                                     "this turn was NOT saved") from err
            raise
        finally:
            if fast:
                self.conn.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT_S * 1000)}")

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        # SqliteSaver.cursor, with the lock bound taken inside self.lock: LangGraph's writer
        # threads queue on self.lock, and each must see that the one before it gave up.
        with self.lock, self._lock_bound():
            self.setup()
            cur = self.conn.cursor()
            try:
                yield cur
            finally:
                if transaction:
                    self.conn.commit()
                cur.close()

    def close(self) -> None:
        """Close the saver's connection after folding its WAL in: :func:`close_saver`."""
        close_saver(self)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        _checked_thread(config)
        return super().get_tuple(config)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        _checked_thread(config)
        return super().list(config, filter=filter, before=before, limit=limit)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        _checked_thread(config)
        return super().put_writes(config, writes, task_id, task_path)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        _checked_thread(config)
        if (metadata or {}).get("source") not in CONTINUING_SOURCES:
            return super().put(config, checkpoint, metadata, new_versions)
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        parent = conf.get("checkpoint_id")
        with self.lock, self._lock_bound():
            self.setup()
            self.conn.commit()  # close any implicit transaction before taking the write lock
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                row = self.conn.execute(
                    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND "
                    "checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1", (thread_id, ns),
                ).fetchone()
                latest = row[0] if row else None
                if latest != parent:
                    raise ThreadConflictError(
                        f"thread {thread_id!r} in {self.path or 'this database'} was written by "
                        f"another writer after this turn read it (this turn continues checkpoint "
                        f"{parent}, the thread's latest is now {latest}); this turn was NOT "
                        "saved. Fix: one writer per thread (wrap the turn in "
                        "course.checkpoints.thread_lock(path, thread_id)), or send the turn again."
                    )
                type_, blob = self.serde.dumps_typed(checkpoint)
                meta = self._metadata_json(config, metadata)
                self.conn.execute(
                    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (thread_id, ns, checkpoint["id"], parent, type_, blob, meta),
                )
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
        return {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    @staticmethod
    def _metadata_json(config: RunnableConfig, metadata: Any) -> bytes:
        import json

        from langgraph.checkpoint.base import get_checkpoint_metadata

        return json.dumps(get_checkpoint_metadata(config, metadata),
                          ensure_ascii=False).encode("utf-8", "ignore")


def _check_tables(conn: sqlite3.Connection, path: Path) -> bool:
    """True if the checkpoint tables exist with LangGraph's columns; an error if foreign."""
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as err:
        if _is_lock_error(err):  # a good database another process has locked
            raise _locked_error(path, err) from err
        raise CheckpointStoreError(
            f"{path} is not a SQLite database ({err}). Fix: give the checkpointer a new file "
            "name, or move that file away."
        ) from err
    for table, needed in _TABLE_COLUMNS.items():
        if table in names:
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            if not needed <= have:
                raise CheckpointStoreError(
                    f"{path} has a table {table!r} that is not LangGraph's (missing columns "
                    f"{sorted(needed - have)}). Fix: use a separate file for checkpoints."
                )
    return set(_TABLE_COLUMNS) <= names


def _parent_dir(path: Path) -> None:
    for parent in [path.parent, *path.parent.parents]:
        if parent.exists() and not parent.is_dir():
            raise CheckpointStoreError(
                f"cannot create {path}: {parent} is a file, not a folder. Fix: choose a path "
                "whose folders are folders."
            )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CheckpointStoreError(f"cannot create the folder of {path} ({err}). Fix: choose a "
                                   "writable place, e.g. a temporary folder.") from err


def sqlite_checkpointer(path: str | Path, *, read_only: bool = False,
                        guard: bool = True) -> SqliteSaver:
    """A checkpointer on the SQLite file ``path``.

    Writable (default): the file and its folder are created if missing, and the saver refuses
    to fork a thread silently (``guard=False`` gives LangGraph's plain ``SqliteSaver``, to show
    what happens without it). ``read_only=True`` opens an existing file without writing
    anything to it (works on a read-only mount). The connection allows use from several Python
    threads; the saver serialises its own writes.

    The database is ``path`` together with ``path-wal`` and ``path-shm`` (WAL mode): copy or
    move the three together, or call :func:`checkpoint_wal` first; ``path`` alone may lack the
    latest turns. A write waits at most :data:`LOCK_WAIT_S` s for another process's lock, then
    raises :class:`DatabaseLockedError` naming the file and the processes holding it.
    The file must pass SQLite's integrity check (else :class:`DatabaseDamagedError`, and
    nothing is written), and the WAL a crashed writer left is folded into it on opening.
    ``':memory:'`` is refused (nothing would persist): use ``MemorySaver`` for that.
    """
    if str(path).strip() == ":memory:":
        raise CheckpointStoreError(
            "sqlite_checkpointer(':memory:') would keep the checkpoints in this connection only: "
            "nothing would persist past the process (or another checkpointer). Fix: give a file "
            "name such as 'memory.sqlite' to keep the conversation, or use LangGraph's "
            "MemorySaver (langgraph.checkpoint.memory) for an in-memory one.")
    path = Path(path)
    if path.is_dir():
        raise CheckpointStoreError(f"{path} is a folder; give a file name like memory.sqlite")
    if read_only:
        return _read_only_saver(path)
    _parent_dir(path)
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=LOCK_WAIT_S)
        _check_tables(conn, path)
        _check_intact(conn, path)
        saver = (GuardedSqliteSaver if guard else SqliteSaver)(conn)
        saver.setup()
        _fold_wal(conn)  # the turns a crashed writer left in the -wal file
    except sqlite3.Error as err:
        if _is_lock_error(err):
            raise _locked_error(path, err) from err
        raise CheckpointStoreError(f"cannot use {path} as a checkpoint database ({err}). Fix: "
                                   "check that the file and its folder are writable, or pass "
                                   "read_only=True to read it.") from err
    if isinstance(saver, GuardedSqliteSaver):
        saver.path = path
    return saver


def close_saver(saver: SqliteSaver) -> None:
    """Fold the WAL into the main file, then close the saver's connection (the end of a
    conversation). Afterwards the ``.sqlite`` file alone holds every turn written through it,
    unless another connection was reading or writing at that moment (its turns then stay in
    the -wal file, and the last connection to close folds them in)."""
    with saver.lock:
        _fold_wal(saver.conn)
        saver.conn.close()


def checkpoint_wal(path: str | Path) -> None:
    """Fold ``path-wal`` into ``path`` (``PRAGMA wal_checkpoint(TRUNCATE)``), before a copy.

    Afterwards ``path`` alone holds every committed turn (while no writer adds more).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointStoreError(f"no checkpoint file at {path}. Fix: check the path.")
    conn = sqlite3.connect(str(path), timeout=LOCK_WAIT_S)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.OperationalError as err:
        if _is_lock_error(err):
            raise _locked_error(path, err) from err
        raise
    finally:
        conn.close()
    if busy:
        raise _locked_error(path, sqlite3.OperationalError("wal_checkpoint busy"))


def _read_only_saver(path: Path) -> SqliteSaver:
    if not path.is_file():
        raise CheckpointStoreError(f"no checkpoint file at {path}. Fix: write a conversation "
                                   "first, or check the path.")
    uri = path.resolve().as_uri()
    last: Exception | None = None
    # mode=ro reads a file others may be writing; immutable=1 also reads a WAL database on a
    # read-only mount, where SQLite cannot create its shared-memory file.
    for query in ("?mode=ro", "?mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(uri + query, uri=True, check_same_thread=False)
            has_tables = _check_tables(conn, path)
            _check_intact(conn, path)
            break
        except sqlite3.OperationalError as err:
            last = err
    else:
        raise CheckpointStoreError(f"cannot open {path} read-only ({last}). Fix: check that the "
                                   "file is readable.")
    if not has_tables:
        raise CheckpointStoreError(f"{path} holds no LangGraph checkpoints. Fix: check the path, "
                                   "or write a conversation first.")
    saver = SqliteSaver(conn)
    saver.is_setup = True  # never run setup(): it switches to WAL and creates tables
    return saver


def prune_checkpoints(saver: SqliteSaver, thread_id: str, keep: int = 1) -> int:
    """Delete all but the newest ``keep`` checkpoints of a thread (and their pending writes).

    The thread reads back the same afterwards (its latest checkpoint holds the whole state);
    what is lost is the history before it (time travel to a pruned checkpoint). Returns the
    number of checkpoints deleted. The file shrinks only after ``VACUUM``.
    """
    thread_config(thread_id)
    if not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer >= 1 (the latest checkpoint holds the "
                         f"conversation), got {keep!r}")
    with saver.cursor() as cur:
        ids = [r[0] for r in cur.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id DESC", (thread_id,))]
        doomed = ids[keep:]
        for cid in doomed:
            cur.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
                        (thread_id, cid))
            cur.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ?",
                        (thread_id, cid))
    return len(doomed)


def database_bytes(path: str | Path) -> int:
    """Bytes on disk of a SQLite database with its write-ahead log (``-wal``), if any."""
    path = Path(path)
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


@contextmanager
def thread_lock(path: str | Path, thread_id: str, timeout: float = 60.0) -> Iterator[None]:
    """Hold the writer's lock of one thread of the database ``path`` (waits up to ``timeout``).

    An OS byte-range lock on ``<path>.locks``: other processes and other Python threads wait;
    the lock is released when the block ends or the process dies (kill -9 included).
    """
    import fcntl  # POSIX only: imported here so that the rest of the module loads on Windows

    thread_config(thread_id)
    lock_path = Path(f"{path}.locks")
    offset = int.from_bytes(hashlib.sha1(thread_id.encode()).digest()[:4], "big") & 0x7FFFFFFF
    # OS locks belong to a process: Python threads of one process queue on a lock of their own.
    with _LOCKS_GUARD:
        local = _LOCAL_LOCKS.setdefault((str(lock_path.resolve()), offset), threading.Lock())
    if not local.acquire(timeout=timeout):
        raise TimeoutError(f"thread {thread_id!r} of {path} stayed locked by another writer "
                           f"for {timeout:.0f} s")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"thread {thread_id!r} of {path} stayed locked by another "
                                       f"writer for {timeout:.0f} s") from None
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
    finally:
        os.close(fd)
        local.release()
