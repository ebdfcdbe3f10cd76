"""Appendix A4's graded checks reject wrong answers: each check cell (hidden tests included, as the
instructor wrote it) runs against the instructor's solution and against plausible wrong answers,
without executing the rest of the notebook; the student edition's quiz and checks say
``[not yet done]``. (Appendix A4 is left out of the model-setting matrix, which runs the other
chapters' student editions.)"""

import io

import nbformat
import pytest

from classroom.grading.student import student_edition
from course.checks import check
from course.finetune.data import Trajectory, render, training_tasks
from course.finetune.train import TrainSettings
from nbharness import NOTEBOOKS, Exercises, _execute

EXERCISES = Exercises("A4_teach_a_small_model.ipynb")


@pytest.fixture(scope="module")
def names():
    from course.finetune.train import fresh_base

    base = fresh_base()
    trajectories = training_tasks(0)
    example = next(t for t in trajectories if t.family == "fact_lookup" and len(t.outputs) == 2)
    return {"check": check, "base": base, "tokenizer": base.tokenizer, "render": render,
            "Trajectory": Trajectory, "trajectories": trajectories, "settings": TrainSettings(),
            "rendered": render(example, base.tokenizer)}


def _trajectory(outputs, family="combine_two_facts", answer="20750"):
    def answer_fn():
        return Trajectory(family, EX1_TASK, ["web_search"], EX1_PAGES, outputs,
                          expected_tool="web_search", answer=answer)
    return answer_fn


def _ex1_names():
    ns: dict = {}
    _execute(EXERCISES.cells["ex1-setup"], ns, "ex1-setup", io.StringIO())
    return ns["EX1_TASK"], ns["EX1_PAGES"]


EX1_TASK, EX1_PAGES = _ex1_names()
SEARCH = ("Thought: I need both populations. I will search.\n<code>\n"
          'print(web_search(query="population of the town Varkel"))\n'
          'print(web_search(query="population of the town Monsil"))\n</code>')
ADD = "Thought: 12400 and 8350. I add them.\n<code>\nprint(12400 + 8350)\n</code>"
FINAL = 'Thought: It printed 20750.\n<code>\nfinal_answer("20750 inhabitants")\n</code>'


def _wrong_answers(ns):
    import torch

    def all_true(rendered, tokenizer):
        return [True] * len(tokenizer(rendered.text, add_special_tokens=False)["input_ids"])

    def after_prefix(rendered, tokenizer):  # observations trained too
        enc = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
        return [s >= len(rendered.prefix) for s, _ in enc["offset_mapping"]]

    def spans_as_token_indices(rendered, tokenizer):
        n = len(tokenizer(rendered.text, add_special_tokens=False)["input_ids"])
        return [any(a <= i < b for a, b in rendered.spans) for i in range(n)]

    def no_end_token(rendered, tokenizer):  # the model's words without its end-of-turn token
        enc = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
        spans = [(a, b - len("<|im_end|>") if rendered.text[:b].endswith("<|im_end|>") else b)
                 for a, b in rendered.spans]
        return [any(a <= s < b for a, b in spans) for s, _ in enc["offset_mapping"]]

    def product(model, ranks):
        return sum(ranks[n.rsplit(".", 1)[-1]] * m.in_features * m.out_features
                   for n, m in model.named_modules() if n.rsplit(".", 1)[-1] in ranks)

    def every_linear(model, ranks):  # the largest rank on every linear layer, lm_head included
        return sum(max(ranks.values()) * (m.in_features + m.out_features) for m in model.modules()
                   if isinstance(m, torch.nn.Linear))

    def inputs_only(model, ranks):
        return sum(ranks[n.rsplit(".", 1)[-1]] * m.in_features for n, m in model.named_modules()
                   if n.rsplit(".", 1)[-1] in ranks)

    def one_rank_for_all(model, ranks):  # section 3's count with the first rank given
        rank = next(iter(ranks.values()))
        return sum(rank * (m.in_features + m.out_features) for n, m in model.named_modules()
                   if n.rsplit(".", 1)[-1] in ranks)

    return {
        1: {"no search": _trajectory([ADD, FINAL]),
            "an existing family": _trajectory([SEARCH, ADD, FINAL], family="fact_lookup"),
            "no thought": _trajectory([o.split("\n", 1)[1] for o in (SEARCH, ADD, FINAL)]),
            "the sum stated, not computed": _trajectory([SEARCH, FINAL]),
            "a wrong sum": _trajectory([SEARCH, ADD.replace("8350)", "8250)"),
                                        FINAL.replace("20750", "20650")], answer="20650")},
        2: {"every token": all_true, "everything after the system prompt": after_prefix,
            "spans read as token indices": spans_as_token_indices,
            "without the end-of-turn token": no_end_token},
        3: {"r x in x out": product, "every linear layer": every_linear,
            "inputs only": inputs_only, "one rank for every layer": one_rank_for_all},
    }


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_instructor_solution_passes(names, n):
    verdict = EXERCISES.grade(n, names, before=("ex1-setup",))
    assert verdict.passed, verdict


@pytest.mark.parametrize("n", [1, 2, 3])
def test_wrong_answers_fail_the_check(names, n):
    for label, answer in _wrong_answers(names)[n].items():
        verdict = EXERCISES.grade(n, names, answer, before=("ex1-setup",), label=label)
        assert verdict.rejected, verdict


def test_hints_say_what_was_expected_and_what_came_back(names):
    no_search = EXERCISES.grade(1, names, _wrong_answers(names)[1]["no search"],
                                before=("ex1-setup",), label="no search")
    assert "refused it" in no_search.printed and "relevant tool never called" in no_search.printed
    mask = EXERCISES.grade(2, names, _wrong_answers(names)[2]["every token"], label="every token")
    assert "expected 119 trained tokens, got 2613" in mask.printed, mask
    count = EXERCISES.grade(3, names, _wrong_answers(names)[3]["inputs only"], label="inputs only")
    assert "expected 921,600 (PEFT), got 552960" in count.printed, count


def test_the_student_edition_says_not_yet_done(names, tmp_path, monkeypatch):
    student = {c.id: c.source for c in student_edition(
        nbformat.read(NOTEBOOKS / EXERCISES.notebook, as_version=4)).cells}
    assert "### BEGIN SOLUTION" not in "".join(student.values())
    monkeypatch.chdir(tmp_path)  # a student's folder with no quiz choices saved yet
    ns, out = dict(names), io.StringIO()
    _execute(student["ex1-setup"], ns, "ex1-setup", out)
    _execute(student["quiz"].replace("QuizWidget(quiz)", ""), ns, "quiz", out)
    for cell_id in ("quiz-check", "ex1-solution", "ex1-check", "ex2-solution",
                    "ex2-check", "ex3-solution", "ex3-check"):
        _execute(student[cell_id], ns, cell_id, out)
    printed = out.getvalue()
    for title in ("Quiz", "Exercise 1", "Exercise 2", "Exercise 3"):
        assert f"[not yet done] {title}" in printed, printed
    assert "[passed]" not in printed
