"""Contract cases of the student's copy (classroom/workspace.py): nothing the student wrote is lost,
every bad file skips its own chapter with a message naming it and the fix, nothing is written
outside the student's folder; a folder made under the old chapter names keeps every file it held.
Table tests on copies of chapters 00 and 05 (and the renamed chapters) in temporary folders."""

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from test_workspace import old_and_new

from classroom.workspace import (
    MANIFEST,
    RENAMED,
    WorkspaceError,
    main,
    restore_chapter,
    sync_student_copy,
)
from nbharness import append_to_first_cell, notebook_text

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ["00_start_here.ipynb", "05_trimming.ipynb"]
NB, OTHER = CHAPTERS
NEW = "00_start_here.new.ipynb"
WHEN = datetime(2026, 12, 1, 3, 4, 5)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\xff\xfe"




def _with_new_beside(source, dest):
    """00 edited by the student and by the instructor: sync writes 00.new beside it."""
    sync_student_copy(source, dest)
    append_to_first_cell(dest / NB, "my answer")
    append_to_first_cell(source / NB, "edition 2")
    assert sync_student_copy(source, dest).by_outcome("kept-new-beside") == [NB]


# ------------------------------------------------------------ (1) a .new file the student edited


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("student_edits_new", [True, False], ids=["edited-new", "untouched-new"])
def test_an_edited_new_file_is_kept_and_the_next_edition_goes_beside_it(folders,
                                                                       student_edits_new):
    source, dest = folders
    _with_new_beside(source, dest)
    if student_edits_new:
        append_to_first_cell(dest / NEW, "my work in the new edition")
    append_to_first_cell(source / NB, "edition 3")
    report = sync_student_copy(source, dest, now=WHEN)
    assert "my answer" in notebook_text(dest / NB)
    dated = dest / "00_start_here.new.2026-12-01_030405.ipynb"
    if student_edits_new:
        assert report.by_outcome("kept-new-dated") == [NB]
        assert "my work in the new edition" in notebook_text(dest / NEW)  # not overwritten
        assert "edition 3" not in notebook_text(dest / NEW)
        assert "edition 3" in notebook_text(dated)
        assert dated.name in str(report) and f"your {NEW} is kept" in str(report)
        # Again, with yet another edition: a further file, nothing overwritten.
        append_to_first_cell(source / NB, "edition 4")
        sync_student_copy(source, dest, now=WHEN)
        assert "edition 3" in notebook_text(dated) and "edition 4" not in notebook_text(dated)
        assert "edition 4" in notebook_text(dest / "00_start_here.new.2026-12-01_030405-2.ipynb")
        assert "my work in the new edition" in notebook_text(dest / NEW)
    else:  # our own earlier edition, untouched: simply replaced by the newer one
        assert report.by_outcome("kept-new-beside") == [NB]
        assert "edition 3" in notebook_text(dest / NEW)
        assert not dated.exists()


# ------------------------------------------------------- (2) restore backs up every file it removes


@pytest.mark.contract("data loss")
def test_restore_backs_up_an_edited_new_file_before_removing_it(folders):
    source, dest = folders
    _with_new_beside(source, dest)
    append_to_first_cell(dest / NEW, "my work in the new edition")
    restored = restore_chapter("00", source, dest, now=WHEN)
    notebook_backup = dest / "backups" / "00_start_here.2026-12-01_030405.ipynb"
    new_backup = dest / "backups" / "00_start_here.new.2026-12-01_030405.ipynb"
    assert restored.backup == notebook_backup and restored.new_backup == new_backup
    assert "my answer" in notebook_text(notebook_backup)
    assert "my work in the new edition" in notebook_text(new_backup)
    assert not (dest / NEW).exists()
    assert str(new_backup) in str(restored)
    # A second restore in the same second refuses instead of overwriting either backup.
    append_to_first_cell(dest / NB, "more work")
    with pytest.raises(FileExistsError):
        restore_chapter("00", source, dest, now=WHEN)
    assert "more work" in notebook_text(dest / NB)


# --------------------------------------------- (3) one unreadable file skips its chapter, not all


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:300])


def _png(path: Path) -> None:
    path.write_bytes(PNG)


UNREADABLE = {
    # case: (which file is spoiled, how, what the message must name)
    "student-png": ("student", _png, "make restore CHAPTER=00"),
    "student-truncated": ("student", _truncate, "make restore CHAPTER=00"),
    "student-not-a-notebook": ("student", lambda p: p.write_text('{"cells": 3}'),
                               "make restore CHAPTER=00"),
    "instructor-png": ("instructor", _png, "run sync again"),
    "instructor-truncated": ("instructor", _truncate, "run sync again"),
}


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("case", UNREADABLE)
def test_an_unreadable_notebook_skips_its_chapter_and_syncs_the_rest(folders, case):
    source, dest = folders
    where, spoil, fix = UNREADABLE[case]
    sync_student_copy(source, dest)
    spoiled = (dest if where == "student" else source) / NB
    spoil(spoiled)
    before = spoiled.read_bytes()
    append_to_first_cell(source / OTHER, "a new paragraph")
    report = sync_student_copy(source, dest)
    assert report.by_outcome("updated") == [OTHER]
    assert "a new paragraph" in notebook_text(dest / OTHER)
    assert report.by_outcome("skipped" if where == "student" else "failed") == [NB]
    line = next(line for line in str(report).splitlines() if NB in line)
    assert str(spoiled) in line and fix in line
    assert spoiled.read_bytes() == before  # the student's bytes are kept as they are
    assert main(["--source", str(source), "--dest", str(dest), "sync"]) == 0


BROKEN_MANIFESTS = {
    "truncated": '{"00_start_here.ipynb": "ab',
    "png": PNG,
    "a-list": "[1, 2]",
    "empty": "",
}


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("case", BROKEN_MANIFESTS)
def test_a_broken_manifest_is_backed_up_and_rebuilt_keeping_every_notebook(folders, case):
    source, dest = folders
    sync_student_copy(source, dest)
    append_to_first_cell(dest / NB, "my answer")
    broken = BROKEN_MANIFESTS[case]
    (dest / MANIFEST).write_bytes(broken if isinstance(broken, bytes) else broken.encode())
    append_to_first_cell(source / NB, "edition 2")
    report = sync_student_copy(source, dest, now=WHEN)
    saved = dest / "backups" / "manifest.2026-12-01_030405.json"
    assert saved.read_bytes() == (broken if isinstance(broken, bytes) else broken.encode())
    assert str(dest / MANIFEST) in str(report) and str(saved) in str(report)
    assert "my answer" in notebook_text(dest / NB)  # counted as the student's: never overwritten
    assert "edition 2" in notebook_text(dest / NEW)
    assert report.by_outcome("unchanged") == [OTHER]
    # The rebuilt manifest is good: the next sync reads it without a note.
    assert sync_student_copy(source, dest).notes == []


@pytest.mark.contract("raw crash")
def test_restore_with_a_broken_manifest_backs_it_up_and_restores(folders):
    source, dest = folders
    sync_student_copy(source, dest)
    (dest / MANIFEST).write_text("{not json")
    restored = restore_chapter("00", source, dest, now=WHEN)
    assert (dest / "backups" / "manifest.2026-12-01_030405.json").read_text() == "{not json"
    assert "manifest" in str(restored)
    assert sync_student_copy(source, dest).by_outcome("unchanged") == CHAPTERS


# --------------------------------------------------- (4) nothing is written through a symlink


LINKS = {  # case: the path in the student's folder that becomes a link to an outside file
    "notebook": NB,
    "new-file": NEW,
    "dangling-notebook": NB,
}


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("case", LINKS)
def test_sync_and_restore_never_write_through_a_link(folders, tmp_path, case):
    source, dest = folders
    _with_new_beside(source, dest)
    append_to_first_cell(source / NB, "edition 3")
    outside = tmp_path / "outside.ipynb"
    shutil.copy(dest / NB, outside)
    before = outside.read_bytes()
    link = dest / LINKS[case]
    link.unlink()
    if case == "dangling-notebook":
        outside.unlink()
    link.symlink_to(outside)
    report = sync_student_copy(source, dest)
    assert report.by_outcome("skipped") == [NB]
    assert "is a link" in str(report) and "outside" in str(report)
    with pytest.raises(WorkspaceError, match="is a link"):
        restore_chapter("00", source, dest)
    if case == "dangling-notebook":
        assert not outside.exists()
    else:
        assert outside.read_bytes() == before
    assert main(["--source", str(source), "--dest", str(dest), "restore", "00"]) == 2


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("folder", [".edition", "backups"])
def test_a_linked_folder_in_the_student_copy_is_refused(folders, tmp_path, folder):
    source, dest = folders
    sync_student_copy(source, dest)
    outside = tmp_path / "outside"
    (dest / folder).mkdir(exist_ok=True)
    shutil.copytree(dest / folder, outside)
    shutil.rmtree(dest / folder)
    (dest / folder).symlink_to(outside, target_is_directory=True)
    before = sorted((p.name, p.read_bytes()) for p in outside.iterdir())
    with pytest.raises(WorkspaceError, match="is a link"):
        restore_chapter("00", source, dest)
    if folder == ".edition":
        with pytest.raises(WorkspaceError, match="is a link"):
            sync_student_copy(source, dest)
    assert sorted((p.name, p.read_bytes()) for p in outside.iterdir()) == before


# ------------------------------------------------- a file where a folder goes; a huge chapter name


def _student_folder_is_a_file(source, dest):
    dest.write_text("my notes\n")
    return dest, ["sync"]


def _student_folder_under_a_file(source, dest):
    dest.write_text("my notes\n")
    return dest, ["--dest", str(dest / "inner"), "sync"]


def _backups_is_a_file(source, dest):
    sync_student_copy(source, dest)
    append_to_first_cell(dest / NB, "my answer")
    (dest / "backups").write_text("my list of backups\n")
    return dest / "backups", ["restore", "00"]


def _edition_record_is_a_file(source, dest):
    dest.mkdir()
    (dest / ".edition").write_text("not a folder\n")
    return dest / ".edition", ["sync"]


FILE_IN_THE_WAY = {"student folder is a file": _student_folder_is_a_file,
                   "student folder under a file": _student_folder_under_a_file,
                   "backups is a file": _backups_is_a_file,
                   ".edition is a file": _edition_record_is_a_file}


def _snapshot(folder: Path) -> dict[str, bytes]:
    if folder.is_file():
        return {folder.name: folder.read_bytes()}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("case", FILE_IN_THE_WAY)
def test_a_file_where_a_folder_goes_is_named_with_the_fix(folders, case, capsys):
    source, dest = folders
    in_the_way, command = FILE_IN_THE_WAY[case](source, dest)
    before = _snapshot(dest)
    args = command if command[0] == "--dest" else ["--dest", str(dest), *command]
    assert main(["--source", str(source), *args]) == 2
    err = capsys.readouterr().err
    assert "FileExistsError" not in err and "Errno" not in err
    assert f"{in_the_way} is a file" in err and "Fix: rename or move that file" in err
    assert "nothing was changed" in err
    assert _snapshot(dest) == before  # the file in the way and the student's notebooks as they were
    with pytest.raises(WorkspaceError):
        (restore_chapter("00", source, dest) if command[-1] == "00" else
         sync_student_copy(source, Path(args[1]) if args[0] == "--dest" else dest))


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("chapter", ["1" * 5000, "0" * 4400 + "5", "x" * 10000])
def test_a_chapter_argument_thousands_of_characters_long_is_no_chapter(folders, chapter, capsys):
    source, dest = folders
    sync_student_copy(source, dest)
    before = _snapshot(dest)
    expected_ok = chapter.lstrip("0") == "5"  # "000...05" is chapter 05, however many zeros
    code = main(["--source", str(source), "--dest", str(dest), "restore", chapter])
    err = capsys.readouterr().err
    assert "integer string conversion" not in err and "Exceeds the limit" not in err
    if expected_ok:
        assert code == 0
        return
    assert code == 2 and "no chapter" in err and f"({len(chapter)} characters)" in err
    assert "choose one of 00_start_here, 05_trimming" in err and len(err) < 400
    assert _snapshot(dest) == before


# ------------------------------------- (5) a folder made under the old chapter names (RENAMED)


@pytest.mark.contract("data loss")
def test_old_new_files_move_with_their_chapter(tmp_path):
    """05_memory.new.ipynb untouched (an old edition: removed), 04_guarded_agents.new.ipynb
    changed (the student's: moved, the next edition dated beside it), a dated old edition moved."""
    new, old, dest = old_and_new(tmp_path)
    for r in RENAMED[:2]:  # 04_guarded_agents and 05_memory: changed, then a newer old edition
        append_to_first_cell(dest / f"{r.old}.ipynb", f"my work in {r.old}")
        append_to_first_cell(old / f"{r.old}.ipynb", "old edition 2")
    sync_student_copy(old, dest)
    append_to_first_cell(dest / "04_guarded_agents.new.ipynb", "my work in the .new")
    append_to_first_cell(old / "04_guarded_agents.ipynb", "old edition 3")
    sync_student_copy(old, dest, now=WHEN)
    dated = "04_guarded_agents.new.2026-12-01_030405.ipynb"
    assert (dest / dated).exists()
    report = sync_student_copy(new, dest, now=datetime(2026, 12, 2))
    assert not (dest / "05_memory.new.ipynb").exists()
    assert "05_memory.new.ipynb is removed (an edition of 05_memory you had not changed" in \
        str(report)
    assert "my work in 05_memory" in notebook_text(dest / "04_memory.ipynb")
    assert "my work in 04_guarded_agents" in notebook_text(dest / "06_guarded_agents.ipynb")
    assert "my work in the .new" in notebook_text(dest / "06_guarded_agents.new.ipynb")
    assert "old edition 3" in notebook_text(dest / "06_guarded_agents.new.2026-12-01_030405.ipynb")
    assert f"{dated} is now 06_guarded_agents.new.2026-12-01_030405.ipynb" in str(report)
    today = dest / "06_guarded_agents.new.2026-12-02_000000.ipynb"  # the .new is theirs
    assert "old edition" not in notebook_text(today) and "my work" not in notebook_text(today)
    assert not [p for p in dest.iterdir() if p.name.startswith(("04_guarded", "05_memory"))]


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("content", [PNG, b'{"quiz": "99", "answers": {}}', b"[1, 2]"],
                         ids=["png", "another-quiz-id", "a-list"])
def test_a_quiz_file_that_is_not_the_old_chapters_is_moved_as_it_is(tmp_path, content):
    new, _, dest = old_and_new(tmp_path)
    (dest / "quiz_06.json").write_bytes(content)   # beside the old 06_trimming
    (dest / "quiz_05.json").write_text('{"quiz": "05", "answers": {"q1": "c"}}')
    report = sync_student_copy(new, dest)
    side = dest / "quiz_05.from-06_trimming.json"
    assert side.read_bytes() == content
    assert "quiz_06.json is now quiz_05.from-06_trimming.json, as it was" in str(report)
    assert not (dest / "quiz_05.json").exists() and not (dest / "quiz_06.json").exists()
    assert json.loads((dest / "quiz_04.json").read_text()) == {"quiz": "04",
                                                                "answers": {"q1": "c"}}


@pytest.mark.contract("data loss")
def test_an_old_notebook_that_is_a_link_stays_and_nothing_is_overwritten(tmp_path):
    new, _, dest = old_and_new(tmp_path)
    outside = tmp_path / "outside.ipynb"
    shutil.move(dest / "05_memory.ipynb", outside)
    before = outside.read_bytes()
    (dest / "05_memory.ipynb").symlink_to(outside)
    (dest / "quiz_05.json").write_text('{"quiz": "05", "answers": {"q1": "c"}}')
    (dest / "quiz_06.json").write_text('{"quiz": "06", "answers": {"q1": "d"}}')
    report = sync_student_copy(new, dest)
    line = next(str(m) for m in report.moved if m.problem)
    assert "05_memory.ipynb is kept as it is, not moved to 04_memory.ipynb" in line
    assert "is a link" in line and "run this again" in line
    assert outside.read_bytes() == before and (dest / "05_memory.ipynb").is_symlink()
    # Its quiz file stays with it; the one moving onto quiz_05.json goes beside it instead.
    assert json.loads((dest / "quiz_05.json").read_text())["answers"] == {"q1": "c"}
    assert json.loads((dest / "quiz_05.from-06_trimming.json").read_text()) == {
        "quiz": "05", "answers": {"q1": "d"}}
    assert "quiz_05.json exists already and is kept as it is" in str(report)


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("case", ["unreadable-notebook", "lost-manifest"])
def test_what_cannot_be_told_apart_counts_as_the_students_and_is_moved(tmp_path, case):
    new, _, dest = old_and_new(tmp_path)
    if case == "unreadable-notebook":
        _truncate(dest / "05_memory.ipynb")
    else:
        (dest / MANIFEST).unlink()
    before = {r.old: (dest / f"{r.old}.ipynb").read_bytes() for r in RENAMED}
    report = sync_student_copy(new, dest)
    moved = [r for r in RENAMED if (dest / f"{r.new}.ipynb").exists()
             and (dest / f"{r.new}.ipynb").read_bytes() == before[r.old]]
    if case == "unreadable-notebook":
        assert moved == [RENAMED[1]]
        assert "05_memory.ipynb is now 04_memory.ipynb (your work kept)" in str(report)
        line = next(str(a) for a in report.actions if a.notebook == "04_memory.ipynb")
        assert "make restore CHAPTER=04" in line  # the usual message, under the new name
    else:  # no record of what was written: every old notebook is kept as the student's
        assert moved == list(RENAMED)
        assert all((dest / f"{r.new}.new.ipynb").exists() for r in RENAMED)
