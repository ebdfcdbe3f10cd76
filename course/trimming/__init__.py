"""Chapter 06, trimming to a token budget, and the two bugs (notebook ``06_trimming``; note 000).

Read in this order:

- :mod:`.examples`: the note's worked example, the original 11 messages, the four questions.
- :mod:`.counters`: token counters (toy, LangChain's GPT-2 fallback, a model's own tokenizer)
  and the side-by-side count table of bug 2.
- :mod:`.rules`: the four rules walked by hand beside ``trim_messages`` (one walk, two
  explanations: a reason per message and the walk back step by step).
- :mod:`.graph`: the original trimming graph, run turn by turn with and without the bugs.
- :mod:`.remedies`: a fact field, a summary in the checkpointed state, ``RemoveMessage``.

The widget is :mod:`widgets.trim_explorer`.
"""
