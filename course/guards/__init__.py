"""Chapter 04, guarded agents (notebook ``04_guarded_agents``; note 000).

- :mod:`.confirmation`: human approval as a LangGraph interrupt before critical calls.
- :mod:`.warehouse`: a coordinator and three specialist agents over a warehouse system.
- :mod:`.injection`: prompt injection through tool outputs, a naive and a guarded runtime.
- :mod:`.sandbox`: the smolagents executor in a child process with resource limits.
"""
