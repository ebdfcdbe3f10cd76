"""Coursework: the student edition of the notebooks, and a sandboxed grader for a whole class.

Two commands (``python -m classroom.grading --help``)::

    python -m classroom.grading student notebooks/ --out student/
    python -m classroom.grading grade submitted/ --source notebooks/ --out scores.csv

The modules, in the order a submission meets them:

- :mod:`~classroom.grading.student`: the student edition (nbgrader's generate_assignment
  preprocessors) and the gradebook record of the instructor's cells;
- :mod:`~classroom.grading.submissions`: a folder of submissions, graded a few at a time into a CSV;
- :mod:`~classroom.grading.runner`: one notebook: a private copy, a worker process, a deadline;
- :mod:`~classroom.grading.bubblewrap`: the kernel's bubblewrap sandbox and resource limits;
- :mod:`~classroom.grading.autograde`: nbgrader's autograde preprocessors and ``determine_grade``,
  a notebook client with limits, and the guard around every check cell
  (:mod:`~classroom.grading.guard`);
- :mod:`~classroom.grading.results`: the records and the CSV; :mod:`~classroom.grading.cli`.

nbgrader itself, as shipped, runs from the course template in ``nbgrader/`` (``make
nbgrader-assign`` and friends); both score a submission the same way (tested). Not handled:
manually graded answers (nbgrader's formgrader does those), a gradebook for this grader's CSV.
"""

# What the rest of the course and the tests use (``from classroom.grading import student_edition``);
# the records and the steps in between are in their modules.
from classroom.grading.autograde import prepare_submission
from classroom.grading.results import ResourceLimits, graded_cells
from classroom.grading.student import (
    leaked_solution_lines,
    solution_lines,
    student_edition,
    write_student_editions,
)
from classroom.grading.submissions import grade_class

__all__ = [
    "ResourceLimits",
    "grade_class",
    "graded_cells",
    "leaked_solution_lines",
    "prepare_submission",
    "solution_lines",
    "student_edition",
    "write_student_editions",
]
