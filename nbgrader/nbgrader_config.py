"""The workbook's nbgrader course template (nbgrader 0.9.6).

``make nbgrader-assign`` copies this file into the course folder (``release/nbgrader`` unless
``NBGRADER_COURSE=...``), puts every chapter under ``source/<chapter>/`` and runs nbgrader's own
``generate_assignment``; ``make nbgrader-autograde``, ``make nbgrader-export`` and ``make
nbgrader-formgrader`` run the rest of nbgrader's pipeline in that folder (``make lab-instructor``
serves it too, its Formgrader reading this file). See README.md, "Coursework". ``make class``
(``classroom/hub.py``) puts it in the instructor's ``~/course`` on a JupyterHub, where the
course id and the exchange come from the hub's config folder for every user as well (README.md,
"A class on JupyterHub").

nbgrader's autograde is the course's one scoring path (``python -m classroom.grading grade`` and
``make grade`` drive it in a temporary course made from this file). The course's parts of its
chain (``classroom.grading``): the Execute step ``GuardedExecute``, which runs each submission's
kernel in a bubblewrap sandbox (``SandboxedKernelManager``; the kernel's limits are
``c.SandboxedKernelManager.*``, and ``c.SandboxedKernelManager.sandbox = False`` runs it without
the sandbox, for a trusted class only), guards every check cell, caps each cell's output and
bounds the notebook's time; a duplicated cell graded once (``KeepLastCopy``); an untouched check
cell taken for the released one (no checksum warning); feedback without the hidden tests; and
an export of what was submitted only.
"""

import os

from nbgrader.converters import Autograde, GenerateFeedback
from nbgrader.preprocessors import DeduplicateIds, Execute, GetGrades, OverwriteCells

from classroom.grading.execute import GuardedExecute
from classroom.grading.feedback import HideHiddenTests
from classroom.grading.nbgrader_plugins import (
    KeepLastCopy,
    KeepReleasedCells,
    SubmittedOnlyCsvExport,
)

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
# A whole chapter (kernel start included) takes 20-120 s on a quiet machine, several times that on
# a busy one; past this its sandbox is killed and the checks not yet run score 0.
c.GuardedExecute.notebook_timeout = 1800

# Everything offline: no cell may download anything, and checks raise when grading.
for name, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
                    "TOKENIZERS_PARALLELISM": "false", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}.items():
    os.environ.setdefault(name, value)

# Students submit notebooks only; a missing check cell earns 0 rather than being put back.
c.OverwriteCells.add_missing_cells = False

# A duplicated cell is graded once (the last copy); an untouched released check cell is not
# "changed" (nbgrader recorded it with its hidden tests).
_ours = {DeduplicateIds: KeepLastCopy, OverwriteCells: KeepReleasedCells}
c.Autograde.sanitize_preprocessors = [
    _ours.get(step, step) for step in Autograde.class_traits()["sanitize_preprocessors"].default()]

# Every submission runs in the sandbox, its check cells guarded (classroom/grading/execute.py).
c.Autograde.autograde_preprocessors = [
    GuardedExecute if step is Execute else step
    for step in Autograde.class_traits()["autograde_preprocessors"].default()]

# Feedback (HTML) a student keeps: the hidden tests removed, right after the grades are read.
_feedback = list(GenerateFeedback.class_traits()["preprocessors"].default())
c.GenerateFeedback.preprocessors = [*_feedback[:_feedback.index(GetGrades) + 1], HideHiddenTests,
                                    *_feedback[_feedback.index(GetGrades) + 1:]]

# grades.csv: one row per submission, none for an assignment a student never submitted.
c.ExportApp.plugin_class = SubmittedOnlyCsvExport
