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

Notebooks and other chapters import each name from the module that defines it
(``from course.guards.<module> import ...``); this package exports nothing itself. Importing it
switches on the OpenTelemetry spans (:mod:`course.tools.spans`), so the chapter's smolagents
and LangGraph runs emit them too.
"""

import course.tools  # noqa: F401 - switches the spans on
