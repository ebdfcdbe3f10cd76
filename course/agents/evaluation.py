"""Trajectory checks: read a trace, not just its final answer, and flag what went wrong.

Each check takes a :class:`~course.agents.traces.Run`, the record read from a run's spans
(:func:`course.agents.traces.run_from_spans`), and returns a list of :class:`Flag` (empty when
the trajectory passes):

- :func:`merged_contradictions`: the final answer draws on two sources whose facts contradict
  each other (temperatures with no value in common, or different sky conditions), instead of
  choosing one or saying they disagree.
- :func:`relevant_tool_never_called`: a tool the task calls for (by cue words such as "latest",
  "current", "photo", see :data:`RELEVANCE_CUES`) was available but never called.
- :func:`run_instruction_ignored` (with :func:`script_runs`): the task asks to run code that it provides (in
  ``additional_args``), but no step executed that code (or an edited version of it) before
  the final answer.

:func:`check_trajectory` runs all three and :class:`TrajectoryVerdict` shows one run's flags;
:class:`RunComparison` puts several runs side by side
(steps, figures with their labels, tools called, script runs, flags, each flag naming its
subject, e.g. ``relevant tool never called (web_search)``). Both are records
(:class:`course.records.Record`): text for the student, their values for a test. The checks read what the steps' code does from its
syntax tree (a call inside a string is not a call) and read facts from observations with small
regular expressions. What they do not do: judge whether an answer is true, understand topics
beyond the cue words and fact patterns listed here, or replace reading the trace.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from course.agents.traces import Run
from course.records import Record

__all__ = [
    "Flag",
    "RunComparison",
    "SourceFacts",
    "TrajectoryVerdict",
    "check_trajectory",
    "executes_script",
    "facts_in",
    "merged_contradictions",
    "relevant_tool_never_called",
    "run_instruction_ignored",
    "script_runs",
]

RELEVANCE_CUES: dict[str, tuple[str, ...]] = {
    "web_search": ("current", "latest", "today", "now", "recent", "news", "weather"),
    "image_generator": ("photo", "image", "picture", "draw"),
    "text_to_image": ("photo", "image", "picture", "draw"),
}
RUN_INSTRUCTION = re.compile(r"\b(run|execute|test)\b", re.IGNORECASE)
CONDITIONS = ("partly cloudy", "clear sky", "overcast", "cloudy", "sunny", "rain", "snow", "fog")
TEMPERATURE = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*°")
NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Flag:
    """One problem a check found: which check, at which step (if any), and what it saw."""

    check: str
    step: int | None
    message: str
    subject: str | None = None
    """What the flag is about when a check can name it (the tool that was never called)."""

    @property
    def label(self) -> str:
        """The check's name with its subject: ``relevant tool never called (web_search)``."""
        return f"{self.check} ({self.subject})" if self.subject else self.check

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "run"
        return f"[{self.check}] {where}: {self.message}"


# ----- facts in observations -----
@dataclass(frozen=True)
class SourceFacts:
    """Temperatures and sky conditions that one source (one search result) states."""

    source: str
    temperatures: frozenset[float]
    conditions: frozenset[str]


def _conditions(text: str) -> frozenset[str]:
    found, rest = set(), text.lower()
    for phrase in CONDITIONS:  # longest first, so "partly cloudy" is not also "cloudy"
        if phrase in rest:
            found.add(phrase)
            rest = rest.replace(phrase, " ")
    return frozenset(found)


def sources_in(observation: str) -> list[tuple[str, str]]:
    """Split an observation into (source, text): one per ``[title](link)`` search result."""
    parts = re.split(r"\n(?=\[[^\]]+\]\([^)]+\))", observation or "")
    out = []
    for part in parts:
        match = re.match(r"\[([^\]]+)\]\(([^)]+)\)", part.strip())
        out.append((match.group(2) if match else "observation", part))
    return out


def facts_in(observation: str) -> list[SourceFacts]:
    """The facts each source of an observation states (sources stating none are left out)."""
    facts = []
    for source, text in sources_in(observation):
        temps = frozenset(float(t) for t in TEMPERATURE.findall(text))
        conds = _conditions(text)
        if temps or conds:
            facts.append(SourceFacts(source, temps, conds))
    return facts


def _contradict(a: SourceFacts, b: SourceFacts) -> bool:
    temps = bool(a.temperatures and b.temperatures and not a.temperatures & b.temperatures)
    conds = bool(a.conditions and b.conditions and not a.conditions & b.conditions)
    return temps or conds


def _answer_uses(answer: str, facts: SourceFacts) -> bool:
    numbers = {abs(float(n)) for n in NUMBER.findall(answer)}
    return bool(numbers & {abs(t) for t in facts.temperatures}) or bool(
        _conditions(answer) & facts.conditions)


def _final_step(run: Run) -> int:
    finals = [s.number for s in run.steps if s.is_final_answer]
    return finals[0] if finals else (run.steps[-1].number if run.steps else 0)


# ----- the three checks -----
def merged_contradictions(run: Run) -> list[Flag]:
    """Flag a final answer that combines facts from sources that contradict each other."""
    answer = run.final_answer or ""
    facts = [f for step in run.steps for f in facts_in(step.observation)]
    used = [f for f in facts if _answer_uses(answer, f)]
    for i, a in enumerate(used):
        for b in used[i + 1:]:
            if a.source != b.source and _contradict(a, b):
                def describe(f: SourceFacts) -> str:
                    temps = ", ".join(f"{t:g}°" for t in sorted(f.temperatures))
                    return f"{f.source} ({'; '.join(x for x in (temps, *sorted(f.conditions)) if x)})"
                return [Flag("merged contradictions", _final_step(run),
                             f"the answer {answer!r} combines {describe(a)} and {describe(b)}, "
                             "which disagree")]
    return []


def relevant_tools(run: Run, cues: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """The tools of ``run`` that its task calls for, by cue words."""
    cues = RELEVANCE_CUES if cues is None else cues
    words = set(re.findall(r"[a-z]+", run.task.lower()))
    return [tool for tool in run.tools if words & set(cues.get(tool, ()))]


def relevant_tool_never_called(run: Run, relevant: list[str] | None = None) -> list[Flag]:
    """Flag each relevant tool that no step called before (or in) the final-answer step."""
    relevant = relevant_tools(run) if relevant is None else relevant
    last = _final_step(run)
    called = {c.name for s in run.steps if s.number <= last for c in s.tool_calls}
    return [Flag("relevant tool never called", None,
                 f"the task calls for {tool!r} (available), but no step called it", tool)
            for tool in relevant if tool not in called]


class _ExecutableNames(ast.NodeVisitor):
    """Names used by code that runs (string constants are data and are skipped)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.calls: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name):
            self.calls.add(node.func.id)
        self.generic_visit(node)


def _provided_scripts(run: Run) -> dict[str, ast.Module]:
    scripts = {}
    for key, value in run.additional_args.items():
        if isinstance(value, str) and "\n" in value.strip():
            try:
                scripts[key] = ast.parse(value)
            except SyntaxError:
                continue
    return scripts


def executes_script(code: str, script: ast.Module, script_var: str | None = None) -> bool:
    """Whether ``code`` runs ``script`` or an edited copy of it (not just quotes it in a string).

    True when the code calls ``exec``/``eval`` (on the provided variable or anything else), or its
    executable part uses a name that the script defines (e.g. the script's ``numbers`` list).
    """
    try:
        tree = ast.parse(code or "")
    except SyntaxError:
        return False
    seen = _ExecutableNames()
    seen.visit(tree)
    if seen.calls & {"exec", "eval"}:
        return True
    defined = {n.id for n in ast.walk(script) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bool(seen.names & defined)


def script_runs(run: Run) -> list[int]:
    """Numbers of the steps whose code executed a script provided in ``additional_args``."""
    scripts = _provided_scripts(run)
    return [step.number for step in run.steps
            if any(executes_script(step.code, s, k) for k, s in scripts.items())]


def run_instruction_ignored(run: Run) -> list[Flag]:
    """Flag a run whose task says to run the provided code, when no step executed it."""
    scripts = _provided_scripts(run)
    if not scripts or not RUN_INSTRUCTION.search(run.task):
        return []
    last = _final_step(run)
    if any(number <= last for number in script_runs(run)):
        return []
    names = ", ".join(repr(k) for k in scripts)
    return [Flag("instruction to run code ignored", last,
                 f"the task asks to run the provided code ({names}); no step executed it before "
                 "the final answer")]


CHECKS: tuple[Callable[[Run], list[Flag]], ...] = (
    merged_contradictions, relevant_tool_never_called, run_instruction_ignored)


def check_trajectory(run: Run) -> list[Flag]:
    """All flags of all checks for ``run`` (an empty list: the trajectory passes)."""
    return [flag for check in CHECKS for flag in check(run)]


@dataclass
class TrajectoryVerdict(Record):
    """One run's final answer and the flags of the trajectory checks (none: it passes)."""

    run: str
    answer: str | None
    flags: list[Flag]

    @classmethod
    def of(cls, label: str, run: Run) -> TrajectoryVerdict:
        """The checks' verdict on ``run``, shown under ``label``."""
        return cls(label, run.final_answer, check_trajectory(run))

    def __str__(self) -> str:
        lines = [f"{self.run}: answer {str(self.answer)[:45]!r} -> {len(self.flags)} flag(s)"]
        lines += [f"    {flag}" for flag in self.flags]
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


@dataclass
class RunComparison(Record):
    """Runs side by side: one row per run with its provenance, figures, tools and flags."""

    runs: dict[str, Run] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The rows, as a test reads them."""
        return {"rows": self.rows}

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One dict per run: label, who wrote the outputs, steps, tokens, tools, script runs, flags."""
        out = []
        for label, run in self.runs.items():
            out.append({
                "run": label, "outputs": run.source, "figures": "/".join(run.figure_labels) or "-",
                "steps": len(run.steps), "input": run.total_input_tokens,
                "output": run.total_output_tokens,
                "measured prompt": run.cumulative_measured_input_tokens[-1] if run.steps else None,
                "qwen prompt": _sum_or_none([s.qwen_input_tokens for s in run.steps]),
                "tools": [n for n in run.tool_names_called() if n != "final_answer"],
                "script runs": script_runs(run),
                "flags": [f.label for f in check_trajectory(run)],
            })
        return out

    def row(self, label: str) -> dict[str, Any]:
        """The row of the run called ``label``."""
        return next(r for r in self.rows if r["run"] == label)

    def __str__(self) -> str:
        lines = []
        for r in self.rows:
            ran = f"; ran the script in step {r['script runs']}" if r["script runs"] else ""
            lines.append(
                f"{r['run']}: outputs={r['outputs']} figures={r['figures']} steps={r['steps']} "
                f"input={_dash(r['input'])} output={_dash(r['output'])} "
                f"measured_prompt={_dash(r['measured prompt'])} qwen_prompt={_dash(r['qwen prompt'])}"
                f" tools={','.join(r['tools']) or '-'}{ran}; flags="
                f"{', '.join(r['flags']) or 'none'}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in (
            "run", "model outputs", "figures", "steps", "input", "output", "prompt measured here",
            "prompt, Qwen3 tokenizer", "tools called", "ran the script", "flags"))
        body = ""
        for r in self.rows:
            flags = ", ".join(r["flags"])
            cells = [r["run"], r["outputs"], r["figures"], r["steps"], _dash(r["input"]),
                     _dash(r["output"]), _dash(r["measured prompt"]), _dash(r["qwen prompt"]),
                     ", ".join(r["tools"]) or "-",
                     ", ".join(map(str, r["script runs"])) or "-"]
            body += ("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                     + f"<td style='color:{'#b00' if flags else '#070'}'>"
                     f"{html.escape(flags or 'no flags')}</td></tr>")
        return f"<table><tr>{head}</tr>{body}</table>"


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _sum_or_none(values: list[int | None]) -> int | None:
    return None if not values or None in values else sum(values)  # type: ignore[arg-type]
