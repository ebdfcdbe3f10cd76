"""The time OpenTelemetry spans add to an agent run: a replay and a live step, with and without.

Spans are on by default (importing ``course.agents`` instruments smolagents and LangChain), and
the course's runners capture their run's spans and read its ``Run`` from them. This measures
what that costs, on the same agent run made three ways, in alternating rounds:

- ``off``: no instrumentation (``course.tools.spans.uninstrument``): the same ``CodeAgent``,
  model, tools behind the door and step limit as the runner builds, run bare;
- ``on``: instrumented, the same bare run: spans are made and, with no capture open, dropped
  (what every run a lesson makes outside the runners pays);
- ``runner``: the course's runner as a lesson calls it (``replay_run`` / ``run_live``): spans
  captured in memory with the course's attributes, and the ``Run`` read from them.

The replay is the note's weather run (``course/data/recordings/weather_note.json``, the
offline search). The live step (``--live``) is the weather task with the active agent model,
one bounded model call (``live_plan`` with one step), the model's own generation included.
One warm-up round of each kind comes first (imports, tokenizers, the model). Prints, per kind,
the median and spread of the rounds' milliseconds and what ``on`` and ``runner`` add to
``off``, then the spans of one replay and the time to encode them as OTLP JSON.

    .venv/bin/python benchmarks/tracing.py                  # replay, 7 rounds
    .venv/bin/python benchmarks/tracing.py --rounds 15 --no-tokenizers
    .venv/bin/python benchmarks/tracing.py --live --rounds 2

``--no-tokenizers`` replays without counting prompts (the agent, its executor and the tools
only), so the spans' share is larger. Wall-clock on a machine others may be using: read the
figures with the load average printed beside them. Not measured here: Phoenix's memory (the
appendix on Phoenix has its own figures). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def replay_kinds(no_tokenizers: bool) -> dict[str, Callable[[], object]]:
    """The weather replay: bare (for off and on) and through ``replay_run``."""
    from smolagents import CodeAgent

    from course.agents.offline_tools import make_tools
    from course.agents.replay import ReplayModel, local_tokenizer, replay_run
    from course.agents.traces import RECORDINGS_DIR, load_run
    from course.tools.for_libraries import smolagents_door

    run = load_run(RECORDINGS_DIR / "weather_note.json")
    tokenizer = None if no_tokenizers else local_tokenizer()

    def bare() -> object:
        model = ReplayModel(run.model_outputs(), model_id=run.model_id, tokenizer=tokenizer)
        agent = CodeAgent(tools=smolagents_door(make_tools(run.tools)), model=model,
                          max_steps=len(run.steps), verbosity_level=-1)
        return agent.run(run.task)

    def runner() -> object:
        return replay_run(run, tokenizer=tokenizer, qwen=None)

    return {"bare": bare, "runner": runner}


def live_kinds() -> dict[str, Callable[[], object]]:
    """One bounded live step of the weather task: bare (for off and on) and ``run_live``."""
    from smolagents import CodeAgent
    from smolagents.utils import AgentError

    from course.agents.live import LivePlan, live_plan, run_live, stop_after_steps
    from course.agents.offline_tools import make_tools
    from course.agents.traces import RECORDINGS_DIR, load_run
    from course.models import smolagents_model
    from course.tools.for_libraries import smolagents_door

    plan = live_plan()
    plan = LivePlan(1, plan.max_new_tokens, plan.reason, plan.first_block)
    recording = load_run(RECORDINGS_DIR / "weather_note.json")
    model = smolagents_model(max_new_tokens=plan.max_new_tokens)

    def bare() -> object:
        agent = CodeAgent(tools=smolagents_door(make_tools(recording.tools)), model=model,
                          max_steps=plan.max_steps + 1,
                          step_callbacks=[stop_after_steps(plan.max_steps)], verbosity_level=-1)
        try:
            return agent.run(recording.task)
        except AgentError:
            return None

    def runner() -> object:
        return run_live("weather", plan, model=model)

    return {"bare": bare, "runner": runner}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each kind (default 7)")
    parser.add_argument("--no-tokenizers", action="store_true",
                        help="replay without counting prompts (the agent and tools only)")
    parser.add_argument("--live", action="store_true",
                        help="a live step with the active agent model instead of the replay")
    options = parser.parse_args()

    from course.tools import spans as tracing

    made = live_kinds() if options.live else replay_kinds(options.no_tokenizers)

    def timed(kind: str) -> float:
        if kind == "off":
            tracing.uninstrument()
        else:
            tracing.instrument()  # switching it on is not part of a run's cost
        start = time.perf_counter()
        made["runner" if kind == "runner" else "bare"]()
        return time.perf_counter() - start

    kinds = ("off", "on", "runner")
    for kind in kinds:  # warm-up
        timed(kind)
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(options.rounds):
        for kind in kinds:
            seconds[kind].append(timed(kind))
    tracing.instrument()

    load = os.getloadavg()
    what = ("live step (weather, one bounded model call)" if options.live else
            f"weather replay, {'no tokenizers' if options.no_tokenizers else 'prompts counted'}")
    print(f"{what}; {options.rounds} rounds of each kind, alternating; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    for kind, values in seconds.items():
        print(f"  {kind:>6}: median {statistics.median(values) * 1000:9.1f} ms  "
              f"min {min(values) * 1000:9.1f}  max {max(values) * 1000:9.1f}")
    off = statistics.median(seconds["off"])
    for kind in ("on", "runner"):
        median = statistics.median(seconds[kind])
        print(f"  {kind} - off: {(median - off) * 1000:+.1f} ms per run (medians), "
              f"{(min(seconds[kind]) - min(seconds['off'])) * 1000:+.1f} ms (minimums); "
              f"ratio {median / off:.3f}")
    if not options.live:
        from course.agents.replay import replay_run
        from course.agents.traces import RECORDINGS_DIR, load_run

        spans = replay_run(load_run(RECORDINGS_DIR / "weather_note.json"), tokenizer=None,
                           qwen=None).spans
        start = time.perf_counter()
        text = spans.to_otlp_json()
        encode = time.perf_counter() - start
        print(f"  spans of one replay: {spans!r}; OTLP JSON {len(text) / 1024:.0f} KiB "
              f"encoded in {encode * 1000:.1f} ms")


if __name__ == "__main__":
    main()
