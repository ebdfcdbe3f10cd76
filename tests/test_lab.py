"""`make lab` serves the workbook: JupyterLab answers on localhost and the first notebook opens."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).parent / "jupyter"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_serves_the_start_notebook(tmp_path):
    port, token = free_port(), "course-test-token"
    # The same server options as the Makefile's `lab` target, without opening a browser.
    cmd = [str(JUPYTER), "lab", "--allow-root", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={ROOT / 'notebooks'}"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                                   "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                assert time.time() < deadline, "JupyterLab did not answer within 60 s"
                time.sleep(0.5)
        with urllib.request.urlopen(
                f"{base}/api/contents/00_start_here.ipynb?token={token}", timeout=10) as r:
            model = json.load(r)
        assert model["type"] == "notebook"
        assert model["content"]["cells"][0]["source"].startswith("# Start here")
        with urllib.request.urlopen(f"{base}/lab/tree/00_start_here.ipynb?token={token}",
                                    timeout=10) as r:
            assert r.status == 200 and "JupyterLab" in r.read().decode()
        with urllib.request.urlopen(f"{base}/api/kernelspecs?token={token}", timeout=10) as r:
            assert "python3" in json.load(r)["kernelspecs"]
    finally:
        server.terminate()
        server.wait(timeout=20)
