"""A widget for a chapter's quiz: one set of radio buttons per question, *Check*, a verdict each.

``QuizWidget(quiz)`` shows a ``course.quiz.Quiz``. Every click is saved at once beside the
notebook (``Quiz.save``), and a new widget starts from the choices saved there, so a kernel
restart loses nothing and the graded cell (``quiz.check_saved()``) grades what was clicked.
*Check* marks each answered question right or not, shows its explanation and a summary line.

The view is plain methods (:meth:`select`, :meth:`check`, :meth:`feedback_text`) so it can be
tested without a browser. Not handled: a folder the kernel cannot write (the click still counts
in the widget; the graded cell then finds nothing saved and says so).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping

import ipywidgets as w

from course.quiz import Quiz
from widgets import Displayed

__all__ = ["QuizWidget"]


class QuizWidget(Displayed, w.VBox):
    """Radio buttons per question, a *Check* button, and feedback under each question."""

    def __init__(self, quiz: Quiz, folder: str | os.PathLike[str] | None = None) -> None:
        self.quiz = quiz
        self.folder = folder
        saved = quiz.saved(folder)
        self.buttons: dict[str, w.RadioButtons] = {}
        self.verdicts: dict[str, w.HTML] = {}
        rows: list[w.Widget] = []
        for q in quiz.questions:
            radio = w.RadioButtons(options=[(f"{k}) {v}", k) for k, v in q.choices.items()],
                                   value=saved.get(q.id) if saved.get(q.id) in q.choices else None,
                                   layout=w.Layout(width="auto"))
            radio.observe(self._save, names="value")
            self.buttons[q.id] = radio
            self.verdicts[q.id] = w.HTML("")
            rows += [w.HTML(f"<b>{html.escape(q.id)}.</b> {html.escape(q.text)}"), radio,
                     self.verdicts[q.id]]
        self.check_button = w.Button(description="Check", button_style="primary")
        self.check_button.on_click(lambda _: self.check())
        self.summary = w.HTML("")
        super().__init__([*rows, w.HBox([self.check_button, self.summary])])

    def _save(self, change: object = None) -> None:
        try:
            self.quiz.save(self.answers, self.folder)
        except OSError as err:
            self.summary.value = html.escape(f"your choice could not be saved: {err}")

    @property
    def answers(self) -> dict[str, str | None]:
        """The letters chosen so far, {question id: letter or None}."""
        return {qid: radio.value for qid, radio in self.buttons.items()}

    def select(self, answers: Mapping[str, str]) -> None:
        """Choose letters as a student would click them."""
        for qid, letter in answers.items():
            self.buttons[qid].value = letter

    def check(self) -> str:
        """Mark every answered question, show its why, and return the summary line."""
        result = self.quiz.score(self.answers)
        for q in self.quiz.questions:
            if q.id in result.right:
                mark = "<span style='color:#1a7f37'>right</span>"
            elif q.id in result.wrong:
                mark = "<span style='color:#b35900'>not this one</span>"
            else:
                self.verdicts[q.id].value = ""
                continue
            self.verdicts[q.id].value = f"{mark}: {html.escape(q.why)}"
        self.summary.value = html.escape(result.summary())
        return result.summary()

    def feedback_text(self) -> str:
        """What the verdict lines say, as plain text (for tests and text front ends)."""
        import re

        lines = ((q.id, re.sub(r"<[^>]+>", "", self.verdicts[q.id].value))
                 for q in self.quiz.questions)
        return "\n".join(f"{qid}: {line}" for qid, line in lines if line)

    def display_text(self) -> str:
        return self.quiz.text()
