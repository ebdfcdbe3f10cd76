"""Chapter 06, guarded agents (notebook ``06_guarded_agents``; note 000). Widget: ``widgets.approval_panel``.

- :mod:`.confirmation`: human approval as a LangGraph interrupt before critical calls
  (:func:`~.confirmation.ask_approval` stops the run and reads the decision); the records
  :class:`~.confirmation.ApprovalRequest`, :class:`~.confirmation.ApprovalDecision` and
  :class:`~.confirmation.ApprovalAudit`.
- :mod:`.warehouse`: a coordinator and three specialist agents over a warehouse system, its
  approval graph, and the command line that resumes it from another process
  (``python -m course.guards.warehouse``).
- :mod:`.managed`: the same coordinator as real smolagents agents (a manager with supply,
  transit and export as ``managed_agents``), driven by scripted policies or a language model.
- prompt injection through tool outputs, in four modules: :mod:`.injection_payloads` (the
  payload catalogue), :mod:`.injection_lab` (the lab's tool world), :mod:`.injection_reader`
  (a scripted reader that obeys what it reads) and :mod:`.injection` (the agent model live, a
  naive and a guarded runtime, the report).
- :mod:`.sandbox`: the smolagents executor in a child process with resource limits, and an
  escape suite.

Imports go one way: warehouse and injection build on confirmation, managed on warehouse;
confirmation knows none of them.
What notebook 04 and the approval panel use is importable from this package (``from course.guards
import build_warehouse_graph, decide, run_suite``); each name is imported from its module the
first time it is asked for, so importing one module of the chapter (the sandbox's child process
imports only :mod:`.sandbox`) does not load the others.
"""

from course.exports import lazy_exports

#: What notebook 04 and the approval panel use, by the module that defines it.
_EXPORTS = {
    "confirmation": ("ApprovalAudit", "ApprovalDecision", "ScriptedApprover", "decide",
                     "pending_request", "run_with_approver"),
    "warehouse": ("ConsistencyCheck", "Coordinator", "PausedOrder", "ResumedRun", "Warehouse",
                  "build_warehouse_graph", "prompt_sizes", "registry_for"),
    "managed": ("DESCRIPTIONS", "MANAGER_INSTRUCTIONS", "Team", "propose_tool", "run_team",
                "scripted_models"),
    "injection_payloads": ("Payload", "payloads"),
    "injection_lab": ("ALLOWED_HOSTS", "Lab", "as_data"),
    "injection_reader": ("Readings", "read_instructions"),
    "injection": ("InjectionRows", "LiveModelAgent", "run_guarded", "run_naive", "run_suite"),
    "sandbox": ("SandboxRuns", "SuiteSample", "escape_attempts", "run_escape_suite",
                "run_sandboxed"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
