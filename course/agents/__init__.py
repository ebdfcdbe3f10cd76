"""Chapter 02, three runs of a small code agent (notebook ``02_code_agent_runs``; note 000).

- :mod:`.dummy_agent`: the framework-free ReAct loop the chapter writes in its cells (saved copy).
- :mod:`.traces`: ``Run`` / ``TraceStep``, a trace as data, loaded from and saved to JSON.
- :mod:`.offline_tools`: the offline web-search and image tools the runs call.
- :mod:`.replay`: a recorded run replayed through the real smolagents ``CodeAgent``.
- :mod:`.evaluation`: trajectory checks that flag what a final answer hides; runs side by side.
- :mod:`.live`: the three tasks run live with the active agent model (measured).
- :mod:`.interfaces`: one task for ``CodeAgent`` and ``ToolCallingAgent`` (code as the interface).

Notebooks and other chapters import each name from the module that defines it
(``from course.agents.<module> import ...``); this package exports nothing itself.
"""
