"""``python -m course doctor`` passes here and fails with a clear line when an asset is missing."""

import os
import subprocess
import sys


def doctor(**env):
    full = dict(os.environ, HF_HUB_OFFLINE="1", **env)
    return subprocess.run([sys.executable, "-m", "course", "doctor"], env=full,
                          capture_output=True, text=True, timeout=120)


def test_doctor_passes_on_a_prepared_machine():
    out = doctor()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 of 6 checks passed" in out.stdout
    assert "[ok] GPT-2 tokenizer: 'Hello world' -> [15496, 995]" in out.stdout


def test_doctor_fails_without_the_gpt2_asset(tmp_path):
    out = doctor(HF_HUB_CACHE=str(tmp_path))
    assert out.returncode == 1
    line = next(x for x in out.stdout.splitlines() if "GPT-2 tokenizer" in x)
    assert line.startswith("[FAIL]") and "python -m course prepare" in line


def test_doctor_fails_without_the_prepared_model(tmp_path):
    out = doctor(COURSE_CACHE=str(tmp_path))
    assert out.returncode == 1
    line = next(x for x in out.stdout.splitlines() if x.startswith("[FAIL] model"))
    assert "no converted copy" in line and "python -m course prepare" in line


def test_doctor_names_a_bad_model_setting():
    out = doctor(COURSE_MODEL="nobody/no-such-model-xyz")
    assert out.returncode == 1
    assert "COURSE_MODEL='nobody/no-such-model-xyz'" in out.stdout
