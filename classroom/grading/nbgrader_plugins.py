"""Two nbgrader 0.9.6 parts the course template (``nbgrader/nbgrader_config.py``) swaps in.

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
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells

from classroom.grading.results import csv_cell

__all__ = ["KeepReleasedCells", "SubmittedOnlyCsvExport", "released_source"]

CSV_KEYS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
            "email", "raw_score", "late_submission_penalty", "score", "max_score")


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
