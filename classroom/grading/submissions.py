"""Grading a class: every student's notebooks, a few at a time, into one CSV.

Takes a folder with one sub-folder per student (``submitted/<student>/*.ipynb``, or nbgrader's
``submitted/<student>/<assignment>/*.ipynb``), matches notebooks to the instructor's by file
name and grades each with :func:`classroom.grading.runner.grade_notebook`.

A student folder holding two notebooks of one name (``alice/practice.ipynb`` and
``alice/old/practice.ipynb``) is graded once: the one nearest the student's folder (then the
first by path); the result's notes name the others, which are not graded. The scores CSV's path
is checked before any notebook is graded.

Not handled: a gradebook, late submissions, students missing a notebook (they get no row).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from classroom.grading.autograde import make_gradebook
from classroom.grading.results import (
    NotebookResult,
    OutputPathError,
    ResourceLimits,
    check_csv_path,
    graded_cells,
    write_scores_csv,
)
from classroom.grading.runner import grade_notebook
from classroom.grading.student import find_notebooks

__all__ = ["duplicate_submissions", "find_submissions", "grade_class"]


def find_submissions(folder: Path, instructor: dict[str, Path]) -> list[tuple[str, Path, Path]]:
    """``(student, instructor notebook, submitted notebook)`` for every notebook a student
    folder holds whose name matches an instructor notebook (searched recursively, so
    nbgrader's ``submitted/<student>/<assignment>/`` works too; symlinked notebooks are listed
    and then refused by the grader). Of several notebooks of one name in one student's folder,
    only the one nearest the student's folder is listed (see :func:`duplicate_submissions`)."""
    return _scan(folder, instructor)[0]


def duplicate_submissions(folder: Path, instructor: dict[str, Path]
                          ) -> dict[tuple[str, str], list[Path]]:
    """``(student, notebook name) -> [notebooks not graded]`` for every student folder holding
    more than one notebook of one name."""
    return _scan(folder, instructor)[1]


def _scan(folder: Path, instructor: dict[str, Path]):
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions "
                                "(expected <folder>/<student>/<notebook>.ipynb)")
    jobs, duplicates = [], {}
    for student_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        found: dict[str, list[Path]] = {}
        for nb_path in sorted(student_dir.rglob("*.ipynb"),
                              key=lambda p: (len(p.relative_to(student_dir).parts), str(p))):
            if ".ipynb_checkpoints" in nb_path.parts or nb_path.name not in instructor:
                continue
            found.setdefault(nb_path.name, []).append(nb_path)
        for name in sorted(found):
            first, *others = found[name]
            jobs.append((student_dir.name, instructor[name], first))
            if others:
                duplicates[(student_dir.name, name)] = others
    return jobs, duplicates


def grade_class(submissions: Path, sources: Sequence[Path], out_csv: Path | None = None,
                workers: int = 2, limits: ResourceLimits | None = None,
                feedback_dir: Path | None = None, log=print,
                sandbox: bool = True) -> list[NotebookResult]:
    """Grade every student's notebooks in ``submissions`` against the instructor notebooks in
    ``sources``, ``workers`` at a time; write ``out_csv`` when given, and the executed
    notebooks to ``feedback_dir/<student>/`` when given; return the results."""
    instructor = {p.name: p for p in find_notebooks(sources) if graded_cells(
        nbformat.read(p, as_version=4))}
    if not instructor:
        raise ValueError("none of the instructor notebooks has graded cells "
                         "(nbgrader metadata grade=true with points)")
    if out_csv is not None:
        check_csv_path(Path(out_csv))
    if feedback_dir is not None and Path(feedback_dir).exists() and \
            not Path(feedback_dir).is_dir():
        raise OutputPathError(f"the feedback folder {feedback_dir} is a file: give a folder "
                              "name (new or existing), e.g. --feedback feedback")
    jobs, duplicates = _scan(Path(submissions), instructor)
    if not jobs:
        raise FileNotFoundError(
            f"{submissions}: no submitted notebook named like an instructor notebook "
            f"({', '.join(sorted(instructor))})")
    books = tempfile.TemporaryDirectory(prefix="course-gradebooks-")
    gradebooks = {name: make_gradebook(nbformat.read(path, as_version=4), Path(books.name),
                                       path.stem) for name, path in instructor.items()}

    def run(job):
        student, source, submitted = job
        feedback = (Path(feedback_dir) / student / submitted.name) if feedback_dir else None
        result = grade_notebook(source, submitted, student, limits, feedback=feedback,
                                sandbox=sandbox, gradebook=gradebooks[source.name])
        others = duplicates.get((student, submitted.name))
        if others:
            student_dir = Path(submissions) / student
            result.notes.append(
                f"graded {submitted.relative_to(student_dir)}; also submitted, not graded: "
                + ", ".join(str(p.relative_to(student_dir)) for p in others)
                + " (one notebook of a name is graded per student: remove or rename the others)")
        if log:
            log(f"{student}/{result.notebook}: {result.score:g}/{result.max_score:g} "
                f"in {result.seconds:.1f} s" + (f" ({'; '.join(result.notes)})"
                                                 if result.notes else ""))
        return result

    with books, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(run, jobs))
    if out_csv is not None:
        write_scores_csv(results, Path(out_csv))
    return results
