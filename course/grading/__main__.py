"""``python -m course.grading``: see :mod:`course.grading.cli`."""

import sys

from course.grading.cli import main

sys.exit(main())
