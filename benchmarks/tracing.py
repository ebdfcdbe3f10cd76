"""The time OpenTelemetry tracing adds to a replay: the note's weather run, with and without spans.

The same replay (course.agents.replay.replay_run of course/data/recordings/weather_note.json,
the real CodeAgent, its executor and the offline search behind the door) is run in alternating
rounds: ``off`` with no instrumentation at all (course.agents.spans.uninstrument), ``on`` inside
``course.agents.spans.capture(recording=run)``, which is what a lesson would do (OpenInference's
smolagents instrumentation, the course's attributes, the SDK's in-memory exporter); the
instrumentation is switched on before an ``on`` round's clock starts. One warm-up
replay of each kind comes first (imports, tokenizers). Prints, per kind, the median and the
spread of the rounds' seconds, then the ratio on/off and the milliseconds added per replay, the
spans of one replay, and the time to encode them as OTLP JSON.

    .venv/bin/python benchmarks/tracing.py                  # 7 rounds, tokenizers as the lesson
    .venv/bin/python benchmarks/tracing.py --rounds 15 --no-tokenizers

``--no-tokenizers`` replays without counting prompts (tokenizer=None, qwen=None): the agent,
its executor and the tools only, so the instrumentation's share is larger. Wall-clock on a
machine others may be using: read the figures with the load average printed beside them. Not
measured here: a live model's step (its generation dwarfs the spans), Phoenix's memory. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="replays of each kind (default 7)")
    parser.add_argument("--no-tokenizers", action="store_true",
                        help="replay without counting prompts (the agent and tools only)")
    options = parser.parse_args()

    from course.agents import spans as tracing
    from course.agents.replay import local_tokenizer, replay_run
    from course.agents.traces import RECORDINGS_DIR, load_run

    run = load_run(RECORDINGS_DIR / "weather_note.json")
    counting = ({"tokenizer": None, "qwen": None} if options.no_tokenizers
                else {"tokenizer": local_tokenizer(), "qwen": "cache"})

    def off() -> tuple[float, object]:
        tracing.uninstrument()
        start = time.perf_counter()
        replay_run(run, **counting)
        return time.perf_counter() - start, None

    def on() -> tuple[float, object]:
        tracing.instrument()  # switching it on is not part of a replay's cost
        start = time.perf_counter()
        with tracing.capture(recording=run) as spans:
            replay_run(run, **counting)
        return time.perf_counter() - start, spans

    off()
    on()  # warm-up: imports, tokenizers, the instrumentors' first wrapping
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    spans = None
    for _ in range(options.rounds):
        seconds["off"].append(off()[0])
        took, spans = on()
        seconds["on"].append(took)
    tracing.uninstrument()

    load = os.getloadavg()
    print(f"weather replay, {options.rounds} rounds each, alternating; "
          f"{'no tokenizers' if options.no_tokenizers else 'prompts counted as in the lesson'}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    for kind, values in seconds.items():
        print(f"  {kind:>3}: median {statistics.median(values) * 1000:8.1f} ms  "
              f"min {min(values) * 1000:8.1f}  max {max(values) * 1000:8.1f}")
    median_off, median_on = (statistics.median(seconds[k]) for k in ("off", "on"))
    min_off, min_on = (min(seconds[k]) for k in ("off", "on"))
    print(f"  on/off = {median_on / median_off:.3f} (medians), {min_on / min_off:.3f} (minimums); "
          f"added {(median_on - median_off) * 1000:+.1f} ms per replay (medians), "
          f"{(min_on - min_off) * 1000:+.1f} ms (minimums)")
    if spans is not None:
        start = time.perf_counter()
        text = spans.to_otlp_json()
        encode = time.perf_counter() - start
        print(f"  spans of one replay: {spans!r}; OTLP JSON {len(text) / 1024:.0f} KiB "
              f"encoded in {encode * 1000:.1f} ms")


if __name__ == "__main__":
    main()
