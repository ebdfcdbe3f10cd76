"""The model settings other than the bundled default, for tests that run notebooks under them.

:class:`ServedModel` runs ``transformers serve`` on a free loopback port with the bundled model
(``COURSE_MODEL=http://127.0.0.1:PORT/v1``) and counts the chat requests it logs, so a test sees
which notebooks reached it; :func:`write_hub_cache` places the bundled model in a temporary
Hugging Face cache under a hub id (``COURSE_MODEL=HuggingFaceTB/SmolLM2-135M-Instruct``,
resolved offline). Neither downloads anything; the server binds 127.0.0.1 only, so it works
under ``scripts/no-network``. Pass the setting to a kernel with
``nbharness.run_notebook(path, env={...})``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from nbharness import kernel_env

__all__ = ["HUB_ID", "ServedModel", "write_hub_cache"]

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SERVER_START_TIMEOUT_S = 240
START_POLL_S = 0.1  # a refused GET costs well under a millisecond; the server is up in 5-12 s
CHAT_REQUEST = '"POST /v1/chat/completions HTTP/1.1"'


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServedModel:
    """``transformers serve --device cpu MODEL_DIR`` on 127.0.0.1, started and stopped by us.

    ``url`` is the ``COURSE_MODEL`` value; :meth:`chat_requests` counts the chat requests the
    server has logged so far (uvicorn's access log), so a test can see which cells reached it,
    and :meth:`cpu_seconds` what they cost. The server runs one torch thread
    (``OMP_NUM_THREADS=1``), as every kernel of the suite does.
    """

    def __init__(self, model_dir: Path, log_path: Path) -> None:
        self.model_dir = Path(model_dir)
        self.log_path = Path(log_path)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen | None = None

    def start(self) -> ServedModel:
        import httpx

        serve = Path(sys.executable).with_name("transformers")
        env = kernel_env({"OMP_NUM_THREADS": "1"})
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [str(serve), "serve", "--device", "cpu", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "info", str(self.model_dir)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"transformers serve exited ({self.process.returncode}):\n"
                                   + self.log_path.read_text()[-2000:])
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(START_POLL_S)
        self.stop()
        raise RuntimeError(f"transformers serve did not answer within {SERVER_START_TIMEOUT_S} s")

    @property
    def setting(self) -> dict[str, str]:
        """The kernel environment that selects this server. The request timeout is long because
        one CPU core serves every chapter of a loaded test machine; users get the default."""
        return {"COURSE_MODEL": self.url, "COURSE_SERVER_TIMEOUT": "600"}

    def chat_requests(self) -> int:
        return self.log_path.read_text(errors="replace").count(CHAT_REQUEST)

    def cpu_seconds(self) -> float:
        """CPU seconds the server process has used so far (all its threads, user and system)."""
        import psutil

        times = psutil.Process(self.process.pid).cpu_times() if self.process else None
        return times.user + times.system if times else 0.0

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if getattr(self, "_log", None):
            self._log.close()


def write_hub_cache(root: Path, model_dir: Path, hub_id: str = HUB_ID,
                    rev: str = "course-test") -> Path:
    """A Hugging Face hub cache under ``root`` that holds ``model_dir`` as ``hub_id``.

    ``hub/models--ORG--NAME/{refs/main, snapshots/<rev>/}`` with the snapshot's files linked to
    ``model_dir`` (nothing copied); every entry of the real hub cache is linked in beside it so
    the kernel still finds what ``python -m course prepare`` put there. Returns the hub folder
    (the kernel's ``HF_HUB_CACHE``).
    """
    from huggingface_hub import constants

    hub = Path(root) / "hub"
    repo = hub / ("models--" + hub_id.replace("/", "--"))
    snapshot = repo / "snapshots" / rev
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    for item in Path(model_dir).iterdir():
        (snapshot / item.name).symlink_to(item.resolve())
    real = Path(constants.HF_HUB_CACHE)
    if real.is_dir():
        for entry in real.iterdir():
            if not (hub / entry.name).exists():
                (hub / entry.name).symlink_to(entry.resolve())
    return hub
