"""Chapter 05, where conversation memory lives (notebook ``05_memory``; note 000).

- :mod:`.stateless`: the model keeps nothing; the history changes its next-token probabilities.
- :mod:`.chat_graph`: the one-node chat graph, prompt assembly and sizes, update rules,
  the checkpoints of a thread as a table, read-back (chapter 06 builds on it).
- :mod:`.recorded`: the published Qwen2-0.5B-Instruct replies, loaded from a recording.
- :mod:`.store`: the SQLite store under load: another process, two writers on one thread,
  growth with the number of turns.
- :mod:`.prefix_cache`: reusing the KV cache of a conversation's prefix, measured.

Threads, the SQLite checkpointer, its writer guard and pruning are in :mod:`course.checkpoints`
(chapters 04-06 use them).
"""
