"""Chapter 04, guarded agents (notebook ``04_guarded_agents``; note 000). Widget: ``widgets.approval_panel``.

- :mod:`.confirmation`: human approval as a LangGraph interrupt before critical calls; the
  records :class:`~.confirmation.ApprovalRequest`, :class:`~.confirmation.ApprovalDecision`
  and :class:`~.confirmation.ApprovalAudit`.
- :mod:`.warehouse`: a coordinator and three specialist agents over a warehouse system, its
  approval graph, and the command line that resumes it from another process
  (``python -m course.guards.warehouse``).
- :mod:`.injection`: prompt injection through tool outputs; a scripted reader that obeys what
  it reads, the agent model live, a naive and a guarded runtime.
- :mod:`.sandbox`: the smolagents executor in a child process with resource limits, and an
  escape suite.

Imports go one way: warehouse and injection build on confirmation; confirmation knows neither.
"""
