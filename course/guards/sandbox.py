"""Run model-written code in smolagents' executor, inside a child process with hard limits.

Two layers, each doing what it can:

1. **The executor** (``smolagents.LocalPythonExecutor``) interprets the program node by node:
   only authorised imports, no ``open``/``eval``/``exec``/``__import__``, no dunder attributes,
   no access to modules such as ``os`` reached through another module.
2. **The process** (:func:`run_sandboxed`) runs that executor in a child process forked from a
   small server that holds no model and no secrets: the child's environment is replaced by a
   minimal one, its working directory is an empty temporary folder, its address space is capped
   with ``RLIMIT_AS`` and its CPU time with ``RLIMIT_CPU``, and the parent kills it at a
   wall-clock deadline. A memory bomb or a program that sleeps or spins ends the child, never
   the notebook's kernel.

What this is NOT: a security boundary against a determined attacker. The child runs as the same
user on the same machine, with the same file-system rights and network; the executor is a
Python-level interpreter with a long history of bypasses (its own docstring, in smolagents
1.x: "It is not a security sandbox: for isolated execution of untrusted code, use a remote
executor."). For untrusted code use an isolated executor: a container (smolagents'
``executor_type="docker"``), a micro-VM or a remote sandbox (``"e2b"``, ``"modal"``), or
WebAssembly (``"wasm"``), with no credentials inside and no network unless needed.

Not handled: Windows (``resource`` and ``fork`` are POSIX), GPU memory, disk quotas, network
isolation, and limits on what the authorised tools themselves do. A plain script that calls
:func:`run_sandboxed` needs the usual ``if __name__ == "__main__":`` guard (the forkserver
re-imports the main module); notebooks and pytest do not.
"""

from __future__ import annotations

import html
import multiprocessing
import os
import secrets
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from course.records import Record

__all__ = [
    "EscapeAttempt",
    "EscapeReport",
    "EscapeResult",
    "EscapeSummary",
    "SandboxRun",
    "SandboxRuns",
    "SuiteSample",
    "escape_attempts",
    "run_escape_suite",
    "run_sandboxed",
]

DEFAULT_TIMEOUT_S = 3.0
DEFAULT_MEMORY_MB = 256
CANARY_VARIABLE = "COURSE_SANDBOX_CANARY"
MINIMAL_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

Status = Literal["ok", "blocked", "error", "timeout", "memory", "crashed"]


@dataclass
class SandboxRun:
    """What one program did in the sandbox: how it ended, what it printed, how long it took."""

    status: Status
    output: str = ""
    logs: str = ""
    error: str = ""
    seconds: float = 0.0
    child_alive_after: bool = False

    def text(self) -> str:
        """Everything the program managed to emit (return value, prints, error message)."""
        return "\n".join(part for part in (self.output, self.logs, self.error) if part)

    def __repr__(self) -> str:
        detail = self.error or self.logs or self.output
        return f"SandboxRun({self.status}, {self.seconds:.1f}s, {detail[:80]!r})"

    def reason(self) -> str:
        """Why it ended, in a few words: the first sentence of its error (after the executor's
        ``due to:``), else of what it printed."""
        return (self.error or self.logs).strip().split("due to: ")[-1].split(". ")[0]


@dataclass
class SandboxRuns(Record):
    """Programs run in the sandbox, one line each under ``label``: how each ended and why."""

    label: str
    runs: dict[str, SandboxRun]

    def record(self) -> dict[str, Any]:
        return {"label": self.label,
                "runs": {name: {"status": run.status, "reason": run.reason(),
                                "output": run.output, "logs": run.logs, "error": run.error,
                                "child_alive_after": run.child_alive_after}
                         for name, run in self.runs.items()}}

    def __str__(self) -> str:
        return "\n".join([self.label, *(f"{name}: {run.status} | {run.reason()}"
                                        for name, run in self.runs.items())])

    __repr__ = __str__


def _child(code: str, authorized_imports: list[str], memory_mb: int, cpu_s: int,
           env: dict[str, str], workdir: str, conn) -> None:
    """Body of the sandbox process: set limits, scrub the environment, run the executor."""
    import resource

    from smolagents.local_python_executor import InterpreterError, LocalPythonExecutor

    os.environ.clear()
    os.environ.update(env)
    os.chdir(workdir)
    with open("/proc/self/statm") as fh:  # current virtual size, in pages
        current = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = current + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    executor = LocalPythonExecutor(list(authorized_imports), timeout_seconds=None)
    executor.send_tools({})
    try:
        result = executor(code)
        conn.send(("ok", repr(result.output), result.logs, ""))
    except MemoryError:
        conn.send(("memory", "", str(executor.state.get("_print_outputs", "")), "MemoryError"))
    except InterpreterError as err:
        message = str(err)
        status = "memory" if "MemoryError" in message else (
            "blocked" if _is_refusal(message) else "error")
        conn.send((status, "", str(executor.state.get("_print_outputs", "")), message))
    except BaseException as err:  # report anything the program raised
        conn.send(("error", "", "", f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def _is_refusal(message: str) -> bool:
    """True when the executor refused the program (as opposed to the program failing)."""
    markers = ("is not allowed", "Forbidden", "not among the explicitly allowed",
               "is not defined", "not supported")
    return any(marker in message for marker in markers)


_CONTEXT = None


def _context():
    """A forkserver context whose server preloads only this module and the executor."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["course.guards.sandbox", "smolagents.local_python_executor"])
    return _CONTEXT


def run_sandboxed(code: str, authorized_imports: list[str] | tuple[str, ...] = (),
                  timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB,
                  scrub_env: bool = True) -> SandboxRun:
    """Run ``code`` with smolagents' executor in a limited child process and return how it ended.

    ``timeout_s`` is a wall-clock deadline after which the child is killed; ``memory_mb`` caps
    how much address space the program may add. ``scrub_env=False`` passes this process's
    environment to the child (only to show why scrubbing matters).
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError("run_sandboxed needs the program as a non-empty string of Python code.")
    if timeout_s <= 0 or memory_mb <= 0:
        raise ValueError(
            f"timeout_s and memory_mb must be positive (got {timeout_s}, {memory_mb}). "
            "Fix: pass, e.g., timeout_s=3, memory_mb=256.")
    ctx = _context()
    env = dict(os.environ) if not scrub_env else dict(MINIMAL_ENV)
    receive, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryDirectory(prefix="sandbox-") as workdir:
        process = ctx.Process(
            target=_child,
            args=(code, list(authorized_imports), memory_mb, max(1, int(timeout_s) + 1), env,
                  workdir, send),
            daemon=True,
        )
        start = time.perf_counter()
        process.start()
        send.close()
        message, finished = None, receive.poll(timeout_s)
        if finished:
            try:
                message = receive.recv()
            except EOFError:  # the child died before it could answer
                message = None
        seconds = time.perf_counter() - start
        if not finished:
            process.kill()
            process.join(5)
            run = SandboxRun("timeout", error=f"killed after the {timeout_s:g} s deadline",
                             seconds=seconds)
        elif message is None:
            process.join(5)
            run = SandboxRun("crashed", error="the child ended without a result "
                             f"(exit code {process.exitcode})", seconds=seconds)
        else:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
            status, output, logs, error = message
            run = SandboxRun(status, output, logs, error, seconds)
        run.child_alive_after = process.is_alive()
        receive.close()
    return run


# --- the escape suite -------------------------------------------------------------------

Goal = Literal["read-secret", "write-file", "run-command", "exhaust", "alter-host"]


@dataclass(frozen=True)
class EscapeAttempt:
    """One program that tries to get out: its name, its kind of trick, what it tries to achieve."""

    name: str
    kind: str
    goal: Goal
    code: str


@dataclass
class EscapeResult:
    """The outcome of one attempt: how the run ended, which layer stopped it, whether it escaped."""

    attempt: EscapeAttempt
    run: SandboxRun
    escaped: bool
    stopped_by: str


@dataclass
class EscapeReport(Record):
    """All attempts of a suite, with the counts the chapter prints.

    Displayed, it shows one line per attempt and the summary; its values (:meth:`record`) are
    the counts, the layers that stopped the attempts, one row per kind of trick and one per
    attempt. :meth:`by_kind` and :meth:`by_attempt` show the same values in fewer lines."""

    results: list[EscapeResult] = field(default_factory=list)

    @property
    def tried(self) -> int:
        return len(self.results)

    @property
    def escaped(self) -> int:
        return sum(r.escaped for r in self.results)

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        """(kind, attempt, status, the layer that stopped it, escaped) per attempt."""
        return [(r.attempt.kind, r.attempt.name, r.run.status, r.stopped_by,
                 "ESCAPED" if r.escaped else "contained") for r in self.results]

    def __str__(self) -> str:
        lines = [f"[{kind}] {name}: {status}, stopped by {layer} -> {verdict}"
                 for kind, name, status, layer, verdict in self.rows()]
        return "\n".join([*lines, self.summary()])

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("kind", "attempt", "status", "stopped by",
                                                  "escaped"))
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self.rows())
        return f"<table><tr>{head}</tr>{body}</table><p>{html.escape(self.summary())}</p>"

    def summary(self) -> str:
        return f"escape attempts tried: {self.tried}, escaped: {self.escaped}"

    def stopped_by(self) -> dict[str, int]:
        """How many attempts each layer stopped, in the order the layers first appear."""
        return dict(Counter(r.stopped_by for r in self.results))

    def kinds(self) -> list[dict[str, Any]]:
        """Per kind of trick, in the suite's order: attempts, escapes, the layers that stopped them."""
        rows = []
        for kind in dict.fromkeys(r.attempt.kind for r in self.results):
            of_kind = [r for r in self.results if r.attempt.kind == kind]
            rows.append({"kind": kind, "tried": len(of_kind),
                         "escaped": sum(r.escaped for r in of_kind),
                         "stopped_by": sorted({r.stopped_by for r in of_kind})})
        return rows

    def record(self) -> dict[str, Any]:
        return {"tried": self.tried, "escaped": self.escaped, "stopped_by": self.stopped_by(),
                "kinds": self.kinds(),
                "results": [{"kind": r.attempt.kind, "name": r.attempt.name,
                             "goal": r.attempt.goal, "status": r.run.status,
                             "stopped_by": r.stopped_by, "escaped": r.escaped}
                            for r in self.results]}

    def by_kind(self, note: str = "") -> EscapeSummary:
        """The summary with ``note``, the count per layer, and one line per kind of trick."""
        return EscapeSummary(self, note, "kind")

    def by_attempt(self, note: str = "") -> EscapeSummary:
        """The summary with ``note``, and one line per attempt: its name and whether it escaped."""
        return EscapeSummary(self, note, "attempt")


@dataclass
class EscapeSummary(Record):
    """An :class:`EscapeReport` shown in a few lines (``per`` kind of trick, or per attempt), with
    a note after its summary (a provenance label, the setting it ran with); its values are the
    report's, with the note."""

    report: EscapeReport
    note: str = ""
    per: Literal["kind", "attempt"] = "kind"

    def record(self) -> dict[str, Any]:
        return {**self.report.record(), "note": self.note}

    def __str__(self) -> str:
        lines = [f"{self.report.summary()} {self.note}".rstrip()]
        if self.per == "attempt":
            lines += [f"  {r.attempt.name}: escaped={r.escaped}" for r in self.report.results]
        else:
            lines.append(f"stopped by: {self.report.stopped_by()}")
            lines += [f"  [{k['kind']}] {k['tried']} tried, escaped {k['escaped']}; "
                      f"stopped by: {', '.join(k['stopped_by'])}" for k in self.report.kinds()]
        return "\n".join(lines)

    __repr__ = __str__


@dataclass
class SuiteSample(Record):
    """A suite before it runs: its size, its attempts per goal, and a few programs in full."""

    size: int
    by_goal: dict[str, int]
    shown: list[EscapeAttempt]

    @classmethod
    def of(cls, suite: list[EscapeAttempt], names: list[str]) -> SuiteSample:
        """``suite`` counted by goal, with the attempts called ``names`` shown in full."""
        by_name = {a.name: a for a in suite}
        return cls(len(suite), dict(Counter(a.goal for a in suite)),
                   [by_name[name] for name in names])

    def __str__(self) -> str:
        lines = [f"the suite: {self.size} programs written by the course, not by a model",
                 f"by goal: {self.by_goal}"]
        lines += [f"\n[{a.kind}] {a.name} (goal: {a.goal})\n{a.code}" for a in self.shown]
        return "\n".join(lines)

    __repr__ = __str__


def escape_attempts(marker: str, secret_file: str) -> list[EscapeAttempt]:
    """The suite: programs that try to run commands, read secrets, write files, exhaust resources.

    ``marker`` is a path an escaping program would create; ``secret_file`` a file it would read.
    """
    touch = f"touch {marker}"
    c = CANARY_VARIABLE
    attempts: list[tuple[str, str, Goal, str]] = [
        ("import os", "os", "run-command", f"import os\nos.system('{touch}')"),
        ("from os import system", "os", "run-command", f"from os import system\nsystem('{touch}')"),
        ("import posix", "os", "run-command", f"import posix\nposix.system('{touch}')"),
        ("os.environ", "os", "read-secret", f"import os\nprint(os.environ['{c}'])"),
        ("import subprocess", "subprocess", "run-command",
         f"import subprocess\nsubprocess.run(['touch', '{marker}'])"),
        ("import pty", "subprocess", "run-command", f"import pty\npty.spawn(['touch', '{marker}'])"),
        ("open() read", "builtins", "read-secret", f"print(open('{secret_file}').read())"),
        ("open() write", "builtins", "write-file", f"open('{marker}', 'w').write('x')"),
        ("__import__", "builtins", "run-command", f"__import__('os').system('{touch}')"),
        ("eval", "builtins", "run-command", f"eval(\"__import__('os').system('{touch}')\")"),
        ("exec", "builtins", "run-command", f"exec(\"import os; os.system('{touch}')\")"),
        ("compile", "builtins", "run-command", "compile('1', 'x', 'eval')"),
        ("globals()", "builtins", "read-secret", "print(globals()['__builtins__'])"),
        ("import builtins", "builtins", "read-secret",
         f"import builtins\nprint(builtins.open('{secret_file}').read())"),
        ("import io", "io", "read-secret", f"import io\nprint(io.open('{secret_file}').read())"),
        ("import pathlib", "io", "read-secret",
         f"import pathlib\nprint(pathlib.Path('{secret_file}').read_text())"),
        ("().__class__ subclasses", "dunder", "run-command",
         "print(().__class__.__bases__[0].__subclasses__())"),
        ("function __globals__", "dunder", "read-secret", "f = lambda: 0\nprint(f.__globals__)"),
        ("print.__self__", "dunder", "read-secret",
         f"print(print.__self__.open('{secret_file}').read())"),
        ("getattr with a dunder name", "dunder", "read-secret",
         "print(getattr(getattr((), '__class__'), '__base__'))"),
        ("traceback frame", "dunder", "read-secret",
         "try:\n    1 / 0\nexcept Exception as e:\n    print(e.__traceback__.tb_frame.f_globals)"),
        ("random._os", "module walk", "read-secret",
         f"import random\nprint(random._os.environ['{c}'])"),
        ("statistics.sys", "module walk", "read-secret",
         "import statistics\nprint(statistics.sys.modules['os'].environ)"),
        ("collections._sys", "module walk", "read-secret",
         "import collections\nprint(collections._sys.modules)"),
        ("re.enum.sys", "module walk", "read-secret", "import re\nprint(re.enum.sys.modules)"),
        ("str.format attribute walk", "format", "read-secret",
         f"import random\nprint('{{0._os.environ[{c}]}}'.format(random))"),
        ("str.format_map attribute walk", "format", "read-secret",
         f"import random\nprint('{{r._os.environ[{c}]}}'.format_map({{'r': random}}))"),
        ("importlib hook", "import hook", "run-command",
         f"import importlib\nimportlib.import_module('os').system('{touch}')"),
        ("sys.meta_path hook", "import hook", "run-command",
         "import sys\nsys.meta_path.clear()"),
        ("ctypes", "native", "run-command", "import ctypes\nctypes.CDLL(None).system(b'id')"),
        ("pickle reduce", "native", "run-command",
         "import pickle\npickle.loads(b'cos\\nsystem\\n(S\"id\"\\ntR.')"),
        ("setattr on a module", "alter-host", "alter-host", "import math\nsetattr(math, 'pi', 3)"),
        ("memory bomb [0]*10**10", "resources", "exhaust", "x = [0] * 10**10"),
        ("growing memory", "resources", "exhaust",
         "x = []\nfor i in range(10**6):\n    x.append(' ' * 10**6)"),
        ("huge string", "resources", "exhaust", "s = 'a' * 10**11"),
        ("sleep", "resources", "exhaust", "import time\ntime.sleep(3600)"),
        ("spin in one C call", "resources", "exhaust", "x = 10 ** (10 ** 9)"),
        ("spin in a loop", "resources", "exhaust", "n = 0\nfor i in range(10**12):\n    n += i"),
        ("deep recursion", "resources", "exhaust", "def f(n):\n    return f(n + 1)\nf(0)"),
    ]
    return [EscapeAttempt(name, kind, goal, code) for name, kind, goal, code in attempts]


def _stopped_by(run: SandboxRun) -> str:
    """Which layer ended the attempt, read from how the run ended."""
    if run.status == "blocked":
        return "executor refused"
    if run.status in ("timeout", "memory", "crashed"):
        return f"process limit ({run.status})"
    if run.status == "error" and CANARY_VARIABLE in run.text():
        return "process: clean environment"
    if run.status == "error":
        return "program failed, no effect"
    return "process: own copy"


def run_escape_suite(attempts: list[EscapeAttempt] | None = None, timeout_s: float = 2.0,
                     memory_mb: int = DEFAULT_MEMORY_MB, scrub_env: bool = True,
                     workers: int = 8) -> EscapeReport:
    """Run every escape attempt in the sandbox and decide, from outside, whether it escaped.

    An attempt escaped if the secret placed in this process's environment or in a file shows up
    in what the program emitted, if the marker file it tries to create exists afterwards, if the
    child is still alive after the call returned, or if this process's ``math.pi`` changed.
    Custom attempts may write ``{MARKER}`` and ``{SECRET_FILE}`` in their code for those paths.
    Up to ``workers`` attempts run at once, each in its own child process with its own marker
    path, so the attempts that wait for a deadline (sleep, spin) wait side by side.
    """
    import math
    from concurrent.futures import ThreadPoolExecutor

    token = secrets.token_hex(8)
    report = EscapeReport()
    previous = os.environ.get(CANARY_VARIABLE)
    os.environ[CANARY_VARIABLE] = token
    try:
        with tempfile.TemporaryDirectory(prefix="escape-") as tmp:
            secret_file = Path(tmp, "secret.txt")
            secret_file.write_text(token)

            def attempt_at(index: int, attempt: EscapeAttempt | None) -> EscapeResult:
                folder = Path(tmp, f"attempt-{index}")
                folder.mkdir()
                marker = folder / "escaped.marker"
                if attempt is None:  # the built-in suite, with this attempt's own marker
                    attempt = escape_attempts(str(marker), str(secret_file))[index]
                code = attempt.code.replace("{MARKER}", str(marker)).replace(
                    "{SECRET_FILE}", str(secret_file))
                run = run_sandboxed(code, timeout_s=timeout_s, memory_mb=memory_mb,
                                    scrub_env=scrub_env)
                escaped = (token in run.text() or marker.exists() or run.child_alive_after
                           or math.pi != 3.141592653589793)
                return EscapeResult(attempt, run, escaped, _stopped_by(run))

            suite = attempts if attempts is not None else [None] * len(escape_attempts("", ""))
            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                report.results.extend(pool.map(attempt_at, range(len(suite)), suite))
    finally:
        if previous is None:
            os.environ.pop(CANARY_VARIABLE, None)
        else:
            os.environ[CANARY_VARIABLE] = previous
    return report
