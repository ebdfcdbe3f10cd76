"""The student's copy: generated on first use, a student's edits never overwritten, restore backs
up first. Runs on copies of two real chapters (00 and 06) in temporary folders."""

import json
import subprocess
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from course.grading import leaked_solution_lines
from course.workspace import MANIFEST, fingerprint, restore_chapter, sync_student_copy
from nbharness import append_to_first_cell, notebook_text

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ["00_start_here.ipynb", "05_trimming.ipynb"]
ANSWER = "def count_words(text: str) -> int:\n    return len(text.split())  # my answer\n"


def _answer_exercise(path: Path) -> None:
    """Type an answer into 00's exercise cell, as a student would in JupyterLab."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "ex0-solution")
    assert "NotImplementedError" in cell.source  # the student edition's stub
    cell.source = ANSWER
    nbformat.write(nb, path)




def test_first_use_writes_the_student_edition_of_every_chapter(folders):
    source, dest = folders
    report = sync_student_copy(source, dest)
    assert report.by_outcome("written") == CHAPTERS
    for name in CHAPTERS:
        instructor = nbformat.read(source / name, as_version=4)
        student = nbformat.read(dest / name, as_version=4)
        assert leaked_solution_lines(instructor, student) == []
        assert "### BEGIN SOLUTION" not in notebook_text(dest / name)
        assert "### BEGIN HIDDEN TESTS" not in notebook_text(dest / name)
        assert all(not c.get("outputs") for c in student.cells)
    manifest = json.loads((dest / MANIFEST).read_text())
    assert manifest["00_start_here.ipynb"] == fingerprint(nbformat.read(dest / CHAPTERS[0], 4))
    assert "00_start_here.ipynb: written" in str(report)


def test_regenerating_keeps_a_students_edit(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    _answer_exercise(dest / "00_start_here.ipynb")
    report = sync_student_copy(source, dest)
    assert report.by_outcome("kept") == ["00_start_here.ipynb"]
    assert report.by_outcome("unchanged") == ["05_trimming.ipynb"]
    assert "# my answer" in notebook_text(dest / "00_start_here.ipynb")
    assert not (dest / "00_start_here.new.ipynb").exists()


def test_a_new_edition_goes_beside_a_changed_notebook_and_replaces_an_untouched_one(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    _answer_exercise(dest / "00_start_here.ipynb")
    append_to_first_cell(source / "00_start_here.ipynb", "A new paragraph from the instructor.")
    append_to_first_cell(source / "05_trimming.ipynb", "Another new paragraph.")
    report = sync_student_copy(source, dest)
    assert report.by_outcome("kept-new-beside") == ["00_start_here.ipynb"]
    assert report.by_outcome("updated") == ["05_trimming.ipynb"]
    # The student's answer is where it was; the new edition sits beside it.
    assert "# my answer" in notebook_text(dest / "00_start_here.ipynb")
    assert "A new paragraph" not in notebook_text(dest / "00_start_here.ipynb")
    beside = dest / "00_start_here.new.ipynb"
    assert "A new paragraph" in notebook_text(beside) and "# my answer" not in notebook_text(beside)
    assert "as 00_start_here.new.ipynb" in str(report)
    # 06 was untouched by the student: it simply became the new edition.
    assert "Another new paragraph" in notebook_text(dest / "05_trimming.ipynb")
    # Nothing changed since: a third run writes nothing and still keeps the answer.
    again = sync_student_copy(source, dest)
    assert again.by_outcome("kept") == ["00_start_here.ipynb"]
    assert again.by_outcome("unchanged") == ["05_trimming.ipynb"]


def test_running_cells_is_not_an_edit(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    nb = nbformat.read(dest / "05_trimming.ipynb", as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    code.execution_count = 1
    nbformat.write(nb, dest / "05_trimming.ipynb")
    assert sync_student_copy(source, dest).by_outcome("unchanged") == CHAPTERS


def test_restore_backs_up_first_then_writes_the_student_edition(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    _answer_exercise(dest / "00_start_here.ipynb")
    (dest / "00_start_here.new.ipynb").write_text("{}")
    restored = restore_chapter("00", source, dest, now=datetime(2026, 12, 1, 3, 4, 5))
    backup = dest / "backups" / "00_start_here.2026-12-01_030405.ipynb"
    assert restored.backup == backup
    assert "# my answer" in notebook_text(backup)
    assert "# my answer" not in notebook_text(dest / "00_start_here.ipynb")
    assert "NotImplementedError" in notebook_text(dest / "00_start_here.ipynb")
    assert not (dest / "00_start_here.new.ipynb").exists()
    assert str(backup) in str(restored)
    # The restored notebook counts as untouched: the next sync may update it.
    assert sync_student_copy(source, dest).by_outcome("unchanged") == CHAPTERS


def test_restore_refuses_to_lose_a_backup_and_names_the_chapters(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    when = datetime(2026, 12, 1, 3, 4, 5)
    restore_chapter("0", source, dest, now=when)
    _answer_exercise(dest / "00_start_here.ipynb")
    with pytest.raises(FileExistsError):
        restore_chapter("00_start_here", source, dest, now=when)
    assert "# my answer" in notebook_text(dest / "00_start_here.ipynb")  # nothing overwritten
    with pytest.raises(ValueError, match="05_trimming"):
        restore_chapter("09", source, dest)


def test_the_student_folder_is_never_the_instructor_folder(folders):
    source, _ = folders
    with pytest.raises(ValueError, match="instructor"):
        sync_student_copy(source, source)


def test_make_restore_runs_the_helper(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    _answer_exercise(dest / "00_start_here.ipynb")
    out = subprocess.run(["make", "-s", "-o", ".venv/.assets-ready", "-o", ".venv/.installed",
                          "restore", "CHAPTER=00", f"STUDENT_DIR={dest}",
                          f"INSTRUCTOR_DIR={source}"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert "restored 00_start_here.ipynb" in out.stdout
    backups = list((dest / "backups").glob("00_start_here.*.ipynb"))
    assert len(backups) == 1 and "# my answer" in notebook_text(backups[0])



def test_a_chapter_that_cannot_be_generated_is_reported_and_the_rest_written(folders):
    source, dest = folders
    nb = nbformat.read(source / "05_trimming.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION"))
    nbformat.write(nb, source / "05_trimming.ipynb")
    report = sync_student_copy(source, dest)
    assert report.by_outcome("written") == ["00_start_here.ipynb"]
    assert report.by_outcome("failed") == ["05_trimming.ipynb"]
    assert not (dest / "05_trimming.ipynb").exists()
    assert "05_trimming.ipynb: not written" in str(report)
