"""The student's own copy of the workbook: generated once, then never overwritten.

``make lab`` calls :func:`sync_student_copy`, which writes the student edition of every
instructor notebook (``classroom.grading.student_edition``: exercises blank, hidden tests and
outputs removed) into the student's folder (``student/`` at the repository root, git-ignored):

- a notebook that is missing is written;
- a notebook the student has not changed is replaced when the instructor edition changed;
- a notebook the student has changed is kept as it is; when the instructor edition changed
  too, the new version is written beside it as ``<stem>.new.ipynb``;
- that ``.new`` file is protected the same way: once the student changed it (or it was not
  written by this module), the next new edition goes beside it under a dated name
  (``<stem>.new.<date-time>.ipynb``, never overwriting a file) and the report says so;
- a notebook whose student edition cannot be made (nbgrader refuses a misplaced marker, the
  instructor file is not a notebook) or whose student copy cannot be read (not JSON, not a
  notebook) is reported with the file and the fix and skipped; the other chapters are still
  written;
- nothing is written through a link: a notebook, ``.new`` file, ``.edition/`` or ``backups/``
  in the student's folder that is a symlink is refused with a message, so nothing outside the
  student's folder is ever written;
- a manifest that cannot be read is moved to ``backups/`` and rebuilt from what is on disk:
  every notebook already there counts as the student's (kept, never overwritten);
- a chapter that was renamed (:data:`RENAMED`, e.g. ``05_memory`` is now ``04_memory``) is
  moved before anything else, once the instructor folder has its new notebook, one line per file
  saying where it is now: a notebook (or ``.new`` file) the student never changed is removed (the
  new edition is written under the new name); one they changed is moved to the new name (and the
  new edition goes beside it, as for any changed notebook). When a file of the new name is there
  already (a sync that knew no renames wrote it), one the student never changed gives way; one
  they changed stays, and theirs from the old name goes beside it as ``<new>.from-<old>.ipynb``
  (both kept). The dated ``.new`` editions move the same way. Every move is a rename that fails
  rather than replace a file; the only files removed are ones the student never changed.
  The saved quiz choices beside the old notebook (``quiz_05.json``) move to the new quiz's file
  (``quiz_04.json``, its ``"quiz"`` rewritten) or, when that file is someone else's, to
  ``quiz_04.from-05_memory.json``; when the folder already holds the chapter that now has the old
  number (``05_trimming.ipynb``), the quiz file may be that chapter's: it stays and a copy goes to
  ``quiz_04.from-05_memory.json``. Quiz files trade names in a cycle (04 -> 06 -> 05 -> 04), so
  every moved one is first put under its ``.from-`` name, then given the new name once all are out
  of the way: no order of moves overwrites a file. Once moved, no old name is left, so the next
  sync moves nothing.

"Changed" is decided against the edition written last time: ``.edition/manifest.json`` in the
student's folder keeps a fingerprint of each notebook as generated (the type and source of each
cell; outputs, execution counts and metadata are not the student's work and do not count).
:func:`restore_chapter` ("start this exercise over", ``make restore CHAPTER=03``) first copies
the student's notebook to ``backups/<stem>.<date-time>.ipynb`` (and the ``.new`` file beside it,
if any, to ``backups/<stem>.new.<date-time>.ipynb``) and only then writes the fresh student
edition in its place and removes the ``.new`` file. Dated ``.new`` editions are left alone.
A chapter number means today's chapter (``CHAPTER=05`` is ``05_trimming``); an old name
(``05_memory``) is refused with the new one, and restoring a number whose old chapter is still
in the folder under its old name says where that chapter went. Backups keep the name they were
saved under.

Not handled: merging a student's edits into a new instructor edition (the two versions sit side
by side, the student copies their answers over); notebooks the student created themselves are
never touched (a copy such as ``05_memory-Copy1.ipynb`` keeps its old name), and neither is
anything outside the student's folder, ``backups/`` or JupyterLab's ``.ipynb_checkpoints/``.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

# nbformat and classroom.grading (nbgrader) are imported where a notebook is read or written, so
# the command line refuses a wrong argument without loading them (seconds of imports).

__all__ = [
    "BACKUP_DIR",
    "MANIFEST",
    "NOTEBOOKS_DIR",
    "RENAMED",
    "STUDENT_DIR",
    "Moved",
    "Renamed",
    "Restored",
    "SyncAction",
    "SyncReport",
    "WorkspaceError",
    "fingerprint",
    "main",
    "restore_chapter",
    "sync_student_copy",
]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
STUDENT_DIR = ROOT / "student"
MANIFEST = Path(".edition") / "manifest.json"
BACKUP_DIR = Path("backups")

# What happened to one notebook, and the sentence a student reads about it.
OUTCOMES = {
    "written": "written (it was missing)",
    "updated": "updated to the new edition (you had not changed it)",
    "unchanged": "up to date",
    "kept": "kept: you changed it",
    "kept-new-beside": "kept: you changed it; the new edition is beside it",
    "kept-new-dated": "kept: you changed it and its .new file; the new edition is beside them",
    "failed": "not written: its student edition could not be made",
    "skipped": "skipped, nothing written",
}
STAMP = "%Y-%m-%d_%H%M%S"


@dataclass(frozen=True)
class Renamed:
    """A chapter renamed: its notebook stem and its quiz id, before and after."""

    old: str
    new: str
    old_quiz: str
    new_quiz: str


RENAMED: tuple[Renamed, ...] = (
    # lessons in the order of their ideas: memory, trimming, then guarded agents; 07 an appendix
    Renamed("04_guarded_agents", "06_guarded_agents", old_quiz="04", new_quiz="06"),
    Renamed("05_memory", "04_memory", old_quiz="05", new_quiz="04"),
    Renamed("06_trimming", "05_trimming", old_quiz="06", new_quiz="05"),
    Renamed("07_teach_a_small_model", "A4_teach_a_small_model", old_quiz="07", new_quiz="A4"),
)
"""Every chapter renamed since students first made their copies, so that sync moves a student's
work under an old name to the new one and restore answers an old name with the new one. Add a
row per rename, old stem to the current one (never a chain: rewrite an old row instead)."""


class WorkspaceError(Exception):
    """Something in the student's folder the workbook will not touch; the message says why and
    what to do."""


def fingerprint(nb: nbformat.NotebookNode) -> str:
    """A hash of what a student can change in ``nb``: each cell's type and source, in order."""
    cells = [[c.cell_type, c.source] for c in nb.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def _refuse_links(dest: Path, path: Path) -> None:
    """Raise :class:`WorkspaceError` when ``path`` or a folder between ``dest`` and it is a
    symlink: writing there could change a file outside the student's folder."""
    dest = Path(dest)
    rel = Path(path).relative_to(dest)
    current = dest
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise WorkspaceError(
                f"{current} is a link (to {current.readlink()}): the workbook never writes "
                f"through links, which could change a file outside {dest}; replace the link by "
                "a real file or folder (copy what it points to) and run this again")


def _make_folder(path: Path, role: str) -> None:
    """Make the folder ``path`` (and its parents); a file in the way is a
    :class:`WorkspaceError` naming it and the fix (it is never moved or overwritten)."""
    path = Path(path)
    for folder in [*reversed(path.parents), path]:
        if folder.exists() and not folder.is_dir():
            raise WorkspaceError(
                f"{folder} is a file, where {role} {path} needs a folder; nothing was changed. "
                f"Fix: rename or move that file (the workbook never touches it), then run this "
                "again" + (", or give another student folder with --dest"
                           if role == "the student's folder" else ""))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WorkspaceError(f"cannot make {role} {path} ({err.strerror or err}). Fix: choose a "
                             "folder you can write to, or ask for write permission") from err


def _stamp(now: datetime | None = None) -> str:
    return (now or datetime.now()).strftime(STAMP)


def _load_manifest(dest: Path, notes: list[str], now: datetime | None = None) -> dict[str, str]:
    """The manifest of ``dest``; one that cannot be read is moved to ``backups/`` (a note
    says so) and an empty one returned, so every notebook on disk counts as the student's."""
    path = dest / MANIFEST
    _refuse_links(dest, path)
    if dest.exists():  # checked before anything is written, so a refusal changes nothing
        _make_folder(path.parent, "the edition record's folder")
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(manifest, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in manifest.items())):
            raise ValueError("not a JSON object of file names and fingerprints")
        return manifest
    except (OSError, UnicodeDecodeError, ValueError) as err:
        backup = _free_name(dest / BACKUP_DIR / f"manifest.{_stamp(now)}.json")
        _refuse_links(dest, backup)
        _make_folder(backup.parent, "the backups folder")
        shutil.move(path, backup)
        notes.append(f"{path} could not be read ({type(err).__name__}: {err}); it was moved to "
                     f"{backup} and rebuilt from the notebooks on disk: every notebook already "
                     "there counts as yours (kept, nothing overwritten)")
        return {}


def _write_manifest(dest: Path, manifest: dict[str, str]) -> None:
    path = dest / MANIFEST
    _refuse_links(dest, path)
    _make_folder(path.parent, "the edition record's folder")
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _new_beside(path: Path) -> Path:
    return path.with_name(f"{path.stem}.new.ipynb")


def _free_name(path: Path) -> Path:
    """``path``, or ``<stem>-2<suffix>``, ``-3``... : the first name no file has."""
    candidate, n = path, 1
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def _write_new_file(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write ``nb`` to ``path``, which must not exist (never overwrites, never follows a link)."""
    import nbformat

    with open(path, "x", encoding="utf-8") as f:
        nbformat.write(nb, f)


def _read_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as a notebook; raises ``ValueError`` naming why it is not one."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
        _ = [(c.cell_type, c.source) for c in nb.cells]
        return nb
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError,
            nbformat.ValidationError) as err:
        raise ValueError(f"{path} is not a readable notebook ({type(err).__name__}: "
                         f"{str(err)[:200]})") from err


@dataclass
class Moved:
    """One file of a renamed chapter (:data:`RENAMED`) and where it is now, in one line."""

    old: str       # its name before this sync
    now: str       # its name now: "" when removed (nothing of the student's was in it)
    text: str      # the line the student reads, naming both
    problem: bool = False  # nothing was moved: ``text`` says why and the fix

    def __str__(self) -> str:
        return self.text


@dataclass
class SyncAction:
    """What :func:`sync_student_copy` did with one notebook."""

    notebook: str
    outcome: str          # a key of OUTCOMES
    new_version: str = ""  # file name of the new edition written beside, if any
    problem: str = ""      # why nothing was written ("failed", "skipped"), with the fix

    def __str__(self) -> str:
        text = f"{self.notebook}: {OUTCOMES[self.outcome]}"
        if self.problem:
            return f"{text} ({self.problem})"
        if self.outcome == "kept-new-dated":
            return (f"{text} as {self.new_version} (your {_new_beside(Path(self.notebook)).name} "
                    "is kept as it is)")
        return f"{text} as {self.new_version}" if self.new_version else text


@dataclass
class SyncReport:
    """Every notebook's outcome after one :func:`sync_student_copy`, and where they are."""

    folder: Path
    actions: list[SyncAction] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # about the folder itself (the manifest)
    moved: list[Moved] = field(default_factory=list)  # files of renamed chapters, done first

    def by_outcome(self, outcome: str) -> list[str]:
        return [a.notebook for a in self.actions if a.outcome == outcome]

    def __str__(self) -> str:
        lines = [f"student edition in {self.folder}:"]
        lines += [f"  {m}" for m in self.moved]
        lines += [f"  {a}" for a in self.actions]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        moved = "".join(f"<p>{html.escape(str(m))}</p>" for m in self.moved)
        rows = "".join(
            f"<tr><td><code>{html.escape(a.notebook)}</code></td>"
            f"<td>{html.escape(str(a)[len(a.notebook) + 2:])}</td></tr>" for a in self.actions)
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<p>Student edition in <code>{html.escape(str(self.folder))}</code></p>{moved}"
                f"<table><tr><th>notebook</th><th>outcome</th></tr>{rows}</table>{notes}")


@dataclass
class Restored:
    """One chapter put back to the student edition, and where the student's copy was saved."""

    notebook: Path
    backup: Path | None   # None when there was nothing to back up
    new_backup: Path | None = None  # where the removed ``.new`` file was saved, if any
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        saved = f"your previous version is in {self.backup}" if self.backup else \
            "there was no previous version"
        text = f"restored {self.notebook.name} to the student edition; {saved}"
        if self.new_backup:
            text += f"; the {self.notebook.stem}.new.ipynb beside it is in {self.new_backup}"
        return "; ".join([text, *self.notes])

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(str(self))}</p>"


def _instructor_notebooks(source: Path) -> list[Path]:
    found = sorted(p for p in Path(source).glob("*.ipynb") if not p.name.endswith(".new.ipynb"))
    if not found:
        raise FileNotFoundError(f"no instructor notebooks in {source}")
    return found


def sync_student_copy(source: Path = NOTEBOOKS_DIR, dest: Path = STUDENT_DIR,
                      now: datetime | None = None) -> SyncReport:
    """Bring the student's folder ``dest`` up to date with the instructor notebooks in
    ``source`` without overwriting any notebook the student changed (see the module doc)."""
    source, dest = Path(source), Path(dest)
    if dest.resolve() == source.resolve():
        raise ValueError(f"the student's folder must not be the instructor folder {source}")
    _make_folder(dest, "the student's folder")
    report = SyncReport(dest)
    manifest = _load_manifest(dest, report.notes, now)
    notebooks = _instructor_notebooks(source)
    report.moved = _move_renamed({p.stem for p in notebooks}, dest, manifest)
    from classroom.grading import student_edition

    for path in notebooks:
        try:
            edition = student_edition(_read_notebook(path))
        except (ValueError, RuntimeError) as err:  # a marker nbgrader refuses: say so, go on
            report.actions.append(SyncAction(
                path.name, "failed", problem=f"{err}; fix {path} and run sync again"))
            continue
        try:
            report.actions.append(_sync_one(edition, dest / path.name, manifest, now))
        except (WorkspaceError, ValueError) as err:
            report.actions.append(SyncAction(path.name, "skipped", problem=str(err)))
    _write_manifest(dest, manifest)
    return report


def _sync_one(edition: nbformat.NotebookNode, target: Path, manifest: dict[str, str],
              now: datetime | None) -> SyncAction:
    """Bring one notebook ``target`` up to date with ``edition``; updates ``manifest``."""
    import nbformat

    dest, name = target.parent, target.name
    beside = _new_beside(target)
    _refuse_links(dest, target)
    _refuse_links(dest, beside)
    new_print = fingerprint(edition)
    last_print = manifest.get(name)
    new_file = ""
    if not target.exists():
        outcome = "written"
        _write_new_file(edition, target)
    else:
        try:
            current = fingerprint(_read_notebook(target))
        except ValueError as err:
            raise ValueError(
                f"{err}: it is kept as it is; rename it to keep it, or run "
                f"`make restore CHAPTER={name.split('_', 1)[0]}` (it is backed up first) to "
                "start this chapter over, then sync again") from None
        student_changed = current != last_print
        if current == new_print and last_print is None:  # e.g. a manifest rebuilt
            outcome = "unchanged"
        elif not student_changed and new_print == last_print:
            outcome = "unchanged"
        elif not student_changed:
            outcome = "updated"
            nbformat.write(edition, target)
        elif new_print == last_print or new_print == current:
            outcome = "kept"
        else:
            outcome, new_file = _write_beside(edition, beside, manifest, now)
    manifest[name] = new_print
    return SyncAction(name, outcome, new_file)


def _write_beside(edition: nbformat.NotebookNode, beside: Path, manifest: dict[str, str],
                  now: datetime | None) -> tuple[str, str]:
    """Put the new ``edition`` beside a changed notebook: in ``beside`` (``<stem>.new.ipynb``)
    unless the student changed that file (or this module did not write it), else under a dated
    name. Returns the outcome and the file name written."""
    import nbformat

    new_print = fingerprint(edition)
    if not beside.exists():
        _write_new_file(edition, beside)
        manifest[beside.name] = new_print
        return "kept-new-beside", beside.name
    try:
        beside_print = fingerprint(_read_notebook(beside))
    except ValueError:
        beside_print = None
    if beside_print == new_print:  # already holds the new edition
        manifest[beside.name] = new_print
        return "kept-new-beside", beside.name
    if beside_print is not None and beside_print == manifest.get(beside.name):
        nbformat.write(edition, beside)  # our own earlier edition, untouched: replace it
        manifest[beside.name] = new_print
        return "kept-new-beside", beside.name
    # The student changed the .new file: it is theirs now; the next edition goes beside it.
    dated = _free_name(beside.with_name(f"{beside.stem}.{_stamp(now)}.ipynb"))
    _write_new_file(edition, dated)
    return "kept-new-dated", dated.name


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _untouched(path: Path, manifest: dict[str, str]) -> bool:
    """Whether ``path`` is a notebook as this module last wrote it (its cells as recorded)."""
    recorded = manifest.get(path.name)
    try:
        return recorded is not None and fingerprint(_read_notebook(path)) == recorded
    except ValueError:
        return False


def _move(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, which must not exist: never overwrites, even in a race."""
    try:
        os.link(src, dst)  # fails when dst exists
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if _exists(dst):
            raise FileExistsError(f"{dst} exists already") from None
        os.rename(src, dst)
        return
    os.unlink(src)


def _replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    tmp = _free_name(path.with_name(f".{path.name}.tmp"))
    with open(tmp, "x", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _move_renamed(stems: set[str], dest: Path, manifest: dict[str, str]) -> list[Moved]:
    """Move the student's files of every renamed chapter (:data:`RENAMED`) whose new notebook is
    among the instructor ``stems`` to the new names, updating ``manifest`` (see the module doc).
    A chapter that cannot be moved (a link, a file system error) is left as it is and named."""
    present = {p.name for p in dest.iterdir()}  # before anything moves
    moved: list[Moved] = []
    quizzes: list[tuple[Renamed, str | None]] = []
    for r in RENAMED:
        if r.new not in stems or r.old in stems:
            continue
        family = [p for p in (dest / f"{r.old}.ipynb", dest / f"{r.old}.new.ipynb") if _exists(p)]
        family += sorted(dest.glob(f"{r.old}.new.*.ipynb"))
        if not family:
            continue
        try:
            notebook_moved = _move_chapter(r, family, dest, manifest, moved)
        except WorkspaceError as err:  # a link: checked before anything of it moved
            moved.append(Moved(family[0].name, family[0].name, problem=True, text=(
                f"{family[0].name} is kept as it is, not moved to {r.new}.ipynb (the chapter's "
                f"new name): {err}")))
            continue
        if notebook_moved:  # the saved quiz beside the old notebook moves with it
            owner = next((s for s in sorted(stems) if _number(s) == r.old_quiz), None)
            quizzes.append((r, owner if owner and f"{owner}.ipynb" in present else None))
    _move_quizzes(quizzes, dest, moved)
    return moved


def _move_chapter(r: Renamed, family: list[Path], dest: Path, manifest: dict[str, str],
                  moved: list[Moved]) -> bool:
    """Move the files of one renamed chapter: ``<old>.ipynb``, ``<old>.new.ipynb`` and the dated
    ``<old>.new.<date>.ipynb`` (each to the same name with ``r.new``), appending to ``moved``.
    Returns whether ``<old>.ipynb`` was there and is moved (or removed). A link among them is a
    :class:`WorkspaceError` before anything moves; a file that cannot be moved is named in
    ``moved`` and left where it is."""
    plans = []
    for old in family:
        new = dest / f"{r.new}{old.name[len(r.old):]}"
        _refuse_links(dest, old)
        _refuse_links(dest, new)
        plans.append((old, new))
    notebook_moved = False
    for old, new in plans:
        try:
            moved.append(_move_one(r, old, new, dest, manifest))
        except OSError as err:
            moved.append(Moved(old.name, old.name, problem=True, text=(
                f"{old.name} is kept as it is, not moved (the chapter is now {r.new}): "
                f"{type(err).__name__}: {err}; fix that (e.g. ask for write permission on "
                f"{dest}) and run sync again")))
            continue
        notebook_moved = notebook_moved or old.name == f"{r.old}.ipynb"
    return notebook_moved


def _move_one(r: Renamed, old: Path, new: Path, dest: Path, manifest: dict[str, str]) -> Moved:
    """Move one file of a renamed chapter from ``old`` to ``new`` (see the module doc)."""
    notebook = old.name == f"{r.old}.ipynb"
    tracked = notebook or old.name == f"{r.old}.new.ipynb"  # dated editions never are
    if tracked and _untouched(old, manifest):  # nothing of the student's in it
        old.unlink()
        del manifest[old.name]
        if notebook:
            return Moved(old.name, new.name, (f"{old.name} is now {new.name} (you had not "
                                              "changed it: the new edition takes its place)"))
        return Moved(old.name, "", (f"{old.name} is removed (an edition of {r.old} you had not "
                                    f"changed; the chapter is now {r.new}.ipynb)"))
    instead = ""
    if _exists(new) and tracked and _untouched(new, manifest):
        new.unlink()  # an edition this module wrote, unchanged: sync writes it again beside
        manifest.pop(new.name)
        instead = f", in place of the {new.name} you had not changed"
    if not _exists(new):
        _move(old, new)
        recorded = manifest.pop(old.name, None)
        if recorded is not None:  # else it counts as the student's, as a rebuilt manifest does
            manifest[new.name] = recorded
        return Moved(old.name, new.name, f"{old.name} is now {new.name} (your work kept{instead})")
    side = _free_name(dest / f"{r.new}.from-{r.old}{old.name[len(r.old):]}")
    _move(old, side)
    manifest.pop(old.name, None)
    return Moved(old.name, side.name, (
        f"{old.name} is now {side.name} (your work kept; {new.name}, which you changed too, is "
        "kept as it is: both are yours, copy your answers from one to the other)"))


def _saved_quiz(path: Path, quiz_id: str) -> tuple[dict | None, str]:
    """The saved choices of quiz ``quiz_id`` in ``path``, or None and why they are not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return None, f"it cannot be read: {type(err).__name__}: {str(err)[:120]}"
    if not (isinstance(data, dict) and isinstance(data.get("answers"), dict)):
        return None, 'it is not {"quiz": ..., "answers": {...}}'
    if data.get("quiz") != quiz_id:
        return None, f'its "quiz" is {str(data.get("quiz"))[:40]!r}, not {quiz_id!r}'
    return data, ""


def _move_quizzes(quizzes: list[tuple[Renamed, str | None]], dest: Path,
                  moved: list[Moved]) -> None:
    """Move each renamed chapter's saved quiz choices, ``quiz_<old id>.json``, to
    ``quiz_<new id>.json`` with its ``"quiz"`` rewritten (see the module doc). ``quizzes`` pairs
    each rename with the chapter that now has the old number when the folder held it already
    (then the file may be that chapter's: it stays, a copy is made). Ids trade places in a cycle,
    so every file first goes to its ``.from-`` name and only then to the new one."""
    claimed: list[tuple[Renamed, Path, Path]] = []
    for r, owner in quizzes:
        old = dest / f"quiz_{r.old_quiz}.json"
        if not _exists(old):
            continue
        side = _free_name(dest / f"quiz_{r.new_quiz}.from-{r.old}.json")
        try:
            _refuse_links(dest, old)
            if owner is None:
                _move(old, side)
                claimed.append((r, old, side))
                continue
            data, _ = _saved_quiz(old, r.old_quiz)
            if data is None:
                shutil.copyfile(old, side)  # as it is: copyfile does not follow into side
            else:
                with open(side, "x", encoding="utf-8") as f:
                    json.dump({**data, "quiz": r.new_quiz}, f, indent=1)
        except (WorkspaceError, OSError) as err:
            moved.append(Moved(old.name, old.name, problem=True, text=(
                f"{old.name} is kept as it is (your answers to the quiz of {r.old}, now "
                f"{r.new}, may be in it): {err}")))
            continue
        moved.append(Moved(old.name, old.name, (
            f"{old.name} is kept as it is (it may hold your answers to {owner}'s quiz) and copied "
            f"to {side.name} for {r.new} (was {r.old}): if it held {r.old}'s answers, use "
            f"the copy as quiz_{r.new_quiz}.json")))
    for r, old, side in claimed:  # all moved out of the way: now the new names
        target = dest / f"quiz_{r.new_quiz}.json"
        data, why = _saved_quiz(side, r.old_quiz)
        if data is None:
            moved.append(Moved(old.name, side.name, (
                f"{old.name} is now {side.name}, as it was ({why}, so it is not the saved quiz "
                f"of {r.old}; {target.name} is left to {r.new})")))
            continue
        text = json.dumps({**data, "quiz": r.new_quiz}, indent=1)
        try:
            with open(target, "x", encoding="utf-8") as f:
                f.write(text)
        except FileExistsError:
            try:
                _replace_text(side, text)
            except OSError as err:
                moved.append(Moved(old.name, side.name, problem=True, text=(
                    f"{old.name} is now {side.name}, as it was (your quiz answers for {r.old}, "
                    f"now {r.new}; its \"quiz\" could not be rewritten: {err})")))
                continue
            moved.append(Moved(old.name, side.name, (
                f"{old.name} is now {side.name} (your quiz answers for {r.new}, was {r.old}; "
                f"{target.name} exists already and is kept as it is: to use these answers "
                "instead, replace it with this file)")))
            continue
        except OSError as err:
            moved.append(Moved(old.name, side.name, problem=True, text=(
                f"{old.name} is now {side.name}, as it was (your quiz answers for {r.old}, now "
                f"{r.new}; they could not be written to {target.name}: {err}; to use them, "
                f"rename the file to {target.name} and set its \"quiz\" to \"{r.new_quiz}\")")))
            continue
        side.unlink()
        moved.append(Moved(old.name, target.name,
                           f"{old.name} is now {target.name} (your quiz answers for {r.new})"))


def _find_chapter(source: Path, chapter: str) -> Path:
    """The instructor notebook named by ``chapter``: its number ("03", "3"), stem or file name."""
    key = chapter.removesuffix(".ipynb")
    notebooks = _instructor_notebooks(source)
    for path in notebooks:
        if key == path.stem or _same_number(key, _number(path.stem)):
            return path
    stems = {p.stem for p in notebooks}
    hint = ""
    for r in RENAMED:
        if r.new not in stems:
            continue
        if key == r.old:
            raise ValueError(f"{r.old} is now {r.new}: make restore CHAPTER={_number(r.new)}")
        if _same_number(key, _number(r.old)):  # a number no chapter has any more
            hint = f" ({r.old} is now {r.new}: make restore CHAPTER={_number(r.new)})"
    names = ", ".join(p.stem for p in notebooks)
    shown = repr(chapter) if len(chapter) <= 60 else (
        f"{chapter[:40]!r}... ({len(chapter)} characters)")
    raise ValueError(f"no chapter {shown}: choose one of {names} (e.g. CHAPTER=03){hint}")


def _number(stem: str) -> str:
    """A chapter's number (or appendix letter and number): what comes before the first ``_``."""
    return stem.split("_", 1)[0]


def _same_number(key: str, number: str) -> bool:
    """Whether ``key`` names chapter ``number``: as it is, or as digits without leading zeros
    ("3" is "03"; no int(): an argument of thousands of digits is just no chapter)."""
    return key == number or (key.isdigit() and number.isdigit()
                             and key.lstrip("0") == number.lstrip("0"))


def restore_chapter(chapter: str, source: Path = NOTEBOOKS_DIR, dest: Path = STUDENT_DIR,
                    now: datetime | None = None) -> Restored:
    """Start chapter ``chapter`` over: back up the student's notebook to
    ``backups/<stem>.<date-time>.ipynb`` (and its ``.new`` file to
    ``backups/<stem>.new.<date-time>.ipynb``), then write the current student edition in its
    place and remove the ``.new`` file."""
    source, dest = Path(source), Path(dest)
    path = _find_chapter(source, chapter)
    import nbformat

    from classroom.grading import student_edition

    try:
        edition = student_edition(_read_notebook(path))
    except ValueError as err:
        raise WorkspaceError(f"cannot make the student edition of {path.name}: {err}; fix "
                             f"{path} and run restore again; nothing was changed") from None
    target = dest / path.name
    beside = _new_beside(target)
    stamp = _stamp(now)
    backup = dest / BACKUP_DIR / f"{path.stem}.{stamp}.ipynb"
    beside_backup = dest / BACKUP_DIR / f"{beside.stem}.{stamp}.ipynb"
    for p in (target, beside, dest / MANIFEST, backup, beside_backup):
        _refuse_links(dest, p)
    for old, saved in ((target, backup), (beside, beside_backup)):
        if old.exists() and saved.exists():
            raise FileExistsError(f"{saved} exists already: try again in a second")
    notes: list[str] = []
    manifest = _load_manifest(dest, notes, now)
    if target.exists() or beside.exists():  # before anything is copied or written
        _make_folder(backup.parent, "the backups folder")
    saved_notebook: Path | None = None  # where the notebook was backed up, if it existed
    if target.exists():
        shutil.copy2(target, backup)
        saved_notebook = backup
    saved_new: Path | None = None  # where the ``.new`` file was backed up, if it existed
    if beside.exists():
        shutil.copy2(beside, beside_backup)
        saved_new = beside_backup
    _make_folder(dest, "the student's folder")
    nbformat.write(edition, target)
    if saved_new is not None:
        beside.unlink()
    manifest.pop(beside.name, None)
    manifest[path.name] = fingerprint(edition)
    _write_manifest(dest, manifest)
    stems = {p.stem for p in _instructor_notebooks(source)}
    for r in RENAMED:  # the number meant another chapter when this folder was made
        if (_number(r.old) == _number(path.stem) and r.old not in stems
                and _exists(dest / f"{r.old}.ipynb")):
            notes.append(f"CHAPTER={_number(path.stem)} is {path.stem} now; your {r.old}.ipynb "
                         f"is left as it is: that chapter is now {r.new} (make lab moves your "
                         f"work to {r.new}.ipynb, make restore CHAPTER={_number(r.new)} starts "
                         "it over)")
    return Restored(target, saved_notebook, saved_new, notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m classroom.workspace",
                                     description="The student's own copy of the workbook.")
    parser.add_argument("--source", type=Path, default=NOTEBOOKS_DIR,
                        help="instructor notebooks (default: notebooks/)")
    parser.add_argument("--dest", type=Path, default=STUDENT_DIR,
                        help="the student's folder (default: student/)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sync", help="write missing notebooks; never overwrite a changed one")
    rs = sub.add_parser("restore", help="start one chapter over (after a dated backup)")
    rs.add_argument("chapter", help="chapter number or name, e.g. 03")
    args = parser.parse_args(argv)
    try:
        if args.command == "sync":
            print(sync_student_copy(args.source, args.dest))
        else:
            print(restore_chapter(args.chapter, args.source, args.dest))
    except (WorkspaceError, ValueError, OSError) as err:
        print(f"{parser.prog} {args.command}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
