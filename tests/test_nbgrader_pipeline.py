"""nbgrader as shipped: the course template in ``nbgrader/`` driven by nbgrader's own command
line (generate_assignment, autograde, export), and ``course.grading`` scoring the same
submissions identically.

Uses the fixture notebook ``tests/fixtures/source/practice.ipynb`` (three checks, 5 points,
no model), not a chapter: a chapter's kernel loads a model and would add minutes; the
pipeline is the same. Three submissions: full (right answers), untouched (the release), one
wrong (ex2 misses the hidden test, ex3 undone).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from fixtures.make_fixtures import RIGHT, WRONG_ANSWERS, fill

from course.grading import ResourceLimits, grade_class

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "source" / "practice.ipynb"
EXPECTED = {"full": 5.0, "untouched": 0.0, "one_wrong": 1.0}
LIMITS = ResourceLimits(cell_timeout_s=30, notebook_timeout_s=120, memory_bytes=4 * 2**30,
                        cpu_seconds=120, output_bytes_per_cell=50_000, processes=128)


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), *args], cwd=course,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("nbgrader-course")
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader_config.py")
    (course / "source" / "practice").mkdir(parents=True)
    shutil.copy(SOURCE, course / "source" / "practice" / "practice.ipynb")
    _nbgrader(course, "generate_assignment", "practice", "--force")
    release = nbformat.read(course / "release" / "practice" / "practice.ipynb", as_version=4)
    submissions = {"full": fill(nbformat.from_dict(release), dict(RIGHT)),
                   "untouched": nbformat.from_dict(release),
                   "one_wrong": fill(nbformat.from_dict(release), dict(WRONG_ANSWERS))}
    for student, nb in submissions.items():
        folder = course / "submitted" / student / "practice"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "practice.ipynb")
    autograde = _nbgrader(course, "autograde", "practice", "--force")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    return {"dir": course, "log": autograde.stderr}


def test_nbgrader_generates_a_release_without_solutions(course):
    release = (course["dir"] / "release" / "practice" / "practice.ipynb").read_text()
    assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release
    assert "raise NotImplementedError()" in release
    assert (course["dir"] / "gradebook.db").is_file()


def test_nbgrader_exports_the_expected_scores(course):
    with (course["dir"] / "grades.csv").open() as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert {s: float(rows[s]["score"]) for s in EXPECTED} == EXPECTED
    assert {float(rows[s]["max_score"]) for s in EXPECTED} == {5.0}


def test_course_grading_scores_like_nbgrader_cell_by_cell(course, tmp_path):
    from nbgrader.api import Gradebook

    results = grade_class(course["dir"] / "submitted", [SOURCE], tmp_path / "scores.csv",
                          workers=2, limits=LIMITS, log=None)
    ours = {r.student: r.points() for r in results}
    with Gradebook(f"sqlite:///{course['dir'] / 'gradebook.db'}") as gb:
        theirs = {student: {g.name: g.score for g in
                            gb.find_submission_notebook("practice", "practice", student).grades
                            if g.cell_type == "code" and g.auto_score is not None}
                  for student in EXPECTED}
    assert ours == theirs
    assert {s: sum(p.values()) for s, p in ours.items()} == EXPECTED
