"""The chapter quiz: keys hide the answer, a bad key is refused, the widget saves every click beside
the notebook and the graded cell grades what was saved."""

import pytest

from course.checks import check
from course.quiz import Question, Quiz, answer_key
from widgets.quiz import QuizWidget


def make_quiz() -> Quiz:
    return Quiz("99", [
        Question("q1", "Two plus two?", {"a": "3", "b": "4"}, key=answer_key("99", "q1", "b"),
                 why="2 + 2 = 4."),
        Question("q2", "Is a tool call a contract?", {"a": "yes", "b": "no"},
                 key=answer_key("99", "q2", "a"), why="It says what it does, takes, returns."),
    ])


def test_key_does_not_show_the_letter_and_depends_on_quiz_and_question():
    key = answer_key("99", "q1", "b")
    assert len(key) == 12 and key not in {"b", "B"}
    assert key != answer_key("98", "q1", "b") != answer_key("99", "q2", "b")
    assert answer_key("99", "q1", " B ") == key  # letters compared as a student types them


def test_a_key_that_matches_no_choice_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"matches none of the choices.*answer_key\('99', 'q1'"):
        Quiz("99", [Question("q1", "?", {"a": "x"}, key="000000000000", why="")])
    with pytest.raises(ValueError, match="used twice"):
        q = make_quiz().questions[0]
        Quiz("99", [q, q])


def test_check_passes_right_answers_and_names_wrong_and_missing_ones(capsys):
    quiz = make_quiz()
    assert quiz.check({"q1": "b", "q2": "A"}).passed
    assert "q1 right: 2 + 2 = 4." in capsys.readouterr().out
    result = quiz.score({"q1": "a"})
    assert result.summary() == "0 of 2 right; wrong: q1; not answered: q2"
    with pytest.raises(AssertionError, match="0 of 2 right"):
        quiz.check({"q1": "a"})


@pytest.mark.parametrize("answers, message", [
    (["b", "a"], "must be a dict"),
    ({"q3": "a"}, "no question q3"),
    ({"q1": "z"}, "'z' is not one of its choices"),
])
def test_malformed_answers_get_a_message_a_student_can_act_on(answers, message):
    with pytest.raises(AssertionError, match=message):
        make_quiz().score(answers)


def test_graded_cell_verdicts(capsys, monkeypatch):
    quiz = make_quiz()
    with check("Quiz"):
        quiz.check({"q1": "a", "q2": "a"})
    assert "[try again] Quiz: 1 of 2 right; wrong: q1" in capsys.readouterr().out
    monkeypatch.setenv("COURSE_GRADING", "1")
    with pytest.raises(AssertionError):
        with check("Quiz"):
            quiz.check({})


def test_widget_marks_what_was_clicked_and_saves_it_for_the_graded_cell(tmp_path):
    widget = QuizWidget(make_quiz(), tmp_path)
    assert widget.answers == {"q1": None, "q2": None}
    widget.select({"q1": "a"})
    assert widget.check() == "0 of 2 right; wrong: q1; not answered: q2"
    assert widget.feedback_text() == "q1: not this one: 2 + 2 = 4."
    assert make_quiz().saved(tmp_path) == {"q1": "a", "q2": None}  # saved at the click
    widget.select({"q1": "b", "q2": "a"})
    widget.check_button.click()
    assert widget.summary.value == "2 of 2 right"
    assert make_quiz().check_saved(tmp_path).passed
    assert "q2. Is a tool call a contract?" in widget.display_text()


def test_a_new_widget_starts_from_the_saved_choices(tmp_path):
    QuizWidget(make_quiz(), tmp_path).select({"q2": "b"})
    assert QuizWidget(make_quiz(), tmp_path).answers == {"q1": None, "q2": "b"}


def test_nothing_saved_reads_not_yet_done_and_grading_scores_it_zero(tmp_path, capsys, monkeypatch):
    with check("Quiz"):
        make_quiz().check_saved(tmp_path)
    assert "[not yet done] Quiz: answer the quiz in the widget above" in capsys.readouterr().out
    QuizWidget(make_quiz(), tmp_path).select({"q1": "a"})
    monkeypatch.setenv("COURSE_GRADING", "1")
    with pytest.raises(AssertionError, match="0 of 2 right"):
        with check("Quiz"):
            make_quiz().check_saved(tmp_path)


@pytest.mark.parametrize("content", ["not json", '{"quiz": "98", "answers": {"q1": "b"}}', "[1]"])
def test_a_damaged_or_foreign_answers_file_says_which_file_and_the_fix(tmp_path, content):
    (tmp_path / "quiz_99.json").write_text(content)
    with pytest.raises(AssertionError, match=r"quiz_99\.json.*answer the quiz again in the widget"):
        make_quiz().saved(tmp_path)


def test_a_letter_the_quiz_lacks_is_never_saved(tmp_path):
    with pytest.raises(AssertionError, match="'z' is not one of its choices"):
        make_quiz().save({"q1": "z"}, tmp_path)
    assert not (tmp_path / "quiz_99.json").exists()
