"""Chapter 04, where conversation memory lives (notebook ``04_memory``; note 000).

- :mod:`.stateless`: the model keeps nothing; the history changes its next-token probabilities.
- :mod:`.chat_graph`: the three pieces the lesson writes in its cells (the one-node graph with a
  checkpointer, the prompt template, the state with its reducer), put together by
  ``build_chat_graph``; prompt rendering and sizes, the checkpoints of a thread as a table,
  read-back (chapter 05 builds on it).
- :mod:`.recorded`: the published Qwen2-0.5B-Instruct replies and the original notebook's stored
  state, loaded from recordings.
- :mod:`.store`: the SQLite store under load: another process, two writers on one thread,
  growth with the number of turns.
- :mod:`.prefix_cache`: reusing the KV cache of a conversation's prefix, measured.

Threads, the SQLite checkpointer, its writer guard and pruning are in :mod:`course.checkpoints`
(chapters 04-06 use them).

Notebooks and other chapters import each name from the module that defines it
(``from course.memory.<module> import ...``); this package exports nothing itself.
"""
