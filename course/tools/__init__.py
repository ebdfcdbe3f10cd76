"""Chapter 01, tool calling (notebook ``01_tool_calling``; note 003 and the protocol of note 000).

- :mod:`.calls`: ``ToolCall``, the one record of "this tool, these arguments" (used by 02, 03 and 04).
- :mod:`.examples`: ``get_weather``, the course's one example tool (imported by later chapters).
- :mod:`.door`: the single door as the chapter writes it (``SingleDoor``) and ``ToolError``, the
  one refusal exception.
- :mod:`.registry`: ``ToolRegistry``, the same door with more checks, which every later tool call
  goes through; ``ToolStatus``, the one vocabulary of how a call ended, and ``ToolResult``, the
  outcome every caller gets.
- :mod:`.gateway`: subject, risk class, veto policies, confirmation and audit on that door.
- :mod:`.for_libraries`: the registry's tools as LangChain / smolagents tools that use the door (every
  agent of chapters 02-06 gets its tools this way); a LangChain tool message carries the result.
- :mod:`.protocol`: the tool list in the prompt, the one parser of a model's JSON call, validity,
  and the LangChain-type -> chat-role table (``CHAT_ROLES``) later chapters use.
- :mod:`.constrained`: constrained decoding of a call with a logits processor.
- :mod:`.protocol_chat`: a LangChain chat model that turns the local model's text into ``tool_calls``.
- :mod:`.graph`: the agent -> tools LangGraph graph and its transcript.
- :mod:`.kinds`: one small tool of each kind the note lists (API, shell, files, database, ...).
- :mod:`.slots`: slot filling, a tool's arguments gathered over turns, the call made when valid.
- :mod:`.empty_result`: what a model replies after an empty tool result vs a refusal, counted.
- :mod:`.catalogue`: 122 business tools and BM25 tool retrieval.
- :mod:`.tool_count`: tool-choice accuracy vs the number of tools shown, measured.
- :mod:`.descriptions`: poor vs good descriptions of three order tools, the model's choice.
- :mod:`.bfcl`: the public BFCL v4 benchmark (simple, multiple), free vs constrained decoding,
  judged by BFCL's own AST checker (``python -m course.tools.bfcl`` is the full run).
- :mod:`.sales`: the tool as the source of truth (a deterministic sales tool).
- :mod:`.mcp_server`: a small MCP server of coarse business actions, and its client.
- :mod:`.spans`: every agent run as OpenTelemetry spans (OpenInference's instrumentation), with
  the door's verdict on each tool call; saved and loaded as OTLP JSON: the one trace format.

Importing the package switches the spans on (:func:`.spans.instrument`): from then on every
smolagents and LangChain / LangGraph run in the process, this chapter's graphs included, emits
spans through the course's provider, whether or not a ``capture()`` collects them (appendix A5
reads them; every later chapter imports this package). A command line of the course
(``python -m course.tools.bfcl``, ``python -m course.guards.warehouse``) is the exception: Python
imports this package while it looks the command's module up, when ``sys.argv[0]`` is still
``"-m"``; nothing in such a process reads spans, and it checks its arguments before the
frameworks load, so it is not instrumented.

Notebooks and other chapters import each name from the module that defines it
(``from course.tools.<module> import ...``); this package exports nothing itself.
"""

import sys

if getattr(sys, "argv", [])[:1] != ["-m"]:
    from course.tools import spans

    spans.instrument()
