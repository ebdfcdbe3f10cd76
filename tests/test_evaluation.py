"""Trajectory checks: they flag the three note runs and pass the good trajectories."""

from course.agents.evaluation import (
    check_trajectory,
    executes_script,
    facts_in,
    merged_contradictions,
    relevant_tool_never_called,
    run_instruction_ignored,
    script_runs,
)
from course.agents.traces import Run, TraceStep
from course.tools.calls import ToolCall


def test_checks_flag_exactly_the_intended_runs(replays):
    flagged = {name: sorted(f.check for f in check_trajectory(r.trace)) for name, r in replays.items()}
    assert flagged == {
        "weather_note": ["merged contradictions"],
        "bond_note": ["relevant tool never called"],
        "debug_note": ["instruction to run code ignored"],
        "bond_reference_72b": [],
        "debug_reference_72b": [],
        "bond_ideal_react": [],
    }


def test_the_flags_name_what_they_saw(replays):
    (merged,) = merged_contradictions(replays["weather_note"].trace)
    assert "13°" in merged.message and "16°" in merged.message and merged.step == 3
    (missing,) = relevant_tool_never_called(replays["bond_note"].trace)
    assert "'web_search'" in missing.message
    assert script_runs(replays["debug_reference_72b"].trace) == [1, 2]
    assert script_runs(replays["debug_note"].trace) == []


def test_facts_per_source():
    obs = ("## Search Results\n\n[A](https://a.example)\nParis: 13 °C, partly cloudy.\n\n"
           "[B](https://b.example)\nclear sky, +16°.\n\n[C](https://c.example)\nforum post")
    facts = facts_in(obs)
    assert [(f.source, set(f.temperatures), set(f.conditions)) for f in facts] == [
        ("https://a.example", {13.0}, {"partly cloudy"}),
        ("https://b.example", {16.0}, {"clear sky"})]


def run_with(answer, observation, task="What is the current weather?"):
    return Run(task, "m", [TraceStep(1, code="print(web_search(query='w'))", observation=observation,
                                tool_calls=[ToolCall("web_search", {"query": "w"})]),
                           TraceStep(2, is_final_answer=True)], tools=["web_search"], final_answer=answer)


OBS = "[A](https://a.example)\n13 °C, partly cloudy\n\n[B](https://b.example)\nclear sky, +16°"


def test_choosing_one_source_is_not_merging():
    assert merged_contradictions(run_with("13 °C and partly cloudy", OBS)) == []
    assert merged_contradictions(run_with("Sources disagree.", OBS)) == []
    assert len(merged_contradictions(run_with("Partly cloudy, 16°", OBS))) == 1
    agreeing = "[A](https://a.example)\n13 °C, sunny\n\n[B](https://b.example)\n13°, sunny"
    assert merged_contradictions(run_with("13 °C, sunny", agreeing)) == []


def test_relevance_by_cue_words_and_explicit_list():
    run = run_with("x", "", task="Add 2 and 2")
    assert relevant_tool_never_called(run) == []
    run.steps[0].tool_calls = []
    assert relevant_tool_never_called(run) == []
    assert len(relevant_tool_never_called(run, relevant=["web_search"])) == 1


def test_running_the_script():
    import ast

    script = ast.parse("numbers=[0, 1, 2]\nfor i in range(4):\n    print(numbers(i))\n")
    assert executes_script("exec(code)", script)
    assert executes_script("numbers = [0, 1, 2]\nprint(numbers[0])", script)
    assert not executes_script('fixed = """numbers = [0]\nprint(numbers[0])"""\nfinal_answer(fixed)', script)
    assert not executes_script("print(code)", script)
    assert not executes_script("this is not python", script)


def test_no_instruction_no_flag():
    run = Run("Explain this code", "m", [TraceStep(1, code="final_answer('ok')", is_final_answer=True)],
              additional_args={"code": "x = 1\nprint(x)\n"})
    assert run_instruction_ignored(run) == []
    run.task = "Run this code and tell me what it prints"
    assert len(run_instruction_ignored(run)) == 1


def test_verdicts_and_comparisons_say_their_values_to_a_machine(replays):
    """What the chapter displays is read by value: the flags of a verdict, the rows side by side."""
    import json

    from course.agents.evaluation import RunComparison, TrajectoryVerdict
    from course.records import RECORD_MIME

    verdict = TrajectoryVerdict.of("bond", replays["bond_note"].trace)
    (flag,) = json.loads(json.dumps(verdict._repr_mimebundle_()[RECORD_MIME]))["flags"]
    assert (flag["check"], flag["subject"]) == ("relevant tool never called", "web_search")
    assert str(verdict).startswith("bond: answer '<image") and "-> 1 flag(s)" in str(verdict)
    rows = RunComparison({"ideal": replays["bond_ideal_react"].trace}).record()["rows"]
    assert rows[0]["run"] == "ideal" and rows[0]["flags"] == [] and rows[0]["outputs"] == "reconstructed"
