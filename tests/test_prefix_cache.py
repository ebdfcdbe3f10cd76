"""course.memory.prefix_cache: reusing the cached prefix changes no output (no timing assertions)."""

import itertools

import pytest

from course.memory.prefix_cache import (
    PrefixReuseReport,
    TurnTiming,
    _FirstTokenClock,
    measure_prefix_reuse,
)
from course.models.local import common_prefix_length


@pytest.fixture(scope="module")
def local():
    from course.models import load_local_model

    return load_local_model()


@pytest.fixture(scope="module")
def report(local):
    # A short system prompt: these tests are about the tokens and the cache, not the timings.
    return measure_prefix_reuse(local, ["Hi! I'm Bob.", "How do I make bread?", "What's my name?"],
                                system="You are a cooking school's assistant.", max_new_tokens=3)


def test_common_prefix_length():
    assert common_prefix_length([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_length([1, 2], [1, 2, 3]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([5], [6]) == 0


def test_reuse_gives_identical_greedy_tokens(report):
    assert len(report.turns) == 3
    assert report.all_identical
    assert all(t.identical for t in report.turns)
    assert all(t.new_tokens >= 1 for t in report.turns)


def test_each_turn_reuses_at_least_the_previous_prompt(report):
    turns = report.turns
    assert turns[0].reused_tokens == 0
    for before, now in itertools.pairwise(turns):
        assert before.prompt_tokens <= now.reused_tokens < now.prompt_tokens


def test_figures_are_printed_not_promised(report):
    table = report.table().splitlines()
    assert "ttft full" in table[0] and "identical" in table[0]
    assert len(table) == 4 and all(row.rstrip().endswith("yes") for row in table[1:])
    summary = report.summary()
    assert "identical token for token on 3 of 3 turns" in summary
    assert "time to first token" in summary and "total latency" in summary
    assert all(t.ttft_full > 0 and t.total_reuse > 0 for t in report.turns)


def test_plot_draws_two_lines_per_panel(report):
    import matplotlib

    matplotlib.use("Agg")
    axes = report.plot()
    assert [len(ax.lines) for ax in axes] == [2, 2]
    assert [ax.get_title() for ax in axes] == ["time to first token", "total latency"]


def test_bad_input(local):
    with pytest.raises(ValueError, match="user_turns"):
        measure_prefix_reuse(local, [])
    with pytest.raises(ValueError, match="user_turns"):
        measure_prefix_reuse(local, ["ok", "  "])
    with pytest.raises(ValueError, match="max_new_tokens"):
        measure_prefix_reuse(local, ["hi"], max_new_tokens=0)


def test_speedups_and_empty_report():
    t = TurnTiming(turn=1, prompt_tokens=10, reused_tokens=5, ttft_full=1.0, ttft_reuse=0.25,
                   total_full=2.0, total_reuse=1.0, new_tokens=3, identical=True, reply="x")
    assert t.ttft_speedup == 4.0 and t.total_speedup == 2.0
    empty = PrefixReuseReport()
    assert not empty.all_identical and empty.summary() == "no turns measured"


def test_first_token_clock_notes_the_second_put():
    clock = _FirstTokenClock()
    clock.put("prompt")
    assert clock.first_token_at is None
    clock.put("token")
    first = clock.first_token_at
    clock.put("token")
    assert first is not None and clock.first_token_at == first


def test_command_line_runs_the_measurement(local, capsys):
    from course.memory.prefix_cache import _main

    assert _main(["--turns", "1", "--max-new-tokens", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("probe model: ")
    assert "identical token for token on 1 of 1 turns" in out
    for bad in (["--turns", "0"], ["--turns", "13"]):
        with pytest.raises(SystemExit):
            _main(bad)
