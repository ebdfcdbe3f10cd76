"""Coursework: the student edition of the notebooks, and nbgrader grading a whole class in a sandbox.

nbgrader's autograde is the one scoring path: the course template ``nbgrader/nbgrader_config.py``
(``make nbgrader-*``, the class hub) runs it with the course's plug-ins, and the class grader
drives it. Two commands (``python -m classroom.grading --help``)::

    python -m classroom.grading student notebooks/ --out student/
    python -m classroom.grading grade submitted/ --source notebooks/ --out scores.csv

The modules, in the order a submission meets them:

- :mod:`~classroom.grading.student`: the student edition (nbgrader's generate_assignment
  preprocessors);
- :mod:`~classroom.grading.submissions`: a folder of submissions, checked, placed in a temporary
  nbgrader course and autograded there a few at a time, into a CSV;
- :mod:`~classroom.grading.nbgrader_plugins`: the course's steps in nbgrader's chain (a
  duplicated cell, an untouched check cell, the CSV export);
- :mod:`~classroom.grading.execute`: nbgrader's Execute step with the guard around every check
  cell (:mod:`~classroom.grading.guard`), an output cap and the notebook's deadline;
- :mod:`~classroom.grading.sandboxed_kernel` and :mod:`~classroom.grading.bubblewrap`: the
  kernel in a bubblewrap sandbox, with resource limits;
- :mod:`~classroom.grading.results`: the records, what an autograded cell shows, the CSV;
  :mod:`~classroom.grading.feedback`: what goes back to a student; :mod:`~classroom.grading.cli`;
  :mod:`~classroom.grading.nbgrader_cli`: nbgrader's own command line, as the grader starts it.

Not handled: manually graded answers (nbgrader's formgrader does those).
"""

import sys

# jsonschema (under nbformat) imports rfc3987_syntax when installed, which compiles a grammar at
# import time (1.5-4 s of CPU per process); notebooks use no IRI formats, so every process that
# imports the grader first (``python -m classroom.grading`` and the nbgrader processes it starts,
# ``python -m classroom.grading.nbgrader_cli``) goes without it.
# A None entry makes the import fail (the import system documents it; typeshed allows modules only).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

# What the rest of the course and the tests use (``from classroom.grading import student_edition``);
# the records and the steps in between are in their modules.
from classroom.grading.results import ResourceLimits, graded_cells  # noqa: E402
from classroom.grading.student import (  # noqa: E402
    leaked_solution_lines,
    solution_lines,
    student_edition,
    write_student_editions,
)
from classroom.grading.submissions import grade_class  # noqa: E402

__all__ = [
    "ResourceLimits",
    "grade_class",
    "graded_cells",
    "leaked_solution_lines",
    "solution_lines",
    "student_edition",
    "write_student_editions",
]
