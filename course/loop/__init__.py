"""Chapter 03, the agent loop (notebook ``03_agent_loop``; note 000).

- :mod:`.agent_loop`: one step in two halves (``decide``, ``call_and_observe``, as the lesson
  writes them), ``run_loop`` with its stop rules (``StopRules``), ``StepDecision``, ``LoopStep``.
- :mod:`.budget_guard`: the same stop rules in smolagents (``max_steps`` plus a step callback).
- :mod:`.budget_graph`: the same stop rules in LangGraph (``recursion_limit``, a budget in state).
- :mod:`.scenarios`: runs to apply the rules to (a scripted stuck agent, recorded runs replayed).
- :mod:`.failures`: the failure table, one runnable demonstration per row.
- :mod:`.remedies`: each row's remedy in a few lines, as the lesson writes them.
- :mod:`.reliability`: reliability multiplies over steps, and what recovery buys.
- :mod:`.pipelines`: when not to use an agent: a pipeline and an agent on one task, measured.

What notebook 03 and the budget explorer use is importable from this package (``from course.loop
import StopRules, run_loop``); each name is imported from its module the first time it is asked
for, so importing one module does not load the others.
"""

from course.exports import lazy_exports

#: What notebook 03 and the budget explorer use, by the module that defines it.
_EXPORTS = {
    "agent_loop": ("IdealBondTrajectory", "Line", "LoopRun", "LoopState", "LoopStep", "ScriptedModel",
                   "StepDecision", "StopReason", "StopRules", "StopTable", "Trajectory",
                   "approximate_token_count", "call_and_observe", "count_messages", "decide",
                   "describe_result", "run_loop", "start_messages", "system_prompt"),
    "budget_guard": ("budgeted_code_agent", "run_smolagents_with_budget", "scripted_code_model"),
    "budget_graph": ("build_budget_graph", "loop_diagram", "run_langgraph_with_budget"),
    "scenarios": ("replay_recorded_run", "stuck_search_model"),
    "failures": ("ConversionAgent", "ObeyingModel", "demo_cost", "demo_fabricated_results",
                 "demo_silent_side_effects", "exchange_rate", "injection_tools", "multiply",
                 "reference_rate"),
    "reliability": ("chain_success", "chain_success_with_recovery", "plot_success_curves",
                    "simulate_chain"),
    "limitations": ("compare_search_tools", "success_within_budget", "tool_decisions"),
    "pipelines": ("TICKET", "ChatModelPolicy", "Comparison", "agent_chat", "compare", "outputs_seen",
                  "scripted_agent"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
