"""Convert the shipped recordings from the course's old trace JSON to OTLP JSON spans.

One-off: the recordings under ``course/data/recordings`` were written in the course's own JSON
(a ``Run``'s fields, ``format_version`` 2). This reads each such file, builds the
:class:`course.agents.traces.Run` it describes, and writes it back, under the same name, as
the spans :func:`course.agents.traces.spans_from_run` gives it, labelled ``recorded``. A file
that is already OTLP JSON is left alone, so running it again changes nothing. The test
``tests/test_traces.py`` and ``tests/test_replay.py`` check that the converted recordings hold
the same values and replay to the same steps, outputs and token figures as the JSON files did
(``tests/fixtures/recorded_replays.json``, taken from them before the conversion).

    .venv/bin/python scripts/convert_recordings.py [--dry-run]

Not handled: any other trace JSON than format 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run_from_old_json(data: dict):
    """The Run an old-format trace file describes (its fields are the dataclasses' own)."""
    from course.agents.traces import Run, TraceStep
    from course.tools.calls import ToolCall

    if data.get("format_version") != 2:
        raise ValueError(f"format_version {data.get('format_version')!r}: only 2 is converted")
    steps = [TraceStep(**{**raw, "tool_calls": [ToolCall(c["name"], dict(c.get("arguments", {})))
                                                for c in raw.get("tool_calls", [])]})
             for raw in data["steps"]]
    fields = {k: v for k, v in data.items() if k not in ("steps", "format_version")}
    return Run(steps=steps, **fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would change only")
    options = parser.parse_args()

    from course.agents.traces import RECORDINGS_DIR, load_run, save_run, spans_from_run

    for path in sorted(RECORDINGS_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if "resourceSpans" in data:
            print(f"{path.name}: already OTLP JSON")
            continue
        run = run_from_old_json(data)
        if options.dry_run:
            print(f"{path.name}: would convert ({len(run.steps)} steps)")
            continue
        run.spans = spans_from_run(run, provenance="recorded")
        save_run(run, path)
        back = load_run(path)
        # a step written as a thought and code reads back with the model output they make
        expected = run.to_dict()
        for step, output in zip(expected["steps"], run.model_outputs(), strict=True):
            step["model_output"] = output if step["thought"] or step["code"] else \
                step["model_output"]
        same = back.to_dict() == expected
        print(f"{path.name}: converted, {len(back.spans)} spans; same values read back: {same}")


if __name__ == "__main__":
    main()
