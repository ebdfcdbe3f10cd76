"""Arize Phoenix, a trace UI, on this machine: its own environment, loopback only, nothing sent out.

``python -m course phoenix`` (or ``make phoenix``) makes ``.venv-phoenix`` once (``python -m
venv``, then ``pip install arize-phoenix==``:data:`PHOENIX_VERSION`), starts ``phoenix serve``
from it bound to 127.0.0.1 with its database under the course cache, waits until it answers (at
most ``--timeout`` seconds), prints the UI's address and the OTLP endpoint, and stops it on
Ctrl-C. Phoenix lives in its own environment because its dependencies need older
python-dateutil and tenacity than the course's pins (constraints.txt): the course's kernel only
sends spans to it, over OTLP/HTTP, with the SDK's exporter (the ``[phoenix]`` extra).

:func:`start_phoenix` is the same start for a test or a benchmark (:class:`PhoenixServer`: its
addresses, its process, :meth:`~PhoenixServer.stop`); :func:`phoenix_version` asks whether a
Phoenix answers at an address (a lesson sends its spans there when one does; sending is
:func:`course.tools.spans.send_spans`).

Offline: Phoenix is started with its telemetry off (``PHOENIX_TELEMETRY_ENABLED=false``), no
public-internet requests of its own (``PHOENIX_ALLOW_EXTERNAL_RESOURCES=false``: no web fonts,
no analytics pixels, no sandbox download) and its assistant off (it would call an LLM
provider). Only the install needs the network, once.

Not handled: Phoenix's OTLP gRPC receiver listens on all interfaces whatever the host setting
(Phoenix 20.26 binds it to ``[::]``; the course sends over HTTP only, and this module moves it
off 4317 when that port is taken); authentication, TLS, a Postgres database, a Phoenix other
machines can reach; upgrading an environment made with another Phoenix version in place (pip
installs the pinned one over it); a venv on a machine without ``venv``/``ensurepip`` (Debian's
``python3-venv``); other ``PHOENIX_*`` settings in the environment are passed through as they
are.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from course.assets import course_cache_dir
from course.records import Record

__all__ = ["PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_SETTINGS", "PHOENIX_URL", "PHOENIX_VERSION",
           "PhoenixError", "PhoenixServer", "exporter_installed", "make_phoenix_env", "phoenix_env",
           "phoenix_installed",
           "phoenix_version", "start_phoenix"]

PHOENIX_VERSION = "20.26.1"
"""The arize-phoenix release this module installs (tested here with the course's spans)."""
PHOENIX_HOST = "127.0.0.1"
PHOENIX_PORT = 6006
"""Phoenix's own default port: its UI and its OTLP/HTTP receiver (``/v1/traces``)."""
PHOENIX_URL = f"http://{PHOENIX_HOST}:{PHOENIX_PORT}"
"""Where :func:`start_phoenix` puts Phoenix by default (``python -m course phoenix``)."""
GRPC_PORT = 4317
PHOENIX_SETTINGS = {
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
}
"""Phoenix's own settings for a server that sends nothing out."""

_ROOT = Path(__file__).resolve().parents[1]
_LOG_NAME = "phoenix.log"
_NETWORK_TROUBLE = ("Failed to establish a new connection", "Temporary failure in name resolution",
                    "Name or service not known", "Network is unreachable", "ConnectTimeout",
                    "Read timed out", "No matching distribution found",
                    "Could not find a version that satisfies")


class PhoenixError(RuntimeError):
    """Phoenix could not be installed or started: the message says why and what to do."""


def phoenix_env(venv: Path | None = None) -> Path:
    """Phoenix's environment: ``venv``, else ``.venv-phoenix`` beside ``pyproject.toml`` in a
    checkout of the workbook, else ``venv-phoenix`` in the course cache."""
    if venv is not None:
        return Path(venv)
    if (_ROOT / "pyproject.toml").is_file():
        return _ROOT / ".venv-phoenix"
    return course_cache_dir() / "venv-phoenix"


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def _stamp(venv: Path) -> Path:
    return venv / f".installed-arize-phoenix-{PHOENIX_VERSION}"


def phoenix_installed(venv: Path | None = None) -> bool:
    """Phoenix's environment is made, with :data:`PHOENIX_VERSION` (nothing is run)."""
    venv = phoenix_env(venv)
    return _stamp(venv).is_file() and _bin(venv, "phoenix").is_file()


def make_phoenix_env(venv: Path | None = None, log: IO[str] | None = None) -> Path:
    """Make Phoenix's environment unless it is there with :data:`PHOENIX_VERSION`; returns the
    ``phoenix`` command. Raises :class:`PhoenixError` when pip cannot install it (the package
    index is needed once)."""
    venv = phoenix_env(venv)
    command = _bin(venv, "phoenix")
    if phoenix_installed(venv):
        return command
    say = log if log is not None else sys.stdout
    print(f"making {venv} (arize-phoenix=={PHOENIX_VERSION}, about 850 MB; needs the network "
          "this once)...", file=say, flush=True)
    fresh = not venv.exists()
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                          text=True)
    if made.returncode != 0:
        raise PhoenixError(f"could not make {venv}: {_tail(made.stderr or made.stdout)}. Fix: "
                           "install Python's venv module (Debian: apt-get install python3-venv).")
    pip = subprocess.run([str(_bin(venv, "python")), "-m", "pip", "install", "--quiet",
                          "--disable-pip-version-check", f"arize-phoenix=={PHOENIX_VERSION}"],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        if fresh:
            shutil.rmtree(venv, ignore_errors=True)  # the next run starts clean
        said = pip.stderr + pip.stdout
        if any(trouble in said for trouble in _NETWORK_TROUBLE):
            raise PhoenixError(
                f"pip could not download arize-phoenix=={PHOENIX_VERSION} (no network to the "
                f"package index? pip said: {_tail(said)}). Phoenix is installed once from the "
                "network, then runs offline. Fix: run this again where the package index is "
                "reachable (or set PIP_INDEX_URL to a mirror).")
        raise PhoenixError(f"pip could not install arize-phoenix=={PHOENIX_VERSION} into "
                           f"{venv} (exit {pip.returncode}): {_tail(said)}")
    _stamp(venv).touch()
    return command


def _tail(text: str, lines: int = 3) -> str:
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and not line.startswith("WARNING: Location")]
    return " | ".join(kept[-lines:]) or "no output"


def exporter_installed() -> bool:
    """The SDK's OTLP/HTTP exporter, which sends the course's spans to Phoenix, is importable in
    this environment (the ``[phoenix]`` extra; ``make install`` has it)."""
    return importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None


def phoenix_version(url: str, timeout: float = 1.0) -> str | None:
    """The version of the Phoenix answering at ``url`` (its ``/arize_phoenix_version``), or
    ``None`` when nothing answers there as Phoenix within ``timeout`` seconds."""
    import httpx

    try:
        answer = httpx.get(f"{url.rstrip('/')}/arize_phoenix_version", timeout=timeout,
                           trust_env=False)
    except httpx.HTTPError:
        return None
    return answer.text.strip() if answer.status_code == 200 else None


def _port_free(port: int, host: str = PHOENIX_HOST) -> bool:
    """Nothing listens on ``host:port`` (connections of a stopped server still closing, which
    Phoenix's own server binds over, do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _free_port(host: str = PHOENIX_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclasses.dataclass
class PhoenixServer(Record):
    """A ``phoenix serve`` process started by :func:`start_phoenix`: where its UI and its OTLP
    receivers are, where it keeps its data and its log. A context manager: leaving it stops the
    server."""

    url: str
    otlp_endpoint: str
    grpc_port: int
    working_dir: Path
    log_path: Path
    version: str | None = None
    process: subprocess.Popen[bytes] | None = dataclasses.field(default=None, repr=False)

    def record(self) -> dict[str, Any]:
        values = super().record()
        values.pop("process", None)
        return values

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def answers(self) -> bool:
        """Phoenix answers at :attr:`url` (its version, within a second)."""
        return phoenix_version(self.url) is not None

    def wait(self, timeout: float) -> PhoenixServer:
        """Wait until Phoenix answers, at most ``timeout`` seconds. Raises :class:`PhoenixError`
        (and stops the process) when it exits first or is still silent at the end."""
        deadline = time.monotonic() + timeout
        while True:
            version = phoenix_version(self.url, timeout=min(1.0, timeout))
            if version is not None:
                self.version = version
                return self
            code = None if self.process is None else self.process.poll()
            if code is not None:
                raise PhoenixError(f"Phoenix exited (code {code}) before answering at {self.url}; "
                                   f"the end of its log ({self.log_path}): {self._log_tail()}")
            if time.monotonic() >= deadline:
                self.stop()
                raise PhoenixError(
                    f"Phoenix did not answer at {self.url} within {timeout:g} s and was stopped; "
                    f"the end of its log ({self.log_path}): {self._log_tail()}. Fix: on a busy "
                    "machine give it longer (--timeout).")
            time.sleep(0.25)

    def stop(self, grace: float = 15.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after ``grace`` seconds); its exit code."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.terminate()
        try:
            return self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(grace)

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "no log"
        return _tail("\n".join(line for line in text.splitlines() if "sqlalchemy" not in line))

    def __enter__(self) -> PhoenixServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __str__(self) -> str:
        return (f"Phoenix {self.version or PHOENIX_VERSION} at {self.url} (open it in a browser)\n"
                f"OTLP over HTTP: {self.otlp_endpoint}   (gRPC: port {self.grpc_port}, all "
                f"interfaces)\ndata: {self.working_dir}   log: {self.log_path}")


def start_phoenix(port: int = PHOENIX_PORT, *, venv: Path | None = None,
                  working_dir: Path | None = None, timeout: float | None = 120.0,
                  grpc_port: int | None = None) -> PhoenixServer:
    """Start ``phoenix serve`` from Phoenix's environment (made first if missing) on
    ``127.0.0.1:port`` and, unless ``timeout`` is ``None``, wait until it answers.

    ``working_dir`` (default: ``phoenix`` in the course cache) holds its SQLite database and its
    log; ``grpc_port`` defaults to 4317, or a free port when that one is taken. Raises
    :class:`PhoenixError` when the port is taken, the install fails, or Phoenix does not answer
    in time.
    """
    url = f"http://{PHOENIX_HOST}:{port}"
    if not _port_free(port):
        running = phoenix_version(url)
        if running is not None:
            raise PhoenixError(f"a Phoenix ({running}) already answers at {url}: open it there, "
                               "or stop it first, or choose another port (--port).")
        raise PhoenixError(f"port {port} on {PHOENIX_HOST} is taken by another program. Fix: "
                           "choose another port (--port), or stop that program.")
    command = make_phoenix_env(venv)
    working_dir = Path(working_dir) if working_dir is not None else course_cache_dir() / "phoenix"
    working_dir.mkdir(parents=True, exist_ok=True)
    if grpc_port is None:
        grpc_port = GRPC_PORT if _port_free(GRPC_PORT, "0.0.0.0") else _free_port()
    env = dict(os.environ)
    env.update(PHOENIX_SETTINGS)
    env.update({"PHOENIX_HOST": PHOENIX_HOST, "PHOENIX_PORT": str(port),
                "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_WORKING_DIR": str(working_dir)})
    log_path = working_dir / _LOG_NAME
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(command), "serve"], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=working_dir,
                                   start_new_session=True)
    server = PhoenixServer(url=url, otlp_endpoint=f"{url}/v1/traces", grpc_port=grpc_port,
                           working_dir=working_dir, log_path=log_path, process=process)
    return server if timeout is None else server.wait(timeout)


def main(port: int = PHOENIX_PORT, venv: Path | None = None, timeout: float = 120.0,
         install_only: bool = False) -> int:
    """``python -m course phoenix``: make the environment, start Phoenix, wait for Ctrl-C."""
    import signal

    command = make_phoenix_env(venv)
    if install_only:
        print(f"Phoenix {PHOENIX_VERSION} is installed: {command}")
        return 0
    server = start_phoenix(port, venv=venv, timeout=None)

    def stop_on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    print(f"starting Phoenix at {server.url} (at most {timeout:g} s)...", flush=True)
    try:
        server.wait(timeout)
        print(server, flush=True)
        if not exporter_installed():
            print("To send spans from the course's kernel, install the SDK's OTLP exporter there: "
                  "pip install -e \".[phoenix]\" in the workbook's folder.", flush=True)
        print("Send spans from the course: Appendix A5, or any OTLP exporter pointed at the "
              "address above. Ctrl-C stops Phoenix.", flush=True)
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("stopping Phoenix...", flush=True)
    finally:
        code = server.stop()
    if code not in (0, None, -signal.SIGTERM):
        print(f"Phoenix exited with code {code}; its log: {server.log_path}", file=sys.stderr)
        return 1
    print("Phoenix stopped.")
    return 0
