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
(chapters 06-05 use them).
"""

from course.exports import lazy_exports

#: What notebooks 05 and 06 and chapter 05's code use, by the module that defines it:
#: ``from course.memory import build_chat_graph`` is ``course.memory.chat_graph``'s.
_EXPORTS = {
    "chat_graph": ("LANGUAGE_TEMPLATE", "LanguageState", "PromptRecorder", "build_chat_graph",
                   "checkpoint_history", "format_messages", "invoke_and_record", "make_prompt",
                   "prompt_kind", "prompt_size", "qwen2_chat_text", "render_prompt",
                   "saved_messages"),
    "stateless": ("history_effect",),
    "recorded": ("StoredState", "original_trimming_state", "qwen2_memory"),
    "store": ("IsolationCheck", "ReadBack", "ScriptedEcho", "ThreadCheck", "ThreadWritten",
              "measure_growth", "read_thread_from_file", "run_threads_concurrently",
              "two_writers"),
    "prefix_cache": ("DEFAULT_TURNS", "measure_prefix_reuse"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
