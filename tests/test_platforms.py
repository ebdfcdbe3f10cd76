"""Where the students are: supported Pythons, Colab's runtime, the one set-up cell, make's Python.

The Colab runtime itself is exercised by ``make colab-mirror`` (scripts/colab_mirror.py, run by
.ci/run); these tests keep the files it relies on consistent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
KEPT = {"torch", "numpy", "ipython", "ipykernel", "jupyter-client", "traitlets", "tornado",
        "ipywidgets"}


def colab_runtime() -> dict[str, tuple[str, bool]]:
    """platforms/colab-gpu.txt as {name: (version, kept)}."""
    out = {}
    for line in (ROOT / "platforms" / "colab-gpu.txt").read_text().splitlines():
        spec, _, comment = line.partition("#")
        if spec.strip():
            name, version = spec.strip().split("==")
            out[canonicalize_name(name)] = (version, comment.strip() == "kept")
    return out


def readme_colab_cell() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- colab-setup-cell -->\n```python\n(.*?)```", readme, re.S)
    assert found, "README.md has no ```python block after <!-- colab-setup-cell -->"
    return found.group(1)


def test_the_colab_file_names_its_source_and_keeps_exactly_the_runtime_packages():
    text = (ROOT / "platforms" / "colab-gpu.txt").read_text()
    assert "googlecolab/backend-info" in text and "pip-freeze.gpu.txt" in text
    runtime = colab_runtime()
    assert {name for name, (_, kept) in runtime.items() if kept} == KEPT
    assert runtime["torch"][0] == "2.11.0" and runtime["ipython"][0] == "7.34.0"
    assert runtime["ipywidgets"][0] == "7.7.1" and runtime["ipykernel"][0] == "6.17.1"


def test_pyproject_admits_the_three_pythons_and_every_kept_colab_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pythons = SpecifierSet(project["requires-python"])
    assert all(v in pythons for v in ("3.11.7", "3.12.1", "3.13.0", "3.13.15"))
    assert "3.10.13" not in pythons and "3.14.0" not in pythons
    runtime = colab_runtime()
    for dependency in project["dependencies"]:
        req = Requirement(dependency)
        name = canonicalize_name(req.name)
        if name in runtime and runtime[name][1]:
            assert req.specifier.contains(runtime[name][0], prereleases=True), (
                f"{dependency} would replace Colab's {name}=={runtime[name][0]}")
    names = {canonicalize_name(Requirement(d).name) for d in project["dependencies"]}
    assert "nbgrader" not in names and "jupyterlab" not in names  # IPython 8 / not on Colab
    assert not any("==" in d for d in project["dependencies"])  # pins live in constraints.txt


def test_the_readme_cell_and_chapter_00_give_the_same_colab_cell():
    cell = readme_colab_cell()
    first = cell.splitlines()[0]
    assert re.fullmatch(r'WORKBOOK_SOURCE = "[^"]+"\s+#.*', first), first
    assert '%pip install --quiet "{WORKBOOK_SOURCE}"' in cell
    assert "!python -m course prepare" in cell
    nb = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4)
    text = next(c.source for c in nb.cells if c.get("id") == "c07")
    assert f"```python\n{cell}```" in text


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _find_python(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """Run scripts/find-python with a PATH of ``folder`` and the few tools it uses, no Python."""
    tools = folder / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("bash", "sed", "ls", "sort"):
        if not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool))
    env = {"PATH": f"{folder}:{tools}", "HOME": os.environ.get("HOME", "/root")}
    return subprocess.run([str(ROOT / "scripts" / "find-python"), *args], capture_output=True,
                          text=True, env=env, timeout=30, check=False)


def test_make_takes_the_first_python_that_runs_and_is_supported(tmp_path):
    _stub(tmp_path, "python3.13", "echo 'pyenv: python3.13: command not found' >&2; exit 127\n")
    _stub(tmp_path, "python3.12", "echo 'Python 3.10'; exit 3\n")  # runs, but unsupported
    (tmp_path / "python3.11").symlink_to(sys.executable)
    done = _find_python(tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == Path(sys.executable).resolve()


def test_a_named_python_that_cannot_work_is_refused_with_the_fix(tmp_path):
    _stub(tmp_path, "python3.10", 'case "$2" in *"Python %d.%d"*) echo "Python 3.10";; '
                                  "*) exit 3;; esac\n")
    done = _find_python(tmp_path, "python3.10")
    assert done.returncode == 1
    assert "PYTHON=python3.10 is Python 3.10" in done.stderr and "Fix:" in done.stderr
    missing = _find_python(tmp_path, "python3.12")
    assert missing.returncode == 1 and "PYTHON=python3.12 is not a command" in missing.stderr


def test_no_supported_python_says_what_to_install(tmp_path):
    done = _find_python(tmp_path)
    assert done.returncode == 1
    assert "No supported Python found" in done.stderr and "install CPython" in done.stderr
