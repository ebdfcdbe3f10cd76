"""Contract cases of the grader (classroom/grading/), more: a duplicated check cell is reported as what
it is (the grade_id and the fix) and graded once, where nbgrader's own chain fails the submission
with "SchemaTooOldError"; and a grader started from a virtualenv reached through a symlink grades an
honest student 5/5 in the sandbox (the kernel starts from a path the sandbox mounts). Table tests;
one real sandboxed run at the end."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.nbgraderformat import SchemaTooOldError
from nbgrader.preprocessors import CheckCellMetadata, DeduplicateIds
from traitlets.config.loader import PyFileConfigLoader

from classroom.grading import grade_class
from classroom.grading.bubblewrap import kernel_python, sandbox_problem
from classroom.grading.nbgrader_plugins import (
    DuplicateGradeIdError,
    KeepLastCopy,
    check_unique_grade_ids,
    duplicate_cell_notes,
    duplicate_grade_ids,
)
from classroom.grading.student import nbgrader_meta

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "source" / "practice.ipynb"
HONEST = ROOT / "tests" / "fixtures" / "submissions" / "instructor" / "practice.ipynb"


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _duplicated(nb: nbformat.NotebookNode, grade_id: str, copies: int = 1):
    """``nb`` with the cell of ``grade_id`` copied right after itself ``copies`` times."""
    nb = copy.deepcopy(nb)
    i = next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == grade_id)
    for n in range(copies):
        cell = copy.deepcopy(nb.cells[i])
        cell["id"] = f"copy-{n}"
        nb.cells.insert(i + 1, cell)
    return nb


# ------------------------------------------------- (1) a duplicated check cell, named as such

DUPLICATES = {"check cell": ("ex1-check", 1), "check cell three times": ("ex2-check", 2),
              "solution cell": ("ex3-solution", 1)}


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("case", DUPLICATES)
def test_a_duplicated_cell_in_a_submission_is_named_not_schema_too_old(case):
    grade_id, copies = DUPLICATES[case]
    submitted = _duplicated(_read(HONEST), grade_id, copies)
    found = duplicate_grade_ids(submitted)
    assert list(found) == [grade_id] and len(found[grade_id]) == copies + 1
    (said,) = duplicate_cell_notes(submitted)
    assert said.startswith(f"{grade_id}:") and f"{copies + 1} cells" in said
    assert "fix: delete the extra copy" in said
    with pytest.raises(SchemaTooOldError):  # nbgrader's own step, then its metadata check
        CheckCellMetadata().preprocess(
            DeduplicateIds().preprocess(copy.deepcopy(submitted), {})[0], {})
    nb, _ = KeepLastCopy().preprocess(copy.deepcopy(submitted), {})
    nb, _ = CheckCellMetadata().preprocess(nb, {})
    assert not duplicate_grade_ids(nb)  # one cell keeps the grade_id: it is graded once
    assert sum(nbgrader_meta(c).get("grade_id") == grade_id for c in nb.cells) == 1


def test_the_course_template_puts_the_course_steps_in_nbgraders_chain():
    from classroom.grading.execute import GuardedExecute
    from classroom.grading.nbgrader_plugins import KeepReleasedCells

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "nbgrader")).load_config()
    sanitize = config.Autograde.sanitize_preprocessors
    assert KeepLastCopy in sanitize and DeduplicateIds not in sanitize
    assert KeepReleasedCells in sanitize
    assert GuardedExecute in config.Autograde.autograde_preprocessors


@pytest.mark.contract("unclear error")
def test_a_duplicated_grade_id_in_the_instructor_notebook_is_refused_naming_it(tmp_path):
    source = _duplicated(_read(SOURCE), "ex1-check")
    with pytest.raises(DuplicateGradeIdError, match="'ex1-check'") as err:
        check_unique_grade_ids(source, "the instructor notebook practice.ipynb")
    assert "practice.ipynb" in str(err.value) and "fix" in str(err.value)
    path = tmp_path / "practice.ipynb"
    nbformat.write(source, path)
    (tmp_path / "submitted" / "alice").mkdir(parents=True)
    shutil.copy(HONEST, tmp_path / "submitted" / "alice" / "practice.ipynb")
    with pytest.raises(DuplicateGradeIdError, match="'ex1-check'") as err:
        grade_class(tmp_path / "submitted", [path], log=None, sandbox=False)
    assert "practice.ipynb" in str(err.value)


# ------------------------------------------------- (2) a virtualenv reached through a symlink

VENV = Path(sys.prefix)
needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None or VENV == Path(sys.base_prefix),
                                   reason="needs bwrap and a virtualenv")


def _linked_python(tmp_path: Path) -> Path:
    link = tmp_path / "linked-venv"
    link.symlink_to(VENV.resolve(), target_is_directory=True)
    return link / "bin" / Path(sys.executable).name


# One Python started through the linked venv: what its kernel would start from, then the grade it
# gives an honest student in the sandbox (``{student}``: the class folder).
IN_LINKED_VENV = """
import json, sys
from pathlib import Path
from classroom.grading import grade_class
from classroom.grading.bubblewrap import kernel_env, kernel_python, readable_paths
mounted = readable_paths()
def seen(p): return any(Path(p) == m or m in Path(p).parents for m in mounted)
facts = {{"executable": sys.executable, "exe_seen": seen(sys.executable),
          "kernel": kernel_python(), "kernel_seen": seen(kernel_python()),
          "path": kernel_env(Path("/tmp")).get("PATH", "").split(":")[0]}}
(r,) = grade_class(Path({student!r}), [Path({source!r})], log=None)
facts["graded"] = {{"points": r.score, "max": r.max_score, "notes": r.notes}}
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def linked_venv(tmp_path_factory) -> dict:
    """What a grader started from the venv through a symlink finds, and grades (one run)."""
    tmp_path = tmp_path_factory.mktemp("linked")
    student = tmp_path / "submitted" / "alice"
    student.mkdir(parents=True)
    shutil.copy(HONEST, student / "practice.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    code = IN_LINKED_VENV.format(student=str(student.parent), source=str(SOURCE))
    out = subprocess.run([str(_linked_python(tmp_path)), "-c", code], capture_output=True,
                         text=True, timeout=240, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.contract("wrong result")
@needs_sandbox
def test_the_kernel_starts_from_a_path_the_sandbox_mounts(linked_venv):
    facts = linked_venv
    assert "linked-venv" in facts["executable"] and not facts["exe_seen"]  # the finding
    assert facts["kernel_seen"] and "linked-venv" not in facts["kernel"]
    assert Path(facts["kernel"]).parent == VENV.resolve() / "bin"  # the venv, not the base
    assert "linked-venv" not in facts["path"]


@pytest.mark.contract("wrong result")
def test_kernel_python_keeps_the_venv_interpreter_here():
    assert Path(kernel_python()).parent == Path(sys.executable).parent.resolve()
    assert Path(kernel_python()).name == Path(sys.executable).name


@pytest.mark.contract("wrong result")
@needs_sandbox
def test_an_honest_student_graded_from_a_symlinked_venv_gets_full_marks(linked_venv):
    result = linked_venv["graded"]
    assert (result["points"], result["max"]) == (5, 5), result["notes"]
