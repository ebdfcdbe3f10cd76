"""Grading one submitted notebook: a private copy, nbgrader's preparation, a worker process
running a sandboxed kernel, a deadline, nbgrader's scoring.

``grade_notebook`` (the grader's side) refuses a submission holding symlinks or special files,
copies the student's folder into a fresh private folder owned by the sandbox's uid, prepares
the notebook with nbgrader's preprocessors (:mod:`classroom.grading.autograde`) and starts a
worker process (``python -m classroom.grading _worker``, outside the sandbox, reading its job on
stdin and answering on stdout) that runs it with a kernel inside the sandbox. The kernel has
no view of the worker, the job, the instructor's notebook or other submissions, and its
stdout and stderr go to ``/dev/null``, so it holds none of the worker's pipes. The worker
kills the kernel's sandbox (its whole PID namespace) when the notebook ends or its deadline
passes and reports what the kernel answered; the grader scores from that report and kills a
worker that overruns by a minute (the sandbox dies with it).

Limits: each cell has a timeout (the kernel is interrupted; a second timeout in a row kills
it), the notebook a deadline, the kernel ``ResourceLimits`` (memory, CPU, file size,
processes, no core files) and each cell's stored output a cap. Not handled: fairness between
submissions graded at once (they share the CPUs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

import nbformat

from classroom.grading.autograde import (
    RunFacts,
    check_unique_grade_ids,
    guarded_client,
    prepare_submission,
    sandboxed_manager,
    score,
)
from classroom.grading.bubblewrap import (
    SandboxUnavailable,
    SubmissionRefused,
    UidPool,
    bwrap_command,
    kernel_env,
    limits_command,
    private_copy,
    sandbox_problem,
    share_caches,
)
from classroom.grading.feedback import without_hidden_tests
from classroom.grading.results import CellScore, NotebookResult, ResourceLimits, graded_cells
from classroom.grading.student import nbgrader_meta

__all__ = ["grade_notebook", "worker_main"]

_DEFAULT_POOL = UidPool()
MAX_NOTEBOOK_BYTES = 64 * 2**20


def grade_notebook(instructor_path: Path, submission_path: Path, student: str,
                   limits: ResourceLimits | None = None, feedback: Path | None = None,
                   sandbox: bool = True, uids: UidPool | None = None,
                   gradebook: str | None = None) -> NotebookResult:
    """Grade one submitted notebook; never raises for a bad submission (problems become
    notes). ``feedback``: where to save the executed notebook for the student (without the
    hidden tests). ``sandbox``:
    False runs the kernel with the grader's rights (only for a trusted class).
    ``gradebook``: from ``make_gradebook`` for this instructor notebook (else one is made)."""
    limits = limits or ResourceLimits()
    instructor_path, submission_path = Path(instructor_path), Path(submission_path)
    start = time.perf_counter()
    instructor = nbformat.read(instructor_path, as_version=4)
    check_unique_grade_ids(instructor, f"the instructor notebook {instructor_path}")
    points = graded_cells(instructor)
    if sandbox and (problem := sandbox_problem_cached()):
        raise SandboxUnavailable(problem)
    pool = uids or _DEFAULT_POOL
    uid = pool.take() if sandbox and os.geteuid() == 0 else None
    result = NotebookResult(student, instructor_path.name)
    try:
        with tempfile.TemporaryDirectory(prefix="course-grading-") as tmp:
            box, work = Path(tmp) / "box", Path(tmp) / "box" / "work"
            try:
                if submission_path.is_symlink() or not submission_path.is_file():
                    raise SubmissionRefused(f"{submission_path.name} is a symlink or not a file")
                if submission_path.stat().st_size > MAX_NOTEBOOK_BYTES:
                    raise SubmissionRefused(f"{submission_path.name} is over "
                                            f"{MAX_NOTEBOOK_BYTES // 2**20} MB")
                private_copy(submission_path.parent, work, owner=uid)
            except (SubmissionRefused, OSError) as err:
                result.notes.append(f"submission refused: {err}")
                result.cells = [CellScore(g, 0.0, p, "refused") for g, p in points.items()]
                return result
            try:  # read before the kernel starts: nothing has touched the copy yet
                nb, notes = prepare_submission(
                    instructor, nbformat.read(work / submission_path.name, as_version=4),
                    instructor_path.stem, gradebook)
            except Exception as err:
                result.notes.append(f"unreadable notebook: {type(err).__name__}: "
                                    f"{str(err)[:200]}")
                result.cells = [CellScore(g, 0.0, p, "missing") for g, p in points.items()]
                return result
            result.notes.extend(notes)
            if uid is not None:
                os.chown(box, uid, uid)
            box.chmod(0o700)
            prepared, executed = Path(tmp) / "prepared.ipynb", Path(tmp) / "executed.ipynb"
            nbformat.write(nb, prepared)
            graded = [i for i, c in enumerate(nb.cells)
                      if nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("grade_id") in points]
            job = {"prepared": str(prepared), "executed": str(executed), "box": str(box),
                   "workdir": str(work), "graded": graded, "limits": asdict(limits),
                   "uid": uid, "sandbox": sandbox}
            facts = _run_worker(job, limits)
            if executed.is_file():
                nb = nbformat.read(executed, as_version=4)
                if feedback is not None:  # the student's copy: no hidden tests
                    Path(feedback).parent.mkdir(parents=True, exist_ok=True)
                    nbformat.write(without_hidden_tests(nb), feedback)
            result.notes.extend(facts.notes)
            result.cells = score(nb, facts, points, limits)
            result.notes.extend(_notes(nb, facts, result, points, limits))
    finally:
        if uid is not None:
            pool.give_back(uid)
        result.seconds = time.perf_counter() - start
    return result


def _notes(nb, facts: RunFacts, result: NotebookResult, points: dict[str, float],
           limits: ResourceLimits) -> list[str]:
    notes = [f"{c.grade_id}: {c.status}" + (f" ({c.detail})" if c.detail else "")
             for c in result.cells if c.status != "passed"]
    name = {i: nbgrader_meta(c).get("grade_id") or c.get("id") for i, c in enumerate(nb.cells)}
    notes += [f"cell {name[i]}: output truncated at {limits.output_bytes_per_cell} bytes"
              for i in facts.truncated]
    notes += [f"cell {name[i]}: timed out" for i in facts.timeouts if name[i] not in points]
    return notes


_PROBLEM: list[str | None] = []


def sandbox_problem_cached() -> str | None:
    """``sandbox_problem()``, asked once per process (which also makes the model caches
    readable by the sandbox's uid, see ``share_caches``)."""
    if not _PROBLEM:
        _PROBLEM.append(sandbox_problem())
        if _PROBLEM[0] is None:
            share_caches()
    return _PROBLEM[0]


def _run_worker(job: dict, limits: ResourceLimits) -> RunFacts:
    proc = subprocess.Popen(
        [sys.executable, "-m", "classroom.grading", "_worker"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(json.dumps(job).encode(),
                                    timeout=limits.notebook_timeout_s + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the sandbox dies with its parent
        out, err = proc.communicate()
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        return RunFacts.from_json(lines[-1])
    except (IndexError, ValueError, TypeError, KeyError):
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        return RunFacts(notes=[f"the grader's worker failed (exit {proc.returncode}): "
                               f"{' | '.join(tail)}"])


def _execute(job: dict) -> RunFacts:
    """The worker's job: run the prepared notebook with a kernel in the sandbox, write the
    executed notebook, return what the client saw."""
    from nbclient.exceptions import DeadKernelError

    limits = ResourceLimits(**job["limits"])
    nb = nbformat.read(job["prepared"], as_version=4)
    box, workdir = Path(job["box"]), Path(job["workdir"])
    if job["sandbox"]:
        prefix = bwrap_command(box, workdir, job["uid"], limits)
        km = sandboxed_manager(prefix, kernel_env(workdir), box / "kernel", job["uid"])
    else:
        km = sandboxed_manager(limits_command(limits), kernel_env(workdir))
    client = guarded_client(
        nb, km=km, timeout=limits.cell_timeout_s, kernel_name="python3", allow_errors=True,
        interrupt_on_timeout=True, output_cap=limits.output_bytes_per_cell,
        graded=set(job["graded"]), resources={"metadata": {"path": str(workdir)}},
        shutdown_kernel="immediate", startup_timeout=120)
    notes: list[str] = []
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
        notes.append("the kernel died or was killed; later cells did not run")
    except Exception as err:
        notes.append(f"grader error: {type(err).__name__}: {str(err)[:200]}")
    finally:
        done.set()
        kill_sandbox()
    if deadline_hit.is_set():
        notes.append(f"notebook ran over {limits.notebook_timeout_s} s and was stopped")
    nbformat.write(nb, job["executed"])
    return RunFacts.of(client, notes)


def worker_main() -> int:
    """Entry point of a worker process: the job on stdin, what it saw as JSON on stdout."""
    facts = _execute(json.load(sys.stdin))
    sys.stdout.write("\n" + facts.to_json() + "\n")
    return 0
