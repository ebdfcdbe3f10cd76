"""The limitations of agents listed in note 000, each shown by something a cell can run.

- Models know poorly what they do not know: :func:`tool_decisions` asks the agent model questions
  it can answer from its weights and questions it cannot (current facts), offers a search tool,
  and records for each whether the model asked for the tool and whether that was right.
- Agent results depend on the tool implementation: :func:`compare_search_tools` runs one
  reactive scripted agent (it reads its observations) against the naive keyword search of
  chapter 02 and against BM25 over the same pages; the trajectories differ.
- Cost is a first-order limit: :func:`success_within_budget` counts a run as a success only when
  its answer passed the trajectory checks *and* it stayed within a token budget.

Not handled: judging whether an answer is true (the question set says what needs a tool), or
any model but the active one; the scripted agent is named "scripted" in every output.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from course.agents.evaluation import check_trajectory
from course.agents.offline_tools import BM25WebSearchTool, OfflineWebSearchTool
from course.agents.traces import Run
from course.loop.agent_loop import LoopRun, LoopState, StepDecision, StopRules, run_loop
from course.loop.pipelines import batched_replies
from course.records import Record
from course.tools.calls import ToolCall

__all__ = ["BudgetRow", "BudgetTable", "ToolDecision", "ToolDecisionTable", "ToolSensitivity",
           "WeatherSearchPolicy", "compare_search_tools", "success_within_budget", "tool_decisions"]

# --------------------------------------------------------------------------------------------
# 1. knowing what you do not know

QUESTIONS: tuple[tuple[str, bool], ...] = (
    ("What is 12 + 7?", False),
    ("What is the capital of France?", False),
    ("How many legs does a spider have?", False),
    ("What is the current weather in Paris?", True),
    ("What was the closing price of Apple stock yesterday?", True),
    ("Who won the football match last night?", True),
)
"""(question, needs the search tool): answerable from any model's weights, or a current fact."""

DECISION_PROMPT = (
    "You can use one tool: web_search(query) for current information. If you need it, reply "
    "with exactly SEARCH: <query>. Otherwise reply with the answer.\nQuestion: {question}"
)
_SEARCH = re.compile(r"\bSEARCH\s*:|web_search\s*\(", re.I)


@dataclass
class ToolDecision:
    """One question: whether it needs the tool, what the model replied, what that means."""

    question: str
    needs_tool: bool
    reply: str
    called: bool

    @property
    def right(self) -> bool:
        return self.called == self.needs_tool


@dataclass
class ToolDecisionTable(Record):
    """The model's tool decisions on questions it can and cannot answer (measured)."""

    model: str
    rows: list[ToolDecision] = field(default_factory=list)

    @property
    def right(self) -> int:
        return sum(r.right for r in self.rows)

    def rate(self, needs_tool: bool) -> tuple[int, int]:
        """(right, asked) among the questions that need the tool (or do not)."""
        group = [r for r in self.rows if r.needs_tool == needs_tool]
        return sum(r.right for r in group), len(group)

    def __str__(self) -> str:
        lines = [f"tool decisions [measured] model: {self.model}"]
        for r in self.rows:
            lines.append(f"  needs_tool={r.needs_tool} called={r.called} decision_right={r.right} | "
                         f"{r.question} -> {' '.join(r.reply.split())[:80]!r}")
        (a, n), (b, m) = self.rate(True), self.rate(False)
        lines.append(f"decisions right: {self.right} of {len(self.rows)} (needs the tool: {a} of {n}; "
                     f"answerable without it: {b} of {m})")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {"model": self.model, "right": self.right,
                "rows": [{"question": r.question, "needs_tool": r.needs_tool, "called": r.called,
                          "right": r.right, "reply": r.reply} for r in self.rows]}


def tool_decisions(chat: Any, questions: tuple[tuple[str, bool], ...] = QUESTIONS,
                   model: str = "") -> ToolDecisionTable:
    """Ask ``chat`` (a LangChain chat model) each question with the search tool offered.

    The questions go to a model in this kernel in one batch (:func:`batched_replies`).
    """
    table = ToolDecisionTable(model or type(chat).__name__)
    texts = batched_replies(chat, [[("user", DECISION_PROMPT.format(question=q))] for q, _ in questions])
    for (question, needs), text in zip(questions, texts, strict=True):
        table.rows.append(ToolDecision(question, needs, text, bool(_SEARCH.search(text))))
    return table


# --------------------------------------------------------------------------------------------
# 2. the same agent against two search implementations

_TEMPERATURE = re.compile(r"([+-]?\d+)\s*°")


class WeatherSearchPolicy:
    """A *scripted* weather agent that reads its observations (it does not replay fixed steps).

    Step 1 searches "current weather in Paris". When the last observation states a temperature,
    it answers with the temperatures it read; otherwise it refines the query once, then gives up.
    """

    name = "scripted: a weather agent that reads its observations"

    def __call__(self, state: LoopState) -> StepDecision:
        seen = state.last_observation or ""
        temperatures = _TEMPERATURE.findall(seen)
        if temperatures:
            found = sorted({int(t) for t in temperatures})
            return StepDecision(f"The results state {found} °C.",
                                final_answer=f"Paris: {', '.join(map(str, found))} °C")
        if state.step_number == 1:
            return StepDecision("I need the current weather.",
                                ToolCall("web_search", {"query": "current weather in Paris"}))
        if state.step_number == 2:
            return StepDecision("No weather in these results; refine the query.",
                                ToolCall("web_search", {"query": "current weather in Paris, France"}))
        return StepDecision("Nothing found.", final_answer="I could not find the weather.")


@dataclass
class ToolSensitivity(Record):
    """One agent, two tool implementations: the runs side by side."""

    runs: dict[str, LoopRun]

    def __str__(self) -> str:
        lines = []
        for name, run in self.runs.items():
            queries = [s.call.arguments["query"] for s in run.steps if s.call]
            lines.append(f"{name}: steps={len(run.steps)} searches={len(queries)} "
                         f"queries={queries} answer={run.final_answer!r}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {name: {"steps": len(run.steps),
                       "queries": [s.call.arguments["query"] for s in run.steps if s.call],
                       "final_answer": run.final_answer} for name, run in self.runs.items()}


def compare_search_tools(policy: Any = None) -> ToolSensitivity:
    """Run ``policy`` (default :class:`WeatherSearchPolicy`) with the naive search and with BM25."""
    runs = {}
    for name, tool in (("naive keyword search", OfflineWebSearchTool()),
                       ("BM25 search", BM25WebSearchTool())):
        runs[name] = run_loop("What is the current weather in Paris?",
                              policy or WeatherSearchPolicy(), [tool], StopRules(max_steps=4))
    return ToolSensitivity(runs)


# --------------------------------------------------------------------------------------------
# 3. success counted only within budget


@dataclass
class BudgetRow:
    """A run, whether it succeeded, what it cost (and where the figure comes from)."""

    label: str
    answered: bool
    flags: list[str]
    tokens: int | None
    figure: str
    budget: int

    @property
    def succeeded(self) -> bool:
        return self.answered and not self.flags

    @property
    def within_budget(self) -> bool:
        return self.tokens is not None and self.tokens <= self.budget

    @property
    def counted(self) -> bool:
        return self.succeeded and self.within_budget


@dataclass
class BudgetTable(Record):
    """Runs judged on outcome and cost together: success counts only within the budget."""

    budget: int
    rows: list[BudgetRow]

    def __str__(self) -> str:
        lines = [f"budget: {self.budget} input tokens per task (Qwen tokens)"]
        for r in self.rows:
            lines.append(f"  {r.label}: succeeded={r.succeeded} tokens={r.tokens} [{r.figure}] "
                         f"within_budget={r.within_budget} counted_as_success={r.counted}")
        lines.append(f"successes: {sum(r.succeeded for r in self.rows)} of {len(self.rows)} on "
                     f"outcome alone; {sum(r.counted for r in self.rows)} within the budget")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{html.escape(r.label)}</td><td>{r.succeeded}</td><td>{r.tokens}</td>"
            f"<td>{html.escape(r.figure)}</td><td>{r.within_budget}</td>"
            f"<td><b>{r.counted}</b></td></tr>" for r in self.rows)
        return ("<table><tr><th>run</th><th>succeeded</th><th>input tokens</th><th>figure</th>"
                f"<th>within {self.budget}</th><th>counted as success</th></tr>{body}</table>")

    def record(self) -> dict[str, Any]:
        return {"budget": self.budget,
                "rows": {r.label: {"succeeded": r.succeeded, "tokens": r.tokens, "figure": r.figure,
                                   "within_budget": r.within_budget, "counted": r.counted,
                                   "flags": list(r.flags)} for r in self.rows},
                "succeeded": sum(r.succeeded for r in self.rows),
                "counted": sum(r.counted for r in self.rows)}


def _qwen_tokens(run: Run) -> tuple[int | None, str]:
    """The run's input tokens in Qwen tokens: its published total, else counted here."""
    if run.total_input_tokens is not None and run.figure_labels:
        return run.total_input_tokens, "/".join(run.figure_labels)
    counted = [s.qwen_input_tokens for s in run.steps]
    if counted and None not in counted:
        return sum(counted), "measured, Qwen3 tokenizer"  # type: ignore[arg-type]
    return None, "no figure"


def success_within_budget(runs: dict[str, Run], budget: int) -> BudgetTable:
    """Judge each run: an answer with no trajectory flag is a success, counted within ``budget``."""
    rows = []
    for label, run in runs.items():
        tokens, figure = _qwen_tokens(run)
        answered = any(s.is_final_answer for s in run.steps)
        rows.append(BudgetRow(label, answered, [f.check for f in check_trajectory(run)], tokens,
                              figure, budget))
    return BudgetTable(budget, rows)
