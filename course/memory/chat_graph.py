"""Where conversation memory lives: LangGraph state, checkpoints, threads and prompt assembly.

The model is a function of one token sequence; nothing persists between calls. What a chat app
"remembers" is state that the runtime saves per thread and turns back into a prompt at every
call. This module holds the pieces the memory chapter teaches, and the trimming chapter imports.

Stable API (the trimming chapter builds on it; keyword arguments only after ``chat_model``):

``build_chat_graph(chat_model, *, system_template=None, state_schema=MessagesState,
transform=None, checkpointer=None, recorder=None)`` -> a compiled LangGraph app.
    One node, ``"model"``, with an edge from START. At every call the node reads the saved
    state, applies ``transform`` to the saved messages (e.g. a trimmer; it runs BEFORE the
    prompt template adds the system message, exactly as in the published notebook), fills
    :func:`make_prompt` ``(system_template)`` with the state (so ``{language}`` comes from the
    state field of that name), calls ``chat_model`` and returns only its reply, which the
    ``add_messages`` reducer appends. ``checkpointer`` defaults to a new ``MemorySaver()``.
    ``recorder`` (a :class:`PromptRecorder`) receives a :class:`ModelCall` per call: the
    messages the model got and the exact chat-template text they became.

``make_prompt(system_template=None)`` -> ``ChatPromptTemplate``: ``("system", template)`` if
    given, then ``MessagesPlaceholder("messages")``.

``LanguageState``: TypedDict with ``messages: Annotated[Sequence[BaseMessage], add_messages]``
    and ``language: str`` (a plain field: overwritten when passed, kept when not).

``render_prompt(chat_model, messages)`` -> str: the text the model receives (ChatHuggingFace's
    own chat-template rendering; for models without one, a labelled role/content transcript).

``thread_config(thread_id)`` -> ``{"configurable": {"thread_id": thread_id}}``.

``saved_messages(app, thread_id)`` -> the messages in the latest checkpoint of a thread.

``next_token_probability(local, messages, prefix, target)`` -> :class:`NextTokenProbability`:
    P(target | chat prompt of ``messages`` + assistant text ``prefix``), from the logits.

``sqlite_checkpointer(path)`` -> a ``SqliteSaver`` on a file; ``read_thread_from_file(path,
    thread_id)`` reads a thread back without any model (also ``python -m course.memory.chat_graph read
    DB THREAD``, which prints JSON: what a second process sees).

``run_threads_concurrently(app, conversations)`` -> ``{thread_id: [replies]}``: each thread's
    turns run in its own Python thread, all at the same time, against one app.

What this module does not do: trim (see :mod:`course.trimming.policy`), summarise, count tokens for a
budget, or make a 135M model answer correctly. Servers (``ChatOpenAI``) work with the graph
builders, but :func:`render_prompt` can then only show a role/content transcript, and
:func:`next_token_probability` needs a model loaded in the kernel.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from course.checkpoints import thread_config

LANGUAGE_TEMPLATE = (
    "You are a helpful assistant. Answer all questions to the best of your ability in {language}."
)
"""The system instruction of the original notebook's language graph (thread "abc456")."""

MODEL_NODE = "model"

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
    """System instruction first (fields like ``{language}`` filled from state), then messages."""
    parts: list[Any] = []
    if system_template is not None:
        if not isinstance(system_template, str):
            raise TypeError(
                f"system_template must be a string like 'Answer in {{language}}.', got "
                f"{type(system_template).__name__}"
            )
        parts.append(("system", system_template))
    parts.append(MessagesPlaceholder(variable_name="messages"))
    return ChatPromptTemplate.from_messages(parts)


def _as_role_dicts(messages: Sequence[BaseMessage]) -> list[dict]:
    roles = {"system": "system", "human": "user", "ai": "assistant"}
    out = []
    for m in messages:
        if m.type not in roles:
            raise ValueError(f"cannot render a {m.type!r} message in a chat prompt")
        out.append({"role": roles[m.type], "content": m.content})
    return out


def render_prompt(chat_model: Any, messages: Sequence[BaseMessage]) -> str:
    """The exact text the model receives for ``messages``.

    For ``ChatHuggingFace`` this is its own chat-template rendering (the same call it makes
    before generating). A model without one (a server) gets a role/content transcript, labelled.
    """
    to_text = getattr(chat_model, "_to_chat_prompt", None)
    if callable(to_text):
        return to_text(list(messages))
    lines = ["[transcript: this model renders the chat template on its server]"]
    lines += [f"{d['role']}: {d['content']}" for d in _as_role_dicts(messages)]
    return "\n".join(lines)


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
        call = ModelCall(prompt_messages, render_prompt(chat_model, prompt_messages))
        reply = chat_model.invoke(prompt_messages)
        if not isinstance(reply, BaseMessage):
            reply = AIMessage(content=str(reply))
        call.reply = str(reply.content)
        if recorder is not None:
            recorder.append(call)
        return {"messages": [reply]}

    builder = StateGraph(state_schema)
    builder.add_node(MODEL_NODE, call_model)
    builder.add_edge(START, MODEL_NODE)
    if checkpointer is None:
        from langgraph.checkpoint.memory import MemorySaver

        checkpointer = MemorySaver()
    return builder.compile(checkpointer=checkpointer)


def saved_messages(app: Any, thread_id: str) -> list[BaseMessage]:
    """The messages in the latest checkpoint of ``thread_id`` (empty for a new thread)."""
    return list(app.get_state(thread_config(thread_id)).values.get("messages", []))


def checkpoint_history(app: Any, thread_id: str) -> list[dict]:
    """One row per checkpoint of a thread, oldest first: step, source, next node, #messages."""
    rows = []
    for snap in app.get_state_history(thread_config(thread_id)):
        meta = snap.metadata or {}
        rows.append({
            "step": meta.get("step"),
            "source": meta.get("source"),
            "next": tuple(snap.next),
            "messages": len(snap.values.get("messages", [])),
            "checkpoint_id": snap.config["configurable"]["checkpoint_id"],
        })
    return rows[::-1]


def format_messages(messages: Sequence[BaseMessage], width: int = 70) -> str:
    """One line per message: ``type: content`` (content cut to ``width`` characters)."""
    lines = []
    for m in messages:
        text = " ".join(str(m.content).split())
        if len(text) > width:
            text = text[: width - 3] + "..."
        lines.append(f"{m.type:>6}: {text}")
    return "\n".join(lines)


# --- the model is stateless: a next-token probability with and without history -------------

@dataclass
class NextTokenProbability:
    """P(target | prompt + prefix) for one prompt, read from the model's logits."""

    target: str
    prefix: str
    probability: float
    rank: int
    top: list[tuple[str, float]]
    prompt_tokens: int

    def __repr__(self) -> str:
        tops = ", ".join(f"{t!r} {p:.3f}" for t, p in self.top)
        return (f"P({self.target!r} | ...{self.prefix!r}) = {self.probability:.5f} "
                f"(rank {self.rank}, {self.prompt_tokens} prompt tokens; top: {tops})")


def next_token_probability(
    local: Any, messages: Sequence[BaseMessage | dict], prefix: str = "Your name is",
    target: str = " Bob", top_k: int = 5,
) -> NextTokenProbability:
    """Probability that the model's answer to ``messages`` continues ``prefix`` with ``target``.

    ``local`` is a :class:`course.models.LocalModel`. The prompt is the chat template with the
    generation prompt, followed by ``prefix`` as the start of the assistant's answer.
    ``target`` must be one token of the model's tokenizer.
    """
    import torch

    if not messages:
        raise ValueError("messages is empty: give at least the user's question")
    target_ids = local.tokenizer.encode(target, add_special_tokens=False)
    if len(target_ids) != 1:
        raise ValueError(
            f"target {target!r} is {len(target_ids)} tokens for this tokenizer; it must be "
            "exactly one. Fix: use the first token, e.g. ' Bob' with its leading space."
        )
    dicts = [m if isinstance(m, dict) else _as_role_dicts([m])[0] for m in messages]
    text = local.render_chat(dicts) + prefix
    ids = local.tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = local.model(input_ids=ids).logits[0, -1]
    probs = torch.softmax(logits.float(), dim=-1)
    p = float(probs[target_ids[0]])
    rank = int((probs > probs[target_ids[0]]).sum()) + 1
    values, indices = probs.topk(top_k)
    top = [(local.tokenizer.decode([int(i)]), float(v)) for v, i in zip(values, indices, strict=True)]
    return NextTokenProbability(target, prefix, p, rank, top, int(ids.shape[1]))


# --- persistence in a file, and threads side by side --------------------------------------

def read_thread_from_file(path: str | Path, thread_id: str) -> list[dict]:
    """The messages of ``thread_id`` in the SQLite file ``path``, as ``{type, content}`` dicts.

    Uses only the checkpointer, no model: this is what another process sees.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}; write a conversation first")
    with sqlite3.connect(str(path)) as conn:
        found = SqliteSaver(conn).get_tuple(thread_config(thread_id))
    if found is None:
        return []
    messages = found.checkpoint["channel_values"].get("messages", [])
    return [{"type": m.type, "content": str(m.content)} for m in messages]


def run_threads_concurrently(
    app: Any, conversations: dict[str, list[str]], extra: dict | None = None
) -> dict[str, list[str]]:
    """Run each thread's user turns in its own Python thread, all started together.

    Returns ``{thread_id: [reply texts]}``. An error in any thread is raised here.
    """
    if not conversations:
        raise ValueError("conversations is empty: give {thread_id: [user messages]}")
    replies: dict[str, list[str]] = {tid: [] for tid in conversations}
    errors: list[BaseException] = []
    start = threading.Barrier(len(conversations))

    def worker(tid: str, turns: list[str]) -> None:
        try:
            start.wait()
            for text in turns:
                out = app.invoke({"messages": [HumanMessage(text)], **(extra or {})},
                                 thread_config(tid))
                replies[tid].append(str(out["messages"][-1].content))
        except BaseException as err:  # re-raised in the caller
            errors.append(err)

    workers = [threading.Thread(target=worker, args=(tid, list(turns)))
               for tid, turns in conversations.items()]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return replies


__all__ = [
    "MODEL_NODE",
    "LanguageState",
    "ModelCall",
    "NextTokenProbability",
    "PromptRecorder",
    "build_chat_graph",
    "checkpoint_history",
    "format_messages",
    "make_prompt",
    "next_token_probability",
    "read_thread_from_file",
    "render_prompt",
    "run_threads_concurrently",
    "saved_messages",
]


def _main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "read":
        print("usage: python -m course.memory.chat_graph read DB_FILE THREAD_ID", file=sys.stderr)
        return 2
    print(json.dumps(read_thread_from_file(argv[1], argv[2]), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
