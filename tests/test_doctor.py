"""``python -m course doctor`` passes here and fails with a clear line when an asset is missing.

The command line runs in a subprocess on a prepared machine and where the setting must reach a
fresh interpreter (``HF_HUB_CACHE`` is read when huggingface_hub is imported); the other cases
call the command's ``main()`` (its exit status) or ``course.doctor.report()`` in this process
with the setting in the environment (``COURSE_CACHE`` and ``COURSE_MODEL`` are read at each
call), which skips the ~7 CPU-seconds of imports a new interpreter pays.
"""

import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading


def doctor(**env):
    full = dict(os.environ, HF_HUB_OFFLINE="1", **env)
    return subprocess.run([sys.executable, "-m", "course", "doctor"], env=full,
                          capture_output=True, text=True, timeout=120)


def doctor_here(monkeypatch, capsys, **env) -> tuple[bool, str]:
    """``report()`` in this process under ``env``: (every required check passed, what it printed)."""
    from course.doctor import report

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    ok = report()
    return ok, capsys.readouterr().out


def test_doctor_passes_on_a_prepared_machine():
    out = doctor()
    assert out.returncode == 0, out.stdout + out.stderr
    passed = re.search(r"^(\d+) of (\d+) checks passed$", out.stdout, re.M)
    assert passed and passed[1] == passed[2] and int(passed[2]) >= 6, out.stdout
    assert "[ok] Qwen tokenizer: 151,669 tokens" in out.stdout
    assert "[ok] GPT-2 tokenizer: 'Hello world' -> [15496, 995]" in out.stdout


def test_doctor_fails_without_the_gpt2_asset(tmp_path):
    out = doctor(HF_HUB_CACHE=str(tmp_path))
    assert out.returncode == 1
    line = next(x for x in out.stdout.splitlines() if "GPT-2 tokenizer" in x)
    assert line.startswith("[FAIL]") and "python -m course prepare" in line


def command_here(monkeypatch, capsys, **env) -> tuple[int, str, str]:
    """``python -m course doctor``'s ``main()`` in this process under ``env``: (exit status,
    stdout, stderr)."""
    from course.__main__ import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    status = main(["doctor"])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_doctor_fails_without_the_prepared_model(empty_cache, monkeypatch, capsys):
    status, out, _ = command_here(monkeypatch, capsys, COURSE_CACHE=str(empty_cache))
    assert status == 1
    line = next(x for x in out.splitlines() if x.startswith("[FAIL] model"))
    assert "no converted copy" in line and "python -m course prepare" in line


def test_doctor_names_a_bad_model_setting(monkeypatch, capsys):
    ok, out = doctor_here(monkeypatch, capsys, COURSE_MODEL="nobody/no-such-model-xyz")
    assert not ok
    assert "COURSE_MODEL='nobody/no-such-model-xyz'" in out


def test_doctor_fails_on_a_truncated_model_copy(empty_cache, monkeypatch, capsys):
    from course.assets import converted_model_dir

    real = converted_model_dir()
    copy = empty_cache / real.name
    copy.mkdir()
    (copy / "tokenizer.json").write_bytes((real / "tokenizer.json").read_bytes())
    with (real / "model.safetensors").open("rb") as src:
        (copy / "model.safetensors").write_bytes(src.read(200_000))  # a copy cut short
    ok, out = doctor_here(monkeypatch, capsys, COURSE_CACHE=str(empty_cache))
    assert not ok
    line = next(x for x in out.splitlines() if x.startswith("[FAIL] model"))
    assert "damaged converted copy" in line and "truncated" in line
    assert "python -m course prepare" in line


def test_doctor_fails_cleanly_on_a_truncated_gpt2_file_and_prepare_repairs_it(tmp_path):
    from course.assets import install_gpt2_tokenizer

    snapshot = install_gpt2_tokenizer(tmp_path)
    with (snapshot / "tokenizer.json").open("r+b") as f:
        f.truncate(5000)
    out = doctor(HF_HUB_CACHE=str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if "GPT-2 tokenizer" in x)
    assert line.startswith("[FAIL]") and "python -m course prepare" in line
    install_gpt2_tokenizer(tmp_path)  # what `prepare` runs: the damaged entry is replaced
    out = subprocess.run(  # the doctor's GPT-2 check alone, in a fresh interpreter again
        [sys.executable, "-c", "from course.doctor import _gpt2; print(_gpt2().line())"],
        env=dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path)),
        capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("[ok] GPT-2 tokenizer"), out.stdout + out.stderr


def test_doctor_reports_the_qwen_tokenizer_and_only_warns_when_it_is_missing(empty_cache,
                                                                            monkeypatch, capsys):
    from course.assets import converted_model_dir

    cache = empty_cache
    # the prepared copy, read in place (the doctor only reads it), without the Qwen tokenizer
    (cache / converted_model_dir().name).symlink_to(converted_model_dir(),
                                                    target_is_directory=True)
    ok, out = doctor_here(monkeypatch, capsys, COURSE_CACHE=str(cache))
    line = next(x for x in out.splitlines() if "Qwen tokenizer" in x)
    assert line.startswith("[warn]") and "make assets" in line
    assert ok and "optional, missing: Qwen tokenizer" in out


class _Models(http.server.BaseHTTPRequestHandler):
    answer = b'{"object": "list", "data": [{"id": "tiny-model", "object": "model"}]}'

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args):
        pass


def test_doctor_asks_the_server_for_its_models(monkeypatch, capsys):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # 0.05 s poll
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        _, out = doctor_here(monkeypatch, capsys, COURSE_MODEL=url)
        line = next(x for x in out.splitlines() if "agent and probe models" in x)
        assert line.startswith("[ok]") and "answers GET /models; lists tiny-model" in line
        assert "device: cpu, dtype: float32" in line
        _, out = doctor_here(monkeypatch, capsys, COURSE_MODEL=url + "#other-model")
        line = next(x for x in out.splitlines() if "agent and probe models" in x)
        assert line.startswith("[FAIL]") and "does not list 'other-model'" in line
    finally:
        server.shutdown()


def test_doctor_does_not_call_a_silent_server_ok(monkeypatch, capsys):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts connections, never answers
    try:
        ok, out = doctor_here(monkeypatch, capsys,
                              COURSE_MODEL=f"http://127.0.0.1:{silent.getsockname()[1]}/v1#m")
        assert not ok
        line = next(x for x in out.splitlines() if "agent and probe models" in x)
        assert line.startswith("[FAIL]") and "did not answer" in line
    finally:
        silent.close()


def test_the_command_fails_a_local_model_folder_whose_weights_are_garbage(tmp_path, monkeypatch,
                                                                         capsys):
    """``python -m course doctor`` with ``COURSE_MODEL`` a folder that cannot load: a [FAIL] line
    naming the weights file, exit status 1, no traceback (was [ok]; the table of cases is
    tests/test_contract_local_model.py)."""
    from course.assets import converted_model_dir

    folder = tmp_path / "my-model"
    folder.mkdir()
    shutil.copy2(converted_model_dir() / "config.json", folder / "config.json")
    (folder / "model.safetensors").write_bytes(b"<html>not weights</html>" * 100)
    status, out, err = command_here(monkeypatch, capsys, COURSE_MODEL=str(folder))
    assert status == 1 and "Traceback" not in out + err
    line = next(x for x in out.splitlines() if x.startswith("[FAIL] model"))
    assert f"{folder}/model.safetensors" in line and "not a safetensors file" in line
    assert "Fix: save the model into" in line
