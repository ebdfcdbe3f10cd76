"""Chapter 02, three runs of a small code agent (notebook ``02_code_agent_runs``; note 000).

- :mod:`.dummy_agent`: the framework-free ReAct loop the chapter writes in its cells (saved copy).
- :mod:`.traces`: ``Run`` / ``TraceStep``, a trace as data, loaded from and saved to JSON.
- :mod:`.offline_tools`: the offline web-search and image tools the runs call.
- :mod:`.replay`: a recorded run replayed through the real smolagents ``CodeAgent``.
- :mod:`.evaluation`: trajectory checks that flag what a final answer hides; runs side by side.
- :mod:`.live`: the three tasks run live with the active agent model (measured).
- :mod:`.interfaces`: one task for ``CodeAgent`` and ``ToolCallingAgent`` (code as the interface).

What notebook 02 and the later chapters use is importable from this package (``from course.agents
import load_run, replay_run``); each name is imported from its module the first time it is asked
for, so importing one module does not load the others (smolagents, the live model).
"""

from course.exports import lazy_exports

#: What notebooks 02-03, chapters 03, 05 and 07 (course.finetune) and the trace stepper use, by
#: the defining module.
_EXPORTS = {
    "traces": ("RECORDINGS_DIR", "Run", "TraceError", "TraceStep", "content_text", "load_run",
               "prompt_tokens_figure", "run_from_smolagents", "save_run"),
    "offline_tools": ("BM25WebSearchTool", "OfflineImageTool", "OfflineWebSearchTool", "SearchPage",
                      "load_corpus", "make_tools"),
    "replay": ("ReplayModel", "local_tokenizer", "replay_run"),
    "evaluation": ("RunComparison", "TrajectoryVerdict", "check_trajectory", "facts_in",
                   "script_runs"),
    "live": ("NOTE_TASKS", "choice_label", "live_plan", "prefix_reusing", "run_live", "run_live_tuned",
             "stop_after_steps", "tuned_label", "tuned_plan", "tuned_skip_reason"),
    "dummy_agent": ("NOTE_REPLIES", "STOP", "Action", "ActionParseError", "DummyRun", "DummyStep",
                    "FinalAnswer", "active_generate", "dummy_tools", "run_dummy_agent",
                    "scripted_generate"),
    "interfaces": ("SCRIPTED_OUTPUTS", "live_pair", "scripted_pair"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
