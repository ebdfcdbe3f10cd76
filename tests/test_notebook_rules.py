"""Rules every notebook follows. Committed notebooks hold no outputs (CI makes them fresh)."""

import re
from pathlib import Path

import nbformat
import pytest

from nbharness import MAX_CELLS, MAX_WORDS, lesson_size

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert any(p.name == "00_start_here.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: cell {cell.get('id')} has outputs; run `make clean-outputs`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_its_own_test_module(path):
    module = ROOT / "tests" / f"test_nb_{path.stem}.py"
    assert module.is_file(), f"{path.name} is not executed by any test: add {module.name}"
    assert path.name in module.read_text()


# Appendices (A1_..., A2_...) hold what goes beyond the notes. One with exercises has the shape
# of a lesson; one without ends at its summary: no quiz, no exercises, not an nbgrader assignment.
def _is_reading(path) -> bool:
    return path.name.startswith("A") and not (ROOT / "notebooks" / f"quiz_{path.name[:2]}.json").exists()


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if not p.name.startswith("00")],
                         ids=lambda p: p.name)
def test_chapters_end_with_summary_and_exercises(path):
    nb = nbformat.read(path, as_version=4)
    headings = [line for c in nb.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("## ")]
    assert "## Summary" in headings, path.name
    if _is_reading(path):
        assert "## Exercises" not in headings and "## Quiz" not in headings, path.name
        assert headings[-1] == "## Summary", f"{path.name}: an appendix ends with its summary"
    else:
        assert "## Exercises" in headings, path.name


def _heading_index(nb, heading: str) -> int | None:
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown" and any(line.strip() == heading
                                             for line in c.source.splitlines()):
            return i
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_has_the_shape_of_a_lesson(path):
    """Goals first; then the core path; summary, quiz and exercises; depth after them."""
    nb = nbformat.read(path, as_version=4)
    ids = [c.get("id") for c in nb.cells]
    assert ids[1:2] == ["goals"], f"{path.name}: cell 2 must be the 'goals' cell, got {ids[1:2]}"
    goals = nb.cells[1].source
    for part in ("**Learning goals.**", "**Prerequisites.**", "**Time.**"):
        assert part in goals, f"{path.name}: the goals cell lacks {part}"
    if _is_reading(path):
        return
    summary = _heading_index(nb, "## Summary")
    exercises = _heading_index(nb, "## Exercises")
    assert summary is not None and exercises is not None, path.name
    for name in ("quiz", "quiz-check"):
        assert name in ids, f"{path.name}: no '{name}' cell"
    quiz, graded = (ids.index(n) for n in ("quiz", "quiz-check"))
    assert summary < quiz < graded < exercises, path.name
    meta = {n: nb.cells[ids.index(n)].metadata.get("nbgrader", {}) for n in ("quiz", "quiz-check")}
    assert meta["quiz"].get("locked") and not meta["quiz"].get("grade"), path.name
    assert meta["quiz-check"].get("grade") and meta["quiz-check"].get("points") == 1, path.name
    # Answered once, in the widget: the graded cell grades the choices saved beside the notebook.
    assert "QuizWidget(quiz)" in nb.cells[quiz].source, path.name
    assert "quiz.check_saved()" in nb.cells[graded].source, path.name
    assert "my_answers" not in "".join(c.source for c in nb.cells), path.name
    assert f'Quiz("{path.name[:2]}"' in nb.cells[quiz].source, path.name
    further = _heading_index(nb, "## Going further")
    if further is not None:
        assert ids[further] == "going-further" and further > exercises, (
            f"{path.name}: '## Going further' comes after the exercises, in cell 'going-further'")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_lesson_fits_one_sitting(path):
    """At most 45 cells and 2,500 words of prose before the quiz and exercises."""
    size = lesson_size(path)
    assert size.cells <= MAX_CELLS and size.words <= MAX_WORDS, size


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_time_is_one_line_by_the_one_rule(path):
    """The goals cell gives the time in one line, ``**Time.** About N minutes ...``, with N the
    reading time of the one rule (nbharness.LessonSize.minutes), and no other words on run time."""
    goals = nbformat.read(path, as_version=4).cells[1].source
    lines = [line for line in goals.splitlines() if "**Time.**" in line]
    assert len(lines) == 1, f"{path.name}: the time takes {len(lines)} lines of the goals cell"
    said = re.search(r"\*\*Time\.\*\* About (\d+) minutes", lines[0])
    assert said, f"{path.name}: the time line reads {lines[0]!r}, not '**Time.** About N minutes ...'"
    assert int(said.group(1)) == lesson_size(path).minutes, (path.name, lesson_size(path).minutes)


ENGINEERS_NOTES = re.compile(
    r"(?i)\bissue \d+|tests/test_\w+|test_\w+\.py|load average|torch threads?|time on a laptop"
    r"|\bcells? `[a-z0-9][a-z0-9-]*`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_cells_speak_to_the_student(path):
    """No issue numbers, test files, machine load or cell ids in what a student reads."""
    found = [(cell.get("id"), m.group(0)) for cell in nbformat.read(path, as_version=4).cells
             for m in [ENGINEERS_NOTES.search(cell.source)] if m]
    assert not found, f"{path.name}: engineers' notes in the student's cells: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_instructor_edition_has_its_quiz_answered(path):
    """The instructor's choices lie beside the chapter (quiz_NN.json), as a student's clicks
    would, and they are all right: the instructor edition passes its own quiz."""
    import io
    from contextlib import redirect_stdout

    if _is_reading(path):
        assert not any(c.get("id") == "quiz" for c in nbformat.read(path, as_version=4).cells)
        return

    quiz_cell = next(c for c in nbformat.read(path, as_version=4).cells if c.get("id") == "quiz")
    namespace: dict = {}
    with redirect_stdout(io.StringIO()):
        exec(quiz_cell.source, namespace)
    result = namespace["quiz"].check_saved(path.parent)
    assert result.passed and not result.unanswered, (path.name, result.summary())
