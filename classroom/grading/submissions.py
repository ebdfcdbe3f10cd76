"""Grading a class with nbgrader: every student's notebooks, a few at a time, into one CSV.

``grade_class`` takes a folder with one sub-folder per student (``submitted/<student>/*.ipynb``,
or nbgrader's ``submitted/<student>/<assignment>/*.ipynb``) and matches notebooks to the
instructor's by file name. nbgrader grades them, as ``make nbgrader-autograde`` does: in a
temporary course folder made from the course template (``nbgrader/nbgrader_config.py``, with the
class's limits appended), each instructor notebook an assignment of its own name (``nbgrader
generate_assignment``), each submission's folder copied to ``submitted/<id>/<assignment>/`` under
an id of the grader's (a folder name may hold what nbgrader reads as a pattern), then ``nbgrader
autograde``. With ``workers`` above 1 the submissions are dealt out to that many course folders,
each graded by its own nbgrader process. The points come from each course's gradebook, what
happened in each cell from the notebook nbgrader autograded (:func:`~classroom.grading.results.
cell_score`), and the student's feedback is that notebook without the hidden tests.

Before nbgrader sees a submission: a folder holding a symlink or a special file is refused (0
points), and so are a notebook over 64 MB and a file that is not a notebook. Of two notebooks of
one name in one student's folder (``alice/practice.ipynb`` and ``alice/old/practice.ipynb``) the
one nearest the student's folder is graded and the notes name the others. The CSV's path is
checked before anything is graded.

Not handled: late submissions, manually graded answers (nbgrader's formgrader), students missing
a notebook (they get no row).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from classroom.grading.bubblewrap import SandboxUnavailable, SubmissionRefused, private_copy
from classroom.grading.feedback import without_hidden_tests
from classroom.grading.nbgrader_plugins import check_unique_grade_ids, duplicate_cell_notes
from classroom.grading.results import (
    CellScore,
    NotebookResult,
    OutputPathError,
    ResourceLimits,
    cell_score,
    check_csv_path,
    graded_cells,
    run_notes,
    write_scores_csv,
)
from classroom.grading.student import find_notebooks, nbgrader_meta

__all__ = ["Submission", "autograde", "duplicate_submissions", "grade_class"]

TEMPLATE = Path(__file__).resolve().parents[2] / "nbgrader" / "nbgrader_config.py"
MAX_NOTEBOOK_BYTES = 64 * 2**20
NBGRADER_START_S = 300  # one nbgrader process's own work (imports, gradebook), generously


@dataclass
class Submission:
    """One student's notebook to grade against one instructor notebook."""

    student: str
    instructor: Path
    submitted: Path


def duplicate_submissions(folder: Path, instructor: dict[str, Path]
                          ) -> dict[tuple[str, str], list[Path]]:
    """``(student, notebook name) -> [notebooks not graded]`` for every student folder holding
    more than one notebook of one name."""
    return _scan(folder, instructor)[1]


def _scan(folder: Path, instructor: dict[str, Path]):
    """The submissions to grade: for every notebook a student folder holds whose name matches
    an instructor notebook (searched recursively, so nbgrader's layout works too), the one
    nearest the student's folder; and the others of that name, by student and name."""
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
            jobs.append(Submission(student_dir.name, instructor[name], first))
            if others:
                duplicates[(student_dir.name, name)] = others
    return jobs, duplicates


def grade_class(submissions: Path, sources: Sequence[Path], out_csv: Path | None = None,
                workers: int = 2, limits: ResourceLimits | None = None,
                feedback_dir: Path | None = None, log: Callable[[str], object] | None = print,
                sandbox: bool = True) -> list[NotebookResult]:
    """Grade every student's notebooks in ``submissions`` against the instructor notebooks in
    ``sources`` with nbgrader, ``workers`` at a time; write ``out_csv`` when given, and the
    feedback notebooks to ``feedback_dir/<student>/`` when given; return the results."""
    instructor = {}
    for path in find_notebooks(sources):
        nb = nbformat.read(path, as_version=4)
        if graded_cells(nb):
            check_unique_grade_ids(nb, f"the instructor notebook {path.name}")
            instructor[path.name] = path
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
    results = autograde(jobs, workers, limits or ResourceLimits(), sandbox=sandbox,
                        feedback_dir=feedback_dir)
    for job, result in zip(jobs, results, strict=True):
        others = duplicates.get((job.student, job.submitted.name))
        if others:
            student_dir = Path(submissions) / job.student
            result.notes.append(
                f"graded {job.submitted.relative_to(student_dir)}; also submitted, not graded: "
                + ", ".join(str(p.relative_to(student_dir)) for p in others)
                + " (one notebook of a name is graded per student: remove or rename the others)")
        if log:
            log(f"{job.student}/{result.notebook}: {result.score:g}/{result.max_score:g} "
                f"in {result.seconds:.1f} s" + (f" ({'; '.join(result.notes)})"
                                                 if result.notes else ""))
    if out_csv is not None:
        write_scores_csv(results, Path(out_csv))
    return results


def autograde(jobs: Sequence[Submission], workers: int, limits: ResourceLimits,
              sandbox: bool = True, feedback_dir: Path | None = None) -> list[NotebookResult]:
    """One result per job, in order: nbgrader's autograde of each submission, ``workers``
    course folders at a time (module docstring). Raises ``SandboxUnavailable`` before grading
    when ``sandbox`` and bubblewrap cannot run here."""
    from classroom.grading.sandboxed_kernel import sandbox_problem_once

    if sandbox and (problem := sandbox_problem_once()):
        raise SandboxUnavailable(problem)
    with tempfile.TemporaryDirectory(prefix="course-nbgrader-") as tmp:
        template = Path(tmp) / "course-0"
        _make_course(template, {job.instructor for job in jobs}, limits, sandbox)
        courses = [template, *(Path(shutil.copytree(template, Path(tmp) / f"course-{i}"))
                               for i in range(1, max(1, min(workers, len(jobs)))))]
        placed: dict[Path, list[tuple[Submission, str, NotebookResult]]] = {c: [] for c in courses}
        results = []
        for n, job in enumerate(jobs):
            course, student_id = courses[n % len(courses)], f"student-{n:04d}"
            result = NotebookResult(job.student, job.instructor.name)
            results.append(result)
            if _place(job, course, student_id, result):
                placed[course].append((job, student_id, result))
        with ThreadPoolExecutor(max_workers=len(courses)) as pool:
            list(pool.map(lambda c: _autograde_course(c, placed[c], limits, feedback_dir),
                          courses))
    return results


def _nbgrader(course: Path, args: list[str], timeout: float) -> tuple[int, str]:
    """Run ``nbgrader <args>`` in ``course`` (this interpreter's, through
    :mod:`~classroom.grading.nbgrader_cli`, its commands on PATH); its exit code (-9 when killed
    at ``timeout``) and its log. Killing it ends its kernels' sandboxes (``bwrap
    --die-with-parent``)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "classroom.grading.nbgrader_cli", *args], cwd=course, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return proc.returncode, out


def _make_course(course: Path, instructor: set[Path], limits: ResourceLimits,
                 sandbox: bool) -> None:
    """A course folder from the template, this run's limits appended, with each instructor
    notebook generated as the assignment of its name."""
    course.mkdir(parents=True)
    config = TEMPLATE.read_text() + f"""
# This class's run (python -m classroom.grading grade)
c.Execute.timeout = {limits.cell_timeout_s}
c.GuardedExecute.notebook_timeout = {limits.notebook_timeout_s}
c.GuardedExecute.output_cap = {limits.output_bytes_per_cell}
c.SandboxedKernelManager.sandbox = {sandbox}
c.SandboxedKernelManager.memory_bytes = {limits.memory_bytes}
c.SandboxedKernelManager.cpu_seconds = {limits.cpu_seconds}
c.SandboxedKernelManager.file_size_bytes = {limits.file_size_bytes}
c.SandboxedKernelManager.processes = {limits.processes}
"""
    (course / "nbgrader_config.py").write_text(config)
    for path in sorted(instructor):
        (course / "source" / path.stem).mkdir(parents=True)
        shutil.copy(path, course / "source" / path.stem / path.name)
        code, out = _nbgrader(course, ["generate_assignment", path.stem, "--force"],
                              NBGRADER_START_S)
        if code != 0:
            raise ValueError(f"nbgrader could not make an assignment of {path}: "
                             + " | ".join(out.strip().splitlines()[-3:]))


def _place(job: Submission, course: Path, student_id: str, result: NotebookResult) -> bool:
    """Copy the submission's folder to ``course/submitted/<student_id>/<assignment>/``; False
    (and the result's cells and notes say why) when it is refused or unreadable."""
    points = graded_cells(nbformat.read(job.instructor, as_version=4))
    target = course / "submitted" / student_id / job.instructor.stem
    try:
        if job.submitted.is_symlink() or not job.submitted.is_file():
            raise SubmissionRefused(f"{job.submitted.name} is a symlink or not a file")
        if job.submitted.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise SubmissionRefused(f"{job.submitted.name} is over "
                                    f"{MAX_NOTEBOOK_BYTES // 2**20} MB")
        private_copy(job.submitted.parent, target)
        (target / "timestamp.txt").unlink(missing_ok=True)  # lateness is not graded here
        submitted = nbformat.read(target / job.submitted.name, as_version=4)
    except (SubmissionRefused, OSError) as err:
        result.notes.append(f"submission refused: {err}")
        result.cells = [CellScore(g, 0.0, p, "refused") for g, p in points.items()]
    except Exception as err:  # not a notebook
        result.notes.append(f"unreadable notebook: {type(err).__name__}: {str(err)[:200]}")
        result.cells = [CellScore(g, 0.0, p, "missing") for g, p in points.items()]
    else:
        result.notes += duplicate_cell_notes(submitted)
        return True
    shutil.rmtree(target, ignore_errors=True)
    return False


def _autograde_course(course: Path, placed: list[tuple[Submission, str, NotebookResult]],
                      limits: ResourceLimits, feedback_dir: Path | None) -> None:
    """``nbgrader autograde`` each assignment placed in ``course``, then read every result."""
    from nbgrader.api import Gradebook

    logs = {}
    for assignment in sorted({job.instructor.stem for job, _, _ in placed}):
        count = sum(job.instructor.stem == assignment for job, _, _ in placed)
        budget = NBGRADER_START_S + count * (limits.notebook_timeout_s + 60)
        logs[assignment] = _nbgrader(course, ["autograde", assignment, "--force"], budget)[1]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for job, student_id, result in placed:
            name = job.instructor.stem
            points = graded_cells(nbformat.read(job.instructor, as_version=4))
            graded = course / "autograded" / student_id / name / job.instructor.name
            if not graded.is_file():
                tail = [line for line in logs[name].splitlines() if student_id in line
                        or "Error" in line][-2:]
                result.notes.append("nbgrader could not grade this notebook: "
                                    + " | ".join(tail).replace(student_id, job.student))
                result.cells = [CellScore(g, 0.0, p, "not run") for g, p in points.items()]
                continue
            nb = nbformat.read(graded, as_version=4)
            scores = {g.name: g.score for g in
                      gradebook.find_submission_notebook(name, name, student_id).grades}
            cells = {nbgrader_meta(c).get("grade_id"): c for c in nb.cells
                     if nbgrader_meta(c).get("grade")}
            result.cells = [cell_score(cells.get(g), g, scores.get(g, 0.0), p)
                            for g, p in points.items()]
            result.notes += [f"{c.grade_id}: {c.status}" + (f" ({c.detail})" if c.detail else "")
                             for c in result.cells if c.status != "passed"]
            result.notes += run_notes(nb, set(points))
            result.seconds = float(nb.metadata.get("grading", {}).get("seconds", 0.0))
            if feedback_dir is not None:
                target = Path(feedback_dir) / job.student / job.instructor.name
                target.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(without_hidden_tests(nb), target)
