"""Autograding one notebook: nbgrader's own preprocessors restore the instructor's cells and
score the check cells; a client of ours runs the kernel under limits and guards every check.

``prepare_submission`` runs nbgrader 0.9.6's sanitizing chain (``ClearOutput``,
``DeduplicateIds``, ``OverwriteKernelspec``, ``OverwriteCells`` as the course template
configures it, i.e. ``KeepReleasedCells``, ``CheckCellMetadata``) against
a throw-away gradebook filled by ``record_source_cells``, exactly as ``nbgrader autograde``
does, so graded and locked cells (hidden tests included) are the instructor's. ``score``
gives a check cell nbgrader's own ``determine_grade`` when the kernel answered the cell's
execute request with status ok and the guard (:mod:`classroom.grading.guard`) confirmed that the
genuine check ran and passed; otherwise 0 with the reason.

``guarded_client`` makes nbclient's ``NotebookClient`` plus: a per-cell output cap, a kernel kill
when an interrupted cell keeps running, the guard's requests around each check cell, and the
kernel launched in the sandbox (:mod:`classroom.grading.bubblewrap`) with its stdout and stderr on
``/dev/null``. Not handled: running the notebook (that is :mod:`classroom.grading.runner`).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from classroom.grading import guard
from classroom.grading.results import CellScore, ResourceLimits, graded_cells
from classroom.grading.student import nbgrader_meta, record_source_cells

__all__ = ["DuplicateGradeIdError", "RunFacts", "check_unique_grade_ids", "duplicate_grade_ids", "guarded_client", "make_gradebook", "prepare_submission", "sandboxed_manager", "score"]

ASSIGNMENT = "assignment"
GUARD_TIMEOUT_S = 20


def make_gradebook(instructor: nbformat.NotebookNode, folder: Path,
                   notebook: str = "notebook") -> str:
    """A gradebook in ``folder`` holding the instructor's cells (nbgrader's ``SaveCells``);
    returns its URL. Made once per instructor notebook and only read while grading. A
    grade_id held by two of its cells raises :class:`DuplicateGradeIdError` naming it."""
    check_unique_grade_ids(instructor, f"the instructor notebook {notebook}.ipynb")
    _alembic_on_path()
    db_url = f"sqlite:///{Path(folder) / (notebook + '.gradebook.db')}"
    record_source_cells(instructor, db_url, ASSIGNMENT, notebook)
    return db_url


def _alembic_on_path() -> None:
    """nbgrader stamps a new gradebook with the alembic head it gets by running the
    ``alembic`` command (a process and seconds of imports each time): read the same head from
    nbgrader's migration scripts in this process instead."""
    import nbgrader.api
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    if getattr(nbgrader.api.get_alembic_version, "in_process", False):
        return
    config = Config()
    config.set_main_option("script_location", "nbgrader:alembic")
    head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:
        raise RuntimeError("nbgrader's database migrations name no head revision: reinstall "
                           "nbgrader (make install)")

    def get_alembic_version() -> str:
        return head

    get_alembic_version.in_process = True  # type: ignore[attr-defined]
    nbgrader.api.get_alembic_version = get_alembic_version


def prepare_submission(instructor: nbformat.NotebookNode, submitted: nbformat.NotebookNode,
                       notebook: str = "notebook",
                       gradebook: str | None = None) -> tuple[nbformat.NotebookNode, list[str]]:
    """The notebook the grader runs: nbgrader's sanitizing chain over the student's notebook
    (graded and locked cells replaced by the instructor's, outputs cleared), reading the
    instructor's cells from ``gradebook`` (made by ``make_gradebook``; a temporary one when
    None).

    Returns the notebook and notes about graded cells missing from the submission, and about
    a grade_id held by more than one cell (a duplicated check cell, say): the last copy is
    graded, the others run as ordinary cells, and the note names the grade_id and the fix
    (nbgrader would blank the copies and then fail with a misleading ``SchemaTooOldError``).
    An instructor notebook with a duplicated grade_id raises :class:`DuplicateGradeIdError`.
    """
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearOutput,
        DeduplicateIds,
        OverwriteKernelspec,
    )

    from classroom.grading.nbgrader_plugins import KeepReleasedCells

    with tempfile.TemporaryDirectory(prefix="course-gradebook-") as tmp:
        db_url = gradebook or make_gradebook(instructor, Path(tmp), notebook)
        resources: dict[str, Any] = {"nbgrader": {"notebook": notebook, "db_url": db_url,
                                                  "assignment": ASSIGNMENT, "student": "s"}}
        nb = nbformat.from_dict(json.loads(json.dumps(submitted)))
        duplicate_notes = _keep_last_copy(nb)
        for step in (ClearOutput(), DeduplicateIds(), OverwriteKernelspec(), KeepReleasedCells(),
                     CheckCellMetadata()):
            nb, resources = step.preprocess(nb, resources)
    present = {nbgrader_meta(c).get("grade_id") for c in nb.cells if nbgrader_meta(c).get("grade")}
    notes = [f"{grade_id}: missing from the submission"
             for grade_id in graded_cells(instructor) if grade_id not in present]
    notes += duplicate_notes
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    return nb, notes


class DuplicateGradeIdError(ValueError):
    """Two cells of an instructor notebook carry one nbgrader grade_id."""


def duplicate_grade_ids(nb: nbformat.NotebookNode) -> dict[str, list[int]]:
    """Each grade_id held by more than one nbgrader cell, with the indexes of its cells."""
    where: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if grade_id is not None and (meta.get("grade") or meta.get("solution")
                                     or meta.get("locked")):
            where.setdefault(str(grade_id), []).append(i)
    return {g: cells for g, cells in where.items() if len(cells) > 1}


def check_unique_grade_ids(nb: nbformat.NotebookNode, what: str) -> None:
    """Raise :class:`DuplicateGradeIdError` naming each duplicated grade_id of ``what``."""
    duplicates = duplicate_grade_ids(nb)
    if duplicates:
        listed = "; ".join(f"grade_id {g!r} in cells {', '.join(map(str, cells))}"
                           for g, cells in duplicates.items())
        raise DuplicateGradeIdError(
            f"{what} has more than one cell with one nbgrader grade_id ({listed}); fix: delete "
            "the extra copy or give each cell its own grade_id (Create Assignment toolbar, or "
            "metadata.nbgrader.grade_id), then grade again")


def _keep_last_copy(nb: nbformat.NotebookNode) -> list[str]:
    """Strip the nbgrader metadata of every copy but the last of a duplicated grade_id (what
    nbgrader's ``DeduplicateIds`` keeps, without leaving the empty metadata that makes
    ``CheckCellMetadata`` fail); return one note per grade_id naming it and the fix."""
    notes = []
    for grade_id, cells in duplicate_grade_ids(nb).items():
        for i in cells[:-1]:
            del nb.cells[i].metadata["nbgrader"]
        notes.append(f"{grade_id}: {len(cells)} cells of the submission have this grade_id "
                     f"(cells {', '.join(map(str, cells))}, a duplicated cell); the last one "
                     "was graded, the others ran as ordinary cells; fix: delete the extra "
                     "copy from the notebook")
    return notes


def _sandboxed_manager_class():
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        """Launches the kernel behind ``sandbox_prefix`` with ``sandbox_env`` and no pipes."""

        sandbox_prefix: tuple[str, ...] = ()
        sandbox_env: dict[str, str] | None = None
        sandbox_uid: int | None = None

        def write_connection_file(self, **kwargs):  # type: ignore[override]
            super().write_connection_file(**kwargs)
            if self.sandbox_uid is not None:  # the kernel runs as this uid and must read it
                os.chown(self.connection_file, self.sandbox_uid, self.sandbox_uid)

        def format_kernel_cmd(self, extra_arguments=None):  # type: ignore[override]
            from classroom.grading.bubblewrap import kernel_python

            command = list(super().format_kernel_cmd(extra_arguments))
            if command and command[0] == sys.executable:  # maybe through a symlink the
                command[0] = kernel_python()             # sandbox cannot see
            return [*self.sandbox_prefix, *command]

        async def _async_launch_kernel(self, kernel_cmd, **kw):  # type: ignore[override]
            kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
            if self.sandbox_env is not None:
                kw["env"] = {**self.sandbox_env, **{k: v for k, v in kw.get("env", {}).items()
                                                    if k.startswith("JPY_SESSION")}}
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return SandboxedKernelManager


def _client_class():
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from nbclient.util import ensure_async

    class GuardedClient(NotebookClient):
        """See the module docstring. ``graded``: the indices of the check cells."""

        def __init__(self, *args: Any, output_cap: int, graded: set[int], **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.output_cap = output_cap
            self.graded = graded
            self.output_sizes: dict[int, int] = {}
            self.truncated: set[int] = set()
            self.timeouts: list[int] = []
            self.replies: dict[int, dict[str, Any]] = {}
            self.guarded: dict[int, str] = {}  # cell index -> "" when verified, else why not
            self.current_index = -1

        async def async_execute_cell(self, cell, cell_index, execution_count=None,
                                     store_history=True):  # type: ignore[override]
            self.current_index = cell_index
            if cell_index not in self.graded:
                return await super().async_execute_cell(cell, cell_index, execution_count,
                                                        store_history)
            token = guard.new_token()
            answer = await self._ask(guard.restore_expression(token))
            restored = answer == guard.restored_answer(token)
            cell = await super().async_execute_cell(cell, cell_index, execution_count,
                                                    store_history)
            verdicts = await self._ask(guard.verdicts_expression(token)) if restored else None
            self.guarded[cell_index] = _why_not_verified(restored, verdicts)
            return cell

        async def _ask(self, expression: str) -> str | None:
            """Evaluate one user expression in the kernel; its text/plain, or None."""
            return None if self.kc is None else await _user_expression(self.kc, expression)

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
                # Interrupted once and still running: the kernel ignores the interrupt.
                await ensure_async(self.km.shutdown_kernel(now=True))
                raise DeadKernelError("the kernel ignored the interrupt and was killed")
            self.timeouts.append(self.current_index)
            await ensure_async(self.km.interrupt_kernel())
            return None  # wait for the interrupted cell's own reply (KeyboardInterrupt)

    return GuardedClient


def _why_not_verified(restored: bool, verdicts: str | None) -> str:
    """Empty when the guard saw the genuine check pass, else why the cell scores nothing."""
    if not restored:
        return "the grader could not restore the checks"
    if set(_parse_verdicts(verdicts)) != {"passed"}:
        return f"the check did not report success ({verdicts})"
    return ""


async def _user_expression(kc: Any, expression: str) -> str | None:
    """Evaluate one user expression with the kernel client ``kc``: its text/plain, or None when
    it failed, the kernel died or no reply came within ``GUARD_TIMEOUT_S``."""
    from nbclient.util import ensure_async

    msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"v": expression})
    deadline = time.monotonic() + GUARD_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            msg = await ensure_async(kc.shell_channel.get_msg(timeout=1))
        except queue.Empty:
            if not await ensure_async(kc.is_alive()):
                return None
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        value = msg["content"].get("user_expressions", {}).get("v", {})
        if value.get("status") != "ok":
            return None
        return value.get("data", {}).get("text/plain")
    return None


def _parse_verdicts(text: str | None) -> list[str]:
    """Parse a repr'd list of strings without eval (anything else gives [])."""
    import ast

    if text is None:
        return []
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def guarded_client(nb: nbformat.NotebookNode, **kwargs: Any):
    """A ``GuardedClient`` over ``nb`` (the class is built lazily: nbclient is imported only
    when grading); it records each cell's execute reply in ``client.replies``."""
    client = _client_class()(nb, **kwargs)

    def on_executed(cell, cell_index, execute_reply, **_):
        client.replies[cell_index] = (execute_reply or {}).get("content", {})

    client.on_cell_executed = on_executed
    return client


def sandboxed_manager(prefix: list[str], env: dict[str, str], ipc_prefix: Path | None = None,
                      uid: int | None = None):
    """A kernel manager that starts ``python3`` behind ``prefix`` with exactly ``env``,
    talking over Unix sockets named ``ipc_prefix-<n>`` when given (else TCP on loopback)."""
    km = _sandboxed_manager_class()(kernel_name="python3")
    km.sandbox_prefix = tuple(prefix)
    km.sandbox_env = env
    km.sandbox_uid = uid
    if ipc_prefix is not None:
        km.transport = "ipc"
        km.ip = str(ipc_prefix)
        km.connection_file = str(ipc_prefix) + ".json"
    km.kernel_spec.interrupt_mode = "message"  # a signal would hit bwrap, not the kernel
    return km


@dataclass
class RunFacts:
    """What the client saw while running a notebook (cell indices), sent from the worker to
    the grader: each cell's execute reply, the cells that timed out or had their output
    truncated, the guard's verdict per check cell ("" when verified) and notes."""

    replies: dict[int, dict] = field(default_factory=dict)
    timeouts: list[int] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)
    guarded: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, client, notes: list[str]) -> RunFacts:
        return cls(dict(client.replies), list(client.timeouts), sorted(client.truncated),
                   dict(client.guarded), notes)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunFacts:
        data = json.loads(text)
        return cls({int(k): v for k, v in data["replies"].items()}, data["timeouts"],
                   data["truncated"], {int(k): v for k, v in data["guarded"].items()},
                   data["notes"])


def score(nb: nbformat.NotebookNode, client: RunFacts, points: dict[str, float],
          limits: ResourceLimits) -> list[CellScore]:
    """One ``CellScore`` per graded cell of the instructor (``points``), from the executed
    ``nb`` and what the client saw: nbgrader's ``determine_grade`` if the guard verified the
    check and the kernel replied ok, else 0."""
    from nbgrader.utils import determine_grade

    index_of = {nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(nb.cells)
                if nbgrader_meta(c).get("grade")}
    scores = []
    for grade_id, max_points in points.items():
        i = index_of.get(grade_id)
        if i is None:
            scores.append(CellScore(grade_id, 0.0, max_points, "missing"))
            continue
        cell = nb.cells[i]
        reply = client.replies.get(i)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        earned = 0.0
        if i in client.timeouts:
            status, detail = "timeout", f"ran over {limits.cell_timeout_s} s"
        elif reply is None:
            status, detail = "not run", "an earlier cell stopped the kernel"
        elif errors or reply.get("status") != "ok":
            err = errors[0] if errors else reply
            status = "failed"
            detail = f"{err.get('ename', 'error')}: {str(err.get('evalue', ''))[:200]}"
            if err.get("ename") == "NotImplementedError":
                detail = "not yet done"
        elif client.guarded.get(i, "not guarded"):
            status, detail = "unverified", client.guarded.get(i, "not guarded")
        else:
            earned = float(determine_grade(cell)[0] or 0.0)
            status = "passed" if earned > 0 else "failed"
            detail = "" if earned > 0 else "output on stderr"
        scores.append(CellScore(grade_id, earned, max_points, status, detail))
    return scores
