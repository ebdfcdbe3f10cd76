"""The stop rules of :mod:`course.loop.agent_loop`, in the real libraries.

smolagents: ``CodeAgent(max_steps=...)`` is built in; :class:`BudgetGuard` is a step callback
(``step_callbacks=[guard]``) that adds a token budget, a cost budget and repeat detection (the
same code with the same observation). When a rule fires it records the reason and calls
``agent.interrupt()``; smolagents then raises ``AgentError("Agent interrupted.")`` before the
next step, which :func:`run_smolagents_with_budget` catches, so the agent's memory (the trace)
is kept and the reason is data.

LangGraph: ``config={"recursion_limit": N}`` bounds the number of super-steps (an agent step
plus a tool step is two); exceeding it raises ``GraphRecursionError``, which
:func:`run_langgraph_with_budget` catches and then reads the last checkpoint back, so the trace
survives. A token budget lives in the graph state (``tokens_used`` with an adding reducer) and a
conditional edge routes to a stop node when it is spent.

Both are driven here by *scripted* models (named so in every output): the lesson is the
runtime, not the model. What this module does not do: price real API calls, or stop a model in
the middle of a generation (a budget is checked between steps, so a run overshoots by at most
one step).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from course.agents.traces import content_text
from course.checkpoints import thread_config
from course.loop.agent_loop import StepDecision, StopReason, StopRules, approximate_token_count

# --------------------------------------------------------------------------------------------
# A record both libraries report into


@dataclass
class LibraryRun:
    """How a library run ended: the stop reason, steps and tokens, one row per step."""

    library: str
    model_name: str
    stop_reason: StopReason | str
    stop_detail: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    final_answer: Any = None
    trace: Any = None  # the library's own record: a course.agents.traces.Run, or LangGraph state values

    @property
    def steps(self) -> int:
        return len(self.rows)

    @property
    def total_tokens(self) -> int:
        return self.rows[-1]["total_tokens"] if self.rows else 0

    def __str__(self) -> str:
        lines = [f"{self.library} with {self.model_name}"]
        for row in self.rows:
            lines.append(f"  step {row['step']}: {row['action']}  [in {row['input_tokens']}, "
                         f"out {row['output_tokens']}, total {row['total_tokens']}]")
        lines.append(f"stopped: {self.stop_reason} after {self.steps} step(s) ({self.stop_detail});"
                     f" tokens {self.total_tokens}")
        return "\n".join(lines)



# --------------------------------------------------------------------------------------------
# smolagents


def scripted_code_model(outputs: Sequence[str], steps: int = 30, tokenizer: Any = "local",
                        name: str = "scripted code model") -> Any:
    """A *scripted* smolagents model: the given code-agent outputs in order, then the last again.

    Built on :class:`course.agents.replay.ReplayModel` (the code-agent chapter's replay model), padded
    to ``steps`` outputs so that a loop can go on until a stop rule ends it. Token usage is
    measured: the prompt smolagents really sends, rendered with the local model's chat template
    and counted by its tokenizer (``tokenizer=None`` skips counting).
    """
    from course.agents.replay import ReplayModel, local_tokenizer

    if not outputs:
        raise ValueError("scripted_code_model needs at least one output. Fix: pass a list of "
                         "'Thought: ...\\n<code>...</code>' texts.")
    padded = list(outputs) + [outputs[-1]] * max(0, steps - len(outputs))
    tokenizer = local_tokenizer() if tokenizer == "local" else tokenizer
    model_id = name if "scripted" in name else f"scripted: {name}"
    return ReplayModel(padded, model_id=model_id, tokenizer=tokenizer)


class BudgetGuard:
    """A smolagents step callback: token budget, cost budget and repeat detection.

    ``step_callbacks=[guard]``; after each action step it adds the step's tokens, checks the
    limits and, if one is passed, records ``reason`` / ``detail`` and interrupts the agent.
    ``max_steps`` stays the agent's own setting.
    """

    def __init__(self, limits: StopRules) -> None:
        self.limits = limits
        self.reason: StopReason | None = None
        self.detail = ""
        self.rows: list[dict[str, Any]] = []
        self._seen: dict[str, str] = {}
        self.total_tokens = 0
        self.total_cost = 0.0

    def __call__(self, memory_step: Any, agent: Any = None) -> None:
        from smolagents.memory import ActionStep

        if not isinstance(memory_step, ActionStep) or self.reason is not None:
            return
        usage = memory_step.token_usage
        tokens_in = usage.input_tokens if usage else 0
        tokens_out = usage.output_tokens if usage else 0
        self.total_tokens += tokens_in + tokens_out
        self.total_cost += self.limits.cost(tokens_in, tokens_out)
        code = (memory_step.code_action or "").strip()
        observation = memory_step.observations or ""
        self.rows.append({"step": memory_step.step_number,
                          "action": " ".join(code.split())[:70] or "(no code)",
                          "input_tokens": tokens_in, "output_tokens": tokens_out,
                          "total_tokens": self.total_tokens})
        if memory_step.is_final_answer:
            return
        limits = self.limits
        if limits.token_budget is not None and self.total_tokens > limits.token_budget:
            self._stop(agent, StopReason.TOKEN_BUDGET,
                       f"{self.total_tokens} tokens > budget {limits.token_budget}")
        elif limits.cost_budget is not None and self.total_cost > limits.cost_budget:
            self._stop(agent, StopReason.COST_BUDGET,
                       f"cost {self.total_cost:.4f} > budget {limits.cost_budget:.4f}")
        elif limits.repeat_detection and code:
            if self._seen.get(code) == observation:
                self._stop(agent, StopReason.REPEAT,
                           "the same code returned the same observation as before")
            self._seen[code] = observation

    def _stop(self, agent: Any, reason: StopReason, detail: str) -> None:
        self.reason, self.detail = reason, detail
        if agent is not None:
            agent.interrupt()


def run_smolagents_with_budget(agent: Any, task: str, guard: BudgetGuard) -> LibraryRun:
    """Run a smolagents agent that has ``guard`` among its step callbacks; never lose the trace."""
    from smolagents.utils import AgentError, AgentMaxStepsError

    from course.agents.traces import run_from_smolagents

    answer = None
    try:
        answer = agent.run(task)
    except AgentError as err:
        if guard.reason is None:  # not our interruption: a real failure, keep it as the reason
            guard.reason, guard.detail = StopReason.MODEL_ERROR, f"{type(err).__name__}: {err}"
    if guard.reason is not None:
        reason, detail = guard.reason, guard.detail
    elif any(isinstance(getattr(s, "error", None), AgentMaxStepsError)
             for s in agent.memory.steps):
        reason, detail = StopReason.MAX_STEPS, f"max_steps={agent.max_steps} reached"
        guard.rows = [r for r in guard.rows if r["step"] <= agent.max_steps]
    else:
        reason, detail = StopReason.FINAL_ANSWER, "final_answer() was called"
    trace = run_from_smolagents(agent, task=task, figures="measured")
    return LibraryRun("smolagents CodeAgent", str(agent.model.model_id), reason, detail,
                      guard.rows, answer, trace)


def budgeted_code_agent(tools: Sequence[Any], model: Any, limits: StopRules) -> tuple[Any, BudgetGuard]:
    """A real ``CodeAgent`` with ``max_steps`` from ``limits`` and a :class:`BudgetGuard`."""
    from smolagents import CodeAgent

    guard = BudgetGuard(limits)
    agent = CodeAgent(tools=list(tools), model=model, max_steps=limits.max_steps,
                      step_callbacks=[guard], verbosity_level=0)
    return agent, guard


# --------------------------------------------------------------------------------------------
# LangGraph


class BudgetState(TypedDict, total=False):
    """Graph state: messages appended, tokens added up, the budget and the stop reason kept."""

    messages: Annotated[list, operator.add]
    tokens_used: Annotated[int, operator.add]
    token_budget: int
    stop_reason: str


def build_budget_graph(decisions: Sequence[StepDecision], tools: Sequence[Any],
                       count_tokens: Callable[[str], int] = approximate_token_count):
    """A LangGraph agent (agent node, ``ToolNode``, budget stop node) over a scripted policy.

    The scripted policy returns ``decisions`` in order (then repeats the last); each becomes an
    ``AIMessage`` with ``tool_calls`` and ``usage_metadata``. Compiled with ``MemorySaver`` so
    the state can be read back after a ``GraphRecursionError``.
    """
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode

    if not decisions:
        raise ValueError("build_budget_graph needs at least one StepDecision.")

    def agent(state: BudgetState) -> dict:
        done = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        decision = decisions[min(done, len(decisions) - 1)]
        seen = "\n".join(content_text(m.content) for m in state["messages"])
        tokens_in, tokens_out = count_tokens(seen), count_tokens(decision.text())
        calls = [] if decision.call is None else [
            {"name": decision.call.name, "args": dict(decision.call.arguments),
             "id": f"call_{done + 1}"}]
        message = AIMessage(
            content=decision.final_answer if decision.final_answer is not None else decision.thought,
            tool_calls=calls,
            usage_metadata={"input_tokens": tokens_in, "output_tokens": tokens_out,
                            "total_tokens": tokens_in + tokens_out})
        update: dict[str, Any] = {"messages": [message], "tokens_used": tokens_in + tokens_out}
        if not calls:
            update["stop_reason"] = str(StopReason.FINAL_ANSWER)
        return update

    def route(state: BudgetState) -> str:
        if state.get("stop_reason"):
            return END
        if state["tokens_used"] > state["token_budget"]:
            return "budget_stop"
        return "tools"

    def budget_stop(state: BudgetState) -> dict:
        return {"stop_reason": str(StopReason.TOKEN_BUDGET)}

    graph = StateGraph(BudgetState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_node("budget_stop", budget_stop)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", "budget_stop", END])
    graph.add_edge("tools", "agent")
    graph.add_edge("budget_stop", END)
    return graph.compile(checkpointer=MemorySaver())


def run_langgraph_with_budget(graph: Any, task: str, token_budget: int, recursion_limit: int,
                              thread_id: str = "budget-demo") -> LibraryRun:
    """Invoke the graph with a token budget in state and a ``recursion_limit``; keep the trace."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.errors import GraphRecursionError

    config = {**thread_config(thread_id), "recursion_limit": recursion_limit}
    start = {"messages": [HumanMessage(task)], "tokens_used": 0, "token_budget": token_budget,
             "stop_reason": ""}
    try:
        graph.invoke(start, config)
        hit_limit = False
    except GraphRecursionError:
        hit_limit = True
    values = graph.get_state(config).values  # the checkpoint survives the exception
    rows, total = [], 0
    for message in values["messages"]:
        if isinstance(message, AIMessage):
            usage = message.usage_metadata or {}
            total += usage.get("total_tokens", 0)
            action = (", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
                      or f"final answer: {message.content}")
            rows.append({"step": len(rows) + 1, "action": action[:70],
                         "input_tokens": usage.get("input_tokens", 0),
                         "output_tokens": usage.get("output_tokens", 0), "total_tokens": total})
    if hit_limit:
        reason, detail = "recursion_limit", f"GraphRecursionError at recursion_limit={recursion_limit}"
    elif values.get("stop_reason") == str(StopReason.TOKEN_BUDGET):
        reason = StopReason.TOKEN_BUDGET
        detail = f"{values['tokens_used']} tokens > budget {token_budget} (budget in state)"
    else:
        reason, detail = StopReason.FINAL_ANSWER, "the model answered without a tool call"
    final = values["messages"][-1].content if reason == StopReason.FINAL_ANSWER else None
    return LibraryRun("LangGraph StateGraph", "scripted policy", reason, detail, rows, final, values)


# --------------------------------------------------------------------------------------------
# Runs to apply limits to (the budgets widget uses these)


def stuck_search_model() -> Any:
    """A *scripted* search agent that gets stuck: it repeats one search, then answers at step 9.

    Steps 1-2 search, steps 3-8 repeat the step-2 search with the same result (a loop), step 9
    gives a final answer. Which rule stops it first depends only on the limits.
    """
    from course.loop.agent_loop import ScriptedModel
    from course.tools.calls import ToolCall

    first = StepDecision("I need the current weather.",
                     ToolCall("web_search", {"query": "current weather in Paris"}))
    refine = StepDecision("The results were about a phone forum; refine the query.",
                      ToolCall("web_search", {"query": "current weather in Paris, France"}))
    again = StepDecision("Let me check the weather pages once more.",
                     ToolCall("web_search", {"query": "current weather in Paris, France"}))
    answer = StepDecision("Two pages disagree; report both.",
                      final_answer="Paris: 13-16 °C (two sources disagree)")
    return ScriptedModel([first, refine, *[again] * 6, answer],
                         name="scripted: a search agent that gets stuck")


def recorded_tools(run: Any) -> Any:
    """A registry whose tools return a recorded run's observations, in the order they came.

    For replaying a :class:`course.agents.traces.Run` through :func:`course.loop.agent_loop.run_loop`: nothing
    is searched again; each executed call returns the next recorded observation.
    """
    from course.tools.registry import ToolRegistry

    observations = [s.observation for s in run.steps if not s.is_final_answer]
    names = {c.name for s in run.steps for c in s.tool_calls if c.name != "final_answer"}
    registry = ToolRegistry()
    queue = iter(observations)

    def make(name: str) -> Callable[..., str]:
        def recorded(**arguments: Any) -> str:
            return next(queue, "") or "(no observation text in the recording)"

        recorded.__name__ = name
        recorded.__doc__ = f"Recorded observations of {name} (replay, nothing runs)."
        return recorded

    for name in sorted(names):
        registry.register(make(name), name=name, schema={"properties": {},
                                                          "additionalProperties": True})
    return registry


def decisions_from_trace(run: Any) -> list[StepDecision]:
    """One :class:`StepDecision` per step of a :class:`course.agents.traces.Run`, with its recorded tokens."""
    from course.tools.calls import ToolCall

    decisions = []
    for step in run.steps:
        # a recording that publishes input tokens but no per-step output tokens: count 0 output
        # tokens for the step rather than invent them (the loop would count its own otherwise)
        out = step.output_tokens
        if out is None and step.input_tokens is not None:
            out = 0
        calls = [c for c in step.tool_calls if c.name != "final_answer"]
        if step.is_final_answer:
            decisions.append(StepDecision(step.thought, final_answer=run.final_answer or "(answer)",
                                      input_tokens=step.input_tokens, output_tokens=out))
        else:
            call = ToolCall(calls[0].name, dict(calls[0].arguments)) if calls else None
            decisions.append(StepDecision(step.thought, call, input_tokens=step.input_tokens,
                                      output_tokens=out))
    return decisions


def replay_recorded_run(run: Any, limits: StopRules) -> Any:
    """Apply ``limits`` to a recorded run: where would it have stopped, and why?"""
    from course.loop.agent_loop import ScriptedModel, run_loop

    if not run.steps:
        raise ValueError("the recorded run has no steps; nothing to replay.")
    label = getattr(run, "source", "recorded")
    model = ScriptedModel(decisions_from_trace(run),
                          name=f"scripted replay of a run [{label}] ({run.model_id})")
    return run_loop(run.task, model, recorded_tools(run), limits)


def langchain_tool(smol_tool: Any) -> Any:
    """A LangChain tool over a one-argument smolagents tool (for LangGraph's ``ToolNode``)."""
    from langchain_core.tools import StructuredTool

    (arg,) = smol_tool.inputs

    def call(**kwargs: Any) -> str:
        return str(smol_tool(**{arg: kwargs[arg]}))

    from pydantic import create_model

    schema = create_model(f"{smol_tool.name}_args", **{arg: (str, ...)})
    return StructuredTool.from_function(func=call, name=smol_tool.name,
                                        description=smol_tool.description, args_schema=schema)
