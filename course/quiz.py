"""A chapter's short quiz: multiple-choice questions, answered once in a widget, auto-graded.

A quiz is written once, in a locked cell of its chapter, and shown as a widget::

    quiz = Quiz("01", [
        Question("q1", "The model names a tool the registry does not hold. What comes back?",
                 {"a": "a Python traceback", "b": "a refusal result naming the known tools",
                  "c": "nothing: the call is dropped"},
                 key="5a0c3e9d1b2f", why="The door refuses and says why (section 3)."),
    ])
    QuizWidget(quiz)     # widgets.quiz: radio buttons, *Check*, a verdict and the why per question

Each click is saved at once in a small file beside the notebook (``quiz_01.json``,
:meth:`Quiz.answers_path`), so the choices survive a kernel restart and travel with the
notebook when it is handed in. The locked, graded cell reads them from there::

    with check("Quiz"):
        quiz.check_saved()   # nothing chosen yet reads "not yet done"

The right answer is stored only as a short salted hash (:func:`answer_key`), so the cell a
student reads does not show it; the explanation (``why``) is shown once a question is answered.
An author computes a key with ``answer_key("01", "q1", "b")``; a key that matches none of the
choices is refused when the quiz is built, so a typo cannot make a question unanswerable.

Not handled: partial credit (the graded cell is all or nothing, as nbgrader scores a cell), free
text answers (chapters grade those by hand), keeping a determined student from trying every
letter or writing the file by hand: the quiz is a self-check, worth one point.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Question", "Quiz", "QuizResult", "answer_key"]

KEY_CHARS = 12


def answer_key(quiz_id: str, question_id: str, letter: str) -> str:
    """The stored key of ``letter`` being the right answer to ``question_id`` of ``quiz_id``."""
    text = f"agents-workbook quiz\n{quiz_id}\n{question_id}\n{letter.strip().lower()}"
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: an id (``q1``), the text, letter -> choice, key, why."""

    id: str
    text: str
    choices: Mapping[str, str]
    key: str
    why: str


@dataclass(frozen=True)
class QuizResult:
    """Which questions were answered right, wrong, or not at all."""

    right: tuple[str, ...]
    wrong: tuple[str, ...]
    unanswered: tuple[str, ...]
    total: int

    @property
    def passed(self) -> bool:
        """True when every question is answered right."""
        return len(self.right) == self.total

    def summary(self) -> str:
        """``2 of 3 right`` and what is missing."""
        parts = [f"{len(self.right)} of {self.total} right"]
        if self.wrong:
            parts.append("wrong: " + ", ".join(self.wrong))
        if self.unanswered:
            parts.append("not answered: " + ", ".join(self.unanswered))
        return "; ".join(parts)


@dataclass
class Quiz:
    """A chapter's questions; :meth:`show` displays them, :meth:`check` grades answers."""

    chapter: str
    questions: Sequence[Question]
    _by_id: dict[str, Question] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {}
        for q in self.questions:
            if q.id in self._by_id:
                raise ValueError(f"quiz {self.chapter}: question id {q.id!r} is used twice; "
                                 "give each question its own id.")
            if not q.choices:
                raise ValueError(f"quiz {self.chapter}, {q.id}: the question has no choices.")
            if not any(answer_key(self.chapter, q.id, letter) == q.key for letter in q.choices):
                raise ValueError(
                    f"quiz {self.chapter}, {q.id}: the key {q.key!r} matches none of the "
                    f"choices {sorted(q.choices)}; compute it with "
                    f"course.quiz.answer_key({self.chapter!r}, {q.id!r}, '<letter>').")
            self._by_id[q.id] = q

    def is_right(self, question_id: str, letter: str | None) -> bool:
        """True when ``letter`` is the right answer to the question ``question_id``."""
        q = self._by_id[question_id]
        return letter is not None and answer_key(self.chapter, q.id, letter) == q.key

    def score(self, answers: Mapping[str, str | None]) -> QuizResult:
        """Grade ``answers`` ({question id: letter}); refuses ids and letters the quiz lacks."""
        if not isinstance(answers, Mapping):
            raise AssertionError(f"the answers must be a dict like {{'q1': 'b'}}, got "
                                 f"{type(answers).__name__}")
        unknown = sorted(set(answers) - set(self._by_id))
        if unknown:
            raise AssertionError(f"this quiz has no question {', '.join(map(str, unknown))}; "
                                 f"its questions are {', '.join(self._by_id)}")
        right: list[str] = []
        wrong: list[str] = []
        unanswered: list[str] = []
        for q in self.questions:
            letter = answers.get(q.id)
            if letter is None or str(letter).strip() == "":
                unanswered.append(q.id)
                continue
            letter = str(letter).strip().lower()
            if letter not in q.choices:
                raise AssertionError(f"{q.id}: {letter!r} is not one of its choices "
                                     f"({', '.join(q.choices)})")
            (right if self.is_right(q.id, letter) else wrong).append(q.id)
        return QuizResult(tuple(right), tuple(wrong), tuple(unanswered), len(self.questions))

    def check(self, answers: Mapping[str, str | None]) -> QuizResult:
        """Print the verdict and the why of each answered question; assert all are right."""
        result = self.score(answers)
        for q in self.questions:
            if q.id in result.right:
                print(f"{q.id} right: {q.why}")
            elif q.id in result.wrong:
                print(f"{q.id} not this one: {q.why}")
        assert result.passed, result.summary()
        return result

    def answers_path(self, folder: str | os.PathLike[str] | None = None) -> Path:
        """Where the widget saves this quiz's choices: ``quiz_<chapter>.json`` in ``folder``
        (default: the working folder, which is the notebook's in Jupyter and under nbgrader)."""
        return Path(folder if folder is not None else ".") / f"quiz_{self.chapter}.json"

    def save(self, answers: Mapping[str, str | None],
             folder: str | os.PathLike[str] | None = None) -> Path:
        """Save ``answers`` ({question id: letter or None}) beside the notebook, whole or not
        at all (a temporary file renamed over the old one)."""
        self.score(answers)  # ids and letters the quiz lacks are refused before anything is written
        path = self.answers_path(folder)
        data = {"quiz": self.chapter, "answers": {q.id: answers.get(q.id) for q in self.questions}}
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.",
                                         delete=False, encoding="utf-8") as tmp:
            json.dump(data, tmp, indent=1)
        os.replace(tmp.name, path)
        return path

    def saved(self, folder: str | os.PathLike[str] | None = None) -> dict[str, str | None]:
        """The choices saved beside the notebook ({} when none are)."""
        path = self.answers_path(folder)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise AssertionError(f"{path} cannot be read ({err}); delete it and answer the quiz "
                                 "again in the widget") from None
        answers = data.get("answers") if isinstance(data, dict) else None
        if not isinstance(answers, dict) or data.get("quiz") != self.chapter:
            raise AssertionError(f"{path} does not hold this quiz's answers; delete it and answer "
                                 "the quiz again in the widget")
        return answers

    def check_saved(self, folder: str | os.PathLike[str] | None = None) -> QuizResult:
        """Grade the choices saved by the widget; none at all is "not yet done"."""
        answers = self.saved(folder)
        if not any(answers.values()):
            raise NotImplementedError("answer the quiz in the widget above (your choices are "
                                      f"saved in {self.answers_path(folder).name} beside the "
                                      "notebook)")
        return self.check(answers)

    def text(self) -> str:
        """The questions and choices as plain text (what a front end without widgets shows)."""
        lines = [f"Quiz ({len(self.questions)} questions): answer in the widget; your choices "
                 f"are saved in {self.answers_path().name} and graded below."]
        for q in self.questions:
            lines.append(f"{q.id}. {q.text}")
            lines.extend(f"   {letter}) {choice}" for letter, choice in q.choices.items())
        return "\n".join(lines)
