"""Chapter 02, three runs of a small code agent (notebook ``02_code_agent_runs``; note 000).

- :mod:`.dummy_agent`: the framework-free ReAct loop the chapter writes in its cells (saved copy).
- :mod:`.spans`: agent runs as OpenTelemetry spans (OpenInference's instrumentation), saved and
  loaded as OTLP JSON: the one trace format.
- :mod:`.traces`: ``Run`` / ``TraceStep``, a trace as data, read from a run's spans.
- :mod:`.offline_tools`: the offline web-search and image tools the runs call.
- :mod:`.replay`: a recorded run replayed through the real smolagents ``CodeAgent``.
- :mod:`.evaluation`: trajectory checks that flag what a final answer hides; runs side by side.
- :mod:`.live`: the three tasks run live with the active agent model (measured).
- :mod:`.interfaces`: one task for ``CodeAgent`` and ``ToolCallingAgent`` (code as the interface).

Importing the package switches the spans on (:func:`.spans.instrument`): from then on every
smolagents and LangChain / LangGraph run in the process emits spans through the course's
provider, whether or not a ``capture()`` collects them (chapters 03 to 06 import it, directly
or through their own packages).

Notebooks and other chapters import each name from the module that defines it
(``from course.agents.<module> import ...``); this package exports nothing itself.
"""

from course.agents import spans

spans.instrument()
