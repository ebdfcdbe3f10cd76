"""``python -m classroom.grading.nbgrader_cli <args>``: nbgrader's own command line (``nbgrader
<args>``), in a process that skips jsonschema's RFC 3987 grammar.

nbgrader imports nbformat, and with it jsonschema, before it reads the course template; jsonschema
then imports ``rfc3987_syntax`` (installed for jupyter-events), which compiles a grammar at import:
about 1.5 s of CPU in every nbgrader process, for ``iri`` formats no notebook schema uses. Started
this way (the package ``classroom.grading`` blocks that import before anything else), the same
nbgrader runs without it. The class grader and the course's tests run nbgrader so.

Not handled: the ``alembic`` process nbgrader starts when it creates a gradebook (its own
interpreter, which compiles the grammar), and servers that load nbgrader as an extension.
"""

import sys

from nbgrader.apps.nbgraderapp import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.argv[0] = "nbgrader"
    sys.exit(main())
