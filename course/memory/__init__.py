"""Chapter 05, where conversation memory lives (notebook ``05_memory``; note 000).

- :mod:`.chat_graph`: the one-node chat graph, prompt assembly, update rules, read-back.
- :mod:`.prefix_cache`: reusing the KV cache of a conversation's prefix, measured.

Threads and the SQLite checkpointer are in :mod:`course.checkpoints` (chapters 04-06 use them).
"""
