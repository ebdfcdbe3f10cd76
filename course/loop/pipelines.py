"""When not to use an agent: the same task as a fixed pipeline and as an agent loop, measured.

The task is *classify -> route* a support ticket to one of three departments. The pipeline
makes one model call (a choice among the three labels, read from the model's next-token
probabilities) and routes in code. The agent gets a ``route_to``
tool and decides, step by step in :func:`course.loop.agent_loop.run_loop`, what to do; its text is parsed
into calls by :class:`LocalModelPolicy`. Both use the real local model with the same sampling
settings, and :func:`compare` measures per run: model calls, input and output tokens, wall
time, and the outcome (the department the ticket reached, or none), over repeated runs.

What this module does not do: make the small model good at either (its outputs are shown as
they are), or choose the task for you; a pipeline wins when the steps are known in advance.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from course.loop.agent_loop import LoopState, StepDecision, StopRules, run_loop
from course.tools.calls import ToolCall

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


def _generate(local: Any, messages: list[dict], max_new_tokens: int, sample: bool,
              temperature: float) -> tuple[str, int, int]:
    """The model's reply with its input and output token counts (its own tokenizer)."""
    kwargs = {"do_sample": True, "temperature": temperature, "top_p": 0.95} if sample else {}
    text = local.generate(messages, max_new_tokens=max_new_tokens, **kwargs)
    return text, local.count_tokens(local.render_chat(messages)), local.count_tokens(text)


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
    import torch

    prompt = local.render_chat(classify_prompt(ticket))
    ids = local.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        logits = local.model(**ids).logits[0, -1]
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
    import torch

    start = time.perf_counter()
    scores = label_scores(local, ticket)
    tokens_in = local.count_tokens(local.render_chat(classify_prompt(ticket)))
    if sample:
        weights = torch.tensor([scores[d] for d in DEPARTMENTS]) ** (1.0 / temperature)
        department = DEPARTMENTS[int(torch.multinomial(weights / weights.sum(), 1))]
    else:
        department = max(scores, key=scores.get)
    shown = ", ".join(f"{d} {p:.2f}" for d, p in scores.items())
    return Attempt("pipeline", department, 1, tokens_in, 1, time.perf_counter() - start,
                   [f"label probabilities: {shown} -> {department}"])


# --------------------------------------------------------------------------------------------
# The agent: the model decides every step


AGENT_INSTRUCTIONS = (
    "You route support tickets. You have one tool: route_to(department), where department is "
    "billing, shipping or technical. To call it, write: CALL route_to(department=...). "
    "When the ticket is routed, write: ANSWER: routed to <department>.\n"
    "Example. Ticket: My parcel never arrived.\nCALL route_to(department=shipping)"
)

_CALL = re.compile(r"route_to\s*\(\s*(?:department\s*=\s*)?[\"']?(\w+)", re.I)
_ANSWER = re.compile(r"ANSWER\s*:\s*(.+)", re.I | re.S)


class LocalModelPolicy:
    """Turns the local model's text into loop decisions; records what it really wrote.

    ``CALL route_to(department=X)`` becomes a tool call, ``ANSWER: ...`` a final answer;
    anything else is a step with no action (the loop tells the model so). Tool messages are
    given to the model as user turns starting with "Observation:".
    """

    def __init__(self, local: Any, max_new_tokens: int = 16, sample: bool = True,
                 temperature: float = 0.7) -> None:
        self.local, self.max_new_tokens = local, max_new_tokens
        self.sample, self.temperature = sample, temperature
        self.name = f"local model ({getattr(local, 'name', 'transformers')})"
        self.outputs: list[str] = []

    def chat(self, state: LoopState) -> list[dict[str, str]]:
        chat = [{"role": "system", "content": AGENT_INSTRUCTIONS}]
        for message in state.messages[1:]:
            if message["role"] == "tool":
                chat.append({"role": "user", "content": f"Observation: {message['content']}"})
            else:
                chat.append({"role": message["role"], "content": message["content"]})
        return chat

    def __call__(self, state: LoopState) -> StepDecision:
        text, tokens_in, tokens_out = _generate(self.local, self.chat(state), self.max_new_tokens,
                                                self.sample, self.temperature)
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


def run_agent(local: Any, ticket: str = TICKET, max_steps: int = 3, sample: bool = True,
              temperature: float = 0.7, max_new_tokens: int = 16) -> Attempt:
    """The agent loop over the local model with a ``route_to`` tool; at most ``max_steps`` calls."""
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

    policy = LocalModelPolicy(local, max_new_tokens, sample, temperature)
    start = time.perf_counter()
    run = run_loop(f"Route this ticket: {ticket}", policy, [route_to],
                   StopRules(max_steps=max_steps))
    outcome = routed[-1] if routed else "not routed"
    return Attempt("agent", outcome, run.model_calls, run.input_tokens, run.output_tokens,
                   time.perf_counter() - start, policy.outputs)


# --------------------------------------------------------------------------------------------
# Side by side


@dataclass
class Comparison:
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

    def table(self) -> str:
        """The measured figures, one row per figure, one column per approach."""
        names = list(self.attempts)
        rows = [("figure (measured)", *names)]
        keys = ["runs", "model calls per run", "max model calls", "tokens per run",
                "seconds per run", "distinct outcomes", "distinct trajectories", "outcomes",
                "correct"]
        for key in keys:
            cells = []
            for name in names:
                value = self.figures(name)[key]
                cells.append(f"{value:.1f}" if isinstance(value, float) else str(value))
            rows.append((key, *cells))
        width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True))
                         for r in rows)

    def note_table(self) -> str:
        """The course note's comparison table, with the cost and predictability rows measured."""
        p, a = self.figures("pipeline"), self.figures("agent")

        def cost(f: dict) -> str:
            return (f"{f['model calls per run']:.1f} calls, {f['tokens per run']:.0f} tokens, "
                    f"{f['seconds per run']:.1f} s per run (measured)")

        def spread(f: dict) -> str:
            return (f"{f['distinct outcomes']} distinct outcome(s), {f['distinct trajectories']} "
                    f"distinct trajectories in {f['runs']} runs (measured)")

        rows = [
            ("", "pipeline", "tool use", "agent"),
            ("who decides the steps", "the program", "the model, one step",
             "the model, repeatedly"),
            ("side effects", "none", "possible", "likely"),
            ("state", "prompt", "prompt + one result", "accumulates, checkpointed, trimmed"),
            ("cost", cost(p), "one extra generation (not measured here)", cost(a)),
            ("predictability", spread(p), "medium (not measured here)", spread(a)),
            ("what to evaluate", "retrieval + answer", "call correctness + answer",
             "trajectory, success, cost"),
        ]
        return "\n".join("| " + " | ".join(r) + " |" + ("\n|---|---|---|---|" if i == 0 else "")
                         for i, r in enumerate(rows))


def compare(local: Any, runs: int = 3, ticket: str = TICKET, seed: int = 0,
            agent_steps: int = 2, max_new_tokens: int = 12,
            run_pipeline_fn: Callable[..., Attempt] = run_pipeline,
            run_agent_fn: Callable[..., Attempt] = run_agent) -> Comparison:
    """Run both approaches ``runs`` times each (sampling seeded per run) and collect figures.

    Kept small on purpose (a CPU laptop): the agent gets ``agent_steps`` model calls of at most
    ``max_new_tokens`` tokens each.
    """
    import torch

    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}.")
    attempts: dict[str, list[Attempt]] = {"pipeline": [], "agent": []}
    for i in range(runs):
        torch.manual_seed(seed + i)
        attempts["pipeline"].append(run_pipeline_fn(local, ticket))
        torch.manual_seed(seed + i)
        attempts["agent"].append(run_agent_fn(local, ticket, max_steps=agent_steps,
                                              max_new_tokens=max_new_tokens))
    return Comparison(attempts)


def outputs_seen(comparison: Comparison, approach: str) -> Sequence[str]:
    """Every raw model text of an approach, in run order (to show what the model wrote)."""
    return [text for a in comparison.attempts[approach] for text in a.outputs]
