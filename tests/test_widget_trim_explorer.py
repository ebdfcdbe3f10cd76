"""The trimming explorer, driven in pure Python: each control changes the kept set exactly as
trim_messages would, the reasons shown agree with the four rules, and errors replace the table."""

import ipywidgets as w
import pytest
from langchain_core.messages import trim_messages

from course.settings import CourseSettingError
from course.trimming.examples import parse_conversation
from course.trimming.rules import REASON_FITS, REASON_SYSTEM
from widgets.trim_explorer import GPT2, MODEL, OWN, TOY, TrimExplorer, default_counters

WORKED = "worked example (note)"
ELEVEN = "11 messages (original notebook)"


@pytest.fixture(scope="module")
def explorer():
    return TrimExplorer()  # the default counters: toy, LangChain's GPT-2 fallback, the model's


def _oracle(ex: TrimExplorer) -> list[str]:
    """What trim_messages itself keeps for the explorer's current settings."""
    first = ex.strategy.value == "first"
    kept = trim_messages(
        ex.messages(), max_tokens=ex.budget.value, token_counter=ex.token_counter(),
        strategy=ex.strategy.value, allow_partial=False,
        include_system=False if first else ex.include_system.value,
        start_on=None if first else ex.start_on.value,
    )
    return [str(m.content) for m in kept]


CASES = [
    # (changes to the controls, expected kept contents (None: only compare with trim_messages))
    ({}, ["You are a helpful assistant.", "Is it busy on Sundays?",
          "Yes, go early in the morning.", "What's my name?"]),
    ({"budget": 75}, "all"),
    ({"budget": 30}, ["You are a helpful assistant.", "What's my name?"]),
    ({"include_system": False}, ["Is it busy on Sundays?", "Yes, go early in the morning.",
                                 "What's my name?"]),
    ({"start_on": None}, ["You are a helpful assistant.",
                          "Sintra: palaces and gardens, forty minutes from Rossio.",
                          "Is it busy on Sundays?", "Yes, go early in the morning.",
                          "What's my name?"]),
    ({"strategy": "first"}, ["You are a helpful assistant.", "My name is Ana.",
                             "Nice to meet you, Ana!",
                             "Can you suggest a day trip from Lisbon by train?"]),
    ({"source": ELEVEN, "counter": GPT2, "budget": 45},
     ["You're a good assistant.", "What's 2 + 2?", "4.", "Thanks!", "No problem!",
      "Having fun?", "Yes!"]),
    ({"source": ELEVEN, "counter": MODEL, "budget": 45},
     ["You're a good assistant.", "Thanks!", "No problem!", "Having fun?", "Yes!"]),
    ({"source": ELEVEN, "counter": GPT2, "budget": 45, "include_system": False}, None),
    ({"source": ELEVEN, "counter": TOY, "budget": 10}, None),
    ({"source": OWN, "own_text": "system: Be brief.\nuser: Hi, I am Bob.\nassistant: Hello Bob.\n"
                                 "user: What is my name?", "budget": 8},
     ["Be brief.", "What is my name?"]),
]


def _reset(ex: TrimExplorer) -> None:
    ex.source.value, ex.counter.value, ex.strategy.value = WORKED, TOY, "last"
    ex.include_system.value, ex.start_on.value, ex.budget.value = True, "human", 52


@pytest.mark.parametrize("changes, expected", CASES, ids=[str(c[0]) for c in CASES])
def test_each_control_changes_the_kept_set_as_trim_messages_would(explorer, changes, expected):
    _reset(explorer)
    for name, value in changes.items():
        getattr(explorer, name).value = value
    report = explorer.report
    assert report is not None, explorer.error
    assert report.kept_contents == _oracle(explorer)
    if expected == "all":
        assert len(report.kept) == len(report.messages)
    elif expected is not None:
        assert report.kept_contents == expected
    for d in report.decisions:  # the reasons agree with the rules
        if d.kept:
            assert d.reason in (REASON_SYSTEM, REASON_FITS)
        else:
            assert d.reason.startswith(("over budget", "would start on"))
    assert f"{report.kept_tokens} tokens of a budget of {explorer.budget.value}" in explorer.text()
    shown = explorer.view.value
    assert "kept" in shown and ("dropped" in shown or len(report.kept) == len(report.messages))


def test_strategy_first_disables_the_options_trim_messages_refuses(explorer):
    _reset(explorer)
    explorer.strategy.value = "first"
    assert explorer.include_system.disabled and explorer.start_on.disabled
    assert explorer.report is not None and explorer.report.settings["include_system"] is False
    explorer.strategy.value = "last"
    assert not explorer.include_system.disabled


def test_bad_own_text_shows_the_error_instead_of_a_table(explorer):
    _reset(explorer)
    explorer.source.value = OWN
    explorer.own_text.value = "no role here"
    assert explorer.report is None and "role:" in explorer.error
    assert "error:" in explorer.text() and "color:#b00" in explorer.view.value
    explorer.own_text.value = "user: Hi!"
    assert explorer.report is not None and explorer.report.kept_contents == ["Hi!"]


def test_explorer_takes_your_own_examples_and_rejects_bad_settings():
    ex = TrimExplorer(examples={"mine": parse_conversation("user: a b c\nassistant: d e")},
                      budget=2, include_system=False, start_on=None)
    assert ex.report.kept_contents == ["d e"]
    with pytest.raises(ValueError, match="examples is empty"):
        TrimExplorer(examples={})
    with pytest.raises(ValueError, match="counter 'abacus'"):
        TrimExplorer(counter="abacus")


def test_the_explorer_is_a_vbox_showing_its_controls_and_the_report(explorer):
    assert isinstance(explorer, w.VBox)
    assert explorer.children[-1] is explorer.view
    assert all(c in explorer.children for c in explorer.controls)


@pytest.mark.parametrize("error", [
    CourseSettingError("COURSE_MODEL='http://127.0.0.1:9/v1': the server did not answer"),
    OSError("could not download cl100k_base.tiktoken"),
])
def test_a_counter_that_cannot_be_built_shows_the_error_not_a_stale_table(error):
    def broken():
        raise error

    ex = TrimExplorer(counters={**default_counters(), MODEL: broken})
    assert ex.report is not None  # the toy counter works
    ex.counter.value = MODEL
    assert ex.report is None and type(error).__name__ in ex.error
    assert "<table" not in ex.view.value and "color:#b00" in ex.view.value
    ex.counter.value = TOY
    assert ex.report is not None and "<table" in ex.view.value
