"""The grader's records: resource limits, one check cell's score, one notebook's result, and
the class CSV.

The points are nbgrader's (its gradebook); what happened in a check cell is read from the notebook
nbgrader autograded (``cell_score``): the errors the course's ``Execute`` step
(:mod:`classroom.grading.execute`) puts there are named here. Not handled: late penalties and
manually graded cells (they are not in the CSV; nbgrader's ``export`` has them).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from classroom.grading.student import nbgrader_meta

__all__ = ["KERNEL_STOPPED", "NOT_RUN", "TIMEOUT", "TRUNCATED", "UNVERIFIED", "CellScore",
           "NotebookResult", "OutputPathError", "ResourceLimits", "cell_score", "check_csv_path",
           "csv_cell", "graded_cells", "run_notes", "write_scores_csv"]

# The errors the grader's Execute step puts in a cell, by name, and its line on a capped output.
TIMEOUT = "CellTimeoutError"        # nbgrader's own name for a cell over its timeout
KERNEL_STOPPED = "DeadKernelError"  # nbclient's name for a kernel that went away
NOT_RUN = "NotRun"                  # a check cell after the kernel went away
UNVERIFIED = "UnverifiedCheck"      # the guard could not confirm the genuine check passed
TRUNCATED = "[grader] output truncated at"

# A cell a spreadsheet would read as a formula (OWASP "CSV injection"): prefixed with a quote.
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


class OutputPathError(ValueError):
    """The scores CSV cannot be written where asked; the message names the path and the fix."""


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


def cell_score(cell: nbformat.NotebookNode | None, grade_id: str, points: float,
               max_points: float) -> CellScore:
    """One check cell of a notebook nbgrader autograded (None: not in the submission), given
    the ``points`` nbgrader's gradebook holds for it."""
    if cell is None:
        return CellScore(grade_id, 0.0, max_points, "missing")
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    named = {o.get("ename"): str(o.get("evalue", ""))[:200] for o in reversed(errors)}
    failures = [o for o in errors if o.get("ename") not in (TIMEOUT, NOT_RUN, UNVERIFIED)]
    if TIMEOUT in named:
        status, detail = "timeout", named[TIMEOUT]
    elif NOT_RUN in named:
        status, detail = "not run", named[NOT_RUN]
    elif failures:
        status = "failed"
        ename, evalue = failures[0].get("ename", "error"), str(failures[0].get("evalue", ""))
        detail = "not yet done" if ename == "NotImplementedError" else f"{ename}: {evalue[:200]}"
    elif UNVERIFIED in named:
        status, detail = "unverified", named[UNVERIFIED]
    else:
        status, detail = ("passed", "") if points > 0 else ("failed", "output on stderr")
    return CellScore(grade_id, float(points), max_points, status, detail)


def run_notes(nb: nbformat.NotebookNode, checks: set[str]) -> list[str]:
    """What the CSV says about the other cells of an autograded notebook: capped output, a
    timeout outside the ``checks`` (grade ids), the kernel going away."""
    notes = []
    for cell in nb.cells:
        name = nbgrader_meta(cell).get("grade_id") or cell.get("id")
        outputs = cell.get("outputs", [])
        enames = {o.get("ename"): str(o.get("evalue", "")) for o in outputs
                  if o.get("output_type") == "error"}
        capped = [line.strip() for o in outputs if o.get("output_type") == "stream"
                  for line in o.get("text", "").splitlines() if line.startswith(TRUNCATED)]
        notes += [f"cell {name}: {capped[0][len('[grader] '):]}"] if capped else []
        if TIMEOUT in enames and name not in checks:
            notes.append(f"cell {name}: timed out")
        if KERNEL_STOPPED in enames:
            notes.append(enames[KERNEL_STOPPED])
    return notes


def check_csv_path(path: Path) -> Path:
    """Raise :class:`OutputPathError` unless a CSV can be written at ``path`` (a file, new or
    old, in a folder that exists or can be made and is writable): checked before grading, so a
    class's run is never lost at the end."""
    path = Path(path)
    fix = f"give a file name, e.g. --out {path / 'scores.csv'}" if path.is_dir() else \
        "give a file name in a folder you can write to, e.g. --out scores.csv"
    if path.is_dir():
        raise OutputPathError(f"the scores CSV {path} is a folder: {fix}")
    if path.exists() and not path.is_file():
        raise OutputPathError(f"the scores CSV {path} is not a regular file: {fix}")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"the scores CSV {path} cannot be made: {folder} is a file, not a "
                              f"folder; {fix}")
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise OutputPathError(f"the scores CSV {path} cannot be written: no write permission on "
                              f"{target}; {fix}")
    return path


def csv_cell(text: str) -> str:
    """``text`` safe for a spreadsheet: one that starts like a formula gets a leading quote."""
    return f"'{text}" if text.startswith(FORMULA_LEADS) else text


def write_scores_csv(results: Sequence[NotebookResult], path: Path) -> None:
    """One row per student and notebook; one column per graded cell, total, max and notes.
    Text cells starting like a formula (``=``, ``+``, ``-``, ``@``, tab, CR) get a leading
    ``'`` so a spreadsheet shows them as text."""
    columns: list[str] = []
    for r in results:
        for c in r.cells:
            name = f"{Path(r.notebook).stem}:{c.grade_id}"
            if name not in columns:
                columns.append(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "notebook", *map(csv_cell, columns), "total", "max", "notes"])
        for r in sorted(results, key=lambda r: (r.student, r.notebook)):
            by_name = {f"{Path(r.notebook).stem}:{c.grade_id}": c.points for c in r.cells}
            writer.writerow([csv_cell(r.student), csv_cell(r.notebook),
                             *[f"{by_name[c]:g}" if c in by_name else "" for c in columns],
                             f"{r.score:g}", f"{r.max_score:g}", csv_cell("; ".join(r.notes))])
