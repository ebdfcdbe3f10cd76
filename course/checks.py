"""Exercise checks that give a student feedback and give a grader a verdict.

An exercise is a function the student completes (its body between nbgrader's
``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers) and a check cell::

    with check("Exercise 1: count with the model's tokenizer"):
        assert my_counter([HumanMessage("hi")]) == 5, "expected 5 tokens for 'hi'"
        ### BEGIN HIDDEN TESTS
        assert my_counter([]) == 0
        ### END HIDDEN TESTS

In a student's kernel a failed or unfinished check prints feedback and the notebook goes on
(a ``NotImplementedError`` from the generated stub reads "not yet done"). When grading
(``COURSE_GRADING=1`` or nbgrader's ``NBGRADER_EXECUTION``), the failure is raised so the
grader scores the cell 0. Checks test behaviour, never the text of the code.

Under the class grader (``classroom.grading``) each check also records its verdict against a
per-check token the grader arms just before the check cell; the grader gives the points only
when the genuine ``check`` reports "passed" for that token. Not handled here: keeping student
code from tampering with this module; the grader reloads it before every check cell.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GRADING_SETTING", "CheckFailed", "check", "grading"]

GRADING_SETTING = "COURSE_GRADING"
# Armed by the class grader: {"token": str | None, "outcomes": [(token, verdict), ...]}.
_GRADER: dict = {"token": None, "outcomes": []}


class CheckFailed(AssertionError):
    """Raised in grading mode when an exercise check does not pass."""


def grading() -> bool:
    """True when notebooks run under a grader: failures must raise, not just print."""
    return os.environ.get(GRADING_SETTING) == "1" or bool(os.environ.get("NBGRADER_EXECUTION"))


@contextmanager
def check(title: str) -> Iterator[None]:
    """Run the assertions of one exercise and print a verdict a student can act on."""
    try:
        yield
    except NotImplementedError as err:
        _record("not yet done")
        # The stub says nothing; a check that knows what is missing (the quiz) says it.
        todo = str(err) or "fill in the function above"
        print(f"[not yet done] {title}: {todo}, then run this cell again.")
        if grading():
            raise
        return
    except AssertionError as err:
        message = str(err) or "an assertion failed"
        _record("try again")
        print(f"[try again] {title}: {message}")
        if grading():
            raise CheckFailed(f"{title}: {message}") from err
        return
    except Exception as err:  # the student's code raised something else
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        _record("error")
        print(f"[error] {title}: your code raised {last}")
        if grading():
            raise
        return
    _record("passed")
    print(f"[passed] {title}")


def _record(verdict: str) -> None:
    if _GRADER["token"] is not None:
        _GRADER["outcomes"].append((_GRADER["token"], verdict))
