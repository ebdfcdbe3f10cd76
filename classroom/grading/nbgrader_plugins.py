"""nbgrader 0.9.6 parts the course template (``nbgrader/nbgrader_config.py``) swaps in (the
kernel's sandbox and the check guard are in :mod:`classroom.grading.execute`).

- ``KeepLastCopy`` (autograde's ``DeduplicateIds``): of the cells of a submission that share one
  grade_id (a duplicated check cell, say), the last is graded and the others run as ordinary
  cells; nbgrader's own step would blank their metadata and then fail the whole submission with
  a misleading ``SchemaTooOldError``. ``duplicate_cell_notes`` says so, naming the fix, and
  ``check_unique_grade_ids`` refuses an instructor notebook with a duplicated grade_id.
- ``KeepReleasedCells`` (autograde's ``OverwriteCells``): nbgrader records a check cell's
  checksum before ``ClearHiddenTests`` runs, so every released check cell with hidden tests
  differs from its record, and autograde warns "Attribute 'checksum' for cell ... has changed"
  for a notebook the student never touched. A locked cell equal to the *released* cell (the
  recorded source with its hidden tests removed) is given the recorded source back before
  nbgrader compares; any other change is reported and overwritten as nbgrader does.
- ``SubmittedOnlyCsvExport`` (``nbgrader export``): nbgrader's CSV lists every student for
  every assignment in the gradebook, 0.0 where nothing was submitted; this one lists only the
  submissions, with the same columns. Cells are quoted as CSV (a name holding a comma stays in
  its column) and a text cell that starts like a spreadsheet formula (``=``, ``+``, ``-``,
  ``@``) gets a leading ``'`` (:func:`classroom.grading.results.csv_cell`): the row is always
  written, never run as a formula.
"""

from __future__ import annotations

import csv

from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import ClearHiddenTests, DeduplicateIds, OverwriteCells

from classroom.grading.results import csv_cell
from classroom.grading.student import nbgrader_meta

__all__ = ["DuplicateGradeIdError", "KeepLastCopy", "KeepReleasedCells", "SubmittedOnlyCsvExport",
           "check_unique_grade_ids", "duplicate_cell_notes", "duplicate_grade_ids",
           "released_source"]

CSV_KEYS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
            "email", "raw_score", "late_submission_penalty", "score", "max_score")


class DuplicateGradeIdError(ValueError):
    """Two cells of an instructor notebook carry one nbgrader grade_id."""


def duplicate_grade_ids(nb: NotebookNode) -> dict[str, list[int]]:
    """Each grade_id held by more than one nbgrader cell, with the indexes of its cells."""
    where: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if grade_id is not None and (meta.get("grade") or meta.get("solution")
                                     or meta.get("locked")):
            where.setdefault(str(grade_id), []).append(i)
    return {g: cells for g, cells in where.items() if len(cells) > 1}


def check_unique_grade_ids(nb: NotebookNode, what: str) -> None:
    """Raise :class:`DuplicateGradeIdError` naming each duplicated grade_id of ``what``."""
    duplicates = duplicate_grade_ids(nb)
    if duplicates:
        listed = "; ".join(f"grade_id {g!r} in cells {', '.join(map(str, cells))}"
                           for g, cells in duplicates.items())
        raise DuplicateGradeIdError(
            f"{what} has more than one cell with one nbgrader grade_id ({listed}); fix: delete "
            "the extra copy or give each cell its own grade_id (Create Assignment toolbar, or "
            "metadata.nbgrader.grade_id), then grade again")


def duplicate_cell_notes(nb: NotebookNode) -> list[str]:
    """One note per grade_id that several cells of a submission hold: which cells, which one
    is graded, and the fix."""
    return [f"{grade_id}: {len(cells)} cells of the submission have this grade_id (cells "
            f"{', '.join(map(str, cells))}, a duplicated cell); the last one was graded, the "
            "others ran as ordinary cells; fix: delete the extra copy from the notebook"
            for grade_id, cells in duplicate_grade_ids(nb).items()]


class KeepLastCopy(DeduplicateIds):
    """``DeduplicateIds`` that leaves the earlier copies of a duplicated cell without nbgrader
    metadata at all (ordinary cells), instead of an empty one that fails the submission."""

    def preprocess(self, nb, resources):
        for note in duplicate_cell_notes(nb):
            self.log.warning(note)
        for cells in duplicate_grade_ids(nb).values():
            for i in cells[:-1]:
                del nb.cells[i].metadata["nbgrader"]
        return super().preprocess(nb, resources)


def released_source(source: str) -> str:
    """``source`` as ``generate_assignment`` releases it: its hidden tests removed."""
    cell = NotebookNode(source=source)
    ClearHiddenTests(enforce_metadata=False)._remove_hidden_test_region(cell)
    return cell.source


class KeepReleasedCells(OverwriteCells):
    """``OverwriteCells`` that takes an untouched released check cell for what it is."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and cell.metadata.nbgrader.get("locked"):
            try:
                recorded = self.gradebook.find_source_cell(grade_id, self.notebook_id,
                                                           self.assignment_id)
            except MissingEntry:
                recorded = None  # nbgrader's own step reports it
            if recorded is not None and cell.source == released_source(recorded.source):
                cell.source = recorded.source
        return super().preprocess_cell(cell, resources, cell_index)


class SubmittedOnlyCsvExport(CsvExportPlugin):
    """nbgrader's CSV export, one row per submission (no row where nothing was submitted)."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting the submitted assignments' grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(CSV_KEYS)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                    student = submission.student
                    if students and student.id not in students:
                        continue
                    penalty = submission.late_submission_penalty
                    row = {"assignment": assignment.name, "duedate": assignment.duedate,
                           "timestamp": submission.timestamp, "student_id": student.id,
                           "last_name": student.last_name, "first_name": student.first_name,
                           "email": student.email, "raw_score": submission.score,
                           "late_submission_penalty": penalty,
                           "score": max(0.0, submission.score - (penalty or 0.0)),
                           "max_score": assignment.max_score}
                    writer.writerow(["" if row[k] is None else
                                     csv_cell(row[k]) if isinstance(row[k], str) else str(row[k])
                                     for k in CSV_KEYS])
