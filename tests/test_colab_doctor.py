"""The doctor on Colab and on the supported Pythons: no failure for what Colab does not have.

Colab is recognised by its ``google.colab`` package; here a folder holding an empty
``google/colab/__init__.py`` stands in for it on ``sys.path``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys

import pytest

from course import doctor
from course.settings import on_colab


@pytest.fixture
def colab(tmp_path, monkeypatch):
    """This process looks like a Colab runtime: ``google.colab`` is importable."""
    package = tmp_path / "google" / "colab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    before = {name for name in sys.modules if name == "google" or name.startswith("google.")}
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert on_colab()
    yield
    for name in [n for n in sys.modules if n == "google" or n.startswith("google.")]:
        if name not in before:  # a library that asked for google.colab imported the stand-in
            del sys.modules[name]


def without_jupyterlab(monkeypatch):
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "jupyterlab":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_off_colab_there_is_no_google_colab_here():
    assert not on_colab()


def test_on_colab_jupyterlab_and_the_lab_extension_do_not_apply(colab, monkeypatch, capsys):
    without_jupyterlab(monkeypatch)  # Colab has no JupyterLab
    lab, extension = doctor._jupyterlab(), doctor._widgets()
    for check in (lab, extension):
        assert check.status == "n/a" and "does not apply on Colab" in check.line()
    ok = doctor.report()
    out = capsys.readouterr().out
    assert ok, out
    assert "[FAIL]" not in out
    assert "[n/a] JupyterLab: does not apply on Colab" in out
    assert "[n/a] widgets extension: does not apply on Colab" in out
    summary = re.search(r"^(\d+) of (\d+) checks passed(.*)$", out, re.M)
    assert summary and summary[1] == summary[2], out
    assert "not applicable on Colab: JupyterLab, widgets extension" in summary[3]


def test_on_colab_without_a_gpu_the_doctor_only_warns_and_says_how_to_get_one(colab, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    check = doctor._gpu()
    assert check.status == "warn" and "Runtime > Change runtime type > T4 GPU" in check.detail


def test_off_colab_a_missing_jupyterlab_fails_with_the_fix(monkeypatch):
    without_jupyterlab(monkeypatch)
    check = doctor._jupyterlab()
    assert check.status == "FAIL" and '[lab]"' in check.detail and "make install" in check.detail


@pytest.mark.parametrize("version,ok", [("3.11.7", True), ("3.12.1", True), ("3.13.0", True),
                                        ("3.13.15", True), ("3.10.13", False), ("3.14.0", False)])
def test_the_python_check_accepts_the_three_supported_pythons(monkeypatch, version, ok):
    monkeypatch.setattr(sys, "version", f"{version} (main, Jan 1 2026, 00:00:00) [GCC 13.2.0]")
    check = doctor._python()
    assert check.ok is ok, check.line()
    if not ok:
        assert "supports Python 3.11, 3.12 and 3.13" in check.detail
