"""Where a LangGraph conversation is kept: the thread config and the one SQLite checkpointer.

Every chapter that checkpoints a graph (04's approvals, 05's memory, 06's trimming) selects a
conversation with :func:`thread_config` and, when the state must outlive the process, stores it
with :func:`sqlite_checkpointer`. In-memory checkpointing is LangGraph's own ``MemorySaver``.

Not handled here: two processes writing one thread at once (LangGraph then forks the thread
and one branch wins), pruning old checkpoints, and read-only databases.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["sqlite_checkpointer", "thread_config"]


def thread_config(thread_id: str) -> dict:
    """The config that selects a conversation: ``{"configurable": {"thread_id": ...}}``."""
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise ValueError(
            f"thread_id must be a non-empty string, got {thread_id!r}. Fix: name the "
            "conversation, e.g. thread_config('abc123')."
        )
    return {"configurable": {"thread_id": thread_id}}


def sqlite_checkpointer(path: str | Path) -> Any:
    """A ``SqliteSaver`` writing checkpoints to the file ``path`` (created if missing).

    The connection allows use from several Python threads; SqliteSaver serialises writes.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(path)
    if path.exists() and path.is_dir():
        raise IsADirectoryError(f"{path} is a directory; give a file name like memory.sqlite")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver
