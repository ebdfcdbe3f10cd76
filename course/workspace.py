"""The student's own copy of the workbook: generated once, then never overwritten.

``make lab`` calls :func:`sync_student_copy`, which writes the student edition of every
instructor notebook (``course.grading.student_edition``: exercises blank, hidden tests and
outputs removed) into the student's folder (``student/`` at the repository root, git-ignored):

- a notebook that is missing is written;
- a notebook the student has not changed is replaced when the instructor edition changed;
- a notebook the student has changed is kept as it is; when the instructor edition changed
  too, the new version is written beside it as ``<stem>.new.ipynb``;
- a notebook whose student edition cannot be made (nbgrader refuses a misplaced marker) is
  reported and skipped; the other chapters are still written.

"Changed" is decided against the edition written last time: ``.edition/manifest.json`` in the
student's folder keeps a fingerprint of each notebook as generated (the type and source of each
cell; outputs, execution counts and metadata are not the student's work and do not count).
:func:`restore_chapter` ("start this exercise over", ``make restore CHAPTER=03``) first copies
the student's notebook to ``backups/<stem>.<date-time>.ipynb`` and only then writes the fresh
student edition in its place.

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
    "failed": "not written: its student edition could not be made",
}


def fingerprint(nb: nbformat.NotebookNode) -> str:
    """A hash of what a student can change in ``nb``: each cell's type and source, in order."""
    cells = [[c.cell_type, c.source] for c in nb.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def _read_manifest(dest: Path) -> dict[str, str]:
    path = dest / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}


def _write_manifest(dest: Path, manifest: dict[str, str]) -> None:
    path = dest / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _new_beside(path: Path) -> Path:
    return path.with_name(f"{path.stem}.new.ipynb")


@dataclass
class SyncAction:
    """What :func:`sync_student_copy` did with one notebook."""

    notebook: str
    outcome: str          # a key of OUTCOMES
    new_version: str = ""  # file name of the new edition written beside, if any
    problem: str = ""      # why the student edition could not be made ("failed")

    def __str__(self) -> str:
        text = f"{self.notebook}: {OUTCOMES[self.outcome]}"
        if self.problem:
            return f"{text} ({self.problem})"
        return f"{text} as {self.new_version}" if self.new_version else text


@dataclass
class SyncReport:
    """Every notebook's outcome after one :func:`sync_student_copy`, and where they are."""

    folder: Path
    actions: list[SyncAction] = field(default_factory=list)

    def by_outcome(self, outcome: str) -> list[str]:
        return [a.notebook for a in self.actions if a.outcome == outcome]

    def __str__(self) -> str:
        lines = [f"student edition in {self.folder}:"]
        lines += [f"  {a}" for a in self.actions]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(a.notebook)}</code></td>"
            f"<td>{html.escape(str(a)[len(a.notebook) + 2:])}</td></tr>" for a in self.actions)
        return (f"<p>Student edition in <code>{html.escape(str(self.folder))}</code></p>"
                f"<table><tr><th>notebook</th><th>outcome</th></tr>{rows}</table>")


@dataclass
class Restored:
    """One chapter put back to the student edition, and where the student's copy was saved."""

    notebook: Path
    backup: Path | None   # None when there was nothing to back up

    def __str__(self) -> str:
        saved = f"your previous version is in {self.backup}" if self.backup else \
            "there was no previous version"
        return f"restored {self.notebook.name} to the student edition; {saved}"

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(str(self))}</p>"


def _instructor_notebooks(source: Path) -> list[Path]:
    found = sorted(p for p in Path(source).glob("*.ipynb") if not p.name.endswith(".new.ipynb"))
    if not found:
        raise FileNotFoundError(f"no instructor notebooks in {source}")
    return found


def sync_student_copy(source: Path = NOTEBOOKS_DIR, dest: Path = STUDENT_DIR) -> SyncReport:
    """Bring the student's folder ``dest`` up to date with the instructor notebooks in
    ``source`` without overwriting any notebook the student changed (see the module doc)."""
    source, dest = Path(source), Path(dest)
    if dest.resolve() == source.resolve():
        raise ValueError(f"the student's folder must not be the instructor folder {source}")
    dest.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(dest)
    report = SyncReport(dest)
    for path in _instructor_notebooks(source):
        try:
            edition = student_edition(nbformat.read(path, as_version=4))
        except (ValueError, RuntimeError) as err:  # a marker nbgrader refuses: say so, go on
            report.actions.append(SyncAction(path.name, "failed", problem=str(err)))
            continue
        new_print = fingerprint(edition)
        target = dest / path.name
        last_print = manifest.get(path.name)
        if not target.exists():
            outcome = "written"
            nbformat.write(edition, target)
        else:
            current = fingerprint(nbformat.read(target, as_version=4))
            student_changed = current != last_print
            if not student_changed and new_print == last_print:
                outcome = "unchanged"
            elif not student_changed:
                outcome = "updated"
                nbformat.write(edition, target)
            elif new_print == last_print or new_print == current:
                outcome = "kept"
            else:
                outcome = "kept-new-beside"
                nbformat.write(edition, _new_beside(target))
        manifest[path.name] = new_print
        new_file = _new_beside(target).name if outcome == "kept-new-beside" else ""
        report.actions.append(SyncAction(path.name, outcome, new_file))
    _write_manifest(dest, manifest)
    return report


def _find_chapter(source: Path, chapter: str) -> Path:
    """The instructor notebook named by ``chapter``: its number ("03", "3"), stem or file name."""
    key = chapter.removesuffix(".ipynb")
    notebooks = _instructor_notebooks(source)
    for path in notebooks:
        number = path.stem.split("_", 1)[0]
        if key in (path.stem, number) or (key.isdigit() and number.isdigit()
                                          and int(key) == int(number)):
            return path
    names = ", ".join(p.stem for p in notebooks)
    raise ValueError(f"no chapter {chapter!r}: choose one of {names} (e.g. CHAPTER=03)")


def restore_chapter(chapter: str, source: Path = NOTEBOOKS_DIR, dest: Path = STUDENT_DIR,
                    now: datetime | None = None) -> Restored:
    """Start chapter ``chapter`` over: back up the student's notebook to
    ``backups/<stem>.<date-time>.ipynb``, then write the current student edition in its place."""
    source, dest = Path(source), Path(dest)
    path = _find_chapter(source, chapter)
    edition = student_edition(nbformat.read(path, as_version=4))
    target = dest / path.name
    backup = None
    if target.exists():
        stamp = (now or datetime.now()).strftime("%Y-%m-%d_%H%M%S")
        backup = dest / BACKUP_DIR / f"{path.stem}.{stamp}.ipynb"
        backup.parent.mkdir(parents=True, exist_ok=True)
        if backup.exists():
            raise FileExistsError(f"{backup} exists already: try again in a second")
        shutil.copy2(target, backup)
    dest.mkdir(parents=True, exist_ok=True)
    nbformat.write(edition, target)
    _new_beside(target).unlink(missing_ok=True)
    manifest = _read_manifest(dest)
    manifest[path.name] = fingerprint(edition)
    _write_manifest(dest, manifest)
    return Restored(target, backup)


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
    if args.command == "sync":
        print(sync_student_copy(args.source, args.dest))
    else:
        print(restore_chapter(args.chapter, args.source, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
