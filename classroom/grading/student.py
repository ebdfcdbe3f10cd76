"""The student edition of an instructor notebook, made by nbgrader's own preprocessors.

``student_edition`` runs the preprocessors of ``nbgrader generate_assignment`` (``LockCells``,
``ClearSolutions``, ``ClearOutput``, ``ComputeChecksums``, ``ClearHiddenTests``,
``ClearMarkScheme``, ``CheckCellMetadata``) in nbgrader's order: every ``### BEGIN SOLUTION``
region becomes ``raise NotImplementedError()``, hidden tests disappear, outputs are cleared,
and a leftover marker is an error.

Not handled: nbgrader's header/footer and autotest steps, its gradebook, releasing to an
exchange, and course directories (the nbgrader CLI does those; see ``nbgrader/`` at the
repository root).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import nbformat

__all__ = [
    "MARKERS",
    "find_notebooks",
    "hidden_test_lines",
    "leaked_solution_lines",
    "nbgrader_meta",
    "solution_lines",
    "student_edition",
    "write_student_editions",
]

SOLUTION_BEGIN = "### BEGIN SOLUTION"
SOLUTION_END = "### END SOLUTION"
HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_END = "### END HIDDEN TESTS"
MARKERS = (SOLUTION_BEGIN, SOLUTION_END, HIDDEN_BEGIN, HIDDEN_END)


def nbgrader_meta(cell: nbformat.NotebookNode) -> dict[str, Any]:
    """The ``nbgrader`` metadata of a cell (empty when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _generate(nb: nbformat.NotebookNode, resources: dict[str, Any]) -> nbformat.NotebookNode:
    """nbgrader's GenerateAssignment chain, minus header/footer, autotests and the gradebook."""
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ClearSolutions,
        ComputeChecksums,
        LockCells,
    )

    chain = [LockCells(), ClearSolutions(), ClearOutput(), CheckCellMetadata(),
             ComputeChecksums(), ClearHiddenTests(),
             ClearMarkScheme(), ComputeChecksums(), CheckCellMetadata()]
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    for step in chain:
        nb, resources = step.preprocess(nb, resources)
    return nb


def student_edition(instructor: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Return the student edition of one instructor notebook (the input is not changed).

    Raises ``ValueError`` naming the cell when a marker is left in the result (e.g.
    ``### BEGIN SOLUTION`` in a cell without ``nbgrader.solution``).
    """
    nb = _generate(instructor, {"nbgrader": {"notebook": "notebook",
                                             "assignment": "assignment"}})
    for cell in nb.cells:
        for marker in MARKERS:
            if marker in cell.source:
                raise ValueError(
                    f"cell {cell.get('id')!r} still contains {marker!r} in the student edition: "
                    "give the cell nbgrader metadata (solution=true for solutions, grade=true "
                    "for checks) or remove the marker")
    return nb


def _lines_by_region(nb: nbformat.NotebookNode) -> Iterator[tuple[str, str | None]]:
    """Each non-marker line of ``nb`` (stripped), and the region it sits in: ``"solution"``,
    ``"hidden"`` (between hidden-test markers) or None."""
    for cell in nb.cells:
        region = None
        for line in cell.source.splitlines():
            stripped = line.strip()
            if stripped in (SOLUTION_BEGIN, HIDDEN_BEGIN):
                region = "solution" if stripped == SOLUTION_BEGIN else "hidden"
            elif stripped in (SOLUTION_END, HIDDEN_END):
                region = None
            else:
                yield stripped, region


def solution_lines(instructor: nbformat.NotebookNode) -> list[str]:
    """The non-blank lines between solution markers and hidden-test markers (what a student
    edition must not contain)."""
    return [line for line, region in _lines_by_region(instructor) if region and line]


def hidden_test_lines(instructor: nbformat.NotebookNode) -> list[str]:
    """The non-blank lines between hidden-test markers that occur nowhere else in the notebook,
    not even inside another line (what feedback handed back must not contain)."""
    outside = "\n".join(line for line, region in _lines_by_region(instructor)
                         if region != "hidden")
    return [line for line, region in _lines_by_region(instructor)
            if region == "hidden" and line and line not in outside]


def leaked_solution_lines(instructor: nbformat.NotebookNode,
                          student: nbformat.NotebookNode) -> list[str]:
    """Solution or hidden-test lines of ``instructor`` that still appear in ``student``'s
    code cells (lines that occur elsewhere in the instructor notebook too are not counted)."""
    outside = {line for line, region in _lines_by_region(instructor) if not region}
    student_lines = {line.strip() for c in student.cells for line in c.source.splitlines()}
    return [line for line in solution_lines(instructor)
            if line in student_lines and line not in outside]


def write_student_editions(sources: Iterable[Path], out_dir: Path) -> list[Path]:
    """Write the student edition of each notebook in ``sources`` (files or folders) to
    ``out_dir`` under the same file name; return the written paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in find_notebooks(sources):
        student = student_edition(nbformat.read(path, as_version=4))
        target = out_dir / path.name
        if target.resolve() == path.resolve():
            raise ValueError(f"refusing to overwrite the instructor notebook {path}: "
                             "choose another --out folder")
        nbformat.write(student, target)
        written.append(target)
    return written


def find_notebooks(sources: Iterable[Path]) -> list[Path]:
    """The notebooks named by ``sources``: each a notebook file or a folder of them."""
    found: list[Path] = []
    sources = [Path(s) for s in sources]
    for source in sources:
        if source.is_dir():
            found.extend(sorted(p for p in source.glob("*.ipynb")))
        elif source.suffix == ".ipynb" and source.is_file():
            found.append(source)
        else:
            raise FileNotFoundError(f"{source}: not a notebook or a folder of notebooks")
    if not found:
        raise FileNotFoundError(f"no notebooks in {', '.join(map(str, sources))}")
    return found
