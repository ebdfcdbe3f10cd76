"""Coursework: the student edition of the notebooks, and a sandboxed grader for a whole class.

Two commands (``python -m course.grading --help``)::

    python -m course.grading student notebooks/ --out student/
    python -m course.grading grade submitted/ --source notebooks/ --out scores.csv

The modules, in the order a submission meets them:

- :mod:`~course.grading.student`: the student edition (nbgrader's generate_assignment
  preprocessors) and the gradebook record of the instructor's cells;
- :mod:`~course.grading.classroom`: a folder of submissions, graded a few at a time into a CSV;
- :mod:`~course.grading.runner`: one notebook: a private copy, a worker process, a deadline;
- :mod:`~course.grading.sandbox`: the kernel's bubblewrap sandbox and resource limits;
- :mod:`~course.grading.autograde`: nbgrader's autograde preprocessors and ``determine_grade``,
  a notebook client with limits, and the guard around every check cell
  (:mod:`~course.grading.guard`);
- :mod:`~course.grading.results`: the records and the CSV; :mod:`~course.grading.cli`.

nbgrader itself, as shipped, runs from the course template in ``nbgrader/`` (``make
nbgrader-assign`` and friends); both score a submission the same way (tested). Not handled:
manually graded answers (nbgrader's formgrader does those), a gradebook for this grader's CSV.
"""

# What the rest of the course and the tests use (``from course.grading import student_edition``);
# the records and the steps in between are in their modules.
from course.grading.autograde import prepare_submission
from course.grading.classroom import grade_class
from course.grading.results import ResourceLimits, graded_cells
from course.grading.student import (
    leaked_solution_lines,
    solution_lines,
    student_edition,
    write_student_editions,
)

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
