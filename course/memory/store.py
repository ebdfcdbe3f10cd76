"""The conversation store under load: other processes, two writers on one thread, growth.

For chapter 04's section on the SQLite checkpointer: reading a thread back with no model (what a
second process or a restarted kernel sees), running several threads at once, two writers on
ONE thread with and without the guard of :mod:`course.checkpoints`, and how the file grows.

The two-writer and growth measurements use :class:`ScriptedEcho`, a scripted chat model (it
replies ``noted: <message>``): the lesson is about the runtime, not about what a model says.
Command line (what a second process does)::

    python -m course.memory.store read DB THREAD
    python -m course.memory.store append DB THREAD WRITER N [--unguarded | --locked]

Not handled: stores other than SQLite, async graphs, and merging two forked branches back.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from course.checkpoints import (
    CheckpointStoreError,
    ThreadConflictError,
    close_saver,
    database_bytes,
    prune_checkpoints,
    sqlite_checkpointer,
    thread_config,
    thread_lock,
)
from course.cli import seconds, whole_number
from course.records import Record, json_safe

__all__ = [
    "GrowthRow",
    "GrowthTable",
    "IsolationCheck",
    "ReadBack",
    "ScriptedEcho",
    "ThreadCheck",
    "ThreadWritten",
    "TwoWriters",
    "WriterReport",
    "append_turns",
    "measure_growth",
    "read_thread_from_file",
    "run_threads_concurrently",
    "two_writers",
]

WRITE_MODES = ("unguarded", "guarded", "locked")


class ScriptedEcho(BaseChatModel):
    """A scripted chat model: replies ``noted: <last user message>`` after ``delay`` seconds."""

    delay: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "scripted-echo"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if self.delay:
            time.sleep(self.delay)
        last = next((m for m in reversed(messages) if m.type == "human"), None)
        text = f"noted: {last.content if last is not None else ''}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def _run_together(jobs: list[Callable[[], Any]]) -> None:
    """Run each job in its own Python thread, all released at once; re-raise the first error."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(job: Callable[[], Any]) -> None:
        try:
            start.wait()
            job()
        except BaseException as err:  # re-raised in the caller
            errors.append(err)

    workers = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]


def read_thread_from_file(path: str | Path, thread_id: str) -> list[dict]:
    """The messages of ``thread_id`` in the SQLite file ``path``, as ``{type, content}`` dicts.

    Opens the file read-only and uses only the checkpointer, no model: this is what another
    process sees. A thread never written reads back as ``[]``.
    """
    saver = sqlite_checkpointer(path, read_only=True)
    try:
        found = saver.get_tuple(thread_config(thread_id))
    finally:
        saver.conn.close()
    if found is None:
        return []
    messages = found.checkpoint["channel_values"].get("messages", [])
    return [{"type": m.type, "content": str(m.content)} for m in messages]


def run_threads_concurrently(app: Any, conversations: dict[str, list[str]]) -> dict[str, list[str]]:
    """Run each thread's user turns in its own Python thread, all started together.

    Returns ``{thread_id: [reply texts]}``. An error in any thread is raised here.
    """
    if not conversations:
        raise ValueError("conversations is empty: give {thread_id: [user messages]}")
    replies: dict[str, list[str]] = {tid: [] for tid in conversations}

    def worker(tid: str, turns: list[str]) -> None:
        for text in turns:
            out = app.invoke({"messages": [HumanMessage(text)]}, thread_config(tid))
            replies[tid].append(str(out["messages"][-1].content))

    _run_together([partial(worker, tid, list(turns)) for tid, turns in conversations.items()])
    return replies


@dataclass
class ThreadWritten(Record):
    """How many messages this kernel wrote to a thread of a checkpoint file."""

    thread: str
    messages: int
    file: str

    def __str__(self) -> str:
        return f"written by this kernel: {self.messages} messages to {self.file}"

    __repr__ = __str__


@dataclass
class ReadBack(Record):
    """A thread read back by another process (``{type, content}`` dicts), against the
    ``written`` messages of this kernel: ``identical`` says whether types and contents match,
    ``label`` is the provenance of its ai messages."""

    written: int
    read: list[dict]
    identical: bool
    label: str

    @property
    def lost(self) -> int:
        return self.written - len(self.read)

    def record(self) -> dict:
        return {"written": self.written, "read": len(self.read), "identical": self.identical,
                "lost": self.lost, "label": self.label,
                "messages": [[m["type"], m["content"]] for m in self.read]}

    def __str__(self) -> str:
        lines = [f"read by a new process: {len(self.read)} messages (the ai messages: {self.label})"]
        lines += [f"{m['type']:>6}: {m['content']}" for m in self.read]
        lines.append(f"identical to what was written: {self.identical} | messages lost: {self.lost}")
        return "\n".join(lines)

    __repr__ = __str__


@dataclass
class ThreadCheck:
    """One thread of a file after concurrent runs: its saved messages, its user messages, whether
    they are exactly what was sent, and the replies."""

    thread: str
    saved: int
    user_messages: list[str]
    exactly_sent: bool
    replies: list[str]

    def __str__(self) -> str:
        return (f"thread {self.thread!r}: {self.saved} saved messages; its user messages "
                f"{self.user_messages}; exactly what was sent: {self.exactly_sent}\n"
                f"   replies: {self.replies}")


@dataclass
class IsolationCheck(Record):
    """Threads run at once on one file: each thread's check, the model calls, and how many
    prompts held more than one conversation (``mixed``)."""

    threads: list[ThreadCheck]
    calls: int
    mixed: int

    def __str__(self) -> str:
        return "\n".join([*map(str, self.threads), f"{self.calls} model calls; prompts that "
                           f"contain both conversations: {self.mixed}"])

    __repr__ = __str__


# --- two writers on one thread --------------------------------------------------------------

@dataclass
class WriterReport:
    """What one writer was told: the turns reported saved, and the turns refused."""

    writer: str
    committed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def append_turns(path: str | Path, thread_id: str, writer: str, turns: int, mode: str = "guarded",
                 delay: float = 0.002, report: WriterReport | None = None,
                 echo: bool = False) -> WriterReport:
    """One writer appends ``turns`` user messages (``<writer>-<i>``) to a thread of ``path``.

    ``mode``: ``unguarded`` (LangGraph's plain SqliteSaver), ``guarded`` (a conflict raises
    :class:`~course.checkpoints.ThreadConflictError`; the turn is reported refused) or
    ``locked`` (each turn holds :func:`~course.checkpoints.thread_lock`: the other writer waits).
    With ``echo`` each outcome is printed as it happens (``committed X`` / ``refused X``).
    """
    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    thread_config(thread_id)  # an id that cannot be stored is refused before the file is opened
    from course.memory.chat_graph import build_chat_graph  # LangGraph: only for the work

    report = report if report is not None else WriterReport(writer)
    saver = sqlite_checkpointer(path, guard=mode != "unguarded")
    app = build_chat_graph(ScriptedEcho(delay=delay), checkpointer=saver)
    try:
        for i in range(turns):
            text = f"{writer}-{i}"
            try:
                if mode == "locked":
                    with thread_lock(path, thread_id):
                        app.invoke({"messages": [HumanMessage(text)]}, thread_config(thread_id))
                else:
                    app.invoke({"messages": [HumanMessage(text)]}, thread_config(thread_id))
            except ThreadConflictError:
                report.refused.append(text)
                if echo:
                    print("refused", text, flush=True)
                continue
            report.committed.append(text)
            if echo:
                print("committed", text, flush=True)
    finally:
        close_saver(saver)
    return report


@dataclass
class TwoWriters(Record):
    """Two writers on one thread: what each was told, and what the thread kept."""

    mode: str
    writers: list[WriterReport]
    saved: list[str]

    @property
    def committed(self) -> list[str]:
        return [t for w in self.writers for t in w.committed]

    @property
    def lost(self) -> list[str]:
        """Turns reported saved that the thread does not hold: lost silently."""
        kept = set(self.saved)
        return [t for t in self.committed if t not in kept]

    @property
    def refused(self) -> int:
        return sum(len(w.refused) for w in self.writers)

    @property
    def refused_but_kept(self) -> list[str]:
        """Turns the writer was told failed whose question the thread holds anyway (the other
        writer had already continued from it)."""
        kept = set(self.saved)
        return [t for w in self.writers for t in w.refused if t in kept]

    def record(self) -> dict:
        return {"mode": self.mode, "sent": sum(len(w.committed) + len(w.refused)
                                               for w in self.writers),
                "reported_saved": len(self.committed), "refused": self.refused,
                "refused_but_kept": len(self.refused_but_kept), "kept": len(self.saved),
                "lost_silently": len(self.lost)}

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def __str__(self) -> str:
        sent = sum(len(w.committed) + len(w.refused) for w in self.writers)
        return (f"mode={self.mode}: turns sent={sent} reported saved={len(self.committed)} "
                f"refused with an error={self.refused} refused but kept={len(self.refused_but_kept)} "
                f"kept in the thread={len(self.saved)} lost silently={len(self.lost)}")

    def _repr_html_(self) -> str:
        return f"<pre>{self}</pre>"


def two_writers(path: str | Path, thread_id: str, turns_each: int, mode: str,
                delay: float = 0.002) -> TwoWriters:
    """Two writers (two connections, in two Python threads) append to one thread at once."""
    reports = [WriterReport("A"), WriterReport("B")]
    _run_together([partial(append_turns, path, thread_id, r.writer, turns_each, mode, delay, r)
                   for r in reports])
    saved = [m["content"] for m in read_thread_from_file(path, thread_id) if m["type"] == "human"]
    return TwoWriters(mode, reports, saved)


# --- growth ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class GrowthRow:
    """A thread of ``turns`` turns: its checkpoints and the file's bytes, before/after pruning."""

    turns: int
    checkpoints: int
    bytes: int
    bytes_pruned: int


@dataclass
class GrowthTable(Record):
    """File size against turns; :meth:`ratio` says how the size scales when turns double."""

    rows: list[GrowthRow]
    message_chars: int

    def record(self) -> dict:
        return {**json_safe(self), "ratio": self.ratio()}

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def ratio(self) -> float:
        """bytes(last) / bytes(first) divided by (turns(last) / turns(first)): 1 if linear."""
        a, b = self.rows[0], self.rows[-1]
        return (b.bytes / a.bytes) / (b.turns / a.turns)

    def __str__(self) -> str:
        lines = [f"turns={r.turns} checkpoints={r.checkpoints} bytes={r.bytes} "
                 f"bytes_after_pruning={r.bytes_pruned}" for r in self.rows]
        lines.append(f"size per turn grows {self.ratio():.1f}x from {self.rows[0].turns} to "
                     f"{self.rows[-1].turns} turns (1.0x would be linear)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{r.turns}</td><td>{r.checkpoints}</td><td>{r.bytes:,}</td>"
                       f"<td>{r.bytes_pruned:,}</td></tr>" for r in self.rows)
        return ("<table><tr><th>turns</th><th>checkpoints</th><th>bytes</th>"
                f"<th>bytes after pruning</th></tr>{rows}</table>")

    def plot(self, ax: Any = None):
        """Bytes against turns, before and after pruning."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3))
        x = [r.turns for r in self.rows]
        ax.plot(x, [r.bytes for r in self.rows], "o-", label="all checkpoints kept")
        ax.plot(x, [r.bytes_pruned for r in self.rows], "s-", label="pruned to the latest")
        ax.set_xlabel("turns in the thread")
        ax.set_ylabel("bytes on disk")
        ax.set_title(f"measured: one SQLite thread, scripted messages of {self.message_chars} "
                     "characters")
        ax.legend()
        return ax


def measure_growth(turn_counts: Sequence[int] = (5, 10, 20, 40),
                   message_chars: int = 200, folder: str | Path | None = None) -> GrowthTable:
    """Write one thread of each length with the scripted model; measure the file and prune it."""
    counts = list(turn_counts)
    if len(counts) < 2 or any(not isinstance(n, int) or n < 1 for n in counts):
        raise ValueError("turn_counts needs at least two positive integers, e.g. (5, 10, 20)")
    from course.memory.chat_graph import build_chat_graph

    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="growth-"))
    rows = []
    for n in counts:
        path = folder / f"growth-{n}.sqlite"
        saver = sqlite_checkpointer(path)
        app = build_chat_graph(ScriptedEcho(), checkpointer=saver)
        for i in range(n):
            text = f"turn {i}: " + "x" * max(0, message_chars - 10)
            app.invoke({"messages": [HumanMessage(text)]}, thread_config("growth"))
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpoints = saver.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        before = database_bytes(path)
        prune_checkpoints(saver, "growth", keep=1)
        saver.conn.execute("VACUUM")
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows.append(GrowthRow(n, checkpoints, before, database_bytes(path)))
        saver.conn.close()
    return GrowthTable(rows, message_chars)


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.memory.store")
    sub = parser.add_subparsers(dest="command", required=True)
    read = sub.add_parser("read", help="print a thread's messages as JSON")
    read.add_argument("db")
    read.add_argument("thread")
    append = sub.add_parser("append", help="append N scripted turns as WRITER")
    append.add_argument("db")
    append.add_argument("thread")
    append.add_argument("writer")
    append.add_argument("turns", type=whole_number(1, example=3))
    group = append.add_mutually_exclusive_group()
    group.add_argument("--unguarded", action="store_const", dest="mode", const="unguarded")
    group.add_argument("--locked", action="store_const", dest="mode", const="locked")
    append.add_argument("--delay", type=seconds(60, allow_zero=True, example=0.002), default=0.002)
    args = parser.parse_args(argv)
    try:
        if args.command == "read":
            print(json.dumps(read_thread_from_file(args.db, args.thread), ensure_ascii=False))
            return 0
        append_turns(args.db, args.thread, args.writer, args.turns, args.mode or "guarded",
                     args.delay, echo=True)
    except (CheckpointStoreError, ValueError, TimeoutError) as err:  # names the file, the fix
        parser.exit(2, f"{parser.prog} {args.command}: {err}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
