"""BFCL v4 in chapter 01: the pinned wheel's data, its own AST checker loaded unchanged, the
course's conversion of a reply into the checker's input, and the committed run's table.

No model runs here: the checker is fed calls built from BFCL's own possible answers (each must be
accepted) and altered ones (each must be rejected with the checker's reason).
"""

import json
import sys

import pytest

from course.assets import BFCL_PACKAGE, DATA_PACKAGES
from course.tools import bfcl


def _call(name: str, arguments: dict) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def _from_answer(answer: dict) -> tuple[str, dict]:
    """The first possible value of every parameter BFCL lists ("" means: may be left out)."""
    name, params = next(iter(answer.items()))
    values = {k: [x for x in v if x != ""] for k, v in params.items()}
    return name, {k: v[0] for k, v in values.items() if v}


def test_the_wheel_is_the_pinned_one_and_prepare_knows_it():
    assert BFCL_PACKAGE in DATA_PACKAGES
    wheel = bfcl.bfcl_wheel()
    assert wheel.name == "bfcl_eval-2026.3.23-py3-none-any.whl"
    from course.assets import _sha256

    assert _sha256(wheel) == BFCL_PACKAGE.sha256


def test_the_categories_and_the_flat_questions():
    simple, multiple = bfcl.load_cases("simple"), bfcl.load_cases("multiple")
    assert (len(simple), len(multiple)) == (400, 200)
    assert (sum(map(bfcl.flat_case, simple)), sum(map(bfcl.flat_case, multiple))) == (348, 145)
    assert simple[0].id == "simple_python_0" and simple[0].functions[0]["name"] == "calculate_triangle_area"
    assert all(2 <= len(c.functions) <= 4 for c in multiple)
    with pytest.raises(ValueError, match="not measured here"):
        bfcl.load_cases("parallel")


def test_the_checker_is_bfcls_own_and_its_heavy_import_is_stubbed():
    checker = bfcl.load_ast_checker()
    assert checker.__module__ == "bfcl_eval.eval_checker.ast_eval.ast_checker"
    assert sys.modules[checker.__module__].__file__.startswith(str(bfcl.bfcl_wheel()))
    assert "stub" in sys.modules["bfcl_eval.constants.model_config"].__doc__.lower()
    assert not any(m.startswith("bfcl_eval.model_handler") for m in sys.modules)


@pytest.mark.parametrize("category", ["simple", "multiple"])
def test_every_flat_ground_truth_is_accepted_and_a_changed_value_is_not(category):
    cases = [c for c in bfcl.load_cases(category) if bfcl.flat_case(c)]
    rejected = []
    for case in cases:
        name, arguments = _from_answer(case.possible_answer[0])
        verdict = bfcl.judge(case, category, _call(name, arguments))
        if not verdict["valid"]:
            rejected.append((case.id, verdict["error"]))
    assert rejected == []
    case = cases[0]
    name, arguments = _from_answer(case.possible_answer[0])
    key = next(k for k, v in arguments.items() if isinstance(v, int) and not isinstance(v, bool))
    verdict = bfcl.judge(case, category, _call(name, {**arguments, key: arguments[key] + 1}))
    assert not verdict["valid"] and key in verdict["error"][0]


def test_a_reply_that_is_not_a_call_is_judged_as_such():
    case = bfcl.load_cases("simple")[0]
    assert bfcl.bfcl_output("The area is 25.") is None
    assert bfcl.judge(case, "simple", "The area is 25.")["error_type"] == "course:not_a_call"
    wrong = bfcl.judge(case, "simple", _call("math.factorial", {"number": 5}))
    assert not wrong["valid"] and "function" in wrong["error"][0].lower()


def test_tool_schema_speaks_json_schema():
    case = bfcl.load_cases("simple")[0]
    schema = bfcl.tool_schema(case.functions[0])["function"]
    assert schema["parameters"]["type"] == "object"
    assert set(schema["parameters"]["properties"]) == {"base", "height", "unit"}
    only = bfcl.tool_schema(case.functions[0], required_only=True)["function"]["parameters"]
    assert set(only["properties"]) == {"base", "height"}
    floats = next(c for c in bfcl.load_cases("multiple") if '"float"' in json.dumps(c.functions))
    assert '"float"' not in json.dumps([bfcl.tool_schema(f) for f in floats.functions])


def test_constrained_decoding_writes_booleans():
    from course.models import probe_model
    from course.tools.constrained import _argument_segments, _Choice

    tokenizer = probe_model().tokenizer
    segments = _argument_segments(tokenizer, {"properties": {"exact": {"type": "boolean"}}})
    choices = [s for s in segments if isinstance(s, _Choice)]
    assert [sorted(c.options) for c in choices] == [["false", "true"]]


def test_the_committed_run_is_a_complete_table():
    run = bfcl.BfclRun.from_json(bfcl.BFCL_LAST_RUN)
    assert run.model == "SmolLM2-135M-Instruct" and "python -m course.tools.bfcl" in run.when
    rows = {(r.category, r.mode, r.subset): r for r in run.rows}
    assert set(rows) == {(c, m, s) for c in ("simple", "multiple")
                         for m, s in (("free", "flat"), ("constrained", "flat"), ("free", "all"))}
    for category in ("simple", "multiple"):
        free, constrained = rows[(category, "free", "flat")], rows[(category, "constrained", "flat")]
        assert free.n == constrained.n > 0  # the same questions both ways
        cut = constrained.errors.get("course:not_a_call", 0)  # only a call cut by the budget
        assert constrained.well_formed == constrained.n - cut and cut <= constrained.n // 10
        assert 0 <= constrained.accepted <= constrained.n
        assert rows[(category, "free", "all")].n >= free.n
        assert sum(constrained.errors.values()) == constrained.n - constrained.accepted
    for key, example in run.examples.items():  # a constrained call that is not one was cut
        if key.endswith("constrained/course:not_a_call"):
            assert "<tool_call>" in example and "</tool_call>" not in example
    assert str(run).splitlines()[0].startswith("BFCL v4 (measured; model SmolLM2-135M-Instruct")


def test_the_tuned_models_table_asks_the_base_tables_questions():
    """base + the tools adapter (``--model bundled+tools``): the same sample as the base table
    (the first N flat questions of each category), named, and every figure within its N."""
    base, tuned = (bfcl.BfclRun.from_json(p) for p in (bfcl.BFCL_LAST_RUN, bfcl.BFCL_TOOLS_RUN))
    assert tuned.model == "SmolLM2-135M-Instruct + LoRA smollm2-tools (course/data/adapters)"
    assert tuned.provenance == "measured" and tuned.when.count("--model bundled+tools") == 2
    assert "greedy" in tuned.when and "--threads 1" in tuned.when
    key = lambda r: (r.category, r.mode, r.subset)  # noqa: E731
    assert [key(r) for r in tuned.rows] == [key(r) for r in base.rows]
    for b, t in zip(base.rows, tuned.rows, strict=True):
        assert t.n == b.n, key(t)
        assert 0 <= t.accepted <= t.well_formed <= t.n, key(t)
        assert sum(t.errors.values()) == t.n - t.accepted, key(t)
    for category, ids in tuned.questions.items():  # the base table predates `questions`
        n = next(r.n for r in base.rows if r.category == category and r.subset == "flat")
        flat = [c.id for c in bfcl.load_cases(category) if bfcl.flat_case(c)][:n]
        assert ids == flat, category
    assert set(tuned.questions) == {"simple", "multiple"}
    assert str(tuned).splitlines()[0].startswith(
        "BFCL v4 (measured; model SmolLM2-135M-Instruct + LoRA smollm2-tools")


def test_merging_tables_keeps_one_model(tmp_path):
    tuned = bfcl.BfclRun.from_json(bfcl.BFCL_TOOLS_RUN)
    base = bfcl.BfclRun.from_json(bfcl.BFCL_LAST_RUN)
    with pytest.raises(ValueError, match="different models"):
        bfcl.BfclRun.merge([base, tuned])
    with pytest.raises(ValueError, match="nothing to merge"):
        bfcl.BfclRun.merge([])
    halves = [bfcl.BfclRun(tuned.provenance, tuned.model, f"half {c}",
                           [r for r in tuned.rows if r.category == c],
                           questions={c: tuned.questions[c]}) for c in ("simple", "multiple")]
    merged = bfcl.BfclRun.merge(halves, note="side by side")
    assert merged.when == "side by side: half simple; half multiple"
    assert merged.rows == tuned.rows and merged.questions == tuned.questions
    path = merged.to_json(tmp_path / "t.json")
    assert bfcl.BfclRun.from_json(path).rows == tuned.rows
