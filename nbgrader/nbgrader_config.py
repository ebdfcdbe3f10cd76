"""The workbook's nbgrader course template (nbgrader 0.9.6).

``make nbgrader-assign`` copies this file into the course folder (``release/nbgrader`` unless
``NBGRADER_COURSE=...``), puts every chapter under ``source/<chapter>/`` and runs nbgrader's own
``generate_assignment``; ``make nbgrader-autograde``, ``make nbgrader-export`` and ``make
nbgrader-formgrader`` run the rest of nbgrader's pipeline in that folder (``make lab-instructor``
serves it too, its Formgrader reading this file). See README.md, "Coursework". ``make class``
(``classroom/hub.py``) puts it in the instructor's ``~/course`` on a JupyterHub, where the
course id and the exchange come from the hub's config folder for every user as well (README.md,
"A class on JupyterHub").

Three parts of nbgrader's chain are the course's own (``classroom.grading``): feedback without
the hidden tests, an untouched check cell taken for the released one (no checksum warning), and
an export of what was submitted only.
"""

import os

from nbgrader.converters import Autograde, GenerateFeedback
from nbgrader.preprocessors import GetGrades, OverwriteCells

from classroom.grading.feedback import HideHiddenTests
from classroom.grading.nbgrader_plugins import KeepReleasedCells, SubmittedOnlyCsvExport

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "agents-workbook"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")

# The slowest chapter cell, measured by `make benchmark` on a quiet 2-core machine (2026-12-01),
# is 02 `live-weather` at 8.9 s (no cell over 15 s); a busy machine slows a cell several times
# (up to 37 s seen), so 120 s keeps more than 3x even then. Kernels get 120 s to start (a cold model load).
c.Execute.timeout = 120
c.Execute.startup_timeout = 120
c.Execute.interrupt_on_timeout = True

# Everything offline: no cell may download anything, and checks raise when grading.
for name, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
                    "TOKENIZERS_PARALLELISM": "false", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}.items():
    os.environ.setdefault(name, value)

# Students submit notebooks only; a missing check cell earns 0 rather than being put back.
c.OverwriteCells.add_missing_cells = False

# An untouched released check cell is not "changed" (nbgrader recorded it with its hidden tests).
c.Autograde.sanitize_preprocessors = [
    KeepReleasedCells if step is OverwriteCells else step
    for step in Autograde.class_traits()["sanitize_preprocessors"].default()]

# Feedback (HTML) a student keeps: the hidden tests removed, right after the grades are read.
_feedback = list(GenerateFeedback.class_traits()["preprocessors"].default())
c.GenerateFeedback.preprocessors = [*_feedback[:_feedback.index(GetGrades) + 1], HideHiddenTests,
                                    *_feedback[_feedback.index(GetGrades) + 1:]]

# grades.csv: one row per submission, none for an assignment a student never submitted.
c.ExportApp.plugin_class = SubmittedOnlyCsvExport
