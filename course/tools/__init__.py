"""Chapter 01, tool calling (notebook ``01_tool_calling``; note 003 and the protocol of note 000).

- :mod:`.calls`: ``ToolCall``, the one record of "this tool, these arguments" (used by 02 and 03).
- :mod:`.examples`: ``get_weather``, the course's one example tool (imported by later chapters).
- :mod:`.registry`: the registry, the single door every tool call goes through.
- :mod:`.gateway`: subject, risk class, veto policies, confirmation and audit on that door.
- :mod:`.adapters`: the registry's tools as LangChain / smolagents tools that use the door.
- :mod:`.protocol`: the tool list in the prompt, parsing a model's call, validity.
- :mod:`.constrained`: constrained decoding of a call with a logits processor.
- :mod:`.protocol_chat`: a LangChain chat model that turns the local model's text into ``tool_calls``.
- :mod:`.graph`: the agent -> tools LangGraph graph and its transcript.
- :mod:`.empty_result`: what a model replies after an empty tool result vs a refusal, counted.
- :mod:`.catalogue`: 122 business tools and BM25 tool retrieval.
- :mod:`.tool_count`: tool-choice accuracy vs the number of tools shown, measured.
- :mod:`.sales`: the tool as the source of truth (a deterministic sales tool).
- :mod:`.mcp_server`: a small MCP server of coarse business actions, and its client.
"""
