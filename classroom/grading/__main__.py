"""``python -m classroom.grading``: see :mod:`classroom.grading.cli`."""

import sys

from classroom.grading.cli import main

sys.exit(main())
