"""Chapter 02, three runs of a small code agent (notebook ``02_code_agent_runs``; note 000).

- :mod:`.dummy_agent`: the framework-free ReAct loop the chapter writes in its cells (saved copy).
- :mod:`.traces`: ``Run`` / ``TraceStep``, a trace as data, read from a run's spans.
- :mod:`.offline_tools`: the offline web-search and image tools the runs call.
- :mod:`.replay`: a recorded run replayed through the real smolagents ``CodeAgent``.
- :mod:`.evaluation`: trajectory checks that flag what a final answer hides; runs side by side.
- :mod:`.live`: the three tasks run live with the active agent model (measured).
- :mod:`.interfaces`: one task for ``CodeAgent`` and ``ToolCallingAgent`` (code as the interface).
- :mod:`.prompts`: the course's compact CodeAgent system prompt beside smolagents' default, and
  the prompt a taught model runs with (appendix A4 teaches adapters with it).

A run's trace is its OpenTelemetry spans (:mod:`course.tools.spans`, switched on when chapter
01's package is imported, which this one is): every smolagents and LangChain / LangGraph run in
the process emits them, whether or not a ``capture()`` collects them.

Notebooks and other chapters import each name from the module that defines it
(``from course.agents.<module> import ...``); this package exports nothing itself.
"""

import course.tools  # noqa: F401 - switches the spans on
