"""``python -m classroom.grading``: see :mod:`classroom.grading.cli`."""

import sys

# jsonschema (under nbformat) imports rfc3987_syntax when installed, which builds a grammar at
# import time (about 4 s of CPU per process); notebooks use no IRI formats, so every grader
# process (and each worker) skips it.
# A None entry makes the import fail (the import system documents it; typeshed allows modules only).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from classroom.grading.cli import main  # noqa: E402

sys.exit(main())
