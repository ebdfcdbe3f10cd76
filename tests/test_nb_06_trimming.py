"""The trimming chapter: the worked example, the 11-message trimmer, the two bugs over four turns,
the summary kept in state and counted in the budget, the exercises. Assertions read values
(regex on fields, parsed numbers) from what the student sees under each cell."""

import ast
import re
from itertools import pairwise

SEVEN = ["You're a good assistant.", "What's 2 + 2?", "4.", "Thanks!", "No problem!",
         "Having fun?", "Yes!"]
MAX_NEW = 8  # the chapter's reply length (cell bug1-setup)

NOTEBOOK = "06_trimming.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)

TURN = re.compile(r"turn (\d+), (.+?): received (\d+) messages, name in prompt: (yes|no), "
                  r"stored (\d+) chars \((\d+) GPT-2 fallback, (\d+) agent tokenizer, "
                  r"(\d+) notes tokenizer\)")
DECISION = re.compile(r"^#(\d+) (\w+) \((\d+) tokens\) (kept|dropped): ", re.M)


def _list_after(text: str, label: str) -> list:
    """The Python list printed after ``label`` on its line."""
    found = re.search(re.escape(label) + r"\s*(\[.*\])", text)
    assert found, f"no list after {label!r} in:\n{text}"
    return ast.literal_eval(found.group(1))


def _turns(text: str) -> dict[str, dict[int, dict]]:
    """{run label: {turn: fields}} from a TurnRuns record's text."""
    runs: dict[str, dict[int, dict]] = {}
    for m in TURN.finditer(text):
        turn, label, received, name, chars, gpt2, agent, notes = m.groups()
        runs.setdefault(label, {})[int(turn)] = {
            "received": int(received), "name": name == "yes", "chars": int(chars),
            "gpt2": int(gpt2), "agent": int(agent), "notes": int(notes)}
    return runs


SUMMARY_LINE = re.compile(r"^(.+?)(?: \(ran (\d+) of (\d+) turns\))?: name in prompt on turns "
                          r"(\[[\d, ]*\]); received (\d+)(?:-(\d+))? messages; stored "
                          r"(\d+)(?:-(\d+))? chars, (\d+)(?:-(\d+))? GPT-2 fallback tokens$", re.M)


def _summaries(text: str) -> dict[str, dict]:
    """{run label: fields} from a TurnRuns record's summary() (one line per run)."""
    out = {}
    for m in SUMMARY_LINE.finditer(text):
        label, ran, _, named, r_lo, r_hi, c_lo, c_hi, g_lo, g_hi = m.groups()
        out[label] = {"ran": int(ran) if ran else None, "named": ast.literal_eval(named),
                      "received": (int(r_lo), int(r_hi or r_lo)),
                      "chars": (int(c_lo), int(c_hi or c_lo)),
                      "gpt2": (int(g_lo), int(g_hi or g_lo))}
    return out


def _decisions(text: str) -> dict[int, tuple[str, int, bool]]:
    return {int(i): (role, int(tok), kept == "kept") for i, role, tok, kept in DECISION.findall(text)}


def test_each_rule_changes_the_kept_set(run):
    assert _list_after(run.text("rule-1"), "strategy='last': kept") == [
        "Any plans?", "Not yet.", "What is my name?"]
    assert _list_after(run.text("rule-1"), "strategy='first': kept") == ["Be brief.", "Hi, I am Bob."]
    rule2 = run.text("rule-2")
    with_system = re.search(r"include_system=True: kept (\[.*\]) \((\d+) tokens\)", rule2)
    assert ast.literal_eval(with_system.group(1)) == ["Be brief.", "Any plans?", "Not yet.",
                                                      "What is my name?"]
    assert int(with_system.group(2)) == 10
    rule3 = run.text("rule-3")
    partial = _list_after(rule3, "allow_partial=True :")
    greeting = "Hello Bob, nice to meet you."
    assert partial[1:] == ["Any plans?", "Not yet.", "What is my name?"]
    assert partial[0].strip() != greeting and greeting.endswith(partial[0].strip())  # cut
    assert _list_after(rule3, "allow_partial=False:") == ["Any plans?", "Not yet.", "What is my name?"]
    assert _list_after(run.text("rule-4"), "start_on=None: kept") == ["Not yet.", "What is my name?"]
    assert _list_after(run.text("rule-4"), "start_on='human': kept") == ["What is my name?"]


def test_the_rules_written_in_the_cell_agree_with_trim_messages(run):
    text = run.text("rules-code")
    assert _list_after(text, "budget 10, all four rules:") == [  # as rule-2 with the system
        "Be brief.", "Any plans?", "Not yet.", "What is my name?"]
    found = re.search(r"the same kept set in (\d+) of (\d+) cases \(budgets 0-(\d+)", run.text("rules-agree"))
    same, total, top = map(int, found.groups())
    assert same == total == (top + 1) * 4 and top == 20  # 21 words in chat_log, 4 option pairs


def test_cell_rules_are_the_package_rules_on_the_chapters_cases():
    """One truth: the cell's keep_by_rules (executed from the notebook's source) has the
    package's body, and both keep what trim_messages keeps on the chapter's cases."""
    import inspect
    import random

    from langchain_core.messages import trim_messages

    from course.trimming import rules
    from course.trimming.counters import (
        Gpt2FallbackCounter,
        ModelTokenCounter,
        ToyCounter,
        worked_example_counter,
    )
    from course.trimming.examples import (
        WORKED_BUDGET,
        eleven_messages,
        make_messages,
        worked_example_messages,
    )
    from nbharness import cell_sources

    source = cell_sources(NOTEBOOK)["rules-code"]
    cell_def = source.split("\n\n\nprint(")[0]
    namespace: dict = {}
    exec(cell_def, namespace)  # the chapter's own cell

    def body(text: str) -> str:  # what follows the docstring: the rules themselves
        return text.split('"""', 2)[2].strip()

    assert body(cell_def) == body(inspect.getsource(rules.keep_by_rules))

    def reference(messages, budget, counter, **options):
        kept = trim_messages(messages, max_tokens=budget, token_counter=counter, strategy="last",
                             allow_partial=False, **options)
        return [i for i, m in enumerate(messages) if any(m is k for k in kept)]

    cases = [(worked_example_messages(), WORKED_BUDGET, worked_example_counter()),
             (eleven_messages(), 45, Gpt2FallbackCounter()), (eleven_messages(), 45, ModelTokenCounter())]
    rng = random.Random(24)
    for _ in range(200):
        msgs = make_messages([("system", "x")] * (rng.random() < 0.7)
                             + [(rng.choice(["human", "ai"]), "x") for _ in range(rng.randint(1, 8))])
        cases.append((msgs, rng.randint(0, 60), ToyCounter({m.id: rng.randint(0, 12) for m in msgs})))
    for messages, budget, counter in cases:
        for options in ({"include_system": True, "start_on": "human"},
                        {"include_system": False, "start_on": None}):
            want = reference(messages, budget, counter, **options)
            assert namespace["keep_by_rules"](messages, budget, counter, **options) == want
            assert rules.keep_by_rules(messages, budget, counter, **options) == want
    assert namespace["keep_by_rules"](*cases[0]) == [0, 5, 6, 7]  # the note's worked example


def test_worked_example_keeps_exactly_four_messages_and_32_tokens(run):
    text = run.text("worked-example")
    decisions = _decisions(text)
    assert [i for i, (_, _, kept) in sorted(decisions.items()) if kept] == [0, 5, 6, 7]
    assert [tok for _, (_, tok, _) in sorted(decisions.items())] == [10, 6, 5, 12, 20, 7, 9, 6]
    found = re.search(r"kept (\d+) of (\d+) messages, (\d+) tokens of a budget of (\d+) \(all: (\d+)",
                      text)
    assert tuple(map(int, found.groups())) == (4, 8, 32, 52, 75)
    assert "would start on an assistant turn" in text and "would make 54 > 42" in text


def test_walk_back_is_explained_step_by_step(run):
    text = run.text("walk-back")
    assert "52 - 10 = 42 tokens remain" in text
    steps = [tuple(map(int, m)) for m in re.findall(r": (\d+) -> (\d+) <= (\d+), fits", text)]
    assert steps == [(6, 6, 42), (9, 15, 42), (7, 22, 42), (20, 42, 42)]
    assert re.search(r": 12 -> 54 > 42: stop", text) and "drop it (rule 4)" in text
    assert "the model gets 4 messages and 32 tokens" in text


def test_eleven_messages_keep_the_seven_with_gpt2_counts(run):
    text = run.text("eleven-gpt2")
    assert _list_after(text, "GPT-2 counts per message:") == [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]
    assert _list_after(text, "kept:") == SEVEN
    assert "45 - 8 = 37 tokens remain" in text and "-> 42 > 37: stop" in text
    assert "- ai 'Nice.': the kept history would start on an assistant turn" in text


def test_model_tokenizer_keeps_fewer(run):
    text = run.text("eleven-model")
    counts = _list_after(text, "model-tokenizer counts per message:")
    assert len(counts) == 11 and all(c > 0 for c in counts)
    found = re.search(r"GPT-2 fallback keeps (\d+), the model's tokenizer keeps (\d+)", text)
    assert int(found.group(1)) == 7 and int(found.group(2)) < 7
    assert _list_after(text, "kept only by the GPT-2 count:") == ["What's 2 + 2?", "4."]


def test_three_counters_side_by_side_with_qwen(run):
    text = run.text("eleven-qwen")
    assert "notes tokenizer: Qwen3 tokenizer" in text  # the prepared asset, not the fallback
    keeps = re.search(r"budget 45 keeps: GPT-2 fallback (\d+), agent tokenizer (\d+), "
                      r"notes tokenizer (\d+)", text)
    gpt2, agent, qwen = map(int, keeps.groups())
    assert gpt2 == 7 and qwen < gpt2 and agent < gpt2
    total = re.search(r"^total \|  \| (\d+) \| (\d+) \| (\d+)$", text, re.M)
    assert int(total.group(1)) == 62  # 8+8+4+8+4+8+4+4+5+5+4
    assert int(total.group(3)) > int(total.group(1))  # Qwen's template tokens cost more


def test_include_system_pitfall_and_fix(run):
    text = run.text("include-system-pitfall")
    assert "the option changed nothing: True" in text
    after = _decisions(text.split("fix: template first")[1])
    assert after[0] == ("system", after[0][1], True)


def test_outputs_that_show_the_models_words_name_their_provenance(run):
    probe = "[measured, SmolLM2-135M-Instruct in this kernel through a transformers pipeline]"
    for cell in ("bug1-runs", "nobug-runs", "both-bugs"):
        assert run.text(cell).startswith(probe), cell
    agent = "[measured, SmolLM2-135M-Instruct (bundled)"
    for cell in ("both-fixes", "facts-remedy"):
        assert run.text(cell).startswith(agent), cell
    assert agent in run.text("summary-remedy").splitlines()[0]
    assert probe in run.text("bug1-truth") and probe in run.text("bug2-table")
    for cell in ("bug1-plot", "name-by-turn", "closing-figures"):
        assert re.search(r"^(first turn.*\n)?measured", run.text(cell)), cell


def test_bug1_stores_the_prompt_and_grows_only_with_the_bug(run):
    assert "starts with the whole rendered prompt: True" in run.text("bug1-truth")
    assert "with return_full_text=False it does: False" in run.text("bug1-truth")
    assert run.text("bug1-truth").count("<|im_start|>system") >= 2  # the prompts nest
    runs = _turns(run.text("bug1-plot"))
    bugged = [runs["return_full_text=True (bug 1)"][t]["chars"] for t in (1, 2, 3)]  # 3 turns
    fixed = runs["return_full_text=False (fixed)"]
    assert all(a < b for a, b in pairwise(bugged))  # grows every turn
    assert max(f["chars"] for f in fixed.values()) < bugged[0]
    # bounded by max_new_tokens (+ the chat template around one message): no growth
    assert max(f["agent"] for f in fixed.values()) <= MAX_NEW + 6
    assert run.has_image("bug1-plot")


def test_bug2_the_stored_message_is_over_the_budget_in_gpt2_tokens(run):
    text = run.text("bug2-table")
    stored = re.search(r"stored assistant message of turn 1: (\d+) characters, (\d+) GPT-2 "
                       r"tokens, (\d+) notes-tokenizer tokens, (\d+) agent-tokenizer tokens", text)
    chars, gpt2, qwen, agent = map(int, stored.groups())
    bug1_turn1 = _turns(run.text("bug1-plot"))["return_full_text=True (bug 1)"][1]
    assert (chars, gpt2, qwen, agent) == (bug1_turn1["chars"], bug1_turn1["gpt2"],
                                          bug1_turn1["notes"], bug1_turn1["agent"])
    assert gpt2 > 45 and agent > 45  # alone over the whole budget, as the note says
    assert "\"Human: Hi! I'm Bob.\"" in text or "'Human: Hi! I\\'m Bob.'" in text


def test_note_figure_gets_a_qwen_count(run):
    text = run.text("note-figure")
    found = re.search(r"reconstructed prompt part: (\d+) characters, (\d+) GPT-2 tokens, (\d+) "
                      r"tokens by the Qwen3 tokenizer", text)
    chars, gpt2, qwen = map(int, found.groups())
    assert 100 < chars < 205 and qwen > 0 and gpt2 > 45
    assert "recorded by the note" in text and "205 characters" in text


def test_bugged_graph_loses_the_name_on_turn_2_fixed_graph_at_turn_4(run):
    runs = _turns(run.text("name-by-turn"))
    bugs, fixes = runs["both bugs"], runs["both fixes"]
    assert [bugs[t]["name"] for t in (1, 2, 3, 4)] == [True, False, False, False]
    assert [fixes[t]["name"] for t in (1, 2, 3)] == [True, True, True]
    assert fixes[4]["name"] is False  # the fixed graph forgets too, later: trimming's price
    assert all(bugs[t]["received"] == 2 for t in (2, 3, 4))  # system + the new question
    assert "first turn without the name: both bugs 2 | both fixes 4" in run.text("name-by-turn")


def test_summary_in_state_is_counted_and_keeps_bob(run):
    text = run.text("summary-remedy")
    summary = ast.literal_eval(re.search(r"summary in the checkpointed state: (.+)", text).group(1))
    assert "Bob" in summary  # the model's summary kept the name (computed, not a prefix)
    tokens, budget = map(int, re.search(r"turn 4 prompt: (\d+) tokens \(budget (\d+)", text).groups())
    assert tokens <= budget  # the summary is counted in the budget
    assert "'Hi! I'm Bob.' in the turn-4 prompt: False" in text  # trimmed away ...
    assert "'Bob' survives in the turn-4 prompt: True" in text  # ... yet Bob survives
    closing = _summaries(run.text("closing-figures"))
    assert 4 in closing["summary in state"]["named"] and 4 not in closing["both fixes"]["named"]


def test_remove_message_deletes_trimming_does_not(run):
    text = run.text("remove-vs-trim")
    trimmed = int(re.search(r"trimming graph \(both fixes\), saved messages: (\d+)", text).group(1))
    removed = int(re.search(r"RemoveMessage, saved messages: (\d+)", text).group(1))
    assert trimmed == 8 and removed < trimmed
    assert "'Hi! I'm Bob.' still saved: trimming True | RemoveMessage False" in text
    assert re.search(r"summarize --> model", run.text("summary-graph"))
    assert re.search(r"__start__ --> model", run.text("trimming-graph"))


def test_fact_field_keeps_the_name_every_turn(run):
    assert "name in the prompt on every turn: True" in run.text("facts-remedy")
    assert _summaries(run.text("closing-figures"))["fact field"]["named"] == [1, 2, 3, 4]


def test_explorer_is_shown_and_follows_the_budget(run):
    assert run.has_widget("explorer")
    found = re.search(r"kept (\d+) of (\d+) messages, (\d+) tokens of a budget of (\d+)",
                      run.text("explorer-text"))
    assert tuple(map(int, found.groups())) == (2, 8, 16, 30)


def test_closing_figures_summarise_the_runs_above(run):
    text = run.text("closing-figures")
    assert len(text) < 2000  # summaries first: one line per run, the turns on demand
    closing = _summaries(text)
    assert set(closing) == {"both bugs", "both fixes", "bug 1 alone (no trimming)",
                            "summary in state", "fact field"}
    by_turn = _turns(run.text("name-by-turn"))
    bugs = by_turn["both bugs"]
    assert closing["both bugs"]["named"] == [t for t in sorted(bugs) if bugs[t]["name"]] == [1]
    assert closing["both bugs"]["chars"] == (min(b["chars"] for b in bugs.values()),
                                             max(b["chars"] for b in bugs.values()))
    assert closing["bug 1 alone (no trimming)"]["ran"] == 3  # the costly run: 3 of 4 turns
    assert closing["both bugs"]["gpt2"][0] > 45  # every stored message alone over the budget


def test_exercises_pass(run):
    for n in (1, 2, 3, 4):
        assert "[passed] Exercise" in run.text(f"ex{n}-check"), run.text(f"ex{n}-check")


def test_the_instructor_quiz_passes(run):
    assert run.has_widget("quiz")
    assert "[passed] Quiz" in run.text("quiz-check")
    assert len(re.findall(r"^q\d right: ", run.text("quiz-check"), re.M)) == 5
