"""``python -m classroom.grading.nbgrader_cli <args>``: nbgrader's own command line (``nbgrader
<args>``), without the two start-up costs nbgrader pays for nothing the course uses.

- jsonschema's RFC 3987 grammar: nbgrader imports nbformat, and with it jsonschema, before it
  reads the course template; jsonschema then imports ``rfc3987_syntax`` (installed for
  jupyter-events), which compiles a grammar at import, about 1.5 s of CPU, for ``iri`` formats no
  notebook schema uses. The package ``classroom.grading`` blocks that import before anything else.
- A second Python for one line: when it creates a gradebook, nbgrader starts ``alembic heads``
  to learn its schema's migration head, a process that imports nbgrader again (about 3 s of CPU).
  Here :func:`alembic_head` answers in this process, from alembic's own API over nbgrader's
  migrations folder: the head ``alembic heads`` prints (``tests/test_nbgrader_pipeline.py``
  compares the two).

The class grader and the course's tests run nbgrader so; ``nbgrader`` itself behaves the same,
only slower. Not handled: servers that load nbgrader as an extension (Formgrader creates its
gradebook the usual way).
"""

import sys

import nbgrader.api
from nbgrader.apps.nbgraderapp import main

__all__ = ["alembic_head"]


def alembic_head() -> str:
    """The migration head of nbgrader's gradebook schema (one head; alembic raises on several)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:
        raise RuntimeError(f"no migration head in {ALEMBIC_DIR}")
    return head


if __name__ == "__main__":
    nbgrader.api.get_alembic_version = alembic_head  # the one place nbgrader asks for it
    sys.argv[0] = "nbgrader"
    sys.exit(main())
