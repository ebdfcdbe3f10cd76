"""Grading one submitted notebook: a private copy, a worker process, a sandboxed kernel, a
deadline.

``grade_notebook`` (the grader's side) refuses a submission holding symlinks or special files,
copies the student's folder into a fresh private folder owned by the sandbox's uid, and starts
a worker process (``python -m course.grading _worker``, outside the sandbox, reading its job on
stdin and answering on stdout). The worker prepares the notebook with nbgrader's preprocessors
and runs it with a kernel inside the sandbox; the kernel has no view of the worker, the job,
the instructor's notebook or other submissions, and its stdout and stderr go to ``/dev/null``,
so it holds none of the worker's pipes. The worker kills the kernel's sandbox (its whole PID
namespace) when the notebook ends or its deadline passes; the grader kills the worker when it
overruns by a minute, and the sandbox dies with it.

Limits: each cell has a timeout (the kernel is interrupted; a second timeout in a row kills
it), the notebook a deadline, the kernel ``ResourceLimits`` (memory, CPU, file size,
processes, no core files) and each cell's stored output a cap. Not handled: fairness between
submissions graded at once (they share the CPUs).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

import nbformat

from course.grading.autograde import (
    guarded_client,
    make_gradebook,
    prepare_submission,
    sandboxed_manager,
    score,
)
from course.grading.results import CellScore, NotebookResult, ResourceLimits, graded_cells
from course.grading.sandbox import (
    SandboxUnavailable,
    SubmissionRefused,
    UidPool,
    bwrap_command,
    kernel_env,
    limits_command,
    private_copy,
    sandbox_problem,
)
from course.grading.student import nbgrader_meta

__all__ = ["grade_notebook", "worker_main"]

_DEFAULT_POOL = UidPool(8)


def grade_notebook(instructor_path: Path, submission_path: Path, student: str,
                   limits: ResourceLimits | None = None, feedback: Path | None = None,
                   sandbox: bool = True, uids: UidPool | None = None,
                   gradebook: str | None = None) -> NotebookResult:
    """Grade one submitted notebook; never raises for a bad submission (problems become
    notes). ``feedback``: where to save the executed notebook for the student. ``sandbox``:
    False runs the kernel with the grader's rights (only for a trusted class).
    ``gradebook``: from ``make_gradebook`` for this instructor notebook (else one is made)."""
    limits = limits or ResourceLimits()
    instructor_path, submission_path = Path(instructor_path), Path(submission_path)
    start = time.perf_counter()
    points = graded_cells(nbformat.read(instructor_path, as_version=4))
    if sandbox and (problem := sandbox_problem_cached()):
        raise SandboxUnavailable(problem)
    pool = uids or _DEFAULT_POOL
    uid = pool.take() if sandbox and os.geteuid() == 0 else None
    try:
        with tempfile.TemporaryDirectory(prefix="course-grading-") as tmp:
            box = Path(tmp) / "box"
            try:
                if submission_path.is_symlink() or not submission_path.is_file():
                    raise SubmissionRefused(f"{submission_path.name} is a symlink or not a file")
                private_copy(submission_path.parent, box / "work", owner=uid)
            except (SubmissionRefused, OSError) as err:
                result = NotebookResult(student, instructor_path.name, notes=[
                    f"submission refused: {err}"])
                result.cells = [CellScore(g, 0.0, p, "refused") for g, p in points.items()]
                result.seconds = time.perf_counter() - start
                return result
            if uid is not None:
                os.chown(box, uid, uid)
            box.chmod(0o700)
            executed = Path(tmp) / "executed.ipynb"
            if gradebook is None:
                gradebook = make_gradebook(nbformat.read(instructor_path, as_version=4),
                                           Path(tmp), instructor_path.stem)
            job = {"gradebook": gradebook, "instructor": str(instructor_path.resolve()), "box": str(box),
                   "submission": str(box / "work" / submission_path.name), "student": student,
                   "limits": asdict(limits), "uid": uid, "sandbox": sandbox,
                   "executed": str(executed)}
            result = _run_worker(job, limits, points, student, instructor_path.name)
            if feedback is not None and executed.is_file():
                Path(feedback).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(executed, feedback)
    finally:
        if uid is not None:
            pool.give_back(uid)
    result.seconds = time.perf_counter() - start
    return result


_PROBLEM: list[str | None] = []


def sandbox_problem_cached() -> str | None:
    """``sandbox_problem()``, asked once per process."""
    if not _PROBLEM:
        _PROBLEM.append(sandbox_problem())
    return _PROBLEM[0]


def _run_worker(job: dict, limits: ResourceLimits, points: dict[str, float], student: str,
                notebook: str) -> NotebookResult:
    proc = subprocess.Popen(
        [sys.executable, "-m", "course.grading", "_worker"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
    try:
        out, err = proc.communicate(json.dumps(job).encode(),
                                    timeout=limits.notebook_timeout_s + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        data = json.loads(lines[-1])
        cells = [CellScore(**c) for c in data.pop("cells")]
        return NotebookResult(**data, cells=cells)
    except (IndexError, ValueError, TypeError, KeyError):
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        result = NotebookResult(student, notebook, notes=[
            f"the grader's worker failed (exit {proc.returncode}): {' | '.join(tail)}"])
        result.cells = [CellScore(g, 0.0, p, "not run") for g, p in points.items()]
        return result


def _grade_in_worker(job: dict) -> NotebookResult:
    """The worker's job: prepare, run in the sandbox, score (see the module docstring)."""
    from nbclient.exceptions import DeadKernelError

    limits = ResourceLimits(**job["limits"])
    instructor_path, submission = Path(job["instructor"]), Path(job["submission"])
    instructor = nbformat.read(instructor_path, as_version=4)
    points = graded_cells(instructor)
    result = NotebookResult(job["student"], instructor_path.name)
    try:
        nb, notes = prepare_submission(instructor, nbformat.read(submission, as_version=4),
                                       instructor_path.stem, job["gradebook"])
    except Exception as err:
        result.notes.append(f"unreadable notebook: {type(err).__name__}: {str(err)[:200]}")
        result.cells = [CellScore(g, 0.0, p, "missing") for g, p in points.items()]
        return result
    result.notes.extend(notes)
    box, workdir = Path(job["box"]), submission.parent
    if job["sandbox"]:
        prefix = bwrap_command(box, workdir, job["uid"], limits)
        km = sandboxed_manager(prefix, kernel_env(workdir), box / "kernel", job["uid"])
    else:
        km = sandboxed_manager(limits_command(limits), kernel_env(workdir))
    graded = {i for i, c in enumerate(nb.cells)
              if nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("grade_id") in points}
    client = guarded_client(
        nb, km=km, timeout=limits.cell_timeout_s, kernel_name="python3", allow_errors=True,
        interrupt_on_timeout=True, output_cap=limits.output_bytes_per_cell, graded=graded,
        resources={"metadata": {"path": str(workdir)}}, shutdown_kernel="immediate",
        startup_timeout=120)

    done, deadline_hit = threading.Event(), threading.Event()

    def kill_sandbox() -> None:
        process = getattr(getattr(km, "provisioner", None), "process", None)
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # bwrap leads its own session
            except (ProcessLookupError, PermissionError):
                pass

    def watchdog() -> None:
        if not done.wait(limits.notebook_timeout_s):
            deadline_hit.set()
            kill_sandbox()

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        client.execute()
    except DeadKernelError:
        result.notes.append("the kernel died or was killed; later cells did not run")
    except Exception as err:
        result.notes.append(f"grader error: {type(err).__name__}: {str(err)[:200]}")
    finally:
        done.set()
        kill_sandbox()
    if deadline_hit.is_set():
        result.notes.append(f"notebook ran over {limits.notebook_timeout_s} s and was stopped")
    result.cells = score(nb, client, points, limits)
    for c in result.cells:
        if c.status != "passed":
            result.notes.append(f"{c.grade_id}: {c.status}" + (f" ({c.detail})" if c.detail else ""))
    for i in sorted(client.truncated):
        name = nbgrader_meta(nb.cells[i]).get("grade_id") or nb.cells[i].get("id")
        result.notes.append(f"cell {name}: output truncated at {limits.output_bytes_per_cell} bytes")
    for i in client.timeouts:
        name = nbgrader_meta(nb.cells[i]).get("grade_id") or nb.cells[i].get("id")
        if name not in points:
            result.notes.append(f"cell {name}: timed out")
    nbformat.write(nb, job["executed"])
    return result


def worker_main() -> int:
    """Entry point of a worker process: the job on stdin, the result as JSON on stdout."""
    result = _grade_in_worker(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps({**asdict(result),
                                        "cells": [asdict(c) for c in result.cells]}) + "\n")
    return 0
