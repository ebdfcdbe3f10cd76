"""Base vs fine-tuned on the held-out tasks: real CodeAgent runs, judged by the course's checks.

Each held-out task (:func:`course.finetune.data.held_out_tasks`: the note's three, then kin of
each held-out family) runs in a real smolagents ``CodeAgent`` with the offline tools behind
chapter 01's door, for at most ``max_steps`` steps, each a greedy call of at most
``max_new_tokens`` that ends at the first complete code block (as chapter 02's bounded live
runs do), reusing the kept key/value cache of the shared system prompt. Per run it records:

- parse rate: the steps whose output smolagents could parse into code (no parsing error);
- right tool: the first step calls the tool the task needs first (``web_search``), or, for a
  script to debug, the first step runs the script;
- success: the run reached a final answer, the trajectory checks
  (:func:`course.agents.evaluation.check_trajectory`) raise no flag, where the task has a
  known answer (the car to draw) the image tool was asked for it, and where it gives a script
  to fix the answer is fixed code (:func:`fixed_code_returned`);
- tokens: input and output tokens the model object reported.

Every figure is *measured* (the models ran here). A lesson that shows the committed
``evaluation.json`` of an earlier run says so and names the file (:func:`committed_label`,
:class:`HeldOut`); a run made in the kernel shows as a :class:`TaskResult`. Both are records
(:class:`course.records.Record`): text for the student, their values for a test.

Not handled: sampling (greedy only), judging whether a weather answer is true (the checks judge
the trajectory), servers.
"""

from __future__ import annotations

import html
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from course.adapter_manifest import STEP_TOKENS as MAX_NEW_TOKENS  # one cap, chapters 02-03's too
from course.records import Record, committed_label, shown_path

RUNS_DIR = Path(__file__).resolve().parents[1] / "data" / "finetune_runs"
"""Committed manifests and evaluations of training runs larger than the shipped adapter's, one
folder per run (``pilot-1000/``); their weights are not shipped (each is reproducible from its
manifest's seed and data hash)."""

__all__ = [
    "RUNS_DIR",
    "HeldOut",
    "HeldOutComparison",
    "TaskResult",
    "compare_on_held_out",
    "evaluate",
    "fixed_code_returned",
    "kernel_agent_model",
    "run_task",
]


@dataclass
class TaskResult(Record):
    """One held-out task run by one model (all measured). Shown as a short view (the first
    output, whether it parsed, the tools called); its record is every field."""

    model: str
    family: str
    task: str
    steps: int
    parsed_steps: int
    right_tool: bool
    final_answer: bool
    flags: list[str]
    success: bool
    input_tokens: int
    output_tokens: int
    seconds: float
    first_output: str = ""
    answer: str = ""
    tools_called: list[str] = field(default_factory=list)
    answer_problem: str = ""
    """What the answer check found wrong (:func:`course.finetune.heldout.answer_problem`)."""
    search_queries: list[str] = field(default_factory=list)
    """The queries the run gave ``web_search``, in order."""

    def __str__(self) -> str:
        first_tool = self.tools_called[0] if self.tools_called else "none"
        steps = f"{self.steps} step" + ("s" if self.steps != 1 else "")
        return (f"[measured] {self.model}, live, {steps} of {self.task!r} ({self.seconds} s):\n"
                f"  output: {self.first_output[:150]!r}\n"
                f"  parsed into code: {self.parsed_steps} of {steps}; first tool: {first_tool}; "
                f"tools called: {', '.join(self.tools_called) or 'none'}")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def kernel_agent_model(local: Any, max_new_tokens: int = MAX_NEW_TOKENS) -> Any:
    """smolagents' TransformersModel over ``local`` that reuses the system prompt's cache and
    ends each call at its first complete code block (chapter 02's bounded live runs). The cache
    is ``.prefix`` (a :class:`~course.tools.constrained.PrefixCache`, kept on the first call)."""
    from course.agents.live import prefix_reusing
    from course.models.for_smolagents import SharedTransformersModel
    from course.tools.constrained import PrefixCache

    model = SharedTransformersModel(local, max_new_tokens=max_new_tokens)
    return prefix_reusing(model, PrefixCache(local), first_block=True)


def fixed_code_returned(answer: str, script: str) -> bool:
    """Whether ``answer`` is a fixed version of ``script``: Python that parses, is not the script
    itself, and assigns a name the script assigns (``3`` or ``final_answer(values)`` is not).

    The trajectory checks accept a run whose code merely uses a name the script defines as having
    run the script; this asks of the answer what the task asked for, code.
    """
    import ast

    try:
        tree, given = ast.parse(answer), ast.parse(script)
    except SyntaxError:
        return False

    def stored(t: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    return answer.strip() != script.strip() and bool(stored(tree) & stored(given))


def run_task(traj: Any, model: Any, label: str, max_steps: int = 3,
             prompt_templates: dict[str, Any] | None = None, search_misses: int = 0) -> TaskResult:
    """Run one held-out task (:class:`~course.finetune.data.Trajectory`) with ``model``
    (``prompt_templates``: the agent's prompts; default: those ``model`` was taught with,
    :func:`course.agents.prompts.templates_for`; ``search_misses``: the first searches that find
    nothing). Success needs the answer check of :func:`course.finetune.heldout.answer_problem` too."""
    from smolagents import CodeAgent
    from smolagents.utils import AgentError

    from course.agents.evaluation import check_trajectory, script_runs
    from course.agents.live import stop_after_steps
    from course.agents.prompts import templates_for
    from course.agents.traces import run_from_spans
    from course.finetune.heldout import answer_problem
    from course.tools import spans as tracing
    from course.tools.for_libraries import smolagents_door

    tools = traj.make_tools(search_misses)
    if prompt_templates is None:
        prompt_templates = templates_for(model)
    agent = CodeAgent(tools=smolagents_door(tools), model=model, max_steps=max_steps + 1,
                      step_callbacks=[stop_after_steps(max_steps)], verbosity_level=-1,
                      prompt_templates=prompt_templates)
    start = time.perf_counter()
    answer: Any = None
    with tracing.capture(provenance="measured") as spans:
        try:
            answer = agent.run(traj.task, additional_args=dict(traj.additional_args) or None)
        except AgentError:
            pass  # interrupted at the step limit: the trace says what happened
    seconds = time.perf_counter() - start
    trace = run_from_spans(spans)
    trace.additional_args = dict(traj.additional_args)
    steps = [s for s in trace.steps if s.model_output or s.code or s.error]
    parsed = [s for s in steps if s.code and not (s.error or "").startswith("AgentParsingError")]
    first = steps[0] if steps else None
    if traj.expected_tool == "python":
        right = first is not None and first.number in script_runs(trace)
    else:
        called = [c.name for c in (first.tool_calls if first else []) if c.name != "final_answer"]
        right = bool(called) and called[0] == traj.expected_tool
    final = any(s.is_final_answer for s in trace.steps)
    flags = [f.label for f in check_trajectory(trace)]
    drawn = [c.get("prompt", "") for t in tools for c in getattr(t, "calls", []) if "prompt" in c]
    answered = True
    if "code" in traj.additional_args:  # a script to fix: the answer must be the fixed code
        answered = fixed_code_returned(str(answer) if answer is not None else "",
                                       traj.additional_args["code"])
    if traj.answer:
        answered = any(traj.answer.lower() in p.lower() for p in drawn) or (
            traj.answer.lower() in str(answer).lower())
    problem = answer_problem(traj, answer, drawn) if final else "no final answer"
    return TaskResult(
        model=label, family=traj.family, task=traj.task, steps=len(steps),
        parsed_steps=len(parsed), right_tool=right, final_answer=final, flags=flags,
        success=final and not flags and answered and not problem, input_tokens=trace.total_input_tokens or 0,
        output_tokens=trace.total_output_tokens or 0, seconds=round(seconds, 1),
        first_output=(first.model_output or "")[:300] if first else "",
        answer=str(answer)[:200] if answer is not None else "",
        tools_called=[c.name for s in trace.steps for c in s.tool_calls],
        answer_problem=problem or "",
        search_queries=[c["query"] for t in tools if t.name == "web_search" for c in t.calls])


def evaluate(local: Any, label: str, tasks: list[Any] | None = None, max_steps: int = 3,
             max_new_tokens: int = MAX_NEW_TOKENS, progress: bool = True,
             prompt_templates: dict[str, Any] | None = None,
             search_misses: int = 0) -> list[TaskResult]:
    """Run every held-out task with the model in ``local`` (a :class:`~course.models.LocalModel`)."""
    from tqdm.auto import tqdm

    from course.finetune.data import held_out_tasks

    tasks = held_out_tasks() if tasks is None else tasks
    model = kernel_agent_model(local, max_new_tokens)
    return [run_task(t, model, label, max_steps, prompt_templates, search_misses)
            for t in tqdm(tasks, desc=f"held-out tasks, {label}", disable=not progress)]


@dataclass
class HeldOutComparison:
    """Held-out results of several models, task by task, with a summary per model."""

    results: dict[str, list[TaskResult]]
    max_steps: int

    def summary(self, label: str) -> dict[str, Any]:
        rows = self.results[label]
        steps = sum(r.steps for r in rows)
        return {"model": label, "tasks": len(rows), "steps": steps,
                "parsed_steps": sum(r.parsed_steps for r in rows),
                "parse_rate": round(sum(r.parsed_steps for r in rows) / steps, 3) if steps else 0.0,
                "right_tool": sum(r.right_tool for r in rows),
                "final_answer": sum(r.final_answer for r in rows),
                "success": sum(r.success for r in rows),
                "input_tokens": sum(r.input_tokens for r in rows),
                "output_tokens": sum(r.output_tokens for r in rows),
                "seconds": round(sum(r.seconds for r in rows), 1)}

    def as_dict(self) -> dict[str, Any]:
        return {"max_steps": self.max_steps, "label": "measured",
                "summary": [self.summary(k) for k in self.results],
                "runs": {k: [asdict(r) for r in v] for k, v in self.results.items()}}

    def __str__(self) -> str:
        lines = [f"[measured] held-out tasks, at most {self.max_steps} steps each, greedy:"]
        for label in self.results:
            s = self.summary(label)
            lines.append(f"{label}: parse rate {s['parsed_steps']}/{s['steps']} steps; right first "
                         f"tool {s['right_tool']}/{s['tasks']}; final answer {s['final_answer']}/"
                         f"{s['tasks']}; success by the checks {s['success']}/{s['tasks']}; tokens "
                         f"in {s['input_tokens']}, out {s['output_tokens']}; {s['seconds']} s")
        for label, rows in self.results.items():
            for r in rows:
                lines.append(f"  {label} | {r.family}: steps={r.steps} parsed={r.parsed_steps} "
                             f"right_tool={r.right_tool} final={r.final_answer} success={r.success}"
                             f" flags={','.join(r.flags) or 'none'} tools={','.join(r.tools_called) or '-'}"
                             f" answer={r.answer[:60]!r}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"


@dataclass
class HeldOut(Record):
    """A held-out evaluation as a lesson shows it: one row per model (parse rate, right first
    tool, final answers, successes, tokens), labelled with where it came from (``source``)."""

    source: str
    file: str
    max_steps: int
    summary: list[dict[str, Any]]
    runs: dict[str, list[dict[str, Any]]]

    @classmethod
    def committed(cls, path: Path) -> HeldOut:
        """The evaluation an earlier run committed at ``path`` (``evaluation.json``)."""
        import json

        data = json.loads(Path(path).read_text())
        return cls(committed_label(path), shown_path(path), data["max_steps"], data["summary"],
                   data["runs"])

    @property
    def models(self) -> list[str]:
        return [s["model"] for s in self.summary]

    def only(self, model: str) -> HeldOut:
        """The same evaluation, one model's part of it."""
        return HeldOut(self.source, self.file, self.max_steps,
                       [s for s in self.summary if s["model"] == model], {model: self.runs[model]})

    def __str__(self) -> str:
        rows = [("model", "parse rate", "right tool", "final answer", "success", "tokens in / out")]
        rows += [(s["model"], f"{s['parsed_steps']}/{s['steps']}", f"{s['right_tool']}/{s['tasks']}",
                  f"{s['final_answer']}/{s['tasks']}", f"{s['success']}/{s['tasks']}",
                  f"{s['input_tokens']:,} / {s['output_tokens']:,}") for s in self.summary]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        tasks = self.summary[0]["tasks"] if self.summary else 0
        head = (f"[{self.source}] {tasks} held-out tasks, at most {self.max_steps} steps each, "
                "greedy:")
        lines = ["  " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows]
        return "\n".join([head, *lines])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def compare_on_held_out(adapter_folder: Path | None = None, tasks: list[Any] | None = None,
            max_steps: int = 3, progress: bool = True,
            prompt_templates: dict[str, Any] | None = None,
            include_base: bool = True, search_misses: int = 0) -> HeldOutComparison:
    """The bundled model and the bundled model + adapter on the same held-out tasks
    (``include_base=False``: the adapter only; ``search_misses``: the first searches of each
    task find nothing)."""
    from course.adapter_manifest import DEFAULT_ADAPTER, adapter_label
    from course.finetune.adapter import fresh_base, load_with_adapter
    from course.finetune.data import held_out_tasks

    tasks = held_out_tasks() if tasks is None else tasks
    base_label = "SmolLM2-135M-Instruct (bundled)"
    tuned_label = adapter_label(Path(adapter_folder).name if adapter_folder is not None else DEFAULT_ADAPTER)
    results = {}
    if include_base:
        results[base_label] = evaluate(fresh_base(), base_label, tasks, max_steps, progress=progress,
                                       prompt_templates=prompt_templates, search_misses=search_misses)
    tuned = load_with_adapter(adapter_folder, base=fresh_base())
    results[tuned_label] = evaluate(tuned, tuned_label, tasks, max_steps, progress=progress,
                                    prompt_templates=prompt_templates, search_misses=search_misses)
    return HeldOutComparison(results, max_steps)
