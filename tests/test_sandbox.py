"""The sandbox: authorised imports run, 30+ escape attempts escape 0 times, resources contained."""

import math
import os

import pytest

from course.guards.sandbox import (
    CANARY_VARIABLE,
    EscapeAttempt,
    escape_attempts,
    run_escape_suite,
    run_sandboxed,
)


def test_authorised_code_runs_and_prints():
    run = run_sandboxed("import statistics\nprint(statistics.mean([1, 2, 3]))\n6 * 7")
    assert run.status == "ok" and run.logs.strip() == "2" and run.output == "42"


def test_unauthorised_import_is_refused_and_authorising_it_works():
    assert run_sandboxed("import json\nprint(json.dumps(1))").status == "blocked"
    run = run_sandboxed("import json\nprint(json.dumps([1]))", authorized_imports=["json"])
    assert run.status == "ok" and run.logs.strip() == "[1]"


def test_memory_bomb_and_sleeper_are_contained():
    bomb = run_sandboxed("x = [0] * 10**10", memory_mb=128)
    assert bomb.status == "memory" and not bomb.child_alive_after
    growing = run_sandboxed("x = []\nfor i in range(10**6):\n    x.append(' ' * 10**6)",
                            memory_mb=128)
    assert growing.status == "memory"
    sleeper = run_sandboxed("import time\ntime.sleep(3600)", timeout_s=1)
    assert sleeper.status == "timeout" and not sleeper.child_alive_after
    spinner = run_sandboxed("x = 10 ** (10 ** 9)", timeout_s=1)
    assert spinner.status in ("timeout", "crashed") and not spinner.child_alive_after


def test_escape_suite_has_30_attempts_and_none_escapes():
    report = run_escape_suite(timeout_s=1.5)
    assert report.tried >= 30
    assert report.escaped == 0, str(report)
    lines = str(report).splitlines()
    assert lines[-1] == report.summary() and len(lines) == report.tried + 1
    assert sum(line.endswith("-> contained") for line in lines) == report.tried
    assert report._repr_html_().count("<tr>") == report.tried + 1
    kinds = {r.attempt.kind for r in report.results}
    assert {"os", "subprocess", "builtins", "dunder", "import hook", "resources"} <= kinds
    assert CANARY_VARIABLE not in os.environ  # the canary is removed afterwards
    assert math.pi == 3.141592653589793


def test_detector_sees_a_real_leak_when_the_environment_is_passed():
    attempts = [a for a in escape_attempts("/nonexistent", "/nonexistent")
                if a.kind == "format"]
    assert attempts
    report = run_escape_suite(attempts, scrub_env=False)
    assert report.escaped == len(attempts)  # the executor alone does not stop str.format


def test_custom_attempts_get_the_marker_and_secret_paths():
    attempt = EscapeAttempt("show paths", "test", "write-file", "print('{MARKER} {SECRET_FILE}')")
    report = run_escape_suite([attempt])
    logs = report.results[0].run.logs
    assert report.escaped == 0 and "escaped.marker" in logs and "secret.txt" in logs


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="non-empty"):
        run_sandboxed("   ")
    with pytest.raises(ValueError, match="positive"):
        run_sandboxed("1", timeout_s=0)
