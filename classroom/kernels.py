"""Chapter kernels forked from one pre-imported process (a zygote), so the pages of the heavy
libraries every kernel imports are shared copy-on-write between them.

Seven chapter kernels open at once each imported torch, transformers, LangChain, LangGraph,
smolagents and matplotlib into private memory: 308 MB of anonymous private pages per kernel
(measured in one process), the same in all seven. Here a Jupyter kernel provisioner (jupyter_client's extension point, entry
point ``course-forking`` in the group ``jupyter_client.kernel_provisioners``, chosen by the
kernelspec ``lab/kernels/python3/kernel.json`` that ``make lab`` puts on ``JUPYTER_PATH``) asks a
zygote for each kernel:

* the zygote (:func:`serve`, this file run by the kernel's own Python) imports the third-party
  libraries in :data:`PRELOAD` (never ``course`` or ``widgets``, which a student may edit, and no
  torch operation that would start a thread pool), calls ``gc.freeze()``, and listens on a Unix
  socket in a private (0700) runtime folder. There is one zygote per Python executable and
  :func:`fingerprint` (the environment variables that change what an import does, and the
  installed distributions): a kernel with another environment gets another zygote;
* per request it forks a child that takes the request's environment, working folder and stdio
  (passed with ``socket.send_fds``), starts a new session (so interrupts reach its process group),
  and runs ``ipykernel_launcher`` on the connection file, as the ordinary kernel command does;
* it reaps its children and sends each one's exit status to the process that asked for it; when
  that process (the Jupyter server, nbclient) dies, its connection closes and the zygote kills the
  child's process group; it exits once it has had no live child for ``COURSE_FORK_IDLE_S``
  seconds (default 600).

:class:`ForkingProvisioner` (a ``LocalProvisioner``) launches through the zygote, starting it when
there is none (waiting at most ``START_TIMEOUT_S``); poll, signal, kill and wait act on the
forked child. If anything about the zygote fails, it launches the ordinary way and says why on
stderr, once per reason. ``COURSE_FORK_KERNELS=0`` turns forking off (``1``, the default, on);
another value is an error naming the setting.

A forked kernel is made to look like an ordinary one (tested against it): the same ``sys.path``
and ``sys.argv[0]``, its own session, default signal handlers, ipykernel's parent handle from
``JPY_PARENT_PID``, the inline plot backend, and Python's and numpy's random generators seeded
again (they would otherwise repeat the zygote's in every kernel).

What it does not handle: other systems than Linux (the ordinary launch is used), kernels other
than ``python -m ipykernel_launcher`` (ordinary launch; the sandboxed grader's command, behind
its sandbox prefix, is one), a ``stdout=PIPE`` launch (ordinary launch), and kernels whose zygote
was killed: they run on (unless re-parented to PID 1, where ipykernel's own parent check ends
them) and the provisioner still polls and signals them (by pidfd), but they are no longer killed
when the process that started them dies, and their exit status reads as -1. A module a student
changed is imported fresh in each kernel (``course`` and ``widgets`` are never in the zygote),
but an upgrade of a preloaded library only reaches kernels of a new zygote (the fingerprint
changes when a distribution is reinstalled).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = [
    "FORK_SETTING", "PRELOAD", "ForkedKernel", "ForkingProvisioner", "ZygoteError",
    "check_fork_settings", "fingerprint", "fork_kernel", "fork_setting", "runtime_dir", "serve",
]

FORK_SETTING = "COURSE_FORK_KERNELS"
IDLE_SETTING = "COURSE_FORK_IDLE_S"
RUNTIME_SETTING = "COURSE_FORK_RUNTIME_DIR"
DEFAULT_IDLE_S = 600.0
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path, 108 with its NUL, on Linux)
START_TIMEOUT_S = 120.0  # the zygote imports torch and transformers: 5-40 s on a loaded machine
REPLY_TIMEOUT_S = 30.0
LAUNCHER = ["-m", "ipykernel_launcher"]

# The libraries every chapter kernel imports (third-party only; each is tried, a failure is logged).
PRELOAD = (
    "numpy", "torch", "safetensors.torch", "tokenizers", "huggingface_hub",
    "transformers", "transformers.modeling_utils", "transformers.generation",
    "transformers.models.llama.modeling_llama", "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
    "langchain_core.messages", "langchain_core.tools", "langchain_core.language_models",
    "langchain_core.messages.utils", "langchain_huggingface",
    "langgraph.graph", "langgraph.prebuilt", "langgraph.checkpoint.memory",
    "langgraph.checkpoint.sqlite",
    "smolagents", "matplotlib", "matplotlib.pyplot",
    "ipywidgets", "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel", "pygments",
)

# Environment variables that change what an import does (read at import or at interpreter start).
FINGERPRINT_PREFIXES = (
    "HF_", "TRANSFORMERS_", "TORCH", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDA_", "COURSE_",
    "PYTHON", "LD_", "TOKENIZERS_", "MPL", "XDG_", "LC_", "PYDEVD_", "IPYTHON",
)
FINGERPRINT_NAMES = ("HOME", "LANG", "TZ", "SAFETENSORS_FAST_GPU")
NOT_FINGERPRINTED = (FORK_SETTING, IDLE_SETTING, RUNTIME_SETTING, "COURSE_TORCH_THREADS")


class ZygoteError(RuntimeError):
    """The zygote could not give a kernel (the provisioner then launches the ordinary way)."""


# --------------------------------------------------------------------------- settings, paths

def fork_setting(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Whether kernels are forked: ``COURSE_FORK_KERNELS`` = 1 (default) or 0."""
    raw = (os.environ if env is None else env).get(FORK_SETTING, "1").strip()
    if raw in ("1", ""):
        return True
    if raw == "0":
        return False
    raise ValueError(f"{FORK_SETTING}={raw!r} is not a setting: give 1 (kernels forked from one "
                     f"pre-imported process, the default) or 0 (ordinary kernels), or unset it.")


def idle_seconds(env: dict[str, str] | os._Environ[str]) -> float:
    """``COURSE_FORK_IDLE_S``: how long a zygote without kernels waits before it exits."""
    raw = env.get(IDLE_SETTING, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise ValueError(f"{IDLE_SETTING}={raw!r}: give seconds between 0 and 86400 "
                         f"(default {DEFAULT_IDLE_S:.0f}), or unset it.")
    return value


def runtime_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """The private folder of the zygotes' sockets, locks and logs (made 0700; refused when it is
    another user's or others can enter it, or when ``COURSE_FORK_RUNTIME_DIR`` names a file or a
    path too long for a socket's folder)."""
    env = os.environ if env is None else env
    if env.get(RUNTIME_SETTING):
        from course.settings import folder_setting_problem  # not at import: see the module text

        problem = folder_setting_problem(RUNTIME_SETTING, env[RUNTIME_SETTING],
                                         "~/.course-kernels (a folder only you can enter)")
        path = Path(env[RUNTIME_SETTING]).expanduser()
        socket_bytes = len(os.fsencode(str(path.absolute()))) + len("/zygote-0123456789abcdef.sock")
        if not problem and socket_bytes > SOCKET_PATH_MAX:
            problem = (f"{RUNTIME_SETTING}={str(path)[:60]!r} is too long for the zygote's "
                       f"socket in it ({socket_bytes} bytes, the system allows "
                       f"{SOCKET_PATH_MAX}). Fix: set {RUNTIME_SETTING} to a shorter folder "
                       "such as ~/.course-kernels, or unset it.")
        if problem:
            raise ZygoteError(problem)
    elif env.get("XDG_RUNTIME_DIR") and Path(env["XDG_RUNTIME_DIR"]).is_dir():
        path = Path(env["XDG_RUNTIME_DIR"]) / "course-kernels"
    else:
        path = Path("/tmp") / f"course-kernels-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not path.is_dir() or path.is_symlink():
        raise ZygoteError(f"{path} is not a private folder of this user (mode "
                          f"{info.st_mode & 0o777:o}, owner {info.st_uid}): remove it, or set "
                          f"{RUNTIME_SETTING} to a folder only you can enter")
    return path


def check_fork_settings(env: dict[str, str] | os._Environ[str]) -> None:
    """Refuse, with a ``ValueError`` naming the setting and the fix, a ``COURSE_FORK_IDLE_S``
    or a ``COURSE_FORK_RUNTIME_DIR`` that cannot work. Checked before a kernel starts: a wrong
    setting is an error, never silently replaced by the ordinary launch."""
    idle_seconds(env)
    if env.get(RUNTIME_SETTING):
        try:
            runtime_dir(env)
        except (ZygoteError, OSError) as exc:
            raise ValueError(f"{RUNTIME_SETTING}: {exc}" if RUNTIME_SETTING not in str(exc)
                             else str(exc)) from None


def _site_dirs(python: str) -> list[Path]:
    prefix = Path(python).absolute().parent.parent
    return sorted(prefix.glob("lib/python3*/site-packages"))


def fingerprint(python: str, env: dict[str, str] | os._Environ[str]) -> str:
    """16 hex digits naming one zygote: the Python executable, this file (the zygote's code),
    the environment variables that change what an import does (:data:`FINGERPRINT_PREFIXES`),
    and the installed distributions (their metadata folders' names and times in the
    interpreter's site-packages)."""
    digest = hashlib.sha256()
    real = os.path.realpath(python)
    digest.update(f"{os.path.abspath(python)}\0{real}\0{os.stat(real).st_mtime_ns}\0".encode())
    digest.update(f"{os.stat(__file__).st_mtime_ns}\0".encode())  # the zygote's own code
    for name in sorted(env):
        if name in NOT_FINGERPRINTED:
            continue
        if name.startswith(FINGERPRINT_PREFIXES) or name in FINGERPRINT_NAMES:
            digest.update(f"{name}={env[name]}\0".encode())
    for site in _site_dirs(python):
        with os.scandir(site) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.endswith((".dist-info", ".egg-info", ".pth", ".egg-link")):
                    digest.update(f"{entry.name}:{entry.stat().st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- wire format

def _send_message(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    frame = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [frame[:4]], fds)
        sock.sendall(frame[4:])
    else:
        sock.sendall(frame)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = b""
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed in a message")
        chunks += chunk
    return chunks


def _recv_message(sock: socket.socket, with_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    fds: list[int] = []
    if with_fds:
        head, fds, _flags, _addr = socket.recv_fds(sock, 4, with_fds)
        if not head:
            raise ConnectionError("connection closed before a message")
        head += _recv_exact(sock, 4 - len(head))
    else:
        head = _recv_exact(sock, 4)
    (length,) = struct.unpack("!I", head)
    if length > 4 << 20:
        raise ConnectionError(f"a message of {length} bytes")
    return json.loads(_recv_exact(sock, length)), fds


# --------------------------------------------------------------------------- the zygote

def _log(text: str) -> None:
    print(f"[course zygote {os.getpid()} {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr,
          flush=True)


def _preload() -> list[str]:
    """Import :data:`PRELOAD`; the modules that failed, with why."""
    import importlib

    # ipykernel sets this when it starts, after matplotlib would have read it at import
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    failed = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing optional library: the kernel imports it itself
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return failed


def _become_kernel(request: dict[str, Any], fds: list[int], keep_closed: list[Any]) -> None:
    """In the forked child: take the request's stdio, environment and folder, run ipykernel."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for thing in keep_closed:
            with contextlib.suppress(OSError):
                os.close(thing) if isinstance(thing, int) else thing.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            if fd > 2:
                os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path.insert(0, os.getcwd())  # what `python -m` puts first (the zygote took it out)
        kernelapp = sys.modules.get("ipykernel.kernelapp")
        if kernelapp is not None:  # traits whose defaults ipykernel read from the zygote's env
            app = kernelapp.IPKernelApp
            for name, variable in (("parent_handle", "JPY_PARENT_PID"),
                                   ("interrupt", "JPY_INTERRUPT_EVENT")):
                value = int(os.environ.get(variable) or 0)
                getattr(app, name).default_value = value
                static = app.__dict__.get("_static_immutable_initial_values", {})
                if name in static:  # traitlets' cache of the default
                    static[name] = value
        import random

        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        import runpy

        sys.argv = ["ipykernel_launcher", *request["args"]]
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _refusal() -> str | None:
    """Preload the libraries; why this process cannot fork kernels, or None when it can."""
    for line in _preload():
        _log(f"not preloaded: {line}")
    mine = [name for name in ("course", "widgets") if name in sys.modules]
    if mine:
        return f"{', '.join(mine)} imported by a preloaded library"
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate())
        return f"Python threads after the imports ({names}); fork needs one"
    return None


def _listen(socket_path: Path) -> socket.socket:
    """A listening Unix socket at ``socket_path``, put there atomically: a client sees a socket
    that accepts, or none."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = socket_path.with_name(f"{socket_path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    listener.bind(str(temporary))
    listener.listen(16)
    os.rename(temporary, socket_path)
    return listener


class _Children:
    """The zygote's kernels: each forked child and the connection of the process that asked for
    it (None once that process is gone), watched by one selector with the listener and the
    signal wake-up pipe."""

    def __init__(self, listener: socket.socket, wake_r: int, wake_w: int) -> None:
        import selectors

        self.listener, self.wake_r, self.wake_w = listener, wake_r, wake_w
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, "listen")
        self.selector.register(wake_r, selectors.EVENT_READ, "wake")
        self.children: dict[int, socket.socket | None] = {}
        self.last_busy = time.monotonic()

    def reap(self) -> None:
        """Wait for every child that ended; tell each one's requester its exit status."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            self.last_busy = time.monotonic()
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.setblocking(True)
                    _send_message(conn, {"exit": os.waitstatus_to_exitcode(status)})
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(conn)
                conn.close()

    def accept(self) -> None:
        """One request: fork a kernel and answer with its pid (or with why not)."""
        import selectors

        conn, _ = self.listener.accept()
        conn.settimeout(10)
        fds: list[int] = []
        try:
            request, fds = _recv_message(conn, with_fds=3)
            if len(fds) != 3:
                raise ConnectionError(f"{len(fds)} file descriptors, not 3 (stdin, out, err)")
            sys.stdout.flush()
            sys.stderr.flush()
            others = [c for c in self.children.values() if c is not None]
            pid = os.fork()
            if pid == 0:
                _become_kernel(request, fds, [self.listener, self.selector, conn, *others,
                                              self.wake_r, self.wake_w])
            self.children[pid] = conn
            self.last_busy = time.monotonic()
            _log(f"forked kernel {pid} in {request['cwd']}")
            _send_message(conn, {"pid": pid, "zygote": os.getpid()})
            conn.setblocking(False)
            self.selector.register(conn, selectors.EVENT_READ, pid)
        except (OSError, ValueError, KeyError, ConnectionError) as exc:
            _log(f"a request failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                _send_message(conn, {"error": f"{type(exc).__name__}: {exc}"})
            conn.close()
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def requester_gone(self, conn: socket.socket, pid: int) -> None:
        """The requester's connection is readable: when it closed, kill its kernel."""
        try:
            data = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:  # nothing is expected from the requester: ignore
            return
        self.selector.unregister(conn)
        conn.close()
        if pid in self.children:
            self.children[pid] = None
            _log(f"the process that asked for kernel {pid} is gone: killing it")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def wait(self, timeout: float) -> None:
        """Handle what is ready within ``timeout`` seconds, then reap."""
        for key, _ in self.selector.select(timeout=timeout):
            if key.data == "listen":
                self.accept()
            elif key.data == "wake":
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            else:
                self.requester_gone(key.fileobj, key.data)  # type: ignore[arg-type]
        self.reap()


def _socket_replaced(socket_path: Path, inode: int) -> bool:
    """Someone removed or replaced our socket: no new client can reach us."""
    try:
        return socket_path.stat().st_ino != inode
    except FileNotFoundError:
        return True


def serve(socket_path: Path, idle_s: float) -> int:
    """The zygote: preload, then fork a kernel per request until idle for ``idle_s`` seconds."""
    import gc

    started = time.perf_counter()
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # nothing is imported from the zygote's folder; a kernel puts its own
    refusal = _refusal()
    if refusal:
        _log(f"refusing to serve: {refusal}")
        return 2
    # OpenBLAS (numpy) starts its pool at import; it stops it before a fork (pthread_atfork)
    # and starts it again in the child on first use.
    native = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    gc.collect()
    gc.freeze()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    listener = _listen(socket_path)
    inode = socket_path.stat().st_ino
    _log(f"serving {socket_path.name} after {time.perf_counter() - started:.1f} s of imports "
         f"({len(sys.modules)} modules, {native} native threads)")
    kernels = _Children(listener, wake_r, wake_w)
    try:
        while not stop:
            idle_for = time.monotonic() - kernels.last_busy
            if not kernels.children and idle_for >= idle_s:
                _log(f"no kernel for {idle_s:.0f} s: exiting")
                break
            kernels.wait(max(0.05, min(5.0, idle_s - idle_for)))
            if not kernels.children and _socket_replaced(socket_path, inode):
                break
    finally:
        with contextlib.suppress(FileNotFoundError):
            if socket_path.stat().st_ino == inode:
                socket_path.unlink()
        listener.close()
    return 0


def _daemon_main(argv: list[str]) -> int:
    """``python kernels.py serve SOCKET IDLE_S``: detach (double fork), then :func:`serve`."""
    if len(argv) != 3 or argv[0] != "serve":
        print("usage: kernels.py serve SOCKET IDLE_S", file=sys.stderr)
        return 2
    if os.fork() > 0:
        os._exit(0)  # the starter waits for this one; the zygote is not its child
    os.setsid()
    return serve(Path(argv[1]), float(argv[2]))


# --------------------------------------------------------------------------- the client side

BOOT = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__zygote__')"


@contextlib.contextmanager
def _locked(path: Path, timeout: float):
    with open(path, "a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ZygoteError(f"{path} stayed locked for {timeout:.0f} s") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def _log_tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start_zygote(python: str, env: dict[str, str], socket_path: Path, log_path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()  # stale: nothing accepted on it
    with open(log_path, "ab") as log:
        starter = subprocess.Popen(
            [python, "-c", BOOT, str(Path(__file__).resolve()), "serve", str(socket_path),
             str(idle_seconds(env))],
            env=env, cwd=str(socket_path.parent), stdin=subprocess.DEVNULL, stdout=log,
            stderr=log, start_new_session=True)
    try:
        code = starter.wait(timeout=30)
    except subprocess.TimeoutExpired:
        starter.kill()
        starter.wait()
        raise ZygoteError("the zygote's starter did not detach within 30 s") from None
    if code:
        raise ZygoteError(f"the zygote's starter exited with {code}: {_log_tail(log_path)}")
    size = log_path.stat().st_size
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if socket_path.exists():
            return
        text = log_path.read_bytes()[size:].decode(errors="replace")
        if "refusing to serve" in text or "Traceback" in text:
            raise ZygoteError(f"the zygote did not start (log {log_path}): {text.strip()[-600:]}")
        time.sleep(0.1)
    raise ZygoteError(f"no zygote socket after {START_TIMEOUT_S:.0f} s (log {log_path})")


def zygote_socket(python: str, env: dict[str, str]) -> Path:
    """The socket of the zygote for ``python`` and ``env`` (it may not be running)."""
    return runtime_dir(env) / f"zygote-{fingerprint(python, env)}.sock"


def _zygote_connection(python: str, env: dict[str, str]) -> socket.socket:
    socket_path = zygote_socket(python, env)
    try:
        return _connect(socket_path)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    with _locked(socket_path.with_suffix(".lock"), START_TIMEOUT_S + 30):
        try:
            return _connect(socket_path)
        except (FileNotFoundError, ConnectionRefusedError):
            _start_zygote(python, env, socket_path, socket_path.with_suffix(".log"))
        return _connect(socket_path)


def _stdio_fd(value: Any, default: int, opened: list[int]) -> int:
    if value is None:
        return default
    if value == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    if isinstance(value, int) and value >= 0:
        return value
    if hasattr(value, "fileno"):
        return value.fileno()
    raise ZygoteError(f"stdio {value!r} (a pipe to the kernel): the ordinary launch handles it")


class ForkedKernel:
    """A kernel forked by the zygote, with the part of ``subprocess.Popen``'s interface that
    ``LocalProvisioner`` uses (pid, poll, wait, send_signal, terminate, kill)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, conn: socket.socket, zygote: int) -> None:
        self.pid, self.zygote = pid, zygote
        self.returncode: int | None = None
        self._conn: socket.socket | None = conn
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(pid)
        conn.setblocking(False)

    def _read_status(self) -> None:
        if self._conn is None:
            return
        try:
            ready, _, _ = select.select([self._conn], [], [], 0)
            if not ready:
                return
            self._conn.setblocking(True)
            self._conn.settimeout(5)
            message, _ = _recv_message(self._conn)
            self.returncode = int(message["exit"])
        except (ConnectionError, OSError, ValueError, KeyError):
            pass  # the zygote is gone: the pidfd says whether the kernel is
        self._close_conn()

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _exited_without_zygote(self) -> bool:
        if self._pidfd is not None:
            ready, _, _ = select.select([self._pidfd], [], [], 0)
            return bool(ready)
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        return False

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_status()
            if self.returncode is None and self._conn is None and self._exited_without_zygote():
                self.returncode = -1
        if self.returncode is not None and self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout or 0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.poll() is not None:
            return
        if self._pidfd is not None:
            signal.pidfd_send_signal(self._pidfd, signum)
        else:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        self._close_conn()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def fork_kernel(cmd: list[str], env: dict[str, str], cwd: str,
                stdio: tuple[Any, Any, Any] = (None, None, None)) -> ForkedKernel:
    """A kernel running ``cmd`` (``python -m ipykernel_launcher ...``) forked by the zygote for
    ``cmd[0]`` and ``env`` (started when there is none); raises :class:`ZygoteError`."""
    if not sys.platform.startswith("linux"):
        raise ZygoteError(f"forking kernels is for Linux, not {sys.platform}")
    if len(cmd) < 3 or cmd[1:3] != LAUNCHER:
        raise ZygoteError(f"the kernel command {cmd[:3]} is not `python -m ipykernel_launcher`")
    try:
        conn = _zygote_connection(cmd[0], env)
    except OSError as exc:
        raise ZygoteError(f"no zygote: {type(exc).__name__}: {exc}") from exc
    opened: list[int] = []
    try:
        # no stdin given: the null device (never the Jupyter server's own stdin)
        stdin = subprocess.DEVNULL if stdio[0] is None else stdio[0]
        fds = [_stdio_fd(stdin, 0, opened), _stdio_fd(stdio[1], 1, opened),
               _stdio_fd(stdio[2], 2, opened)]
        conn.settimeout(REPLY_TIMEOUT_S)
        env = {**env, "JPY_PARENT_PID": str(os.getpid())}  # as jupyter_client's launch_kernel
        _send_message(conn, {"args": cmd[3:], "env": env, "cwd": os.path.abspath(cwd)}, fds)
        reply, _ = _recv_message(conn)
    except (OSError, ConnectionError, ValueError) as exc:
        conn.close()
        raise ZygoteError(f"the zygote did not answer: {type(exc).__name__}: {exc}") from exc
    except ZygoteError:
        conn.close()
        raise
    finally:
        for fd in opened:
            os.close(fd)
    if "pid" not in reply:
        conn.close()
        raise ZygoteError(f"the zygote refused: {reply.get('error', reply)}")
    return ForkedKernel(int(reply["pid"]), conn, int(reply["zygote"]))


# --------------------------------------------------------------------------- the provisioner

try:
    from jupyter_client.provisioning import LocalProvisioner
except ImportError:  # the zygote itself does not need it
    LocalProvisioner = object  # type: ignore[assignment,misc]

_SAID: set[str] = set()


def _say_once(text: str) -> None:
    if text not in _SAID:
        _SAID.add(text)
        print(f"[course kernels] {text}", file=sys.stderr, flush=True)


class ForkingProvisioner(LocalProvisioner):  # type: ignore[misc,valid-type]
    """``LocalProvisioner`` whose kernels are forked from the zygote (see the module's text);
    the ordinary launch when ``COURSE_FORK_KERNELS=0`` or when the zygote fails."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        import asyncio

        env = dict(kwargs.get("env") or os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        if fork_setting(env):  # a bad value raises, naming the setting
            check_fork_settings(env)  # so do the other two settings
            try:
                process = await asyncio.to_thread(
                    fork_kernel, list(cmd), env, cwd,
                    (kwargs.get("stdin"), kwargs.get("stdout"), kwargs.get("stderr")))
            except (ZygoteError, ValueError) as exc:
                _say_once(f"ordinary kernel launch instead of a forked one: {exc}")
            else:
                # LocalProvisioner declares a Popen here; a ForkedKernel has the part of Popen's
                # interface it uses (see the class), which the type checker cannot see
                self.process = process  # type: ignore[assignment]
                self.pid = self.pgid = process.pid
                self.cwd = cwd
                return self.connection_info
        return await super().launch_kernel(cmd, **kwargs)

    async def cleanup(self, restart: bool = False) -> None:
        if isinstance(self.process, ForkedKernel) and self.process.poll() is not None:
            self.process.close()
        await super().cleanup(restart=restart)


if __name__ == "__zygote__":
    sys.exit(_daemon_main(sys.argv[sys.argv.index("serve"):]))
