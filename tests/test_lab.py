"""`make lab` serves the workbook: JupyterLab answers on localhost and the first notebook opens.

The test runs the Makefile's own `lab` target (its set-up is already done by `make test`), with
a token and without a browser, so what is tested is what the README tells a student to run.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def test_make_lab_serves_the_start_notebook(tmp_path):
    port, token = free_port(), "course-test-token"
    args = f"--no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    log = tmp_path / "lab.log"
    server = subprocess.Popen(["make", "-s", "lab", f"LAB_PORT={port}", f"LAB_ARGS={args}"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=log.open("w"), start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if server.poll() is not None:
                    raise AssertionError(f"make lab exited: {log.read_text()[-2000:]}") from None
                assert time.time() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.5)
        status, body = get(f"{base}/api/contents/00_start_here.ipynb?token={token}")
        model = json.loads(body)
        assert model["type"] == "notebook"
        assert model["content"]["cells"][0]["source"].startswith("# Start here")
        status, body = get(f"{base}/lab/tree/00_start_here.ipynb?token={token}")
        assert status == 200 and "JupyterLab" in body
        sessions = json.loads(get(f"{base}/api/kernelspecs?token={token}")[1])
        assert "python3" in sessions["kernelspecs"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
