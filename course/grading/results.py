"""The grader's records: resource limits, one check cell's score, one notebook's result, and
the class CSV.

Not handled: a gradebook (nbgrader's ``export`` writes that CSV; this one needs none), late
penalties, and manually graded cells (they are not in the CSV).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course.grading.student import nbgrader_meta

__all__ = ["CellScore", "NotebookResult", "ResourceLimits", "graded_cells", "write_scores_csv"]


@dataclass
class ResourceLimits:
    """How far one submission may go before the grader stops it."""

    cell_timeout_s: int = 60
    notebook_timeout_s: int = 600
    memory_bytes: int = 6 * 2**30
    cpu_seconds: int = 900
    file_size_bytes: int = 256 * 2**20
    output_bytes_per_cell: int = 100_000
    processes: int = 256  # threads count too (RLIMIT_NPROC of the sandbox's own uid)


@dataclass
class CellScore:
    """The autograded result of one check cell."""

    grade_id: str
    points: float
    max_points: float
    status: str  # "passed", "failed", "timeout", "not run", "missing", "unverified"
    detail: str = ""


@dataclass
class NotebookResult:
    """One student's notebook, graded."""

    student: str
    notebook: str
    cells: list[CellScore] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(c.points for c in self.cells)

    @property
    def max_score(self) -> float:
        return sum(c.max_points for c in self.cells)

    def points(self) -> dict[str, float]:
        return {c.grade_id: c.points for c in self.cells}

    def __repr__(self) -> str:
        return (f"NotebookResult({self.student}/{self.notebook}: {self.score:g}/"
                f"{self.max_score:g} in {self.seconds:.1f} s)")


def graded_cells(nb: nbformat.NotebookNode) -> dict[str, float]:
    """``grade_id -> points`` for every autograded code cell of an instructor notebook."""
    cells = {}
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            cells[meta["grade_id"]] = float(meta.get("points", 0))
    return cells


def write_scores_csv(results: Sequence[NotebookResult], path: Path) -> None:
    """One row per student and notebook; one column per graded cell, total, max and notes."""
    columns: list[str] = []
    for r in results:
        for c in r.cells:
            name = f"{Path(r.notebook).stem}:{c.grade_id}"
            if name not in columns:
                columns.append(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "notebook", *columns, "total", "max", "notes"])
        for r in sorted(results, key=lambda r: (r.student, r.notebook)):
            by_name = {f"{Path(r.notebook).stem}:{c.grade_id}": c.points for c in r.cells}
            writer.writerow([r.student, r.notebook,
                             *[f"{by_name[c]:g}" if c in by_name else "" for c in columns],
                             f"{r.score:g}", f"{r.max_score:g}", "; ".join(r.notes)])
