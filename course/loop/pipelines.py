"""When not to use an agent: the same task as a fixed pipeline and as an agent loop, measured.

The task is *classify -> route* a support ticket to one of three departments. The pipeline
makes one model call (a choice among the three labels, read from the next-token probabilities
of the probe model, :func:`course.models.probe_model`, which is loaded in the kernel) and routes
in code. The agent gets a ``route_to`` tool and decides, step by step in
:func:`course.loop.agent_loop.run_loop`, what to do: its model is the agent model
(:func:`course.models.chat_model`: the kernel's model, or a server) and its text is parsed into
calls by :class:`ChatModelPolicy`. Both sample at the same temperature, and :func:`compare`
measures per run: model calls, input and output tokens (the unit is named), wall time, and the
outcome (the department the ticket reached, or none), over repeated runs.

:func:`scripted_agent` runs the same loop with a *scripted* model that routes right
(:class:`ScriptedChat`, not an LLM): what a working agent costs at the least on this ticket, the
like-for-like figure beside the pipeline when the live model does not manage the call format.

:func:`batched_replies` sends several independent conversations to a model in this kernel in
one batched generation (chapter 03's tool-decision table uses it).

What this module does not do: make a small model good at either (its outputs are shown as
they are), seed a server's sampling, or choose the task for you; a pipeline wins when the steps
are known in advance.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from course.loop.agent_loop import LoopState, StepDecision, StopRules, run_loop
from course.models import agent_tokenizer, chat_model
from course.records import Record
from course.tools.calls import ToolCall
from course.tools.constrained import PrefixCache

DEPARTMENTS = ("billing", "shipping", "technical")
TICKET = "I was charged twice for my order 1234. Please refund one of the two payments."
EXPECTED = "billing"


@dataclass
class Attempt:
    """One run of one approach: what it cost and where the ticket ended up."""

    approach: str
    outcome: str  # a department, or "not routed"
    model_calls: int
    input_tokens: int
    output_tokens: int
    seconds: float
    outputs: list[str] = field(default_factory=list)  # the model's raw texts
    model: str = ""  # which model made the calls
    token_unit: str = ""  # what the token figures count
    scores: dict[str, float] = field(default_factory=dict)  # the pipeline's label probabilities


def parse_department(text: str) -> str | None:
    """The first department named in ``text`` (case-insensitive), or None."""
    found = re.search(r"\b(" + "|".join(DEPARTMENTS) + r")\b", text.lower())
    return found.group(1) if found else None


# --------------------------------------------------------------------------------------------
# The pipeline: fixed steps, the model only classifies


def classify_prompt(ticket: str) -> list[dict[str, str]]:
    """The pipeline's one question to the model."""
    return [{"role": "user", "content": (
        "Classify this support ticket as billing, shipping or technical. "
        f"Answer with one word.\nTicket: {ticket}")}]


def label_scores(local: Any, ticket: str) -> dict[str, float]:
    """One forward pass: the model's probability of each department as the first answer token.

    The pipeline constrains the model's job to a choice among three labels; the probabilities
    are renormalised over the three first tokens.
    """
    prompt = local.render_chat(classify_prompt(ticket))
    ids = local.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        logits = local.model(**ids.to(local.model.device)).logits[0, -1]
    first = {d: local.tokenizer.encode(d, add_special_tokens=False)[0] for d in DEPARTMENTS}
    chosen = torch.stack([logits[t] for t in first.values()])
    probs = torch.softmax(chosen, dim=0)
    return {d: float(p) for d, p in zip(DEPARTMENTS, probs, strict=True)}


def run_pipeline(local: Any, ticket: str = TICKET, sample: bool = True,
                 temperature: float = 0.7) -> Attempt:
    """classify (one model call, a choice among the three labels) -> route (code).

    With ``sample`` the label is drawn from the model's probabilities sharpened by
    ``temperature`` (as the agent samples its text); otherwise the most probable label.
    """
    start = time.perf_counter()
    scores = label_scores(local, ticket)
    tokens_in = local.count_tokens(local.render_chat(classify_prompt(ticket)))
    if sample:
        weights = torch.tensor([scores[d] for d in DEPARTMENTS]) ** (1.0 / temperature)
        department = DEPARTMENTS[int(torch.multinomial(weights / weights.sum(), 1))]
    else:
        department = max(scores, key=scores.__getitem__)
    shown = ", ".join(f"{d} {p:.2f}" for d, p in scores.items())
    return Attempt("pipeline", department, 1, tokens_in, 1, time.perf_counter() - start,
                   [f"label probabilities: {shown} -> {department}"],
                   f"probe model {local.short_name}", f"{local.short_name} tokenizer", scores)


# --------------------------------------------------------------------------------------------
# The agent: the model decides every step


AGENT_INSTRUCTIONS = (
    "You route support tickets. You have one tool: route_to(department), where department is "
    "billing, shipping or technical. To call it, write: CALL route_to(department=...). "
    "When the ticket is routed, write: ANSWER: routed to <department>.\n"
    "Example. Ticket: My parcel never arrived.\nCALL route_to(department=shipping)"
)

__all__ = [
    "AGENT_INSTRUCTIONS",
    "TICKET",
    "Attempt",
    "ChatModelPolicy",
    "FiguresTable",
    "MeasuredBeside",
    "PipelineVsAgent",
    "ScriptedChat",
    "agent_chat",
    "batched_replies",
    "compare_pipeline_and_agent",
    "outputs_seen",
    "parse_department",
    "scripted_agent",
]

_CALL = re.compile(r"route_to\s*\(\s*(?:department\s*=\s*)?[\"']?(\w+)", re.I)
_ANSWER = re.compile(r"ANSWER\s*:\s*(.+)", re.I | re.S)


def batched_replies(chat: Any, conversations: Sequence[Sequence[Any]]) -> list[str]:
    """``chat``'s reply to each conversation (LangChain messages or ``(role, text)`` pairs).

    A ``ChatHuggingFace`` over a transformers pipeline in this kernel gets them all in one batched
    generation (left-padded, with the pipeline's own settings: the same greedy replies as one
    ``invoke`` each, in a fraction of the time on a CPU); any other chat model, e.g. a server,
    one ``invoke`` per conversation.
    """
    from langchain_core.messages import convert_to_messages

    pipe = getattr(getattr(chat, "llm", None), "pipeline", None)
    if pipe is not None and hasattr(chat, "_to_chat_prompt") and len(conversations) > 1:
        texts = [chat._to_chat_prompt(convert_to_messages(list(c))) for c in conversations]
        return [out[0]["generated_text"] for out in pipe(texts, batch_size=len(texts))]
    replies = [chat.invoke(list(c)) for c in conversations]
    return [r.content if isinstance(r.content, str) else str(r.content) for r in replies]


def agent_chat(max_new_tokens: int = 16, sample: bool = True, temperature: float = 0.7) -> Any:
    """The agent model (:func:`course.models.chat_model`) with this comparison's sampling settings."""
    if not sample:
        return chat_model(max_new_tokens=max_new_tokens)
    return chat_model(max_new_tokens=max_new_tokens, temperature=temperature, top_p=0.95)


class ChatModelPolicy:
    """Turns the agent model's text into loop decisions; records what it really wrote.

    ``CALL route_to(department=X)`` becomes a tool call, ``ANSWER: ...`` a final answer;
    anything else is a step with no action (the loop tells the model so). Tool messages are
    given to the model as user turns starting with "Observation:". Tokens: the usage the model
    reports when it does (a server), else the agent tokenizer over the chat template.
    """

    def __init__(self, chat: Any, count: Any = None, unit: str = "") -> None:
        self.chat_model = chat
        tokenizer, label = (count, unit) if count is not None else agent_tokenizer()
        self.tokenizer, self.token_unit = tokenizer, label
        self.name = f"agent model ({type(chat).__name__})"
        self.outputs: list[str] = []
        self.prefix: PrefixCache | None = None
        self.cached_tokens = 0

    def _start_from_kept_prefix(self, messages: list[tuple[str, str]]) -> dict[str, Any]:
        """For a model in this kernel: the prompt's cache, built on the first prompt's (kept).

        Every prompt of these runs starts with the same instructions and task, so only the tokens
        after them are computed; the pipeline samples from the same scores as without the cache.
        A server decides that itself (nothing is passed).
        """
        pipe = getattr(getattr(self.chat_model, "llm", None), "pipeline", None)
        if pipe is None or not hasattr(self.chat_model, "_to_chat_prompt"):
            return {}
        from types import SimpleNamespace

        from langchain_core.messages import convert_to_messages

        text = self.chat_model._to_chat_prompt(convert_to_messages(messages))
        ids = pipe.tokenizer(text)["input_ids"]  # as the pipeline tokenizes it
        prefix = self.prefix
        first = prefix is None
        if prefix is None:
            prefix = self.prefix = PrefixCache(SimpleNamespace(model=pipe.model))
            prefix.keep(ids[:-1])
            self.name += ", prompts continued from the first prompt's KV cache"
        reused = prefix.reused
        cache = prefix.start(ids)
        if not first:
            self.cached_tokens += prefix.reused - reused
        return {"pipeline_kwargs": {"past_key_values": cache}}

    def chat(self, state: LoopState) -> list[dict[str, str]]:
        chat = [{"role": "system", "content": AGENT_INSTRUCTIONS}]
        for message in state.messages[1:]:
            if message["role"] == "tool":
                chat.append({"role": "user", "content": f"Observation: {message['content']}"})
            else:
                chat.append({"role": message["role"], "content": message["content"]})
        return chat

    def _count(self, messages: list[dict[str, str]], text: str) -> tuple[int, int]:
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                    add_generation_prompt=True)
        return (len(self.tokenizer.encode(prompt, add_special_tokens=False)),
                len(self.tokenizer.encode(text, add_special_tokens=False)))

    def __call__(self, state: LoopState) -> StepDecision:
        messages = self.chat(state)
        turns = [(m["role"], m["content"]) for m in messages]
        reply = self.chat_model.invoke(turns, **self._start_from_kept_prefix(turns))
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
        usage = getattr(reply, "usage_metadata", None) or {}
        if usage.get("input_tokens"):
            tokens_in, tokens_out = usage["input_tokens"], usage.get("output_tokens", 0)
            self.token_unit = "tokens as the server reported them"
        else:
            tokens_in, tokens_out = self._count(messages, text)
        self.outputs.append(text)
        answer = _ANSWER.search(text)
        call = _CALL.search(text)
        if call and not (answer and answer.start() < call.start()):
            return StepDecision(text, ToolCall("route_to", {"department": call.group(1).lower()}),
                                input_tokens=tokens_in, output_tokens=tokens_out)
        if answer:
            return StepDecision("", final_answer=answer.group(1).strip(), input_tokens=tokens_in,
                                output_tokens=tokens_out)
        return StepDecision(text, input_tokens=tokens_in, output_tokens=tokens_out)


def run_agent(chat: Any, ticket: str = TICKET, max_steps: int = 3) -> Attempt:
    """The agent loop over ``chat`` (a LangChain chat model) with a ``route_to`` tool."""
    routed: list[str] = []

    def route_to(department: str) -> str:
        """Send the ticket to a department.

        Args:
            department: billing, shipping or technical.
        """
        if department not in DEPARTMENTS:
            return f"unknown department {department!r}; choose billing, shipping or technical"
        routed.append(department)
        return f"ticket routed to {department}"

    policy = chat if isinstance(chat, ChatModelPolicy) else ChatModelPolicy(chat)
    policy.outputs = []
    start = time.perf_counter()
    run = run_loop(f"Route this ticket: {ticket}", policy, [route_to],
                   StopRules(max_steps=max_steps), token_unit=policy.token_unit)
    outcome = routed[-1] if routed else "not routed"
    return Attempt("agent", outcome, run.model_calls, run.input_tokens, run.output_tokens,
                   time.perf_counter() - start, list(policy.outputs), policy.name,
                   policy.token_unit)


class ScriptedChat:
    """*Scripted*: returns the given replies in order, as a chat model's ``invoke`` would (not an LLM).

    Drives :class:`ChatModelPolicy` through the same parsing and token counting as the live agent
    model, so the only difference from a live run is who wrote the text.
    """

    def __init__(self, replies: Sequence[str]) -> None:
        if not replies:
            raise ValueError("ScriptedChat needs at least one reply. Fix: pass a list of texts.")
        self.replies = list(replies)
        self.position = 0

    def invoke(self, messages: Any, **kwargs: Any) -> Any:
        from langchain_core.messages import AIMessage

        text = self.replies[min(self.position, len(self.replies) - 1)]
        self.position += 1
        return AIMessage(content=text)


def scripted_agent(ticket: str = TICKET, department: str = EXPECTED) -> Attempt:
    """The agent loop with a *scripted* model that routes right: a working agent's fewest calls.

    It writes ``CALL route_to(department=...)``, then ``ANSWER: ...``: two model calls, each
    re-reading the instructions, the ticket and what came before, counted with the agent model's
    own tokenizer (:func:`course.models.agent_tokenizer`).
    """
    chat = ScriptedChat([f"CALL route_to(department={department})",
                         f"ANSWER: routed to {department}"])
    attempt = run_agent(ChatModelPolicy(chat), ticket, max_steps=3)
    attempt.model = "scripted: a router that routes right (not an LLM)"
    return attempt


# --------------------------------------------------------------------------------------------
# Side by side


@dataclass
class PipelineVsAgent:
    """Repeated runs of both approaches, and their figures side by side."""

    attempts: dict[str, list[Attempt]]
    expected: str = EXPECTED

    def figures(self, approach: str) -> dict[str, Any]:
        runs = self.attempts[approach]
        outcomes = Counter(a.outcome for a in runs)
        return {
            "runs": len(runs),
            "model calls per run": statistics.mean(a.model_calls for a in runs),
            "max model calls": max(a.model_calls for a in runs),
            "tokens per run": statistics.mean(a.input_tokens + a.output_tokens for a in runs),
            "seconds per run": statistics.mean(a.seconds for a in runs),
            "distinct outcomes": len(outcomes),
            "distinct trajectories": len({tuple(a.outputs) for a in runs}),
            "outcomes": dict(outcomes),
            "correct": sum(a.outcome == self.expected for a in runs),
        }

    KEYS = ("runs", "model calls per run", "max model calls", "tokens per run",
            "seconds per run", "distinct outcomes", "distinct trajectories", "outcomes", "correct")

    def table(self) -> str:
        """The measured figures as ``approach: figure=value`` lines, with models and token units."""
        lines = []
        for name, runs in self.attempts.items():
            first = runs[0]
            lines.append(f"{name} [measured] model: {first.model}; tokens: {first.token_unit}")
            for key in self.KEYS:
                value = self.figures(name)[key]
                lines.append(f"  {key} = {value:.1f}" if isinstance(value, float)
                             else f"  {key} = {value}")
        return "\n".join(lines)

    def figures_table(self) -> FiguresTable:
        """:meth:`table` as a displayable record: the same lines, and each approach's model,
        token unit and figures as values."""
        return FiguresTable(self)

    def _repr_html_(self) -> str:
        names = list(self.attempts)
        head = "<tr><th>figure (measured)</th>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"
        body = ""
        for key in self.KEYS:
            cells = []
            for name in names:
                value = self.figures(name)[key]
                cells.append(f"{value:.1f}" if isinstance(value, float) else str(value))
            body += f"<tr><td>{key}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
        units = "; ".join(f"{n}: {self.attempts[n][0].model}, {self.attempts[n][0].token_unit}"
                          for n in names)
        return f"<table>{head}{body}</table><p><small>{units}</small></p>"

    def measured(self) -> MeasuredBeside:
        """The figures to set beside the course note's comparison table (a displayable record)."""
        return MeasuredBeside({name: self.figures(name) for name in ("pipeline", "agent")},
                              self.attempts["agent"][0].token_unit)


@dataclass
class FiguresTable(Record):
    """A comparison's figures as :meth:`PipelineVsAgent.table` writes them (text for the student),
    and ``{approach: {"model", "token_unit", "figures"}}`` for a machine."""

    comparison: PipelineVsAgent

    def __str__(self) -> str:
        return self.comparison.table()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {name: {"model": runs[0].model, "token_unit": runs[0].token_unit,
                       "figures": self.comparison.figures(name)}
                for name, runs in self.comparison.attempts.items()}


@dataclass
class MeasuredBeside(Record):
    """Measured figures for the note's pipeline and agent columns: who decided, cost, spread."""

    figures: dict[str, dict[str, Any]]
    token_unit: str

    def rows(self) -> list[tuple[str, str, str]]:
        p, a = self.figures["pipeline"], self.figures["agent"]
        return [
            ("who decided the steps", f"the program; {p['model calls per run']:.1f} model call(s) per run",
             f"the model; {a['model calls per run']:.1f} model call(s) per run"),
            ("cost", f"{p['tokens per run']:.0f} tokens, {p['seconds per run']:.1f} s per run",
             f"{a['tokens per run']:.0f} tokens, {a['seconds per run']:.1f} s per run"),
            ("predictability", f"{p['distinct outcomes']} outcome(s), {p['distinct trajectories']} "
             f"trajectory(ies) in {p['runs']} runs", f"{a['distinct outcomes']} outcome(s), "
             f"{a['distinct trajectories']} trajectory(ies) in {a['runs']} runs"),
            ("routed right", f"{p['correct']} of {p['runs']}", f"{a['correct']} of {a['runs']}"),
        ]

    def _repr_markdown_(self) -> str:
        n = self.figures["pipeline"]["runs"]
        head = f"| measured here (N = {n} runs each, one ticket) | pipeline | agent |\n|---|---|---|\n"
        return head + "\n".join(f"| {r} | {p} | {a} |" for r, p, a in self.rows()) + (
            f"\n\n*tokens: {self.token_unit}*")

    def __str__(self) -> str:
        return "\n".join(f"{r}: pipeline {p} | agent {a}" for r, p, a in self.rows())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def compare_pipeline_and_agent(probe: Any, chat: Any = None, runs: int = 3, ticket: str = TICKET, seed: int = 0,
            agent_steps: int = 2, max_new_tokens: int = 12,
            run_pipeline_fn: Callable[..., Attempt] = run_pipeline,
            run_agent_fn: Callable[..., Attempt] = run_agent) -> PipelineVsAgent:
    """Run both approaches ``runs`` times each (sampling seeded per run) and collect figures.

    ``probe`` is the in-kernel model whose next-token scores the pipeline reads; ``chat`` the
    agent model (default: :func:`agent_chat` with ``max_new_tokens``). Kept small on purpose (a
    CPU laptop): the agent gets ``agent_steps`` model calls of at most ``max_new_tokens`` tokens.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}.")
    policy = chat if chat is not None and not hasattr(chat, "invoke") else ChatModelPolicy(
        chat if chat is not None else agent_chat(max_new_tokens))
    attempts: dict[str, list[Attempt]] = {"pipeline": [], "agent": []}
    for i in range(runs):
        torch.manual_seed(seed + i)
        attempts["pipeline"].append(run_pipeline_fn(probe, ticket))
        torch.manual_seed(seed + i)
        attempts["agent"].append(run_agent_fn(policy, ticket, max_steps=agent_steps))
    return PipelineVsAgent(attempts)


def outputs_seen(comparison: PipelineVsAgent, approach: str) -> Sequence[str]:
    """Every raw model text of an approach, in run order (to show what the model wrote)."""
    return [text for a in comparison.attempts[approach] for text in a.outputs]
