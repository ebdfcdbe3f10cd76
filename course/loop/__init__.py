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

Notebooks and other chapters import each name from the module that defines it
(``from course.loop.<module> import ...``); this package exports nothing itself.
"""
