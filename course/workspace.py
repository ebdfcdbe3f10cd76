"""The student's own copy of the workbook: generated once, then never overwritten.

``make lab`` calls :func:`sync_student_copy`, which writes the student edition of every
instructor notebook (``course.grading.student_edition``: exercises blank, hidden tests and
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
  every notebook already there counts as the student's (kept, never overwritten).

"Changed" is decided against the edition written last time: ``.edition/manifest.json`` in the
student's folder keeps a fingerprint of each notebook as generated (the type and source of each
cell; outputs, execution counts and metadata are not the student's work and do not count).
:func:`restore_chapter` ("start this exercise over", ``make restore CHAPTER=03``) first copies
the student's notebook to ``backups/<stem>.<date-time>.ipynb`` (and the ``.new`` file beside it,
if any, to ``backups/<stem>.new.<date-time>.ipynb``) and only then writes the fresh student
edition in its place and removes the ``.new`` file. Dated ``.new`` editions are left alone.

Not handled: merging a student's edits into a new instructor edition (the two versions sit side
by side, the student copies their answers over); notebooks the student created themselves are
never touched, and neither is anything outside the student's folder.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import nbformat

from course.grading import student_edition

__all__ = [
    "BACKUP_DIR",
    "MANIFEST",
    "NOTEBOOKS_DIR",
    "STUDENT_DIR",
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
    with open(path, "x", encoding="utf-8") as f:
        nbformat.write(nb, f)


def _read_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as a notebook; raises ``ValueError`` naming why it is not one."""
    try:
        nb = nbformat.read(path, as_version=4)
        _ = [(c.cell_type, c.source) for c in nb.cells]
        return nb
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError,
            nbformat.ValidationError) as err:
        raise ValueError(f"{path} is not a readable notebook ({type(err).__name__}: "
                         f"{str(err)[:200]})") from err


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

    def by_outcome(self, outcome: str) -> list[str]:
        return [a.notebook for a in self.actions if a.outcome == outcome]

    def __str__(self) -> str:
        lines = [f"student edition in {self.folder}:"]
        lines += [f"  {a}" for a in self.actions]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(a.notebook)}</code></td>"
            f"<td>{html.escape(str(a)[len(a.notebook) + 2:])}</td></tr>" for a in self.actions)
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<p>Student edition in <code>{html.escape(str(self.folder))}</code></p>"
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
    for path in _instructor_notebooks(source):
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


def _find_chapter(source: Path, chapter: str) -> Path:
    """The instructor notebook named by ``chapter``: its number ("03", "3"), stem or file name."""
    key = chapter.removesuffix(".ipynb")
    notebooks = _instructor_notebooks(source)
    for path in notebooks:
        number = path.stem.split("_", 1)[0]
        # numbers compared as digits without leading zeros: "3" is "03" (no int(): a chapter
        # argument of thousands of digits is just no chapter)
        if key in (path.stem, number) or (key.isdigit() and number.isdigit()
                                          and key.lstrip("0") == number.lstrip("0")):
            return path
    names = ", ".join(p.stem for p in notebooks)
    shown = repr(chapter) if len(chapter) <= 60 else (
        f"{chapter[:40]!r}... ({len(chapter)} characters)")
    raise ValueError(f"no chapter {shown}: choose one of {names} (e.g. CHAPTER=03)")


def restore_chapter(chapter: str, source: Path = NOTEBOOKS_DIR, dest: Path = STUDENT_DIR,
                    now: datetime | None = None) -> Restored:
    """Start chapter ``chapter`` over: back up the student's notebook to
    ``backups/<stem>.<date-time>.ipynb`` (and its ``.new`` file to
    ``backups/<stem>.new.<date-time>.ipynb``), then write the current student edition in its
    place and remove the ``.new`` file."""
    source, dest = Path(source), Path(dest)
    path = _find_chapter(source, chapter)
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
    if target.exists():
        shutil.copy2(target, backup)
    else:
        backup = None
    if beside.exists():
        shutil.copy2(beside, beside_backup)
    else:
        beside_backup = None
    _make_folder(dest, "the student's folder")
    nbformat.write(edition, target)
    if beside_backup is not None:
        beside.unlink()
    manifest.pop(beside.name, None)
    manifest[path.name] = fingerprint(edition)
    _write_manifest(dest, manifest)
    return Restored(target, backup, beside_backup, notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.workspace",
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
