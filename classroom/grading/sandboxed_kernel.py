"""The kernel nbgrader's autograde runs a submission in: ``SandboxedKernelManager``.

A jupyter_client kernel manager that nbgrader's ``Execute`` step (the course's
:class:`~classroom.grading.execute.GuardedExecute`) uses in place of its own. Asked for a kernel in
the autograded folder, it copies that folder into a fresh private folder (``course-grading-*`` in
the temporary folder, owned by a uid of its own when the grader is root; a symlink or a special
file there refuses the start), with the hidden tests removed from the notebooks nbgrader put
there (the kernel sees its notebook as released, not the checks it is about to run), and launches the kernel in the bubblewrap sandbox
(:mod:`classroom.grading.bubblewrap`) with its resource limits and its whole environment
(``kernel_env``), stdin, stdout and stderr on ``/dev/null``, talking over Unix sockets in that
folder, interrupted by a message (a signal would reach ``bwrap``, not the kernel). Its cleanup,
which jupyter_client runs whenever a kernel is shut down, kills the sandbox's whole PID namespace,
deletes the folder and gives the uid back. So the kernel never sees, or changes, nbgrader's
course folder.

Configurable as ``c.SandboxedKernelManager.<name>``: ``sandbox`` (False: no bubblewrap, the kernel
runs with the grader's rights under the same limits, for a trusted class only) and the kernel's
limits of :class:`~classroom.grading.results.ResourceLimits`. Without a working ``bwrap`` a
sandboxed start raises ``SandboxUnavailable``. Not handled: restarting a kernel (the grader never
restarts one).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer

from classroom.grading.bubblewrap import (
    SandboxUnavailable,
    UidPool,
    bwrap_command,
    kernel_env,
    kernel_python,
    limits_command,
    private_copy,
    sandbox_problem,
    share_caches,
)
from classroom.grading.feedback import without_hidden_tests
from classroom.grading.results import ResourceLimits

__all__ = ["SandboxedKernelManager", "sandbox_problem_once"]

_UIDS = UidPool()
_LIMITS = ResourceLimits()


@functools.cache
def sandbox_problem_once() -> str | None:
    """``sandbox_problem()``, asked once per process; when the sandbox works, the model caches
    are made readable by the sandbox's uid first (``share_caches``)."""
    problem = sandbox_problem()
    if problem is None:
        share_caches()
    return problem


class SandboxedKernelManager(AsyncKernelManager):
    """Starts each kernel in a private copy of its folder, inside the sandbox (module docstring)."""

    sandbox = Bool(True, help="Run the kernel in the bubblewrap sandbox (False: a trusted "
                              "class only)").tag(config=True)
    memory_bytes = Integer(_LIMITS.memory_bytes, help="Address space of the kernel").tag(config=True)
    cpu_seconds = Integer(_LIMITS.cpu_seconds, help="CPU seconds of the kernel").tag(config=True)
    file_size_bytes = Integer(_LIMITS.file_size_bytes,
                              help="Largest file the kernel may write").tag(config=True)
    processes = Integer(_LIMITS.processes,
                        help="Processes and threads of the sandbox's uid").tag(config=True)

    _box: Path | None = None
    _uid: int | None = None
    _prefix: tuple[str, ...] = ()
    _env: dict[str, str] | None = None

    def limits(self) -> ResourceLimits:
        return ResourceLimits(memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds,
                              file_size_bytes=self.file_size_bytes, processes=self.processes)

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        if self.sandbox and (problem := sandbox_problem_once()):
            raise SandboxUnavailable(f"{problem} (or, for a trusted class only, set "
                                     "c.SandboxedKernelManager.sandbox = False)")
        folder = Path(kw.get("cwd") or os.getcwd())
        self._uid = _UIDS.take() if self.sandbox and os.geteuid() == 0 else None
        self._box = box = Path(tempfile.mkdtemp(prefix="course-grading-"))
        work = box / "work"
        try:
            private_copy(folder, work, owner=self._uid)
            _withhold_hidden_tests(work)
            if self._uid is not None:
                os.chown(box, self._uid, self._uid)
        except BaseException:
            self._release()
            raise
        self.transport, self.ip = "ipc", str(box / "kernel")
        self.connection_file = str(box / "kernel.json")
        self._prefix = tuple(bwrap_command(box, work, self._uid, self.limits()) if self.sandbox
                             else limits_command(self.limits()))
        self._env = kernel_env(work)
        if self.kernel_spec is not None:
            self.kernel_spec.interrupt_mode = "message"  # a signal would hit bwrap, not the kernel
        return await super()._async_pre_start_kernel(**{**kw, "cwd": str(work)})

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = list(super().format_kernel_cmd(extra_arguments))
        if command and command[0] == sys.executable:  # maybe through a symlink the
            command[0] = kernel_python()             # sandbox cannot see
        return [*self._prefix, *command]

    def write_connection_file(self, **kwargs: Any) -> None:
        super().write_connection_file(**kwargs)
        if self._uid is not None:  # the kernel runs as this uid and must read it
            os.chown(self.connection_file, self._uid, self._uid)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL,
                  env={**(self._env or {}), **{k: v for k, v in kw.get("env", {}).items()
                                       if k.startswith("JPY_SESSION")}})
        await super()._async_launch_kernel(kernel_cmd, **kw)

    def kill_sandbox(self) -> None:
        """Kill the kernel's sandbox, every process in it (``bwrap`` leads its own session;
        safe from any thread, and when nothing runs)."""
        process = getattr(self.provisioner, "process", None)
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        self.kill_sandbox()
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:
            self._release()

    cleanup_resources = _async_cleanup_resources  # AsyncKernelManager's public name

    def _release(self) -> None:
        """Delete the private folder and give the uid back (once)."""
        if self._box is not None:
            shutil.rmtree(self._box, ignore_errors=True)
            self._box = None
        if self._uid is not None:
            _UIDS.give_back(self._uid)
            self._uid = None


def _withhold_hidden_tests(folder: Path) -> None:
    """Rewrite every notebook under ``folder`` without its hidden tests (nbgrader wrote them
    there with the instructor's check cells); one that cannot be read is removed."""
    import nbformat

    for path in folder.rglob("*.ipynb"):
        try:
            nbformat.write(without_hidden_tests(nbformat.read(path, as_version=4)), path)
        except Exception:
            path.unlink()
