"""Coursework: the student edition and the class grader (classroom/grading/), which has
nbgrader's autograde score every submission in a sandbox.

Fixtures in tests/fixtures/ (regenerate with ``python tests/fixtures/make_fixtures.py``):
``source/practice.ipynb`` is the instructor notebook; ``submissions/<student>/`` are the
instructor edition, a student edition with wrong answers, and a malicious one (graded here with
a fourth, made in the test: right answers, one check cell emptied and one deleted);
``submissions_adversarial/<kind>/`` is an adversarial class (an honest submission and
one per attack, each with wrong answers). Both are graded as one class, by one run of the grader
(``graded``): the grader makes one nbgrader course per worker whatever the class's size, and
every assertion reads its own students' results.

The student edition of every notebook with exercises is generated here (no solution, no hidden
test); tests/test_live_hub_notebooks.py executes each one and finds ``[not yet done]`` under every
check.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import ATTACKS, MARKER, RIGHT, fill

from classroom.grading import (
    ResourceLimits,
    grade_class,
    graded_cells,
    leaked_solution_lines,
    solution_lines,
    student_edition,
    write_student_editions,
)
from classroom.grading.bubblewrap import FIRST_UID
from classroom.grading.feedback import leaked_hidden_tests
from nbharness import check_cell_ids, run_notebook

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SOURCE = FIXTURES / "source" / "practice.ipynb"
SUBMISSIONS = FIXTURES / "submissions"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WITH_EXERCISES = [p for p in NOTEBOOKS if graded_cells(nbformat.read(p, as_version=4))]

# The scores the grader must give each fixture, per graded cell (the table of the issue).
EXPECTED = {
    "instructor":    {"ex1-check": 1, "ex2-check": 2, "ex3-check": 2},  # full marks
    "wrong_answers": {"ex1-check": 1, "ex2-check": 0, "ex3-check": 0},  # hidden test; undone
    "malicious":     {"ex1-check": 1, "ex2-check": 0, "ex3-check": 0},  # loop; kernel killed
    "tampered":      {"ex1-check": 1, "ex2-check": 2, "ex3-check": 0},  # check restored; deleted
}
# A cell gets 10 s: at 5 s, a loaded CI machine (two workers, one grading seven chapters) once
# let the flood cell reach its timeout before its first line of output arrived.
TEST_LIMITS = ResourceLimits(cell_timeout_s=10, notebook_timeout_s=90, memory_bytes=4 * 2**30,
                             cpu_seconds=120, output_bytes_per_cell=50_000, processes=64,
                             file_size_bytes=64 * 2**20)
ADVERSARIAL = FIXTURES / "submissions_adversarial"
ODD_ONES = ("edited_checks", "not_json", "symlink", "sabotaged_guard")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


# ----------------------------------------------------------------------------- student edition


@pytest.mark.parametrize("path", [SOURCE, *WITH_EXERCISES], ids=lambda p: p.name)
def test_student_edition_has_no_solutions_or_hidden_tests(path):
    instructor = _read(path)
    student = student_edition(instructor)
    assert solution_lines(instructor), f"{path.name}: no solution or hidden-test lines at all"
    assert leaked_solution_lines(instructor, student) == []
    text = "\n".join(c.source for c in student.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"{path.name}: {marker!r} left in the student edition"
    solutions = [c for c in student.cells if c.metadata.get("nbgrader", {}).get("solution")]
    code = [c for c in solutions if c.cell_type == "code"]
    assert code and all("raise NotImplementedError()" in c.source for c in code)
    # written answers (manually graded markdown) become nbgrader's prompt
    assert all("YOUR ANSWER HERE" in c.source for c in solutions if c.cell_type == "markdown")
    assert all(c.outputs == [] for c in student.cells if c.cell_type == "code")
    # the visible checks stay, and the points with them
    assert graded_cells(student) == graded_cells(instructor)


def test_student_edition_leaves_the_instructor_notebook_alone(tmp_path):
    before = SOURCE.read_bytes()
    written = write_student_editions([SOURCE.parent], tmp_path)
    assert [p.name for p in written] == ["practice.ipynb"] and SOURCE.read_bytes() == before
    with pytest.raises(ValueError, match="refusing to overwrite"):
        write_student_editions([SOURCE], SOURCE.parent)


def test_a_stray_solution_marker_is_an_error():
    nb = _read(SOURCE)
    plain = next(c for c in nb.cells if c.id == "imports")
    plain.source += "\n### BEGIN SOLUTION\nsecret = 1\n### END SOLUTION"
    with pytest.raises(Exception, match="solution"):
        student_edition(nb)


def _student_run(path: Path, tmp_path: Path):
    target = tmp_path / path.name
    nbformat.write(student_edition(_read(path)), target)
    return run_notebook(target)  # a crash in any cell raises here


def _assert_not_yet_done(run, nb):
    for cell_id in check_cell_ids(nb):
        assert "[not yet done]" in run.text(cell_id), (run.name, cell_id, run.text(cell_id))
    assert "[passed]" not in "\n".join(run.text(c) for c in check_cell_ids(nb))


def test_student_edition_of_the_fixture_executes_with_not_yet_done(tmp_path):
    run = _student_run(SOURCE, tmp_path)
    _assert_not_yet_done(run, _read(SOURCE))


# The student edition of every chapter is executed under a hub-id setting in
# tests/test_live_hub_notebooks.py, which asserts "[not yet done]" under each check there.


# ----------------------------------------------------------------------------- fixtures' drift


def test_fixtures_match_the_source():
    source = _read(SOURCE)
    instructor = _read(SUBMISSIONS / "instructor" / "practice.ipynb")
    assert [c.source for c in instructor.cells] == [c.source for c in source.cells]
    student = student_edition(source)
    for name in ("wrong_answers", "malicious"):
        submitted = _read(SUBMISSIONS / name / "practice.ipynb")
        locked = {c.id: c.source for c in student.cells
                  if c.metadata.get("nbgrader", {}).get("locked")}
        assert {c.id: c.source for c in submitted.cells if c.id in locked} == locked, name
        assert "BEGIN HIDDEN TESTS" not in "".join(c.source for c in submitted.cells), name


def test_bad_grading_input_names_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder of submissions"):
        grade_class(tmp_path / "nowhere", [SOURCE.parent])
    (tmp_path / "alice").mkdir()
    with pytest.raises(FileNotFoundError, match=r"practice\.ipynb"):
        grade_class(tmp_path, [SOURCE.parent])
    plain = tmp_path / "plain.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), plain)
    with pytest.raises(ValueError, match="graded cells"):
        grade_class(tmp_path, [plain])


# ----------------------------------------------------------------------------- grading a class


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _tampered() -> nbformat.NotebookNode:
    """Right answers, but the check of exercise 2 emptied and that of exercise 3 deleted."""
    nb = fill(student_edition(_read(SOURCE)), dict(RIGHT))
    next(c for c in nb.cells if c.id == "ex2-check").source = "pass  # the student emptied the check"
    nb.cells = [c for c in nb.cells if c.id != "ex3-check"]
    return nb


ADVERSARIAL_KINDS = {"honest", *ATTACKS, *ODD_ONES}
REFUSED = {"not_json", "symlink"}  # refused before nbgrader: no feedback notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The fixtures' submissions (with ``tampered``) and the adversarial class, graded as one
    class in a copy; what the copy held before, and the processes left behind after."""
    out = tmp_path_factory.mktemp("grades")
    submitted = shutil.copytree(SUBMISSIONS, out / "submitted", symlinks=True)
    (submitted / "tampered").mkdir()
    nbformat.write(_tampered(), submitted / "tampered" / "practice.ipynb")
    for kind in sorted(p.name for p in ADVERSARIAL.iterdir()):
        shutil.copytree(ADVERSARIAL / kind, submitted / kind, symlinks=True)
    assert {p.name for p in submitted.iterdir()} == set(EXPECTED) | ADVERSARIAL_KINDS
    before = _digest(submitted)
    results = grade_class(submitted, [SOURCE.parent], out / "scores.csv", workers=2,
                          limits=TEST_LIMITS, feedback_dir=out / "feedback")
    return {"results": {r.student: r for r in results}, "out": out, "before": before,
            "after": _digest(submitted), "submitted": submitted, "leftovers": _leftovers()}


def test_grader_scores_match_the_table(graded):
    results = graded["results"]
    assert set(results) == set(EXPECTED) | ADVERSARIAL_KINDS, \
        "every submission is graded, the malicious one too"
    for student, expected in EXPECTED.items():
        assert results[student].points() == expected, (student, results[student].notes)
    assert results["instructor"].score == results["instructor"].max_score == 5
    assert 0 < results["wrong_answers"].score < results["wrong_answers"].max_score
    print("grading times:", {s: round(r.seconds, 1) for s, r in results.items()})


def test_csv_has_one_row_per_student_and_a_column_per_exercise(graded):
    with (graded["out"] / "scores.csv").open() as f:
        listed = list(csv.DictReader(f))
    rows = {row["student"]: row for row in listed}
    assert sorted(rows) == sorted(row["student"] for row in listed)  # one row each
    assert set(rows) == set(EXPECTED) | ADVERSARIAL_KINDS
    for student, expected in EXPECTED.items():
        for grade_id, points in expected.items():
            assert float(rows[student][f"practice:{grade_id}"]) == points
        assert float(rows[student]["total"]) == sum(expected.values())
        assert float(rows[student]["max"]) == 5
    assert "hidden" not in rows["wrong_answers"]["notes"]
    assert "a final answer stops the loop" in rows["wrong_answers"]["notes"]
    assert "ex3-check: failed (not yet done)" in rows["wrong_answers"]["notes"]


def test_malicious_submission_is_contained(graded):
    result = graded["results"]["malicious"]
    status = {c.grade_id: c.status for c in result.cells}
    assert status == {"ex1-check": "passed", "ex2-check": "timeout", "ex3-check": "not run"}
    assert any("kernel" in note for note in result.notes)
    # the files beside the submission were deleted only in the grader's temporary copy
    assert _digest(graded["submitted"]) == graded["before"]
    assert (graded["submitted"] / "malicious" / "notes.txt").is_file()
    executed = _read(graded["out"] / "feedback" / "malicious" / "practice.ipynb")
    cells = {c.id: c for c in executed.cells}
    # the 80 GB allocation hit the memory limit: a MemoryError, and the kernel went on
    assert any(o.get("ename") == "MemoryError" for o in cells["ex1-solution"].outputs)
    # the endless output was capped
    flood = sum(len(o.get("text", "")) for o in cells["ex3-solution"].outputs)
    assert flood < 2 * TEST_LIMITS.output_bytes_per_cell
    assert "output truncated" in "".join(o.get("text", "") for o in cells["ex3-solution"].outputs)


def test_feedback_notebooks_show_the_student_what_happened(graded):
    executed = _read(graded["out"] / "feedback" / "wrong_answers" / "practice.ipynb")
    text = {c.id: "".join(o.get("text", "") + o.get("evalue", "") for o in c.get("outputs", []))
            for c in executed.cells if c.cell_type == "code"}
    assert "[passed] Exercise 1" in text["ex1-check"]
    assert "[try again] Exercise 2: should_stop: a final answer stops the loop" in text["ex2-check"]
    assert "[not yet done] Exercise 3" in text["ex3-check"]


def test_nbgrader_restores_the_instructors_checks(graded):
    """The emptied check cell ran as the instructor wrote it (hidden tests included, removed
    again in the feedback), and the deleted one scores 0, named in the notes."""
    result = graded["results"]["tampered"]
    assert {c.grade_id: c.status for c in result.cells} == {
        "ex1-check": "passed", "ex2-check": "passed", "ex3-check": "missing"}
    assert "ex3-check: missing" in result.notes
    check = next(c for c in _read(graded["out"] / "feedback" / "tampered" / "practice.ipynb").cells
                 if c.id == "ex2-check")
    released = next(c for c in student_edition(_read(SOURCE)).cells if c.id == "ex2-check")
    assert check.source == released.source  # not the student's `pass`
    assert "[passed] Exercise 2" in "".join(o.get("text", "") for o in check.outputs)


def test_feedback_handed_back_holds_no_hidden_test(graded):
    """What goes back to the students has every line between the hidden-test markers removed
    (wrong_answers fails a hidden assert, so its traceback would quote them too)."""
    feedback = graded["out"] / "feedback"
    assert {p.parent.name for p in feedback.rglob("*.ipynb")} == (
        set(EXPECTED) | ADVERSARIAL_KINDS) - REFUSED
    assert leaked_hidden_tests(_read(SOURCE), feedback) == {}
    check = next(c for c in _read(feedback / "wrong_answers" / "practice.ipynb").cells
                 if c.id == "ex2-check")
    assert "assert should_stop(5, 5, None)" in check.source  # the visible asserts stay
    assert "HIDDEN TESTS" not in check.source


def test_command_line_writes_student_edition(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "classroom.grading", "student", str(SOURCE), "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "practice.ipynb").is_file() and "wrote" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "classroom.grading", "grade", str(tmp_path / "x"),
                          "--source", str(SOURCE)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert bad.returncode != 0 and "no such folder of submissions" in bad.stderr


# ----------------------------------------------------------------------------- the adversarial class


def _leftovers() -> list[str]:
    """Processes a graded notebook left behind (run by a sandbox uid): an attack's child, or a
    kernel (a fork bomb's children are copies of it) whose grading folder is already deleted. Kernels of a grading
    still running elsewhere (another test file) keep their folder and do not count."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        cmdline = " ".join(args)
        folders = [Path(a).parent for a in args if "/course-grading-" in a]
        if uid >= FIRST_UID and (MARKER in cmdline or args[:2] == ["sleep", "300"]
                                 or any(not folder.exists() for folder in folders)):
            found.append(f"{pid} {cmdline[:100]}")
    return found


@pytest.fixture(scope="module")
def adversarial(graded):
    """The adversarial class's results, from the one grading run."""
    return {**graded, "results": {kind: result for kind, result in graded["results"].items()
                                  if kind in ADVERSARIAL_KINDS}}


def test_adversarial_class_honest_work_full_marks_every_attack_zero(adversarial):
    results = adversarial["results"]
    assert set(results) == ADVERSARIAL_KINDS
    assert results["honest"].score == results["honest"].max_score == 5, results["honest"].notes
    scores = {kind: r.score for kind, r in results.items() if kind != "honest"}
    assert scores == dict.fromkeys(scores, 0.0), {k: results[k].notes for k in scores}
    print("adversarial grading times:", {k: round(r.seconds, 1) for k, r in results.items()})


def test_adversarial_class_changes_no_submission_and_leaves_no_process(adversarial):
    assert adversarial["after"] == adversarial["before"]
    assert adversarial["leftovers"] == []
    feedback = _read(adversarial["out"] / "feedback" / "classmate" / "practice.ipynb")
    text = "".join(o.get("text", "") for c in feedback.cells for o in c.get("outputs", []))
    assert "copied and destroyed" not in text  # no classmate's notebook is in view


def test_adversarial_class_keeps_its_deadline_and_refuses_odd_files(adversarial):
    results = adversarial["results"]
    for kind, result in results.items():
        assert result.seconds < TEST_LIMITS.notebook_timeout_s + 60, (kind, result.seconds)
    assert not any("ran over" in n for n in results["setsid_child"].notes)
    assert {c.status for c in results["symlink"].cells} == {"refused"}
    assert any("symlink" in n for n in results["symlink"].notes)
    assert any("unreadable notebook" in n for n in results["not_json"].notes)
    # restored checks ran and failed on the wrong answers (not skipped, not 100 points)
    assert results["edited_checks"].max_score == 5
    assert {c.status for c in results["edited_checks"].cells} == {"failed"}


def test_a_check_scores_only_when_the_guard_confirms_it(adversarial):
    """Each tampering attack's checks ran and reported a failure the grader saw (the genuine
    check raised), rather than passing quietly."""
    results = adversarial["results"]
    for kind in ("unset_env", "rebind_check", "ast_transformer", "imports_cell"):
        statuses = {c.grade_id: c.status for c in results[kind].cells}
        assert statuses == dict.fromkeys(statuses, "failed"), (kind, results[kind].notes)
    # right answers and no error, but the guard could not confirm the genuine check: 0
    sabotaged = {c.grade_id: c.status for c in results["sabotaged_guard"].cells}
    assert sabotaged == dict.fromkeys(sabotaged, "unverified"), results["sabotaged_guard"].notes


def test_private_copy_refuses_links_and_special_files(tmp_path):
    from classroom.grading.bubblewrap import SubmissionRefused, private_copy

    student = tmp_path / "alice"
    (student / "data").mkdir(parents=True)
    (student / "practice.ipynb").write_text("{}")
    (student / "data" / "notes.txt").write_text("mine")
    private_copy(student, tmp_path / "copy")
    assert (tmp_path / "copy" / "data" / "notes.txt").read_text() == "mine"
    (student / "data" / "classmate.ipynb").symlink_to("/etc/hostname")
    with pytest.raises(SubmissionRefused, match=r"classmate\.ipynb is a symlink"):
        private_copy(student, tmp_path / "copy2")
    (student / "data" / "classmate.ipynb").unlink()
    os.mkfifo(student / "pipe")
    with pytest.raises(SubmissionRefused, match="pipe is not a regular file"):
        private_copy(student, tmp_path / "copy3")
