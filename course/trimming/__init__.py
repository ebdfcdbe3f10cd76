"""Chapter 06, trimming to a token budget, and the two bugs (notebook ``06_trimming``; note 000).

- :mod:`.policy`: the trimming rules, token counters, the trimming graph and its remedies.
"""
