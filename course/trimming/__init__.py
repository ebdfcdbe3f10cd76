"""Chapter 05, trimming to a token budget, and the two bugs (notebook ``05_trimming``; note 000).

Read in this order:

- :mod:`.examples`: the note's worked example, the original 11 messages, the four questions.
- :mod:`.counters`: token counters (toy, LangChain's GPT-2 fallback, a model's own tokenizer)
  and the side-by-side count table of bug 2.
- :mod:`.rules`: rules 1 and 3 (``keep_newest``, also written in the chapter's cell) beside
  ``trim_messages``, and two explanations read from the four rules: a reason per message and
  the walk back step by step; kept sets side by side.
- :mod:`.graph`: the original trimming graph, run turn by turn with and without the bugs.
- :mod:`.remedies`: a fact field, a summary in the checkpointed state, ``RemoveMessage``.

The widget is :mod:`widgets.trim_explorer`.

Notebooks and other chapters import each name from the module that defines it
(``from course.trimming.<module> import ...``); this package exports nothing itself.
"""
