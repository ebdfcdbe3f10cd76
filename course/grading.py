"""Coursework: the student edition of the notebooks, and a grader for a whole class.

Two commands (``python -m course.grading --help``)::

    python -m course.grading student notebooks/ --out student/
    python -m course.grading grade submitted/ --source notebooks/ --out scores.csv

``student`` runs nbgrader 0.9.6's own preprocessors (``LockCells``, ``ClearSolutions``,
``ClearOutput``, ``ComputeChecksums``, ``ClearHiddenTests``, ``ClearMarkScheme``,
``CheckCellMetadata``) in the order ``nbgrader generate_assignment`` uses, without its
database: every ``### BEGIN SOLUTION`` region becomes ``raise NotImplementedError()``, hidden
tests disappear, outputs are cleared, and a leftover marker is an error.

``grade`` takes a folder with one sub-folder per student (``submitted/<student>/*.ipynb``, the
layout of nbgrader's ``submitted/<student>/<assignment>/`` one level down) and grades each
notebook in its own worker process and fresh kernel, several at a time:

- the graded cells (``nbgrader.grade``) and locked cells are overwritten with the instructor's
  version, hidden tests included, as nbgrader's ``OverwriteCells`` does, so editing a check or
  deleting a hidden test earns nothing;
- the notebook runs in a temporary copy of the student's folder (deleting files deletes the
  copy), with ``COURSE_GRADING=1`` so a failed check raises;
- each cell has a timeout (the kernel is interrupted; after a second timeout in a row, or when
  the whole notebook runs past its deadline, the kernel is killed), the worker and its kernel
  run under ``RLIMIT_AS`` (memory), ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (file size) and no core
  files, and each cell's stored output is capped;
- a test cell earns its ``points`` when it runs without an error, else 0; cells that never ran
  (kernel died or killed) earn 0. A broken submission never stops the run.

The result is a CSV with one row per student and notebook, one column per graded cell
(``<notebook>:<grade_id>``), the total, the maximum and notes (timeouts, errors, missing cells).

Not handled: this is not a security sandbox. The limits stop runaway loops, memory and output,
and the temporary copy protects the submission folder from a careless ``rm``; code that targets
absolute paths still runs with the grader's user rights. At class scale run the grader inside a
container or as an unprivileged user (see docs/COURSEWORK.md). Manually graded cells (markdown
answers, ``nbgrader.task``) are listed with no score.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

SOLUTION_BEGIN = "### BEGIN SOLUTION"
SOLUTION_END = "### END SOLUTION"
HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_END = "### END HIDDEN TESTS"
MARKERS = (SOLUTION_BEGIN, SOLUTION_END, HIDDEN_BEGIN, HIDDEN_END)


# --------------------------------------------------------------------------- student edition


def _nbgrader_meta(cell: nbformat.NotebookNode) -> dict[str, Any]:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def student_edition(instructor: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Return the student edition of one instructor notebook (the input is not changed).

    Uses nbgrader's own preprocessors; raises ``ValueError`` naming the cell when a marker is
    left in the result (e.g. ``### BEGIN SOLUTION`` in a cell without ``nbgrader.solution``).
    """
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ClearSolutions,
        ComputeChecksums,
        LockCells,
    )

    nb = nbformat.from_dict(json.loads(json.dumps(instructor)))
    resources: dict[str, Any] = {"nbgrader": {"notebook": "notebook", "assignment": "assignment"}}
    # The order of nbgrader's GenerateAssignment, minus the database (SaveCells) and the
    # header/footer and autotest steps we do not use.
    chain = [LockCells(), ClearSolutions(), ClearOutput(), CheckCellMetadata(),
             ComputeChecksums(), ClearHiddenTests(), ClearMarkScheme(), ComputeChecksums(),
             CheckCellMetadata()]
    for step in chain:
        nb, resources = step.preprocess(nb, resources)
    for cell in nb.cells:
        for marker in MARKERS:
            if marker in cell.source:
                raise ValueError(
                    f"cell {cell.get('id')!r} still contains {marker!r} in the student edition: "
                    "give the cell nbgrader metadata (solution=true for solutions, grade=true "
                    "for checks) or remove the marker")
    return nb


def _lines_by_region(nb: nbformat.NotebookNode) -> Iterator[tuple[str, bool]]:
    """Each non-marker line of ``nb`` (stripped), and whether it sits between solution or
    hidden-test markers."""
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            stripped = line.strip()
            if stripped in (SOLUTION_BEGIN, HIDDEN_BEGIN):
                inside = True
            elif stripped in (SOLUTION_END, HIDDEN_END):
                inside = False
            else:
                yield stripped, inside


def solution_lines(instructor: nbformat.NotebookNode) -> list[str]:
    """The non-blank lines between solution markers and hidden-test markers (what a student
    edition must not contain)."""
    return [line for line, inside in _lines_by_region(instructor) if inside and line]


def leaked_solution_lines(instructor: nbformat.NotebookNode,
                          student: nbformat.NotebookNode) -> list[str]:
    """Solution or hidden-test lines of ``instructor`` that still appear in ``student``'s
    code cells (lines that occur elsewhere in the instructor notebook too are not counted)."""
    outside = {line for line, inside in _lines_by_region(instructor) if not inside}
    student_lines = {line.strip() for c in student.cells for line in c.source.splitlines()}
    return [line for line in solution_lines(instructor)
            if line in student_lines and line not in outside]


def write_student_editions(sources: Iterable[Path], out_dir: Path) -> list[Path]:
    """Write the student edition of each notebook in ``sources`` (files or folders) to
    ``out_dir`` under the same file name; return the written paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in _notebooks(sources):
        student = student_edition(nbformat.read(path, as_version=4))
        target = out_dir / path.name
        if target.resolve() == path.resolve():
            raise ValueError(f"refusing to overwrite the instructor notebook {path}: "
                             "choose another --out folder")
        nbformat.write(student, target)
        written.append(target)
    return written


def _notebooks(sources: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for source in sources:
        source = Path(source)
        if source.is_dir():
            found.extend(sorted(p for p in source.glob("*.ipynb")))
        elif source.suffix == ".ipynb" and source.is_file():
            found.append(source)
        else:
            raise FileNotFoundError(f"{source}: not a notebook or a folder of notebooks")
    if not found:
        raise FileNotFoundError(f"no notebooks in {', '.join(map(str, sources))}")
    return found


# --------------------------------------------------------------------------- grading records


@dataclass
class ResourceLimits:
    """How far one submission may go before the grader stops it."""

    cell_timeout_s: int = 60
    notebook_timeout_s: int = 600
    memory_bytes: int = 6 * 2**30
    cpu_seconds: int = 900
    file_size_bytes: int = 256 * 2**20
    output_bytes_per_cell: int = 100_000


@dataclass
class CellScore:
    """The autograded result of one test cell."""

    grade_id: str
    points: float
    max_points: float
    status: str  # "passed", "failed", "timeout", "not run", "missing"
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
        meta = _nbgrader_meta(cell)
        if meta.get("grade") and cell.cell_type == "code":
            cells[meta["grade_id"]] = float(meta.get("points", 0))
    return cells


def prepare_submission(instructor: nbformat.NotebookNode,
                       submitted: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, list[str]]:
    """The notebook the grader runs: the student's cells, with every locked or graded cell
    replaced by the instructor's (hidden tests included) and outputs cleared.

    Returns the notebook and notes about cells that were missing or had changed type.
    """
    reference = {}
    for cell in instructor.cells:
        meta = _nbgrader_meta(cell)
        if meta.get("grade_id") and (meta.get("grade") or meta.get("locked")) \
                and not meta.get("solution"):
            reference[meta["grade_id"]] = cell
    nb = nbformat.from_dict(json.loads(json.dumps(submitted)))
    notes = []
    seen = set()
    for i, cell in enumerate(nb.cells):
        grade_id = _nbgrader_meta(cell).get("grade_id")
        if grade_id in reference:
            original = nbformat.from_dict(json.loads(json.dumps(reference[grade_id])))
            nb.cells[i] = original
            seen.add(grade_id)
        if nb.cells[i].cell_type == "code":
            nb.cells[i].outputs = []
            nb.cells[i].execution_count = None
    for grade_id in graded_cells(instructor):
        if grade_id not in seen:
            notes.append(f"{grade_id}: missing from the submission")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    return nb, notes


# --------------------------------------------------------------------------- one notebook


def _limited_client_class():
    """A NotebookClient that caps stored output and kills a kernel that ignores interrupts."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from nbclient.util import ensure_async

    class LimitedClient(NotebookClient):
        def __init__(self, *args: Any, output_cap: int, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.output_cap = output_cap
            self.output_sizes: dict[int, int] = {}
            self.truncated: set[int] = set()
            self.timeouts: list[int] = []
            self.replies: dict[int, dict[str, Any]] = {}
            self.current_index = -1

        def output(self, outs, msg, display_id, cell_index):  # type: ignore[override]
            size = len(json.dumps(msg.get("content", {}), default=str))
            before = self.output_sizes.get(cell_index, 0)
            used = before + size
            self.output_sizes[cell_index] = used
            if used > self.output_cap and msg["msg_type"] != "error":
                room = self.output_cap - before
                if msg["msg_type"] == "stream" and room > 0:  # keep the part that fits
                    msg = {**msg, "content": {**msg["content"],
                                              "text": msg["content"]["text"][:room]}}
                    super().output(outs, msg, display_id, cell_index)
                if cell_index not in self.truncated:
                    self.truncated.add(cell_index)
                    outs.append(nbformat.v4.new_output(
                        "stream", name="stderr",
                        text=f"\n[grader] output truncated at {self.output_cap} bytes\n"))
                return None
            return super().output(outs, msg, display_id, cell_index)

        async def _async_handle_timeout(self, timeout, cell=None):  # type: ignore[override]
            if self.current_index in self.timeouts:
                # Interrupted once and still running: the kernel ignores SIGINT.
                await ensure_async(self.km.shutdown_kernel(now=True))
                raise DeadKernelError("the kernel ignored the interrupt and was killed")
            self.timeouts.append(self.current_index)
            await ensure_async(self.km.interrupt_kernel())
            return None  # wait for the interrupted cell's own reply (KeyboardInterrupt)

    return LimitedClient


def _set_limits(limits: ResourceLimits) -> None:
    """Apply the resource limits to this process (and so to the kernel it starts)."""
    os.setsid()
    for name, value in (("RLIMIT_AS", limits.memory_bytes), ("RLIMIT_CPU", limits.cpu_seconds),
                        ("RLIMIT_FSIZE", limits.file_size_bytes), ("RLIMIT_CORE", 0)):
        kind = getattr(resource, name)
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))


def grade_notebook_in_place(instructor_path: Path, submission_path: Path, student: str,
                            limits: ResourceLimits, executed_path: Path | None = None) -> NotebookResult:
    """Grade one notebook in this process (the worker); the caller provides the isolation."""
    from nbclient.exceptions import DeadKernelError

    start = time.perf_counter()
    instructor = nbformat.read(instructor_path, as_version=4)
    points = graded_cells(instructor)
    result = NotebookResult(student, instructor_path.name)
    try:
        submitted = nbformat.read(submission_path, as_version=4)
        nb, notes = prepare_submission(instructor, submitted)
    except Exception as err:
        result.notes.append(f"unreadable notebook: {type(err).__name__}: {err}")
        result.cells = [CellScore(g, 0.0, p, "missing") for g, p in points.items()]
        return result
    result.notes.extend(notes)

    client = _limited_client_class()(
        nb, timeout=limits.cell_timeout_s, kernel_name="python3", allow_errors=True,
        interrupt_on_timeout=True, output_cap=limits.output_bytes_per_cell,
        resources={"metadata": {"path": str(submission_path.parent)}},
        shutdown_kernel="immediate", startup_timeout=120,
    )

    def on_start(cell, cell_index, **kwargs):
        client.current_index = cell_index

    def on_executed(cell, cell_index, execute_reply, **kwargs):
        client.replies[cell_index] = (execute_reply or {}).get("content", {})

    client.on_cell_start = on_start
    client.on_cell_executed = on_executed

    deadline_hit = threading.Event()

    def watchdog() -> None:
        if not done.wait(limits.notebook_timeout_s):
            deadline_hit.set()
            try:
                if client.km is not None:
                    client.km.shutdown_kernel(now=True)
            except Exception:
                pass

    done = threading.Event()
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        client.execute()
    except DeadKernelError:
        result.notes.append("the kernel died or was killed; later cells did not run")
    except Exception as err:
        result.notes.append(f"grader error: {type(err).__name__}: {str(err)[:200]}")
    finally:
        done.set()
    if deadline_hit.is_set():
        result.notes.append(f"notebook ran over {limits.notebook_timeout_s} s and was stopped")

    index_of = {_nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(nb.cells)
                if _nbgrader_meta(c).get("grade")}
    for grade_id, max_points in points.items():
        i = index_of.get(grade_id)
        if i is None:
            result.cells.append(CellScore(grade_id, 0.0, max_points, "missing"))
            continue
        cell = nb.cells[i]
        reply = client.replies.get(i)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if i in client.timeouts:
            status, detail = "timeout", f"ran over {limits.cell_timeout_s} s"
        elif reply is None:
            status, detail = "not run", "an earlier cell stopped the kernel"
        elif errors or reply.get("status") != "ok":
            status = "failed"
            err = errors[0] if errors else reply
            detail = f"{err.get('ename', 'error')}: {str(err.get('evalue', ''))[:200]}"
            if err.get("ename") == "NotImplementedError":
                detail = "not yet done"
        else:
            status, detail = "passed", ""
        result.cells.append(CellScore(grade_id, max_points if status == "passed" else 0.0,
                                      max_points, status, detail))
    for c in result.cells:
        if c.status != "passed":
            result.notes.append(f"{c.grade_id}: {c.status}" + (f" ({c.detail})" if c.detail else ""))
    for i in sorted(client.truncated):
        grade_id = _nbgrader_meta(nb.cells[i]).get("grade_id") or nb.cells[i].get("id")
        note = f"cell {grade_id}: output truncated at {limits.output_bytes_per_cell} bytes"
        if note not in result.notes:
            result.notes.append(note)
    for i in client.timeouts:
        cell_name = _nbgrader_meta(nb.cells[i]).get("grade_id") or nb.cells[i].get("id")
        if cell_name not in points:
            result.notes.append(f"cell {cell_name}: timed out")
    if executed_path is not None:
        nbformat.write(nb, executed_path)
    result.seconds = time.perf_counter() - start
    return result


def _worker_main(job_file: str) -> int:
    """Entry point of a worker process: read the job, grade, write the result as JSON."""
    job = json.loads(Path(job_file).read_text())
    limits = ResourceLimits(**job["limits"])
    result = grade_notebook_in_place(Path(job["instructor"]), Path(job["submission"]),
                                     job["student"], limits, Path(job["executed"]))
    Path(job["result"]).write_text(json.dumps(
        {**asdict(result), "cells": [asdict(c) for c in result.cells]}))
    return 0


def grade_notebook(instructor_path: Path, submission_path: Path, student: str,
                   limits: ResourceLimits | None = None, env: dict[str, str] | None = None,
                   feedback: Path | None = None) -> NotebookResult:
    """Grade one submitted notebook in a worker process under ``limits``, in a temporary copy
    of the student's folder. Never raises for a bad submission: problems become notes.
    ``feedback``: where to save the executed notebook (outputs and all) for the student."""
    limits = limits or ResourceLimits()
    instructor_path, submission_path = Path(instructor_path), Path(submission_path)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="course-grading-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(submission_path.parent, work, symlinks=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        job = {"instructor": str(instructor_path.resolve()),
               "submission": str(work / submission_path.name), "student": student,
               "limits": asdict(limits), "result": str(Path(tmp) / "result.json"),
               "executed": str(Path(tmp) / "executed.ipynb")}
        job_file = Path(tmp) / "job.json"
        job_file.write_text(json.dumps(job))
        kernel_env = dict(os.environ if env is None else env)
        kernel_env.update({"COURSE_GRADING": "1", "NBGRADER_EXECUTION": "autograde",
                           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                           "MPLBACKEND": "Agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                           "TOKENIZERS_PARALLELISM": "false"})
        kernel_env.pop("JPY_PARENT_PID", None)
        wall = limits.notebook_timeout_s + 60
        proc = subprocess.Popen(
            [sys.executable, "-m", "course.grading", "_worker", str(job_file)],
            cwd=str(work), env=kernel_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=lambda: _set_limits(limits),
        )
        try:
            _, stderr = proc.communicate(timeout=wall)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            _, stderr = proc.communicate()
        result_file = Path(job["result"])
        if feedback is not None and Path(job["executed"]).is_file():
            Path(feedback).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(job["executed"], feedback)
        if result_file.is_file():
            data = json.loads(result_file.read_text())
            cells = [CellScore(**c) for c in data.pop("cells")]
            result = NotebookResult(**data, cells=cells)
        else:
            tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
            result = NotebookResult(student, instructor_path.name, notes=[
                f"the grader's worker failed (exit {proc.returncode}): {' | '.join(tail)}"])
            result.cells = [CellScore(g, 0.0, p, "not run")
                            for g, p in graded_cells(nbformat.read(instructor_path, 4)).items()]
    result.seconds = time.perf_counter() - start
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass


# --------------------------------------------------------------------------- a class


def find_submissions(folder: Path, instructor: dict[str, Path]) -> list[tuple[str, Path, Path]]:
    """``(student, instructor notebook, submitted notebook)`` for every notebook a student
    folder holds whose name matches an instructor notebook (searched recursively, so
    nbgrader's ``submitted/<student>/<assignment>/`` works too)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions "
                                "(expected <folder>/<student>/<notebook>.ipynb)")
    jobs = []
    for student_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for nb_path in sorted(student_dir.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in nb_path.parts or nb_path.name not in instructor:
                continue
            jobs.append((student_dir.name, instructor[nb_path.name], nb_path))
    return jobs


def grade_class(submissions: Path, sources: Sequence[Path], out_csv: Path | None = None,
                workers: int = 2, limits: ResourceLimits | None = None,
                feedback_dir: Path | None = None, log=print) -> list[NotebookResult]:
    """Grade every student's notebooks in ``submissions`` against the instructor notebooks in
    ``sources``, ``workers`` at a time; write ``out_csv`` when given, and the executed
    notebooks to ``feedback_dir/<student>/`` when given; return the results."""
    instructor = {p.name: p for p in _notebooks(sources) if graded_cells(
        nbformat.read(p, as_version=4))}
    if not instructor:
        raise ValueError("none of the instructor notebooks has graded cells "
                         "(nbgrader metadata grade=true with points)")
    jobs = find_submissions(Path(submissions), instructor)
    if not jobs:
        raise FileNotFoundError(
            f"{submissions}: no submitted notebook named like an instructor notebook "
            f"({', '.join(sorted(instructor))})")

    def run(job):
        student, source, submitted = job
        feedback = (Path(feedback_dir) / student / submitted.name) if feedback_dir else None
        result = grade_notebook(source, submitted, student, limits, feedback=feedback)
        if log:
            log(f"{student}/{result.notebook}: {result.score:g}/{result.max_score:g} "
                f"in {result.seconds:.1f} s" + (f" ({'; '.join(result.notes)})"
                                                 if result.notes else ""))
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(run, jobs))
    if out_csv is not None:
        write_scores_csv(results, Path(out_csv))
    return results


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
                             *[_fmt(by_name[c]) if c in by_name else "" for c in columns],
                             _fmt(r.score), _fmt(r.max_score), "; ".join(r.notes)])


def _fmt(x: float) -> str:
    return f"{x:g}"


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.grading",
        description="Student edition and class grading for the workbook's exercises.")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("student", help="write the student edition of instructor notebooks")
    st.add_argument("sources", nargs="+", type=Path, help="instructor notebooks or folders")
    st.add_argument("--out", type=Path, default=Path("student"), help="output folder")
    gr = sub.add_parser("grade", help="grade a folder of submissions, write a CSV of scores")
    gr.add_argument("submissions", type=Path, help="folder of <student>/<notebook>.ipynb")
    gr.add_argument("--source", type=Path, nargs="+", default=[Path("notebooks")],
                    help="instructor notebooks or folders (default: notebooks)")
    gr.add_argument("--out", type=Path, default=Path("scores.csv"), help="CSV to write")
    gr.add_argument("--feedback", type=Path, default=None,
                    help="folder for the executed notebooks, one sub-folder per student")
    gr.add_argument("--workers", type=int, default=2, help="notebooks graded at once")
    gr.add_argument("--cell-timeout", type=int, default=ResourceLimits.cell_timeout_s)
    gr.add_argument("--notebook-timeout", type=int, default=ResourceLimits.notebook_timeout_s)
    gr.add_argument("--memory-gb", type=float, default=ResourceLimits.memory_bytes / 2**30)
    gr.add_argument("--output-cap", type=int, default=ResourceLimits.output_bytes_per_cell,
                    help="bytes of output kept per cell")
    wk = sub.add_parser("_worker", help=argparse.SUPPRESS)
    wk.add_argument("job")
    args = parser.parse_args(argv)
    if args.command == "_worker":
        return _worker_main(args.job)
    if args.command == "student":
        for path in write_student_editions(args.sources, args.out):
            print(f"wrote {path}")
        return 0
    limits = ResourceLimits(cell_timeout_s=args.cell_timeout, notebook_timeout_s=args.notebook_timeout,
                    memory_bytes=int(args.memory_gb * 2**30),
                    cpu_seconds=max(args.notebook_timeout * 2, 60),
                    output_bytes_per_cell=args.output_cap)
    start = time.perf_counter()
    results = grade_class(args.submissions, args.source, args.out, args.workers, limits,
                          feedback_dir=args.feedback)
    print(f"graded {len(results)} notebooks in {time.perf_counter() - start:.1f} s; "
          f"scores in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
