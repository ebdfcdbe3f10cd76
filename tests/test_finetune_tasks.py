"""course.finetune.tasks, .heldout and .prompt: the generator at scale, the held-out set and its
answer checks, the compact prompt, and run_task judging answers (by value)."""

from __future__ import annotations

import random
import re

import pytest

from course.finetune.data import HELD_OUT_FAMILIES, Trajectory, render, trajectories_jsonl
from course.finetune.heldout import answer_problem, held_out_set, list_values, source_figures
from course.finetune.tasks import FAMILIES, FAMILY_WEIGHTS, MIXES, generate


@pytest.fixture(scope="module")
def tokenizer():
    from course.models import agent_tokenizer

    return agent_tokenizer()[0]


# ----- the generator -----
def test_the_generator_is_seeded():
    assert trajectories_jsonl(generate(300, seed=0)) == trajectories_jsonl(generate(300, seed=0))
    assert trajectories_jsonl(generate(300, seed=0)) != trajectories_jsonl(generate(300, seed=1))
    assert len(generate(5, seed=3)) == 5
    with pytest.raises(ValueError, match="unknown families"):
        generate(10, weights={"weather": 1})
    with pytest.raises(ValueError, match="n=0"):
        generate(0)


def test_the_generator_never_makes_a_held_out_family():
    many = generate(3000, seed=0)
    assert {t.family for t in many} == {k for k, w in FAMILY_WEIGHTS.items() if w}
    assert not set(FAMILIES) & set(HELD_OUT_FAMILIES)
    held = {t.task for t in held_out_set()}
    for t in many:
        assert t.task not in held
        words = " ".join([t.task, *t.outputs, *(p["description"] for p in t.pages),
                          *t.additional_args.values()]).lower()
        for word in ("weather", "film", "movie", "car", "cars", "vehicle", "bond", "°"):
            assert not re.search(rf"\b{word}\b" if word != "°" else word, words), (word, t.task)
        assert "(i)" not in words and "range(" not in " ".join(t.additional_args.values())


def test_families_of_weight_zero_leave_the_default_draw_as_it_was():
    drawn = {k: w for k, w in FAMILY_WEIGHTS.items() if w}
    assert {"fix_loop", "fix_twice"} <= set(FAMILY_WEIGHTS) - set(drawn)
    assert trajectories_jsonl(generate(300, seed=0)) == trajectories_jsonl(generate(300, 0, drawn))


def test_the_code_mix_teaches_neighbours_of_the_held_out_bug_but_never_a_list_one():
    from course.finetune.heldout import _printed

    many = generate(600, seed=1, weights=MIXES["code"])
    counts = {f: sum(t.family == f for t in many) for f in ("fix_loop", "fix_twice", "lookup_conflict")}
    assert counts["fix_loop"] > 80 and counts["fix_twice"] > 100 and counts["lookup_conflict"] > 20
    held = {t.task for t in held_out_set()}
    errors = set()
    for t in many:
        assert t.task not in held
        words = " ".join([t.task, *t.outputs, *(p["description"] for p in t.pages)]).lower()
        assert not re.search(r"\b(weather|film|movie|cars?|vehicle)\b|°", words), t.task
        if t.family not in ("fix_loop", "fix_twice"):
            continue
        codes = [o.split("<code>\n", 1)[1].rsplit("\n</code>", 1)[0] for o in t.outputs]
        assert codes[0] == t.additional_args["code"].strip()
        seen = [_printed(c.replace("final_answer(fixed_code)", ""))[1] for c in codes]
        assert seen[0] and seen[-1] is None, (t.additional_args, seen)  # it fails, and the fix runs
        if t.family == "fix_twice":  # the first fix runs into a second, other error
            assert seen[1] and seen[1].split("due to: ")[-1] != seen[0].split("due to: ")[-1]
        for error in filter(None, seen):
            # the held-out bug: a list called like a function, or read past its end
            assert "'list' object" not in error and "index [" not in error, (codes[0], error)
            errors.add(error.split("due to: ")[-1])
    # (the executor's message is cut at 120 characters: "Could not index 'word' ..." is read past its end)
    assert any("Could not index" in e for e in errors) and any("not callable" in e for e in errors)


def test_no_script_to_fix_fails_with_an_index_error():
    from course.finetune.heldout import _printed

    scripts = {t.additional_args["code"] for t in generate(400, seed=2) if t.family == "run_and_fix"}
    assert len(scripts) > 50
    for script in scripts:
        _, error = _printed(script)
        # a key missing from a dict reads "Could not index {...}"; a list read past its end
        # (the held-out bug) reads "Could not index [...]" or "out of range"
        assert error and "index [" not in error and "out of range" not in error, (script, error)


def test_every_family_renders_with_both_prompts(tokenizer):
    from course.agents.prompts import prompt_templates

    rng_seed = 0
    for name, make in FAMILIES.items():
        traj = make(random.Random(rng_seed))
        compact = render(traj, tokenizer, prompt_templates())
        assert compact.text.endswith("</code><|im_end|>") and len(compact.spans) == len(traj.outputs)
        if name in ("lookup_miss", "tool_error"):  # the first call fails, as the thought says
            assert "NOT run" in compact.observations[0] or "No results" in compact.observations[0]
        if name in ("lookup_conflict", "lookup_two_agree", "two_hop_draw"):
            assert traj.answer in " ".join(compact.observations)
    default = render(FAMILIES["compute"](random.Random(0)), tokenizer)
    assert len(default.prefix) > 4 * len(compact.prefix)


# ----- the compact prompt -----
def test_the_compact_prompt_is_a_fifth_of_the_default(tokenizer):
    from course.agents.offline_tools import OfflineImageTool, OfflineWebSearchTool
    from course.agents.prompts import system_prompt_text, system_prompt_tokens

    tools = [OfflineWebSearchTool(corpus=[]), OfflineImageTool()]
    compact, default = (system_prompt_tokens(tools, tokenizer, c) for c in (True, False))
    assert compact < 500 < 2000 < default
    text = system_prompt_text(tools)
    assert "def web_search(query: string)" in text and "def image_generator(" in text


# ----- the held-out set and its answer checks -----
def test_the_held_out_set_is_the_notes_three_and_ten_kin_each():
    held = held_out_set()
    assert len(held) == 33 and trajectories_jsonl(held) == trajectories_jsonl(held_out_set())
    assert [t.family for t in held[:3]] == ["weather", "film_vehicle_photo", "debug_list_index"]
    assert held[0].task == "What is the current weather in Paris?"
    for family in HELD_OUT_FAMILIES:
        assert sum(t.family == family for t in held) == 11
    assert len({t.task + str(t.pages) + str(t.additional_args) for t in held}) == 33
    for t in held:
        if t.family == "weather":
            assert len(source_figures(t)) == 2  # two sources that disagree
        if t.family == "film_vehicle_photo":
            assert t.answer in " ".join(p["description"] for p in t.pages) or t.answer == "Aston Martin DB5"


def test_weather_answer_names_one_sources_figure_not_a_glued_range():
    paris = held_out_set()[0]
    assert source_figures(paris) == {"https://meteocity.example/france/paris/now": {13.0},
                                     "https://skyreport.example/eu/france/paris": {15.0, 16.0}}
    assert answer_problem(paris, "13 °C and partly cloudy, according to MeteoCity", []) is None
    assert answer_problem(paris, "Clear sky, +16° (SkyReport)", []) is None
    assert answer_problem(paris, "Clear sky, around 13-16°C", []) == "glues the figures of 2 sources"
    assert answer_problem(paris, "It is nice out", []) == "names no source's temperature"


def test_the_car_drawn_must_be_the_car_the_pages_name_and_the_answer_its_image(tmp_path):
    from PIL import Image

    from course.agents.offline_tools import OfflineImageTool

    held = held_out_set()
    bond = held[1]
    image = OfflineImageTool(out_dir=tmp_path)("Aston Martin DB5, high-res, photorealistic")
    assert answer_problem(bond, image, ["Aston Martin DB5, high-res, photorealistic"]) is None
    assert answer_problem(bond, image, ["James Bond's car from the latest Bond movie"]) == (
        "the image tool was not asked for the Aston Martin DB5")
    assert answer_problem(bond, "Aston Martin DB5", []) == "no image was generated"
    # the right car drawn, but the run answers with something else than the image
    assert answer_problem(bond, print, ["Aston Martin DB5"]) == (
        "the answer is a builtin_function_or_method, not the image the tool made")
    assert answer_problem(bond, None, ["Aston Martin DB5"]) == (
        "the answer is nothing, not the image the tool made")
    saved = tmp_path / "car.png"
    Image.new("RGB", (4, 4)).save(saved)
    assert answer_problem(bond, str(saved), ["Aston Martin DB5"]) is None  # a path to the image
    assert answer_problem(bond, str(tmp_path / "gone.png"), ["Aston Martin DB5"]) is not None
    kin = next(t for t in held[3:] if t.family == "film_vehicle_photo")
    earlier = next(p["description"] for p in kin.pages if "earlier movie" in p["description"])
    old_car = earlier.rsplit(" drove a ", 1)[1].rstrip(".")
    assert answer_problem(kin, image, [f"a {kin.answer}"]) is None
    assert "another car the pages name" in answer_problem(kin, image, [f"{old_car} and {kin.answer}"])
    assert answer_problem(kin, image, [f"a {old_car}"]).startswith("the image tool was not asked")


def test_the_returned_code_must_run_and_print_the_lists_values():
    debug = held_out_set()[2]
    script = debug.additional_args["code"]
    assert list_values(script) == [0, 1, 2]
    fixed = "numbers=[0, 1, 2]\n\nfor i in range(len(numbers)):\n    print(numbers[i])\n"
    assert answer_problem(debug, fixed, []) is None
    assert answer_problem(debug, "numbers = [0, 1, 2]\nfor n in numbers:\n    print(n)", []) is None
    assert answer_problem(debug, script, []) == "returned no fixed code"
    half = "numbers=[0, 1, 2]\nfor i in range(4):\n    print(numbers[i])\n"  # one bug left
    assert answer_problem(debug, half, []).startswith("the returned code fails")
    assert answer_problem(debug, "print(3)", []) == "the returned code prints '3', not the list's values"
    assert answer_problem(debug, "3", []).startswith("the returned code prints")


# ----- run_task: the entry point judges answers too -----
def _weather_run(answer: str, tokenizer) -> object:
    from course.agents.replay import ReplayModel
    from course.finetune.evaluate import run_task

    task = next(t for t in held_out_set()[3:] if t.family == "weather")
    city = task.task.split(" in ")[1].split()[0].rstrip("?.")
    outputs = [f'Thought: I search.\n<code>\nprint(web_search(query="{city} weather now"))\n</code>',
               f'Thought: I answer.\n<code>\nfinal_answer("{answer}")\n</code>']
    return task, run_task(task, ReplayModel(outputs, tokenizer=tokenizer), "scripted", max_steps=3)


def test_run_task_judges_the_answer_not_only_the_trajectory(tokenizer):
    task, _ = _weather_run("x", tokenizer)
    (a, ta), (_, tb) = list(source_figures(task).items())
    one = f"{int(min(ta))} degrees, according to {a}"
    _, good = _weather_run(one, tokenizer)
    assert good.success and good.answer_problem == "" and good.right_tool
    glued = f"around {int(min(ta))}-{int(min(tb))} degrees"
    _, bad = _weather_run(glued, tokenizer)
    assert not bad.success and bad.final_answer
    assert bad.answer_problem == "glues the figures of 2 sources" or bad.flags


def test_run_task_asks_that_a_film_answer_be_the_image_the_tool_made(tokenizer):
    from course.agents.replay import ReplayModel
    from course.finetune.evaluate import run_task

    task = next(t for t in held_out_set()[3:] if t.family == "film_vehicle_photo")
    tool = next(t.name for t in task.make_tools() if t.name != "web_search")

    def run(answer: str):
        outputs = [f'Thought: I search.\n<code>\nprint(web_search(query="{task.task}"))\n</code>',
                   f'Thought: I draw it.\n<code>\nimage = {tool}(prompt="a {task.answer}")\n'
                   f"final_answer({answer})\n</code>"]
        return run_task(task, ReplayModel(outputs, tokenizer=tokenizer), "scripted", max_steps=3)

    drawn = run("image")
    assert drawn.success and drawn.answer_problem == "", drawn
    returned_the_tool = run(tool)  # the right car drawn, but the answer is the tool itself
    assert not returned_the_tool.success and returned_the_tool.final_answer
    assert returned_the_tool.answer_problem.endswith("not the image the tool made")


def test_a_kin_count_out_of_range_is_refused():
    with pytest.raises(ValueError, match="kin=12"):
        held_out_set(kin=12)
    assert len(held_out_set(kin=2)) == 9


def test_eval_only_refuses_a_prompt_the_adapter_was_not_trained_with(capsys):
    from course.finetune.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["--eval-only", "--prompt", "compact"])
    assert stop.value.code == 2
    assert "trained with the default prompt" in capsys.readouterr().err
    assert isinstance(Trajectory, type)


@pytest.mark.parametrize("argv, says", [
    (["--mix", "codes", "--trajectories", "5"], "--mix codes: use one of default, code"),
    (["--mix", "code"], "--mix needs --trajectories N"),
    (["--from", "no-such-adapter"], "--from no-such-adapter: no adapter folder"),
    (["--from", "smollm2-tools", "--eval-only"], "with --eval-only there is no training"),
    (["--learning-rate", "3"], "--learning-rate 3.0: use a value like 6e-4"),
    (["--search-misses", "1"], "--search-misses 1 evaluates an adapter that exists: add --eval-only"),
    (["--eval-only", "--search-misses", "4"], "give a whole number from 0 to 3"),
])
def test_the_new_options_refuse_what_cannot_work(argv, says, capsys):
    from course.finetune.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and says in capsys.readouterr().err


def test_results_side_by_side_per_family():
    from course.finetune.evaluate import TaskResult
    from course.finetune.heldout import by_family, by_family_text

    def result(model: str, family: str, success: bool, problem: str = "") -> TaskResult:
        return TaskResult(model, family, "t", 2, 2, True, True, [], success, 0, 0, 0.0,
                          answer_problem=problem)

    results = {"base": [result("base", "weather", False, "glues the figures of 2 sources"),
                        result("base", "debug_list_index", False, "the returned code fails: X")],
               "tuned": [result("tuned", "weather", True), result("tuned", "debug_list_index", True)]}
    rows = by_family(results)
    assert [(r["family"], r["model"], r["success"]) for r in rows] == [
        ("weather", "base", 0), ("weather", "tuned", 1),
        ("debug_list_index", "base", 0), ("debug_list_index", "tuned", 1)]
    assert rows[0]["answer_problems"] == {"glues the figures of 2 sources": 1}
    assert rows[2]["answer_problems"] == {"the returned code fails": 1}
    assert by_family_text(rows).splitlines()[1] == "weather | tuned | success 1/1 | final answers 1/1"


def test_what_a_model_did_when_sources_disagree_is_counted():
    from course.finetune.evaluate import TaskResult
    from course.finetune.heldout import disagreement_counts

    def weather(success: bool, problem: str = "", searches: int = 1) -> TaskResult:
        return TaskResult("m", "weather", "t", 2, 2, True, True, [], success, 0, 0, 0.0,
                          tools_called=["web_search"] * searches, answer_problem=problem)

    runs = [weather(True), weather(True, searches=2), weather(False, "glues the figures of 2 sources"),
            weather(False, "no final answer", searches=3),
            TaskResult("m", "debug_list_index", "t", 2, 2, True, True, [], False, 0, 0, 0.0)]
    assert disagreement_counts(runs) == {
        "tasks": 4, "named one source's figure": 2, "glues the figures of 2 sources": 1,
        "no final answer": 1, "searched more than once": 2}


def test_a_search_that_misses_finds_nothing_first_then_the_pages():
    from course.finetune.heldout import lookup_tasks

    lookups = lookup_tasks(held_out_set(kin=9))
    assert [t.family for t in lookups] == ["weather", "film_vehicle_photo"] + ["weather"] * 9 + [
        "film_vehicle_photo"] * 9
    kin = lookups[2]  # a weather kin: its own pages
    city = kin.task.rstrip("?.").split()[-1].lower()
    search = kin.make_tools(search_misses=1)[0]
    with pytest.raises(Exception, match=re.escape("No results found! Try a less restrictive/shorter query.")):
        search.forward(f"{city} weather")
    assert city in search.forward(f"{city} weather").lower()  # the same query, now found
    assert [c["query"] for c in search.calls] == [f"{city} weather"] * 2
    assert city in kin.make_tools()[0].forward(f"{city} weather").lower()  # no miss by default
    with pytest.raises(ValueError, match="misses must be 0 or more"):
        kin.make_tools(search_misses=-1)


def test_what_a_model_did_when_its_first_search_missed_is_counted():
    from course.finetune.evaluate import TaskResult
    from course.finetune.heldout import search_miss_counts

    def run(queries: list[str], success: bool = False) -> TaskResult:
        return TaskResult("m", "weather", "t", 3, 3, bool(queries), success, [], success, 0, 0, 0.0,
                          search_queries=queries)

    runs = [run([]), run(["a"]), run(["a", "a", "a"]), run(["a b", "a"], success=True),
            run(["x", "y"])]
    assert search_miss_counts(runs) == {"tasks": 5, "searched": 4, "searched again": 3,
                                        "with another query": 2, "succeeded": 1}
