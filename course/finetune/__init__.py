"""Teach the bundled SmolLM2-135M-Instruct the course's tools: data, LoRA training, evaluation.

- :mod:`.data`: seeded training trajectories in smolagents' CodeAgent format, rendered through a
  real ``CodeAgent`` and checked by the course's trajectory checks; split by task family so the
  note's three tasks (and their kin) are never trained on.
- :mod:`.tasks`: training trajectories at scale: a seeded generator over fourteen task families
  (lookups with one, two and conflicting sources, a missed search, a lookup then a drawing,
  run-read-fix, loops to fix and two bugs in a row, compute, refusals, tool errors, no tool
  needed), none of them held out, drawn by named mixes of weights.
- :mod:`.heldout`: the 33 held-out tasks (the note's three and ten kin of each) and the answer
  checks (one source's figure, the car the pages name, code that runs and prints the list).
- the course's compact CodeAgent system prompt is :mod:`course.agents.prompts` (chapter 02 runs
  the taught agent with it).
- :mod:`.train`: LoRA fine-tuning with PEFT on the CPU (fp32), a progress bar and a loss log;
  writes the adapter and its manifest under ``course/data/adapters/<name>/``.
- :mod:`.evaluate`: base vs fine-tuned on the held-out tasks (parse rate, right tool, task
  success by the trajectory checks, tokens), measured with real CodeAgent runs.
- :mod:`.adapter`: where the committed adapters live (``smollm2-tools``, what
  ``COURSE_MODEL=bundled+tools`` loads; ``smollm2-agent``, the taught agent chapter 02 runs),
  their manifest check, and loading base + adapter.

``python -m course.finetune`` is the full run (``--steps N`` bounds it; ``--from NAME`` goes on
from an adapter's weights). Not handled: GPUs,
full fine-tuning, tasks beyond the offline tools.
"""
