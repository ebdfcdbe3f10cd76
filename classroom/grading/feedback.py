"""Feedback a student may keep: a graded notebook without the hidden tests.

A graded notebook holds the instructor's check cells, hidden tests included (nbgrader's
``OverwriteCells`` puts them back so they run). Before it goes back to a student,
``without_hidden_tests`` removes every region between ``### BEGIN HIDDEN TESTS`` and ``### END
HIDDEN TESTS`` (markers included) with nbgrader's own ``ClearHiddenTests``, and shortens the
traceback of an error raised in such a cell to its last line (an IPython traceback quotes the
source around the failing line, hidden asserts included). The visible asserts and what the
check printed (``[passed]``, ``[try again] <hint>``, ...) stay.

Used by the class grader's hand-back (:mod:`classroom.grading.submissions`, ``make grade``'s
``--feedback`` folder) and, as the preprocessor ``HideHiddenTests``, by ``nbgrader
generate_feedback`` (``nbgrader/nbgrader_config.py`` puts it in ``GenerateFeedback``'s chain).
``leaked_hidden_tests`` checks a folder of feedback (notebooks, HTML, any text) before it goes
out.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from classroom.grading.student import HIDDEN_BEGIN, hidden_test_lines

__all__ = ["HideHiddenTests", "leaked_hidden_tests", "without_hidden_tests"]

SHORT_LINE = 16  # a hidden line shorter than this (``pass``, ``try:``) counts only as a whole line


def without_hidden_tests(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` without hidden tests in any cell's source or error traceback."""
    from nbgrader.preprocessors import ClearHiddenTests

    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    clear = ClearHiddenTests(enforce_metadata=False)
    for cell in nb.cells:
        if HIDDEN_BEGIN not in cell.source:
            continue
        clear._remove_hidden_test_region(cell)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: "
                                       f"{output.get('evalue', '')}"]
    return nb


class HideHiddenTests(Preprocessor):
    """``without_hidden_tests`` as an nbconvert preprocessor (for nbgrader's feedback step);
    enabled by default, unlike nbconvert's own."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        return without_hidden_tests(nb), resources


def _readable_text(path: Path) -> str:
    """What a reader of ``path`` sees: a notebook's every string (sources, outputs), an HTML
    page without its tags, any other file as text; terminal colour codes removed."""
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        strings: list[str] = []

        def walk(value) -> None:
            if isinstance(value, str):
                strings.append(value)
            elif isinstance(value, dict):
                for item in value.values():
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

        walk(json.loads(text))
        text = "\n".join(strings)
    elif path.suffix in (".html", ".htm"):
        text = html.unescape(re.sub(r"<[^>]*>", "", text))
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def leaked_hidden_tests(instructor: nbformat.NotebookNode, folder: Path) -> dict[str, list[str]]:
    """The hidden-test lines of ``instructor`` (``hidden_test_lines``) found in each file under
    ``folder`` (or in the file ``folder``), by file: a line of ``SHORT_LINE`` characters or more
    anywhere in the file, a shorter one as a whole line."""
    hidden = hidden_test_lines(instructor)
    folder = Path(folder)
    found: dict[str, list[str]] = {}
    for path in sorted([folder] if folder.is_file() else folder.rglob("*")):
        if not path.is_file():
            continue
        text = _readable_text(path)
        lines = {line.strip() for line in text.splitlines()}
        leaked = [h for h in hidden if (h in text if len(h) >= SHORT_LINE else h in lines)]
        if leaked:
            found[str(path)] = leaked
    return found
