"""The student's copy: generated on first use, a student's edits never overwritten, restore backs
up first; a folder made under the old chapter names moves to the new ones, nothing lost. Runs on
copies of real chapters (00 and 05; the renamed ones) in temporary folders."""

import json
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from classroom.grading import leaked_solution_lines, student_edition
from classroom.workspace import (
    MANIFEST,
    RENAMED,
    fingerprint,
    main,
    restore_chapter,
    sync_student_copy,
)
from course.quiz import Question, Quiz, answer_key
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


# ------------------------------------------- a student folder made under the old chapter names


def old_and_new(tmp_path: Path, names: tuple[str, ...] = ()) -> tuple[Path, Path, Path]:
    """The instructor folder today (the renamed chapters under their new names), the same
    chapters under their old names as an earlier edition ("old edition of <old>" in the first
    cell, so the two editions differ), and the student's folder made by syncing the old one.
    ``names``: old stems also kept in today's folder, as a sync that knew no renames saw them."""
    new, old, dest = tmp_path / "new", tmp_path / "old", tmp_path / "student"
    new.mkdir()
    old.mkdir()
    for r in RENAMED:
        shutil.copy(ROOT / "notebooks" / f"{r.new}.ipynb", new / f"{r.new}.ipynb")
        shutil.copy(ROOT / "notebooks" / f"{r.new}.ipynb", old / f"{r.old}.ipynb")
        append_to_first_cell(old / f"{r.old}.ipynb", f"old edition of {r.old}")
    sync_student_copy(old, dest)
    if names:
        both = tmp_path / "both"
        shutil.copytree(new, both)
        for stem in names:
            shutil.copy(old / f"{stem}.ipynb", both / f"{stem}.ipynb")
        sync_student_copy(both, dest)
    return new, old, dest


def save_quiz(dest: Path, quiz_id: str, answers: dict[str, str]) -> None:
    """Quiz choices as the widget saves them beside the notebook (course.quiz.Quiz.save)."""
    (dest / f"quiz_{quiz_id}.json").write_text(json.dumps({"quiz": quiz_id, "answers": answers}))


def files(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder``, the edition record included, by its path inside it."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def edition_of(source: Path, stem: str) -> str:
    """The cells' text of today's student edition of ``stem``."""
    return "\n".join(c.source for c in student_edition(
        nbformat.read(source / f"{stem}.ipynb", as_version=4)).cells)


def saved_by(quiz_id: str, dest: Path) -> dict:
    """What the chapter's quiz widget reads back from ``dest`` (its "quiz" must be its id)."""
    question = Question("q1", "?", {"a": "x", "b": "y"}, key=answer_key(quiz_id, "q1", "a"),
                        why="")
    return Quiz(quiz_id, [question]).saved(dest)


# Old answers, told apart by value: quiz id -> the saved choices of the old chapter.
OLD_ANSWERS = {"04": {"q1": "b", "q2": "c"}, "05": {"q1": "c", "q2": "a"},
               "06": {"q1": "d", "q2": "d"}, "07": {"q1": "a", "q2": "b"}}


def test_the_table_of_renames_matches_the_notebooks():
    stems = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    olds, news = {r.old for r in RENAMED}, {r.new for r in RENAMED}
    assert news <= stems and not olds & stems and not olds & news  # no chains, no reuse
    for r in RENAMED:
        assert r.old.split("_", 1)[0] == r.old_quiz and r.new.split("_", 1)[0] == r.new_quiz
        assert f'Quiz(\\"{r.new_quiz}\\"' in (ROOT / "notebooks" / f"{r.new}.ipynb").read_text()


@pytest.mark.parametrize("order", ["table", "reversed"])
def test_work_under_the_old_names_moves_to_the_new_names(tmp_path, monkeypatch, order):
    new, _, dest = old_and_new(tmp_path)
    if order == "reversed":  # no order of the moves overwrites anything
        monkeypatch.setattr("classroom.workspace.RENAMED", tuple(reversed(RENAMED)))
    append_to_first_cell(dest / "05_memory.ipynb", "my memory work")
    append_to_first_cell(dest / "04_guarded_agents.ipynb", "my guarded work")
    for quiz_id, answers in OLD_ANSWERS.items():
        save_quiz(dest, quiz_id, answers)
    report = sync_student_copy(new, dest)

    # Changed: the student's text under the new name, today's edition beside it.
    assert "my memory work" in notebook_text(dest / "04_memory.ipynb")
    assert "my guarded work" in notebook_text(dest / "06_guarded_agents.ipynb")
    for stem in ("04_memory", "06_guarded_agents"):
        assert notebook_text(dest / f"{stem}.new.ipynb") == edition_of(new, stem)
    # Unchanged: simply today's edition under the new name.
    for stem in ("05_trimming", "A4_teach_a_small_model"):
        assert notebook_text(dest / f"{stem}.ipynb") == edition_of(new, stem)
    # No old name is left, in a notebook or a quiz file.
    left = [p.name for p in dest.iterdir() if any(p.name.startswith(r.old) for r in RENAMED)]
    assert left == [] and not (dest / "quiz_07.json").exists()
    # The quiz choices follow their chapter through the cycle 04 -> 06 -> 05 -> 04.
    assert saved_by("04", dest) == OLD_ANSWERS["05"]
    assert saved_by("05", dest) == OLD_ANSWERS["06"]
    assert saved_by("06", dest) == OLD_ANSWERS["04"]
    assert saved_by("A4", dest) == OLD_ANSWERS["07"]
    # One line per file, naming where it was and where it is.
    text = str(report)
    for line in ("05_memory.ipynb is now 04_memory.ipynb (your work kept)",
                 "04_guarded_agents.ipynb is now 06_guarded_agents.ipynb (your work kept)",
                 "06_trimming.ipynb is now 05_trimming.ipynb (you had not changed it",
                 "07_teach_a_small_model.ipynb is now A4_teach_a_small_model.ipynb (you had not",
                 "quiz_05.json is now quiz_04.json", "quiz_04.json is now quiz_06.json",
                 "quiz_06.json is now quiz_05.json", "quiz_07.json is now quiz_A4.json"):
        assert line in text
    assert len(report.moved) == 8 and not any(m.problem for m in report.moved)
    # A second sync changes nothing and moves nothing.
    before = files(dest)
    again = sync_student_copy(new, dest)
    assert again.moved == [] and files(dest) == before


def test_old_and_new_files_side_by_side_are_both_kept(tmp_path):
    """A sync that knew no renames wrote today's notebooks beside the old ones; the student
    worked in some of both. Nothing is overwritten; every piece of work is found afterwards."""
    new, _, dest = old_and_new(tmp_path, names=tuple(r.old for r in RENAMED))
    work = {"05_memory.ipynb": "old memory work", "04_memory.ipynb": "new memory work",
            "04_guarded_agents.ipynb": "old guarded work", "05_trimming.ipynb": "new trim work"}
    for name, words in work.items():
        append_to_first_cell(dest / name, words)
    for quiz_id in ("04", "05", "07"):
        save_quiz(dest, quiz_id, OLD_ANSWERS[quiz_id])
    save_quiz(dest, "A4", {"q1": "c"})
    quiz_before = {n: (dest / n).read_bytes() for n in ("quiz_04.json", "quiz_05.json",
                                                         "quiz_A4.json")}
    report = sync_student_copy(new, dest)

    # Both changed: each kept, the old one under the new stem beside the other.
    assert "new memory work" in notebook_text(dest / "04_memory.ipynb")
    side = dest / "04_memory.from-05_memory.ipynb"
    assert "old memory work" in notebook_text(side)
    assert "05_memory.ipynb is now 04_memory.from-05_memory.ipynb (your work kept; " \
           "04_memory.ipynb, which you changed too, is kept as it is" in str(report)
    # The old one changed, the new one as written: the student's work takes the new name and
    # today's edition goes beside it, as for any changed notebook.
    assert "old guarded work" in notebook_text(dest / "06_guarded_agents.ipynb")
    assert notebook_text(dest / "06_guarded_agents.new.ipynb") == edition_of(new,
                                                                             "06_guarded_agents")
    assert "in place of the 06_guarded_agents.ipynb you had not changed" in str(report)
    # Untouched old copies are gone; the changed new one is as the student left it.
    assert not (dest / "06_trimming.ipynb").exists()
    assert not (dest / "07_teach_a_small_model.ipynb").exists()
    assert "new trim work" in notebook_text(dest / "05_trimming.ipynb")
    for words in work.values():  # every piece of work somewhere in the folder
        assert any(words in notebook_text(p) for p in dest.glob("*.ipynb")), words
    # quiz_04/05.json may be today's 04/05 as well: they stay, copies are made under the new ids.
    for name, data in quiz_before.items():
        assert (dest / name).read_bytes() == data
    assert json.loads((dest / "quiz_04.from-05_memory.json").read_text()) == {
        "quiz": "04", "answers": OLD_ANSWERS["05"]}
    assert json.loads((dest / "quiz_06.from-04_guarded_agents.json").read_text()) == {
        "quiz": "06", "answers": OLD_ANSWERS["04"]}
    # quiz_07.json is no chapter's today; quiz_A4.json is the student's: both kept.
    assert not (dest / "quiz_07.json").exists() and saved_by("A4", dest) == {"q1": "c"}
    assert json.loads((dest / "quiz_A4.from-07_teach_a_small_model.json").read_text()) == {
        "quiz": "A4", "answers": OLD_ANSWERS["07"]}
    assert "quiz_07.json is now quiz_A4.from-07_teach_a_small_model.json" in str(report)
    assert "quiz_A4.json exists already and is kept as it is" in str(report)
    before = files(dest)
    assert sync_student_copy(new, dest).moved == [] and files(dest) == before


def test_restore_takes_todays_numbers_and_refuses_an_old_name(tmp_path, capsys):
    new, _, dest = old_and_new(tmp_path)
    append_to_first_cell(dest / "05_memory.ipynb", "my memory work")
    with pytest.raises(ValueError, match="05_memory is now 04_memory: make restore CHAPTER=04"):
        restore_chapter("05_memory", new, dest)
    assert main(["--source", str(new), "--dest", str(dest), "restore", "05_memory.ipynb"]) == 2
    assert "05_memory is now 04_memory: make restore CHAPTER=04" in capsys.readouterr().err
    with pytest.raises(ValueError, match="07_teach_a_small_model is now A4_teach_a_small_model"):
        restore_chapter("07", new, dest)
    # CHAPTER=05 is today's 05; the old 05 is left as it is, and the note says where it went.
    restored = restore_chapter("05", new, dest)
    assert restored.notebook == dest / "05_trimming.ipynb"
    assert "my memory work" in notebook_text(dest / "05_memory.ipynb")
    assert "your 05_memory.ipynb is left as it is: that chapter is now 04_memory" in str(restored)
    sync_student_copy(new, dest)
    assert "my memory work" in notebook_text(dest / "04_memory.ipynb")
