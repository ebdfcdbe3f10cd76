"""The workbook's nbgrader course template (nbgrader 0.9.6).

``make nbgrader-assign`` copies this file into the course folder (``release/nbgrader`` unless
``NBGRADER_COURSE=...``), puts every chapter under ``source/<chapter>/`` and runs nbgrader's own
``generate_assignment``; ``make nbgrader-autograde``, ``make nbgrader-export`` and ``make
nbgrader-formgrader`` run the rest of nbgrader's pipeline in that folder. See README.md,
"Coursework".
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "agents-workbook"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")

# The slowest chapter cell, measured by `make benchmark` on a quiet 2-core machine (2026-12-01),
# is 02 `live-weather` at 8.9 s (no cell over 15 s); a busy machine slows a cell several times
# (06 `bug1-runs` once took 37 s there, before chapter 06 was cut), so 120 s keeps more than 3x
# even then. Kernels get 120 s to start (a cold model load).
c.Execute.timeout = 120
c.Execute.startup_timeout = 120
c.Execute.interrupt_on_timeout = True

# Everything offline: no cell may download anything, and checks raise when grading.
for name, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
                    "TOKENIZERS_PARALLELISM": "false", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}.items():
    os.environ.setdefault(name, value)

# Students submit notebooks only; a missing check cell earns 0 rather than being put back.
c.OverwriteCells.add_missing_cells = False
