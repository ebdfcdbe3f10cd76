"""nbgrader's ``Execute`` step with what a class grader needs and nbgrader lacks: ``GuardedExecute``.

The course template (``nbgrader/nbgrader_config.py``) puts it in place of ``Execute`` in ``nbgrader
autograde``'s chain, so it runs every submission, and nbgrader's own ``SaveAutoGrades`` scores the
check cells with ``determine_grade``, which gives 0 to a cell whose first error, stderr or result
output is an error. What it adds:

- the kernel of :class:`~classroom.grading.sandboxed_kernel.SandboxedKernelManager` (bubblewrap);
- the check guard (:mod:`classroom.grading.guard`) around every autograded check cell: a check the
  guard cannot confirm (the genuine ``course.checks.check``, armed afresh, ran and reported
  success) and a check whose kernel reply was not ok get an ``UnverifiedCheck`` error before
  their other outputs, unless an error already comes first: nbgrader scores them 0;
- each cell's stored output capped at ``output_cap`` bytes (a line on stderr says so);
- a cell over ``timeout`` is interrupted and gets a ``CellTimeoutError`` error; one that ignores
  the interrupt for another ``timeout`` has its kernel killed;
- the whole notebook's ``notebook_timeout``: then the sandbox is killed;
- once the kernel is gone (``DeadKernelError`` in the cell where it went), the later check cells
  run nothing and get a ``NotRun`` error (without any output nbgrader would give full marks).

The error names are in :mod:`classroom.grading.results`, which reads them back for the class CSV;
the run's wall time goes into the notebook's metadata (``grading.seconds``). Not handled: manually
graded cells (nbgrader leaves them to formgrader) and fairness between notebooks graded at once.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

import nbformat
from nbclient.exceptions import DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbgrader.preprocessors import Execute
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool, Enum, Integer

from classroom.grading import guard
from classroom.grading.results import (
    KERNEL_STOPPED,
    NOT_RUN,
    TIMEOUT,
    TRUNCATED,
    UNVERIFIED,
    ResourceLimits,
)
from classroom.grading.sandboxed_kernel import SandboxedKernelManager

__all__ = ["GuardedExecute"]

GUARD_TIMEOUT_S = 20  # one guard request; a dead kernel is noticed within a second


class GuardedExecute(Execute):
    """nbgrader's ``Execute`` plus the sandbox, the guard and the limits (module docstring)."""

    output_cap = Integer(ResourceLimits.output_bytes_per_cell,
                         help="Bytes of output kept per cell").tag(config=True)
    notebook_timeout = Integer(ResourceLimits.notebook_timeout_s,
                               help="Seconds one notebook may run, kernel start included"
                               ).tag(config=True)
    # A cell that floods its output may still be sending when its reply comes: nbgrader's
    # default (raise) would fail the whole submission; the cap and the timeouts bound it.
    raise_on_iopub_timeout = Bool(False).tag(config=True)
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate").tag(config=True)

    def __init__(self, **kw: Any) -> None:
        kw.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(**kw)
        self._start_notebook(nbformat.v4.new_notebook())

    def _start_notebook(self, nb: nbformat.NotebookNode) -> None:
        self._checks = {i for i, c in enumerate(nb.cells)
                        if c.cell_type == "code" and is_grade(c) and not is_solution(c)}
        self._sizes: dict[int, int] = {}
        self._truncated: set[int] = set()
        self._timed_out: set[int] = set()
        self._current = -1
        self._reply: dict[str, Any] = {}
        self._stopped = ""  # why the kernel is gone, once it is
        self._over = threading.Event()

    def preprocess(self, nb, resources=None, km=None):  # type: ignore[override]
        self._start_notebook(nb)
        timer = threading.Timer(self.notebook_timeout, self._stop_at_deadline)
        timer.daemon = True
        start = time.monotonic()
        timer.start()
        try:
            return super().preprocess(nb, resources, km)
        finally:
            timer.cancel()
            nb.metadata["grading"] = {"seconds": round(time.monotonic() - start, 1)}

    @property
    def _over_deadline(self) -> str:
        return f"the notebook ran over {self.notebook_timeout} s and was stopped"

    def _stop_at_deadline(self) -> None:
        self._over.set()
        if isinstance(self.km, SandboxedKernelManager):
            self.km.kill_sandbox()

    async def async_execute_cell(self, cell, cell_index, execution_count=None,  # type: ignore[override]
                                 store_history=True):
        if cell.cell_type != "code":
            return cell
        if self._over.is_set() and not self._stopped:
            self._stopped = self._over_deadline
        check = cell_index in self._checks
        if self._stopped:
            if check:
                _error_first(cell, NOT_RUN, f"not run: {self._stopped}")
            return cell
        self._current, self._reply = cell_index, {}
        token = guard.new_token()
        restored = False
        if check:
            restored = await self._ask(guard.restore_expression(token)) == \
                guard.restored_answer(token)
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count,
                                                    store_history)
        except DeadKernelError:
            self._stopped = self._stopped or (
                self._over_deadline if self._over.is_set() else "the kernel died or was killed")
            _error_first(cell, KERNEL_STOPPED, f"{self._stopped}; later cells did not run")
        if cell_index in self._timed_out:
            _error_first(cell, TIMEOUT, f"the cell ran over {self.timeout} s")
        if check:
            verdicts = (await self._ask(guard.verdicts_expression(token))
                        if restored and not self._stopped else None)
            why = _why_not_verified(restored, verdicts)
            if why or self._reply.get("status") != "ok":
                _error_first(cell, UNVERIFIED, why or "the kernel did not report success",
                             unless_failed=True)
        return cell

    execute_cell = run_sync(async_execute_cell)

    def on_cell_executed(self, **kwargs: Any) -> None:
        super().on_cell_executed(**kwargs)
        self._reply = (kwargs.get("execute_reply") or {}).get("content", {})

    async def _ask(self, expression: str) -> str | None:
        """Evaluate one user expression in the kernel: its text/plain, or None."""
        return None if self.kc is None else await _user_expression(self.kc, expression)

    def output(self, outs, msg, display_id, cell_index):  # type: ignore[override]
        size = len(json.dumps(msg.get("content", {}), default=str))
        before = self._sizes.get(cell_index, 0)
        self._sizes[cell_index] = before + size
        if before + size <= self.output_cap or msg["msg_type"] == "error":
            return super().output(outs, msg, display_id, cell_index)
        room = self.output_cap - before
        if msg["msg_type"] == "stream" and room > 0:  # keep the part that fits
            super().output(outs, {**msg, "content": {**msg["content"],
                                                     "text": msg["content"]["text"][:room]}},
                           display_id, cell_index)
        if cell_index not in self._truncated:
            self._truncated.add(cell_index)
            outs.append(nbformat.v4.new_output(
                "stream", name="stderr", text=f"\n{TRUNCATED} {self.output_cap} bytes\n"))
        return None

    async def _async_handle_timeout(self, timeout, cell=None):  # type: ignore[override]
        if self._current in self._timed_out or self._over.is_set():
            # Interrupted once and still running, or out of time: the kernel goes.
            self._stopped = (self._over_deadline if self._over.is_set()
                             else "the kernel ignored the interrupt and was killed")
            await ensure_async(self.km.shutdown_kernel(now=True))
            raise DeadKernelError(self._stopped)
        self._timed_out.add(self._current)
        await ensure_async(self.km.interrupt_kernel())
        return None  # wait for the interrupted cell's own reply (KeyboardInterrupt)


def _error_first(cell: nbformat.NotebookNode, ename: str, evalue: str,
                 unless_failed: bool = False) -> None:
    """Put an error output first in ``cell``, which makes nbgrader score it 0; with
    ``unless_failed``, only when nbgrader would not already (its first error, stderr or result
    output is not an error or stderr)."""
    if unless_failed:
        first = next((o for o in cell.outputs if o.output_type in ("error", "execute_result")
                      or (o.output_type == "stream" and o.get("name") == "stderr")), None)
        if first is not None and first.output_type != "execute_result":
            return
    cell.outputs.insert(0, nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                                  traceback=[f"{ename}: {evalue}"]))


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
