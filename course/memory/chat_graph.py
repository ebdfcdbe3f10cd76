"""Where conversation memory lives: LangGraph state, threads, and the prompt rebuilt per call.

The model is a function of one token sequence; nothing persists between calls. What a chat app
"remembers" is state that the runtime saves per thread and turns back into a prompt at every
call. Chapter 04 writes the three pieces of the published notebook in its own cells, and this
module keeps the same definitions for the cells after them and for chapter 05:
:func:`compile_chat_graph` (a one-node ``StateGraph`` compiled with a checkpointer),
:func:`make_prompt` (a ``ChatPromptTemplate``: system instruction, then the saved messages) and
:class:`LanguageState` (appended messages and a plain ``language`` field) with its system
template. :func:`build_chat_graph` puts them together: its node applies an optional transform
such as a trimmer to the saved messages BEFORE the template adds the system message, as the
published notebook did, records what the model received (with the exact chat-template text),
and returns only the reply, which ``add_messages`` appends. Also here: the checkpoints of a
thread as a table that renders itself, and a reader for a thread's saved messages.

Not handled here: trimming (:mod:`course.trimming`), the SQLite store and two writers
(:mod:`course.checkpoints`, :mod:`course.memory.store`), token probabilities
(:mod:`course.memory.stateless`). A server model (``ChatOpenAI``) works with the graph, but
:func:`render_prompt` can then only show a role/content transcript: the server applies the
chat template.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from course.checkpoints import thread_config
from course.models import agent_tokenizer, notes_tokenizer
from course.records import Record, json_safe
from course.tools.protocol import CHAT_ROLES

__all__ = [
    "LANGUAGE_TEMPLATE",
    "CheckpointRow",
    "CheckpointTable",
    "LanguageState",
    "ModelCall",
    "PromptRecorder",
    "PromptSize",
    "as_role_dicts",
    "build_chat_graph",
    "checkpoint_history",
    "compile_chat_graph",
    "format_messages",
    "invoke_and_record",
    "make_prompt",
    "prompt_kind",
    "prompt_size",
    "qwen2_chat_text",
    "render_prompt",
    "saved_messages",
]

LANGUAGE_TEMPLATE = (
    "You are a helpful assistant. Answer all questions to the best of your ability in {language}."
)
"""The system instruction of the original notebook's language graph (thread "abc456")."""

MessageTransform = Callable[[list[BaseMessage]], Sequence[BaseMessage]]


class LanguageState(TypedDict):
    """The published notebook's state: appended messages and a plain ``language`` field."""

    messages: Annotated[Sequence[BaseMessage], add_messages]
    language: str


@dataclass
class ModelCall:
    """One call of the model inside the graph: what it received and what it answered."""

    messages: list[BaseMessage]
    prompt_text: str
    reply: str = ""

    def roles(self) -> list[str]:
        """The message types in order, e.g. ``['system', 'human', 'ai', 'human']``."""
        return [m.type for m in self.messages]

    def __repr__(self) -> str:
        return f"ModelCall({len(self.messages)} messages {self.roles()}, reply={self.reply!r})"


@dataclass
class PromptRecorder:
    """Collects a :class:`ModelCall` for every model call a graph makes (in call order)."""

    calls: list[ModelCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def append(self, call: ModelCall) -> None:
        with self._lock:
            self.calls.append(call)

    @property
    def last(self) -> ModelCall:
        if not self.calls:
            raise LookupError("no model call recorded yet: invoke the graph first")
        return self.calls[-1]

    def __len__(self) -> int:
        return len(self.calls)


def make_prompt(system_template: str | None = None) -> ChatPromptTemplate:
    """The published prompt: the system instruction first (fields like ``{language}`` filled
    from the state), then the saved messages; without a template, the messages alone."""
    parts = [] if system_template is None else [("system", system_template)]
    return ChatPromptTemplate.from_messages([*parts, MessagesPlaceholder(variable_name="messages")])


def as_role_dicts(messages: Sequence[BaseMessage]) -> list[dict]:
    """``[{"role": "user"|"assistant"|"system", "content": ...}]`` for chat templates.

    The roles are chapter 01's table (:data:`course.tools.protocol.CHAT_ROLES`); a conversation
    here has no tool turns, so a tool message is refused.
    """
    out = []
    for m in messages:
        role = CHAT_ROLES.get(m.type)
        if role is None or role == "tool":
            raise ValueError(f"cannot render a {m.type!r} message in a chat prompt")
        out.append({"role": role, "content": m.content})
    return out


TRANSCRIPT_MARK = "[transcript: this model renders the chat template on its server]"
"""The first line of :func:`render_prompt`'s text for a model whose chat template runs elsewhere."""


def render_prompt(chat_model: Any, messages: Sequence[BaseMessage]) -> str:
    """The exact text the model receives for ``messages``.

    For ``ChatHuggingFace`` this is its own chat-template rendering (the same call it makes
    before generating). A model without one (a server) gets a role/content transcript, labelled
    (:data:`TRANSCRIPT_MARK`).
    """
    to_text = getattr(chat_model, "_to_chat_prompt", None)
    if callable(to_text):
        return to_text(list(messages))
    lines = [TRANSCRIPT_MARK]
    lines += [f"{d['role']}: {d['content']}" for d in as_role_dicts(messages)]
    return "\n".join(lines)


def prompt_kind(prompt_text: str) -> str:
    """What :func:`render_prompt` showed, for a cell's heading: the token sequence itself (the
    chat template's text, the model in this kernel) or only a transcript (a server renders it),
    so prose about "the token sequence" is computed from the output, not assumed."""
    if prompt_text.startswith(TRANSCRIPT_MARK):
        return ("a role/content transcript: the server applies the chat template, so the token "
                "sequence itself is not visible here")
    return "the token sequence as text: the chat template applied, exactly what the model reads"


QWEN2_DEFAULT_SYSTEM = "You are a helpful assistant."
"""The system message Qwen2-Instruct's chat template inserts when a conversation has none."""


def qwen2_chat_text(messages: Sequence[BaseMessage]) -> str:
    """The text Qwen2-0.5B-Instruct's chat template makes of ``messages`` (ChatML, with its
    default system message when the conversation has none), ending with the assistant's turn."""
    dicts = as_role_dicts(messages)
    if not dicts or dicts[0]["role"] != "system":
        dicts = [{"role": "system", "content": QWEN2_DEFAULT_SYSTEM}, *dicts]
    turns = "".join(f"<|im_start|>{d['role']}\n{d['content']}<|im_end|>\n" for d in dicts)
    return turns + "<|im_start|>assistant\n"


@dataclass
class PromptSize(Record):
    """How many tokens one prompt is, counted with each tokenizer named in ``counts``."""

    counts: list[tuple[str, int]]

    def record(self) -> dict:
        return {"counts": [{"counter": label, "tokens": n} for label, n in self.counts]}

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def tokens(self, label_part: str) -> int:
        """The count whose label contains ``label_part`` (e.g. ``"Qwen"``)."""
        for label, n in self.counts:
            if label_part in label:
                return n
        raise KeyError(f"no count labelled like {label_part!r}; have {[c[0] for c in self.counts]}")

    def __str__(self) -> str:
        return "prompt size (measured): " + "; ".join(f"{n} tokens, {label}"
                                                      for label, n in self.counts)


def prompt_size(messages: Sequence[BaseMessage]) -> PromptSize:
    """Count the prompt of ``messages`` as the agent model sees it and as Qwen2-0.5B saw it.

    First with the agent model's own tokenizer and chat template (for a server whose tokenizer
    is not available offline, the probe model's, as its label says); then with the notes'
    Qwen tokenizer (Qwen2 and Qwen3 share one vocabulary) over Qwen2's chat template, or, when
    the Qwen asset is missing, the fallback :func:`course.models.notes_tokenizer` names.
    """
    dicts = as_role_dicts(messages)
    tokenizer, label = agent_tokenizer()
    text = tokenizer.apply_chat_template(dicts, tokenize=False, add_generation_prompt=True)
    counts = [(f"{label}, its chat template",
               len(tokenizer.encode(text, add_special_tokens=False)))]
    notes, notes_label = notes_tokenizer()
    qwen_text = qwen2_chat_text(messages)
    counts.append((f"{notes_label}, Qwen2-Instruct chat template",
                   len(notes.encode(qwen_text, add_special_tokens=False))))
    return PromptSize(counts)


def invoke_and_record(chat_model: Any, prompt_messages: list[BaseMessage],
                      recorder: PromptRecorder | None = None) -> BaseMessage:
    """Call the model on the prompt a node built; record what it received and answered.

    The reply is always a message (a plain string from a non-chat model is wrapped as an
    ``AIMessage``); ``recorder`` (if given) receives a :class:`ModelCall` with the exact
    chat-template text.
    """
    call = ModelCall(prompt_messages, render_prompt(chat_model, prompt_messages))
    reply = chat_model.invoke(prompt_messages)
    if not isinstance(reply, BaseMessage):
        reply = AIMessage(content=str(reply))
    call.reply = str(reply.content)
    if recorder is not None:
        recorder.append(call)
    return reply


def compile_chat_graph(call_model, state_schema=MessagesState, checkpointer=None):
    """The published graph: one node, "model", reached from START, compiled with a
    checkpointer (a ``MemorySaver`` unless one is given). ``call_model(state)`` returns only
    the reply; the state's reducers decide how it is saved."""
    workflow = StateGraph(state_schema=state_schema)
    workflow.add_node("model", call_model)
    workflow.add_edge(START, "model")
    if checkpointer is None:
        checkpointer = MemorySaver()  # the checkpoints live in this process's memory
    return workflow.compile(checkpointer=checkpointer)


def build_chat_graph(
    chat_model: Any,
    *,
    system_template: str | None = None,
    state_schema: type = MessagesState,
    transform: MessageTransform | None = None,
    checkpointer: Any | None = None,
    recorder: PromptRecorder | None = None,
):
    """A one-node chat graph (START -> model) compiled with a checkpointer.

    The node rebuilds the prompt from the saved state at every call and returns only the
    model's reply, which ``add_messages`` appends to the thread's messages.
    """
    if chat_model is None or not hasattr(chat_model, "invoke"):
        raise TypeError(
            "chat_model must be a LangChain chat model (something with .invoke(messages)), "
            f"got {type(chat_model).__name__}. Fix: pass course.models.chat_model()."
        )
    if transform is not None and not callable(transform):
        raise TypeError("transform must be a function list[BaseMessage] -> list[BaseMessage]")
    prompt = make_prompt(system_template)
    needed = set(prompt.input_variables) - {"messages"}

    def call_model(state: dict) -> dict:
        saved = list(state.get("messages", []))
        shown = list(transform(saved)) if transform is not None else saved
        missing = sorted(k for k in needed if state.get(k) in (None, ""))
        if missing:
            raise KeyError(
                f"the system template needs {missing} but the saved state has no value for it. "
                f"Fix: pass it on the first turn, e.g. app.invoke({{'messages': [...], "
                f"'{missing[0]}': ...}}, config)."
            )
        values = {k: state[k] for k in needed}
        prompt_messages = prompt.invoke({**values, "messages": shown}).to_messages()
        return {"messages": [invoke_and_record(chat_model, prompt_messages, recorder)]}

    return compile_chat_graph(call_model, state_schema, checkpointer)


def saved_messages(app: Any, thread_id: str) -> list[BaseMessage]:
    """The messages in the latest checkpoint of ``thread_id`` (empty for a new thread)."""
    return list(app.get_state(thread_config(thread_id)).values.get("messages", []))


@dataclass(frozen=True)
class CheckpointRow:
    """One checkpoint of a thread: its number, LangGraph's step and source, and the state."""

    number: int
    parent: int | None
    step: int | None
    source: str | None
    next: tuple[str, ...]
    messages: int
    last: str
    checkpoint_id: str
    config: dict = field(repr=False, compare=False)

    def __str__(self) -> str:
        nxt = ",".join(self.next) or "-"
        parent = "-" if self.parent is None else self.parent
        return (f"#{self.number} parent={parent} step={self.step} source={self.source} "
                f"next={nxt} messages={self.messages} last={self.last}")


@dataclass
class CheckpointTable(Record):
    """Every checkpoint of one thread, oldest first, with the parent each one continues.

    A straight thread has each checkpoint's parent one row up; a fork (``update_state`` on an
    older checkpoint, or two writers) shows as a parent further up. ``table[i].config`` is the
    config that selects that checkpoint (to replay or fork from it).
    """

    thread_id: str
    rows: list[CheckpointRow]

    def record(self) -> dict:
        fields = ("number", "parent", "step", "source", "next", "messages", "last")
        return json_safe({"thread_id": self.thread_id,
                          "rows": [{f: getattr(r, f) for f in fields} for r in self.rows]})

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[CheckpointRow]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> CheckpointRow:
        return self.rows[index]

    def forks(self) -> list[int]:
        """Numbers of the checkpoints that have more than one child."""
        children: dict[int, int] = {}
        for row in self.rows:
            if row.parent is not None:
                children[row.parent] = children.get(row.parent, 0) + 1
        return sorted(n for n, c in children.items() if c > 1)

    def __str__(self) -> str:
        lines = [f"thread {self.thread_id!r}: {len(self.rows)} checkpoints"]
        lines += [str(row) for row in self.rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{h}</th>" for h in
                       ("#", "parent", "step", "source", "next", "messages", "last message"))
        body = "".join(
            f"<tr><td>{r.number}</td><td>{'' if r.parent is None else r.parent}</td>"
            f"<td>{r.step}</td><td>{esc(str(r.source))}</td><td>{esc(','.join(r.next))}</td>"
            f"<td>{r.messages}</td><td>{esc(r.last)}</td></tr>" for r in self.rows)
        return (f"<p>thread <code>{esc(self.thread_id)}</code>: {len(self.rows)} checkpoints</p>"
                f"<table><tr>{head}</tr>{body}</table>")

    def plot(self, ax: Any = None):
        """Checkpoints in order (x) against the messages they hold (y), each joined to its
        parent: a straight thread is one line, a fork is two lines leaving one point."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
        by_number = {r.number: r for r in self.rows}
        for row in self.rows:
            if row.parent is not None:  # a jump back to an older parent is drawn as an arc
                parent = by_number[row.parent]
                bend = 0.0 if row.parent == row.number - 1 else 0.25
                ax.annotate("", xy=(row.number, row.messages),
                            xytext=(parent.number, parent.messages),
                            arrowprops={"arrowstyle": "-", "color": "grey",
                                        "connectionstyle": f"arc3,rad={bend}"}, zorder=1)
        for source in sorted({str(r.source) for r in self.rows}):
            mine = [r for r in self.rows if str(r.source) == source]
            ax.scatter([r.number for r in mine], [r.messages for r in mine], label=source,
                       zorder=2)
        for fork in self.forks():
            ax.annotate("fork", (fork, by_number[fork].messages), textcoords="offset points",
                        xytext=(0, 8), ha="center")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("checkpoint (oldest first)")
        ax.set_ylabel("messages in the state")
        ax.set_title(f"thread {self.thread_id!r}: each checkpoint joined to its parent")
        ax.legend(title="source", fontsize=8)
        return ax


def checkpoint_history(app: Any, thread_id: str, width: int = 40) -> CheckpointTable:
    """The checkpoints of ``thread_id`` (LangGraph's ``get_state_history``) as a table."""
    snaps = list(app.get_state_history(thread_config(thread_id)))[::-1]
    numbers = {s.config["configurable"]["checkpoint_id"]: i for i, s in enumerate(snaps, 1)}
    rows = []
    for i, snap in enumerate(snaps, 1):
        meta = snap.metadata or {}
        messages = list(snap.values.get("messages", []))
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        rows.append(CheckpointRow(
            number=i, parent=numbers.get(parent), step=meta.get("step"),
            source=meta.get("source"), next=tuple(snap.next), messages=len(messages),
            last=format_messages(messages[-1:], width).strip() if messages else "-",
            checkpoint_id=snap.config["configurable"]["checkpoint_id"], config=snap.config,
        ))
    return CheckpointTable(thread_id, rows)


def format_messages(messages: Sequence[BaseMessage], width: int = 70) -> str:
    """One line per message: ``type: content`` (content cut to ``width`` characters)."""
    lines = []
    for m in messages:
        text = " ".join(str(m.content).split())
        if len(text) > width:
            text = text[: width - 3] + "..."
        lines.append(f"{m.type:>6}: {text}")
    return "\n".join(lines)
