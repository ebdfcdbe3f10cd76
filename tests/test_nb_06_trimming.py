"""The trimming chapter: the worked example, the 11-message trimmer, the two bugs over four turns."""

import ast
import re
from itertools import pairwise

SEVEN = ["You're a good assistant.", "What's 2 + 2?", "4.", "Thanks!", "No problem!",
         "Having fun?", "Yes!"]


NOTEBOOK = "06_trimming.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)


def _list_after(text: str, label: str) -> list:
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(label))
    return ast.literal_eval(line.split(label, 1)[1].strip().split(", model tokens")[0])


def test_each_rule_changes_the_kept_set(run):
    assert "strategy='last': kept ['Any plans?', 'Not yet.', 'What is my name?']" in run.text("rule-1")
    assert "strategy='first': kept ['Be brief.', 'Hi, I am Bob.']" in run.text("rule-1")
    assert ("include_system=True: kept ['Be brief.', 'Any plans?', 'Not yet.', "
            "'What is my name?'] (10 tokens)") in run.text("rule-2")
    rule3 = run.text("rule-3")
    partial = _list_after(rule3, "allow_partial=True :")
    greeting = "Hello Bob, nice to meet you."
    assert partial[1:] == ["Any plans?", "Not yet.", "What is my name?"]
    assert partial[0].strip() != greeting and greeting.endswith(partial[0].strip())  # cut
    assert "allow_partial=False: ['Any plans?', 'Not yet.', 'What is my name?']" in rule3
    assert "start_on=None: kept ['Not yet.', 'What is my name?']" in run.text("rule-4")
    assert "start_on='human': kept ['What is my name?']" in run.text("rule-4")


def test_worked_example_keeps_exactly_four_messages_and_32_tokens(run):
    text = run.text("worked-example")
    assert "kept 4 of 8 messages, 32 tokens of a budget of 52 (all: 75" in text
    kept_rows = [ln.split()[0] for ln in text.splitlines() if re.match(r"^\s*\d+\s+\w+\s+\d+ yes", ln)]
    assert kept_rows == ["0", "5", "6", "7"]
    assert "would start on an assistant turn" in text and "would make 54 > 42" in text


def test_walk_back_is_explained_step_by_step(run):
    text = run.text("walk-back")
    assert "52 - 10 = 42 tokens remain" in text
    assert "20 -> 42 <= 42, fits (fits exactly)" in text
    assert "12 -> 54 > 42: stop" in text
    assert "drop it (rule 4)" in text
    assert "the model gets 4 messages and 32 tokens" in text


def test_eleven_messages_keep_the_seven_with_gpt2_counts(run):
    text = run.text("eleven-gpt2")
    assert "GPT-2 counts per message: [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]" in text
    assert _list_after(text, "kept:") == SEVEN
    assert "kept 7 of 11 messages" in text
    assert "45 - 8 = 37 tokens remain" in text and "-> 42 > 37: stop" in text
    assert "- ai 'Nice.': the kept history would start on an assistant turn" in text


def test_model_tokenizer_keeps_fewer(run):
    text = run.text("eleven-model")
    assert "GPT-2 fallback keeps 7, the model's tokenizer keeps 5" in text
    assert "kept only by the GPT-2 count: ['What\\'s 2 + 2?', '4.']" in text or \
        "kept only by the GPT-2 count: [\"What's 2 + 2?\", '4.']" in text


def test_include_system_pitfall_and_fix(run):
    text = run.text("include-system-pitfall")
    assert "the option changed nothing: True" in text
    assert "system kept (rule 2" in text.split("fix: template first")[1]


def test_bug1_stores_the_prompt_and_grows_only_with_the_bug(run):
    assert "starts with the whole rendered prompt: True" in run.text("bug1-truth")
    assert "with return_full_text=False it does: False" in run.text("bug1-truth")
    assert run.text("bug1-truth").count("<|im_start|>system") >= 2  # the prompts nest
    text = run.text("bug1-plot")
    bugged, fixed = _list_after(text, "bug 1: chars"), _list_after(text, "fixed: chars")
    assert len(bugged) >= 4 and all(a < b for a, b in pairwise(bugged))  # grows every turn
    assert max(fixed) < bugged[0]
    tokens = ast.literal_eval(text.split("fixed:")[1].split("model tokens")[1].strip().splitlines()[0])
    assert max(tokens) <= 12 + 2  # bounded by max_new_tokens: no growth without the bug
    assert run.has_image("bug1-plot")


def test_bug2_table_counts_both_ways(run):
    text = run.text("bug2-table")
    assert "'Human: Hi! I\\'m Bob.'" in text or "\"Human: Hi! I'm Bob.\"" in text
    total = next(ln for ln in text.splitlines() if ln.strip().startswith("total")).split()
    assert int(total[1]) != int(total[2])


def _name_table(run):
    rows = {}
    for ln in run.text("name-by-turn").splitlines()[1:]:
        turn, names, _ = (part.strip() for part in ln.split("|"))
        rows[int(turn)] = [x.strip() for x in names.split("/")]
    return rows


def test_bugged_graph_loses_the_name_on_turn_2_fixed_keeps_it(run):
    rows = _name_table(run)
    assert len(rows) >= 4
    assert rows[1] == ["yes", "yes"]
    assert rows[2] == ["no", "yes"]
    assert all(rows[t][0] == "no" for t in rows if t >= 2)
    bugs = run.text("both-bugs")
    for turn in range(2, len(rows) + 1):
        assert f"turn {turn}: model got 2 messages ['system', 'human']" in bugs


def test_remedies(run):
    assert "Summary of the earlier conversation:" in run.text("summary-remedy")
    assert "name in the prompt on every turn: True" in run.text("facts-remedy")


def test_explorer_is_shown_and_follows_the_budget(run):
    assert run.has_widget("explorer")
    assert "kept 2 of 8 messages, 16 tokens of a budget of 30" in run.text("explorer-text")


def test_closing_figures(run):
    text = run.text("closing-figures")
    assert "both bugs" in text and "bug 1 alone" in text


def test_exercises_pass(run):
    for n in (1, 2, 3):
        assert "[passed] Exercise" in run.text(f"ex{n}-check"), run.text(f"ex{n}-check")
