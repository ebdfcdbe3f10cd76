"""The trimming chapter: each rule alone, the walk of rules 1 and 3 saved in the package, the worked
example, the 11-message trimmer, the two bugs over several turns (with the original notebook's
recorded state), the two remedies, the exercises. Assertions read the values of the records the
cells display (``run.record`` / ``run.records``), not their printed prose."""

import re
from itertools import pairwise

SEVEN = ["You're a good assistant.", "What's 2 + 2?", "4.", "Thanks!", "No problem!",
         "Having fun?", "Yes!"]
MAX_NEW = 8  # the chapter's reply length (cell eleven-gpt2)
BUDGET = 45  # the original trimmer's

NOTEBOOK = "05_trimming.ipynb"  # executed once by the shared ``run`` fixture (conftest.py)

PROBE = "measured, SmolLM2-135M-Instruct in this kernel through a transformers pipeline"
AGENT = "measured, SmolLM2-135M-Instruct (bundled)"


def _turns(run, cell, label=None) -> dict[int, dict]:
    """{turn: values} of a Conversation record (or of run ``label`` of a TurnRuns record)."""
    records = [r for r in run.records(cell) if ("turns" in r if label is None else "runs" in r)]
    assert len(records) == 1, (cell, records)
    turns = records[0]["turns"] if label is None else records[0]["runs"][label]
    return {t["turn"]: t for t in turns}


def test_each_rule_alone_changes_the_kept_set(run):
    kept = run.record("rules-one-by-one")["kept"]
    last = ["Any plans?", "Not yet.", "What is my name?"]
    assert kept['1. strategy="first"'] == ["Be brief.", "Hi, I am Bob."]
    assert kept['1. strategy="last"'] == kept["2. include_system=False"] == last
    assert kept["2. include_system=True"] == ["Be brief.", *last]
    assert run.record("rules-one-by-one")["tokens"]["2. include_system=True"] == 10
    greeting = "Hello Bob, nice to meet you."
    cut = kept["3. allow_partial=True"]
    assert cut[1:] == last and cut[0].strip() != greeting and greeting.endswith(cut[0].strip())
    assert kept["3. allow_partial=False"] == last
    assert kept["4. start_on=None, budget 6"] == ["Not yet.", "What is my name?"]
    assert kept['4. start_on="human", budget 6'] == ["What is my name?"]


def test_the_walk_of_rules_1_and_3_is_the_packages_and_agrees_with_trim_messages(run):
    """The cell's keep_newest (saved in course.trimming.rules; test_saved_cells compares the
    code) keeps what trim_messages keeps with rules 2 and 4 switched off."""
    import random

    from langchain_core.messages import trim_messages

    from course.trimming.counters import Gpt2FallbackCounter, ToyCounter
    from course.trimming.examples import eleven_messages, make_messages
    from course.trimming.rules import keep_newest
    from nbharness import cell_sources

    assert cell_sources(NOTEBOOK)["keep-newest"].startswith("# saved in course.trimming.rules\n")
    assert run.record("keep-newest")["contents"] == ["Any plans?", "Not yet.", "What is my name?"]
    cases = [(eleven_messages(), BUDGET, Gpt2FallbackCounter())]
    rng = random.Random(24)
    for _ in range(200):
        msgs = make_messages([(rng.choice(["system", "human", "ai"]), "x")
                              for _ in range(rng.randint(1, 8))])
        cases.append((msgs, rng.randint(0, 60), ToyCounter({m.id: rng.randint(0, 12) for m in msgs})))
    for messages, budget, counter in cases:
        want = trim_messages(messages, max_tokens=budget, token_counter=counter, strategy="last",
                             allow_partial=False)
        assert [m.id for m in keep_newest(messages, budget, counter)] == [m.id for m in want]
    from course.trimming import rules

    assert not hasattr(rules, "keep_by_rules")  # the four rules together are Exercise 2's


def test_worked_example_keeps_exactly_four_messages_and_32_tokens(run):
    report = run.record("worked-example")
    assert report["kept"] == [0, 5, 6, 7]
    assert [d["tokens"] for d in report["decisions"]] == [10, 6, 5, 12, 20, 7, 9, 6]
    assert (len(report["kept"]), len(report["decisions"]), report["kept_tokens"],
            report["max_tokens"], report["total_tokens"]) == (4, 8, 32, 52, 75)
    reasons = [d["reason"] for d in report["decisions"]]
    assert reasons[3].startswith("over budget: would make 54 > 42")
    assert reasons[4].startswith("would start on an assistant turn")


def test_walk_back_is_explained_step_by_step(run):
    steps = run.record("worked-example")["steps"]
    assert (steps[0]["kind"], steps[0]["tokens"], steps[0]["budget"]) == ("system", 10, 42)
    fits = [(s["tokens"], s["total"], s["budget"]) for s in steps if s["kind"] == "fits"]
    assert fits == [(6, 6, 42), (9, 15, 42), (7, 22, 42), (20, 42, 42)]
    stop = next(s for s in steps if s["kind"] == "stop")
    assert (stop["index"], stop["tokens"], stop["total"]) == (3, 12, 54)
    assert [s["index"] for s in steps if s["kind"] == "rule4"] == [4]
    assert steps[-1]["kind"] == "end" and steps[-1]["total"] == 32
    assert "the model gets 4 messages and 32 tokens" in run.text("worked-example")  # shown too


def test_eleven_messages_keep_the_seven_with_gpt2_counts(run):
    report = run.record("eleven-gpt2")
    assert [d["tokens"] for d in report["decisions"]] == [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]
    assert report["kept_contents"] == SEVEN
    assert report["counter"] == "GPT-2 fallback (ChatHuggingFace)"  # the chat model as counter
    steps = report["steps"]
    assert steps[0]["budget"] == 37
    assert next(s for s in steps if s["kind"] == "stop")["total"] == 42
    assert [report["decisions"][s["index"]]["content"] for s in steps if s["kind"] == "rule4"] == ["Nice."]


def test_the_models_own_tokenizers_keep_fewer(run):
    table, kept = run.records("eleven-counts")
    assert table["columns"]["GPT-2 fallback"] == [8, 8, 4, 8, 4, 8, 4, 4, 5, 5, 4]
    assert table["totals"]["GPT-2 fallback"] == 62
    assert table["totals"]["notes tokenizer"] > 62 and table["totals"]["agent tokenizer"] > 62
    # the Qwen3 tokenizer is the prepared asset, not a copy of the agent's or the fallback's
    assert table["columns"]["notes tokenizer"] != table["columns"]["agent tokenizer"]
    keeps = kept["kept"]
    assert keeps["GPT-2 fallback, budget 45"] == SEVEN
    for label in ("agent tokenizer, budget 45", "notes tokenizer, budget 45"):
        assert len(keeps[label]) < 7 and keeps[label][0] == SEVEN[0], label
        assert kept["tokens"][label] <= BUDGET
    lost = [c for c in SEVEN if c not in keeps["agent tokenizer, budget 45"]]
    assert lost == ["What's 2 + 2?", "4."]


def test_include_system_pitfall_and_fix(run):
    values = run.record("include-system-pitfall")
    kept, tokens = values["kept"], values["tokens"]
    without = kept["saved messages, include_system=False"]
    assert without == kept["saved messages, include_system=True"]  # the option changed nothing
    fix = kept["template first, then trim (the fix)"]
    assert fix[0].startswith("You are a helpful assistant. Answer all questions")  # kept ...
    assert tokens["template first, then trim (the fix)"] <= BUDGET  # ... and counted
    assert len(fix) - 1 < len(without)  # so fewer saved messages fit


def test_outputs_that_show_the_models_words_name_their_provenance(run):
    assert run.record("bug1-runs")["label"] == PROBE
    assert run.record("both-bugs")["label"].startswith(f"[{PROBE}]")
    conversations = [r for cell in ("both-fixes", "summary-remedy", "facts-remedy")
                     for r in run.records(cell) if "turns" in r]
    assert len(conversations) == 3
    for record in conversations:
        assert record["label"].startswith(f"[{AGENT}"), record["label"]
    assert run.text("bug1-truth").startswith(f"[{PROBE}]") and PROBE in run.text("bug2-table")
    for cell in ("both-fixes", "closing-figures"):
        assert all(r["label"].startswith("measured") for r in run.records(cell) if "runs" in r)


def test_bug1_stores_the_prompt_and_grows_only_with_the_bug(run):
    bugged = _turns(run, "bug1-runs", "return_full_text=True (bug 1)")
    fixed = _turns(run, "bug1-runs", "return_full_text=False (fixed)")
    assert sorted(bugged) == sorted(fixed) == [1, 2, 3]
    assert all(t["reply"].startswith(t["prompt_text"]) for t in bugged.values())  # bug 1
    assert not any(t["reply"].startswith(t["prompt_text"]) for t in fixed.values())
    assert bugged[2]["reply"].count("<|im_start|>system") >= 2  # the prompts nest
    assert "<|im_start|>system" in run.text("bug1-truth")  # shown in full
    sizes = [bugged[t]["reply_chars"] for t in (1, 2, 3)]
    assert all(a < b for a, b in pairwise(sizes))  # grows every turn
    assert max(f["reply_chars"] for f in fixed.values()) < sizes[0]
    # bounded by max_new_tokens (+ the chat template around one message): no growth
    assert max(f["reply_tokens"]["agent tokenizer"] for f in fixed.values()) <= MAX_NEW + 6
    assert run.has_image("bug1-runs")


def test_bug2_the_stored_message_is_over_the_budget_in_gpt2_tokens(run):
    table = run.record("bug2-table")
    turn1 = _turns(run, "bug1-runs", "return_full_text=True (bug 1)")[1]
    assert table["contents"][-1] == turn1["reply"]
    last = {label: counts[-1] for label, counts in table["columns"].items()}
    assert last == turn1["reply_tokens"]  # the same counters, the same message
    assert last["GPT-2 fallback"] > BUDGET and last["agent tokenizer"] > BUDGET
    assert table["rows"][1]["fallback text"] == "Human: Hi! I'm Bob."  # what GPT-2 counts


def test_the_original_notebooks_recorded_state_keeps_only_the_new_question(run):
    from course.memory.recorded import original_trimming_state

    state = original_trimming_state()
    shown, size, report = run.records("note-figure")
    human, ai, question = report["decisions"]
    assert (human["content"], ai["content"]) == tuple(content for _, content in state.messages)
    assert [list(m) for m in state.messages] == shown["messages"]  # the state, as it is stored
    assert len(ai["content"]) == 205 and ai["role"] == "ai"
    assert ai["tokens"] >= 66 and ai["tokens"] > BUDGET  # the note: at least 66 GPT-2 tokens
    assert report["counter"] == "GPT-2 fallback (ChatHuggingFace)"
    assert report["kept"] == [2] and question["content"] == "What's my name?"
    assert (shown["thread_id"], shown["language"], shown["label"]) == ("abc123", "Spanish", "recorded")
    assert (size["name"], size["characters"], size["tokens"], size["unit"]) == (
        "its assistant message", 205, ai["tokens"], "GPT-2")  # the same count as the trimmer's


def test_bugged_graph_loses_the_name_on_turn_2_fixed_graph_at_turn_4(run):
    bugs = _turns(run, "both-bugs")
    fixes = _turns(run, "both-fixes")
    assert [bugs[t]["name_in_prompt"] for t in (1, 2, 3, 4)] == [True, False, False, False]
    assert all([kind for kind, _ in bugs[t]["received"]] == ["system", "human"] for t in (2, 3, 4))
    assert all(bugs[t]["received"][1][1] == bugs[t]["question"] for t in (2, 3, 4))  # only it
    assert all(bugs[t]["reply_tokens"]["GPT-2 fallback"] > BUDGET for t in bugs)
    assert [fixes[t]["name_in_prompt"] for t in (1, 2, 3, 4)] == [True, True, True, False]
    from langchain_core.messages import AIMessage, HumanMessage

    from course.trimming.counters import ModelTokenCounter

    count, kinds = ModelTokenCounter(), {"human": HumanMessage, "ai": AIMessage}
    for turn in fixes.values():  # the saved messages trimmed to the budget by the model's tokens
        assert count([kinds[kind](content) for kind, content in turn["received"][1:]]) <= BUDGET
    side_by_side = next(r for r in run.records("both-fixes") if "runs" in r)
    assert set(side_by_side["runs"]) == {"both bugs", "both fixes"}
    assert "__start__ --> model" in run.text("both-bugs")  # the graph is drawn


def test_summary_in_state_is_counted_and_keeps_bob(run):
    conversation, saved = run.records("summary-remedy")
    turns = {t["turn"]: t for t in conversation["turns"]}
    system = turns[4]["received"][0]
    assert system[0] == "system" and "Summary of the earlier conversation:" in system[1]
    assert "Bob" in system[1].split("Summary of the earlier conversation:")[1]  # the model's words
    assert turns[4]["prompt_tokens"] <= 70  # the summary is counted in the budget
    assert "Hi! I'm Bob." not in [content for _, content in turns[4]["received"]]  # trimmed ...
    assert turns[4]["name_in_prompt"]  # ... yet Bob survives
    kept = saved["kept"]
    by_trimming = kept["saved by the trimming graph (both fixes)"]
    by_summary = kept["saved by the summary graph (RemoveMessage)"]
    assert len(by_trimming) == 8 and "Hi! I'm Bob." in by_trimming  # trimming deletes nothing
    assert len(by_summary) < 8 and "Hi! I'm Bob." not in by_summary  # RemoveMessage does


def test_fact_field_keeps_the_name_every_turn(run):
    facts = _turns(run, "facts-remedy")
    assert [facts[t]["name_in_prompt"] for t in (1, 2, 3, 4)] == [True] * 4
    assert all("The user's name is Bob." in facts[t]["received"][0][1] for t in (1, 2, 3, 4))


def test_explorer_is_shown(run):
    assert run.has_widget("explorer")


def test_closing_figures_summarise_the_runs_above(run):
    closing = run.record("closing-figures")
    runs = closing["runs"]
    assert set(runs) == {"both bugs", "both fixes", "bug 1 alone (no trimming)",
                         "summary in state", "fact field"}
    bugs = _turns(run, "both-bugs")
    assert runs["both bugs"]["name_in_prompt"] == [1]
    assert runs["both bugs"]["stored_chars"] == [min(b["reply_chars"] for b in bugs.values()),
                                                 max(b["reply_chars"] for b in bugs.values())]
    assert runs["bug 1 alone (no trimming)"]["turns"] == [1, 2, 3]  # the costly run: 3 turns
    assert runs["both bugs"]["stored_tokens"][0] > BUDGET  # every stored message over budget
    assert runs["fact field"]["name_in_prompt"] == [1, 2, 3, 4]
    assert 4 in runs["summary in state"]["name_in_prompt"]
    assert 4 not in runs["both fixes"]["name_in_prompt"]
    assert len(run.text("closing-figures")) < 2000  # one line per run


def test_exercises_pass(run):
    for n in (1, 2, 3, 4):
        assert "[passed] Exercise" in run.text(f"ex{n}-check"), run.text(f"ex{n}-check")


def test_the_instructor_quiz_passes(run):
    assert run.has_widget("quiz")
    assert "[passed] Quiz" in run.text("quiz-check")
    assert len(re.findall(r"^q\d right: ", run.text("quiz-check"), re.M)) == 5
