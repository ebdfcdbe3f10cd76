"""The memory Phoenix takes and the time to send it the note's three runs.

Starts Phoenix as ``python -m course phoenix`` does (course.phoenix.start_phoenix, from
``.venv-phoenix``, loopback, telemetry off) on a free port with a fresh database in a temporary
folder, and measures:

- the seconds until it answers (its first start: the database is made);
- the resident memory (RSS) of its process tree, idle, after ``--settle`` seconds;
- the seconds to send each of the note's three replayed runs (course.tools.spans.send_spans,
  the SDK's OTLP/HTTP exporter, made afresh for each run, the first one importing it; the
  replays themselves are not timed) and until Phoenix's REST API returns every span sent (it
  stores them in batches);
- the RSS of its process tree after receiving them, again after ``--settle`` seconds.

    .venv/bin/python benchmarks/phoenix.py                # one Phoenix, one round of sends
    .venv/bin/python benchmarks/phoenix.py --settle 10

Wall-clock and memory on a machine others may be using: read them with the load average
printed beside them. Not measured: Phoenix's UI in a browser, a Phoenix holding many traces, its
gRPC receiver. Needs ``make phoenix-env``. Prints figures measured in this run; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def tree_rss(pid: int) -> tuple[int, int]:
    """(bytes resident, processes) of ``pid`` and all its descendants."""
    import psutil

    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total, len(processes)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stored_spans(url: str, expected: int, within: float = 120.0) -> int:
    """Wait until Phoenix's REST API returns ``expected`` spans (or ``within`` seconds pass)."""
    import httpx

    deadline = time.monotonic() + within
    while True:
        got = len(httpx.get(f"{url}/v1/projects/default/spans", params={"limit": 1000},
                            timeout=10, trust_env=False).json()["data"])
        if got >= expected or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds to wait before reading memory (default 5)")
    options = parser.parse_args()

    from course.agents.replay import replay_run
    from course.agents.traces import RECORDINGS_DIR, load_run
    from course.phoenix import phoenix_installed, start_phoenix
    from course.tools.spans import capture, otlp_target, send_spans

    if not phoenix_installed():
        sys.exit("Phoenix's environment is missing: run `make phoenix-env` first")
    runs = {}
    for name in ("weather", "bond", "debug"):  # replayed before Phoenix starts: not timed
        recording = load_run(RECORDINGS_DIR / f"{name}_note.json")
        with capture(recording=recording) as spans:
            replay_run(recording)
        runs[name] = spans

    with tempfile.TemporaryDirectory(prefix="phoenix-benchmark-") as folder:
        start = time.perf_counter()
        server = start_phoenix(free_port(), grpc_port=free_port(), working_dir=Path(folder),
                               timeout=300)
        answered = time.perf_counter() - start
        assert server.pid is not None
        try:
            time.sleep(options.settle)
            idle, processes = tree_rss(server.pid)
            target = otlp_target({"OTEL_EXPORTER_OTLP_ENDPOINT": server.url})
            sends = {}
            start = time.perf_counter()
            for name, spans in runs.items():
                one = time.perf_counter()
                outcome = send_spans(spans, target, follow=False)
                sends[name] = (len(spans), time.perf_counter() - one, outcome.outcome)
            sent = time.perf_counter() - start
            total = sum(count for count, _, _ in sends.values())
            stored = stored_spans(server.url, total)
            stored_after = time.perf_counter() - start
            time.sleep(options.settle)
            busy, _ = tree_rss(server.pid)
        finally:
            server.stop()

    load = os.getloadavg()
    mib = 1024 * 1024
    print(f"Phoenix {server.version} ({processes} process(es)); load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores [measured]")
    print(f"  answered after     {answered:8.1f} s   (a fresh database)")
    print(f"  RSS idle           {idle / mib:8.0f} MiB (after {options.settle:g} s)")
    for name, (count, seconds, outcome) in sends.items():
        print(f"  sent {name:<8} {count:3d} spans in {seconds * 1000:7.1f} ms  {outcome}")
    print(f"  all three sent in  {sent * 1000:8.1f} ms; {stored}/{total} spans stored after "
          f"{stored_after * 1000:.0f} ms")
    print(f"  RSS after the runs {busy / mib:8.0f} MiB (+{(busy - idle) / mib:.0f} MiB, after "
          f"{options.settle:g} s)")


if __name__ == "__main__":
    main()
