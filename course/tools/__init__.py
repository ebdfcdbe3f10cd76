"""Chapter 01, tool calling (notebook ``01_tool_calling``; note 003 and the protocol of note 000).

- :mod:`.calls`: ``ToolCall``, the one record of "this tool, these arguments" (used by 02 and 03).
- :mod:`.registry`: the registry, the single door every tool call goes through.
- :mod:`.protocol`: the tool list in the prompt, parsing a model's call, validity.
- :mod:`.constrained`: constrained decoding of a call with a logits processor.
- :mod:`.protocol_chat`: a LangChain chat model that turns the local model's text into ``tool_calls``.
- :mod:`.catalogue`: 122 business tools and BM25 tool retrieval.
- :mod:`.sales`: the tool as the source of truth (a deterministic sales tool).
- :mod:`.mcp_server`: a small MCP server of coarse business actions, and its client.
"""
