"""Execute a notebook in a fresh kernel with nbclient, offline, and read its outputs by cell.

A test names the cells that carry the lesson by cell id or tag and asserts on their text::

    run = execute_notebook("05_trimming.ipynb")
    assert "kept 4 messages, 32 tokens" in run.text("worked-example")

and grades a chapter's exercises without running the notebook (the one harness of every
``test_nb_0N_exercises.py``): each check cell against the instructor's solution and wrong answers::

    verdict = Exercises("05_trimming.ipynb").grade(3, names, answer=lambda r, t, b: [0, 5, 6, 7])
    assert verdict.rejected, verdict  # by the check's own assertion; a crash is not a rejection
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
import traceback
from dataclasses import dataclass
from functools import cache
from hashlib import sha256
from pathlib import Path
from unittest.mock import patch

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# The model-setting matrix: every lesson (not the appendices: A4 trains and runs the bundled model
# whatever COURSE_MODEL says, the others measure what the lessons' own cells already send a model)
# is executed once more, as its student edition, under one setting other than the bundled model:
# a served model (test_live_server_notebooks) or a Hugging Face id (test_live_hub_notebooks).
# A lesson runs once per setting it needs, not under every setting: each setting gets lessons
# that reach the agent model through LangChain and through smolagents, and chapter 00, which
# names the setting, runs under both. The served chapters are the ones whose model calls go
# over HTTP in ways the others do not: native and constrained tool calls (01), the code agent's
# live runs (02, in Going further) and the memory graph's chat model (04).
MATRIX_NAMES = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
SERVER_NAMES = ["00_start_here.ipynb", "01_tool_calling.ipynb", "02_code_agent_runs.ipynb",
                "04_memory.ipynb"]
HUB_NAMES = ["00_start_here.ipynb"] + [name for name in MATRIX_NAMES if name not in SERVER_NAMES]
CELL_TIMEOUT_S = 240


@dataclass
class ExecutedNotebook:
    """A notebook after a fresh run, with helpers to read one cell's outputs."""

    name: str
    nb: nbformat.NotebookNode
    seconds: float

    def cells(self, key: str) -> list[nbformat.NotebookNode]:
        found = [
            c for c in self.nb.cells
            if c.get("id") == key or key in c.get("metadata", {}).get("tags", [])
        ]
        if not found:
            raise KeyError(f"{self.name}: no cell with id or tag {key!r}")
        return found

    def text(self, key: str) -> str:
        """All text a student sees under the cell(s): streams, plain-text results, errors."""
        # Stream chunks are concatenated as they are (the kernel splits stdout wherever it
        # flushes, so a separator would insert blank lines at random); other outputs start on
        # a line of their own.
        text = ""
        for cell in self.cells(key):
            for out in cell.get("outputs", []):
                if out.output_type == "stream":
                    text += out.text
                    continue
                if out.output_type in ("execute_result", "display_data"):
                    data = out.get("data", {})
                    pieces = [data.get("text/plain", ""), data.get("text/html", "")]
                elif out.output_type == "error":
                    pieces = [f"{out.ename}: {out.evalue}"]
                else:
                    continue
                for piece in filter(None, pieces):
                    text += ("" if not text or text.endswith("\n") else "\n") + piece + "\n"
        return text

    def has_image(self, key: str) -> bool:
        return any(
            "image/png" in out.get("data", {})
            for cell in self.cells(key) for out in cell.get("outputs", [])
        )

    def has_widget(self, key: str) -> bool:
        return any(
            "application/vnd.jupyter.widget-view+json" in out.get("data", {})
            for cell in self.cells(key) for out in cell.get("outputs", [])
        )

    def records(self, key: str, shown: bool = True) -> list:
        """The values of the records the cell(s) displayed (:data:`course.records.RECORD_MIME`),
        one JSON object per displayed record, in output order: what a test reads instead of
        matching printed prose. ``shown=False`` leaves out the lines shown with
        ``course.records.show`` (read those with :meth:`shown`)."""
        from course.records import RECORD_MIME

        found = [out["data"][RECORD_MIME] for cell in self.cells(key)
                 for out in cell.get("outputs", []) if RECORD_MIME in out.get("data", {})]
        return found if shown else [r for r in found if not _is_shown(r)]

    def record(self, key: str, shown: bool = True) -> dict:
        """The one record the cell(s) displayed (an error if there are none or several);
        ``shown=False``: the one besides the lines shown with ``course.records.show``."""
        found = self.records(key, shown)
        assert len(found) == 1, f"{self.name}: cell {key!r} displayed {len(found)} records, not 1"
        return found[0]

    def shown(self, key: str) -> dict[str, list]:
        """{shown key: [its values, in order]} of the lines the cell(s) showed with
        ``course.records.show(..., key=...)``."""
        found: dict[str, list] = {}
        for record in filter(_is_shown, self.records(key)):
            found.setdefault(record["shown"], []).append(record["value"])
        return found

    def shown_one(self, key: str, shown_key: str):
        """The one value the cell(s) showed under ``shown_key`` (an error if none or several)."""
        values = self.shown(key).get(shown_key, [])
        assert len(values) == 1, (
            f"{self.name}: cell {key!r} showed {len(values)} values under {shown_key!r}, not 1")
        return values[0]

    def walls_of_text(self, limit: int = 3000) -> list[tuple[str, str]]:
        """(cell id, what is wrong) for each output a student would scroll past or take for a
        failure: a text longer than ``limit`` characters, or anything written to stderr."""
        found = []
        for cell in self.nb.cells:
            for out in cell.get("outputs", []):
                stream = out.output_type == "stream"
                text = out.get("text", "") if stream else out.get("data", {}).get("text/plain", "")
                if len(text) > limit:
                    found.append((cell.get("id"), f"{len(text)} characters"))
                if stream and out.name == "stderr":
                    found.append((cell.get("id"), f"stderr: {text}"))
        return found

    def all_text(self) -> str:
        return "\n".join(self.text(c.id) for c in self.nb.cells if c.cell_type == "code")


def _is_shown(record: dict) -> bool:
    """A line shown with ``course.records.show`` (a :class:`course.records.Shown` record)."""
    return set(record) == {"shown", "value"}


def kernel_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a notebook kernel under test: offline, the bundled model, one torch
    thread per kernel (two kernels share two cores), and the inline plot backend a student gets."""
    env = dict(os.environ)
    for name in ("COURSE_MODEL", "MPLBACKEND"):
        env.pop(name, None)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COURSE_TORCH_THREADS": "1",
                "PYDEVD_DISABLE_FILE_VALIDATION": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra or {})
    return env


def lab_kernel_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """:func:`kernel_env` with ``lab/`` first on ``JUPYTER_PATH``: its kernelspec starts the
    kernel ``make lab`` gives a student, forked from a process that imported the heavy libraries
    once (``classroom/kernels.py``). ``extra`` wins, ``JUPYTER_PATH`` included."""
    lab_path = os.pathsep.join([str(ROOT / "lab"), *filter(None, [os.environ.get("JUPYTER_PATH")])])
    return kernel_env({"JUPYTER_PATH": lab_path, **(extra or {})})


def run_notebook(path: Path, env: dict[str, str] | None = None,
                 timeout: int = CELL_TIMEOUT_S) -> ExecutedNotebook:
    """Execute ``path`` top to bottom in a fresh kernel (cwd: its folder); errors raise.

    The kernel is the one ``make lab`` gives a student (``lab/`` on ``JUPYTER_PATH``: forked
    from a process that imported the heavy libraries once, ``classroom/kernels.py``), so the
    suite's many notebook runs do not each import torch, transformers and LangChain. The Colab
    mirror and the grader run ordinary kernels."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    saved = dict(os.environ)
    kernel = lab_kernel_env(env)
    os.environ.clear()
    os.environ.update(kernel)
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = time.perf_counter() - start
    if (os.environ.get("COURSE_SAVE_EXECUTED") and path.parent == NOTEBOOKS
            and not kernel.get("COURSE_MODEL")):
        # Opt-in: keep the executed instructor notebook for `make book` (book/build.py reuses
        # it while the source is unchanged), with the hash of the source it was run from. Only
        # the default path is kept (the bundled model, offline): the model-setting matrix runs
        # the same notebooks with COURSE_MODEL set, and the site must not show those.
        nb.metadata["course_executed"] = {"source_sha256": sha256(path.read_bytes()).hexdigest(),
                                          "model": "bundled"}
        saved_dir = Path(os.environ["COURSE_SAVE_EXECUTED"])
        saved_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, saved_dir / path.name)
    return ExecutedNotebook(path.name, nb, seconds)


@cache
def execute_notebook(name: str) -> ExecutedNotebook:
    """Run ``notebooks/<name>`` once per test process and keep the result for every test."""
    return run_notebook(NOTEBOOKS / name)


@cache
def cell_sources(name: str) -> dict[str, str]:
    """``notebooks/<name>``'s cell sources by cell id, as the instructor wrote them (hidden tests
    included): what the exercise tests run a check cell from, without executing the notebook."""
    return {c.id: c.source for c in nbformat.read(NOTEBOOKS / name, as_version=4).cells}


def _execute(source: str, namespace: dict, label: str, out: io.StringIO) -> None:
    """Execute one cell's ``source`` in ``namespace`` as a kernel would, printing into ``out``.
    Exceptions propagate, as in a kernel."""
    with contextlib.redirect_stdout(out):
        # dont_inherit: this module's ``from __future__ import annotations`` must not reach the
        # cell (a kernel has none; LangGraph reads a state class's annotations as types).
        exec(compile(source, label, "exec", dont_inherit=True), namespace)


@dataclass(frozen=True)
class Verdict:
    """What a grader makes of one check cell run against one answer.

    ``outcome`` is ``"passed"``, ``"try again"`` (the check's own assertion rejected the answer),
    ``"not yet done"`` (the stub's ``NotImplementedError``) or ``"crashed"`` (anything else
    raised: the check did not judge the answer, so no test may count it as a rejection)."""

    exercise: str
    answer: str
    outcome: str
    printed: str
    error: BaseException | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def rejected(self) -> bool:
        """Rejected by the check itself: its assertion failed and it printed a hint."""
        return self.outcome == "try again" and "[try again]" in self.printed

    def __str__(self) -> str:
        crash = ""
        if self.error is not None:
            crash = "\n" + "".join(traceback.format_exception(self.error)[-6:])
        return f"{self.exercise} with {self.answer}: {self.outcome}\n{self.printed}{crash}"


class Exercises:
    """A chapter's exercises, graded as nbgrader would, without executing the notebook.

    ``grade(n, names)`` runs, in ``names`` (what the notebook defines before the exercise), the
    cells ``before`` (e.g. earlier checks that define helpers), then exercise ``n``'s solution
    cell (its imports and helpers), then the answer under test in its place, then the check
    cell ``ex<n>-check`` (hidden tests included) in grading mode. The answer is the instructor's
    solution (``None``), a function that replaces the one the solution defines, or the source
    of a whole answer cell."""

    def __init__(self, notebook: str):
        self.notebook = notebook
        self.cells = cell_sources(notebook)

    def function(self, n: int) -> str:
        """The name of the function exercise ``n``'s solution cell defines (the student's)."""
        return re.findall(r"^def (\w+)", self.cells[f"ex{n}-solution"], re.M)[-1]

    def grade(self, n: int, names: dict, answer=None, *, before=(), label: str = "") -> Verdict:
        from course.checks import GRADING_SETTING, CheckFailed

        namespace, setup = dict(names), io.StringIO()
        for cell_id in before:
            _execute(self.cells[cell_id], namespace, cell_id, setup)
        if isinstance(answer, str):
            _execute(answer, namespace, "<answer>", setup)
        else:
            _execute(self.cells[f"ex{n}-solution"], namespace, f"ex{n}-solution", setup)
            if answer is not None:
                namespace[self.function(n)] = answer
        label = label or ("the instructor's solution" if answer is None else repr(answer))
        out, error, outcome = io.StringIO(), None, "passed"
        try:
            with patch.dict(os.environ, {GRADING_SETTING: "1"}):
                _execute(self.cells[f"ex{n}-check"], namespace, f"ex{n}-check", out)
        except CheckFailed:
            outcome = "try again"
        except NotImplementedError:
            outcome = "not yet done"
        except Exception as err:  # the check cell crashed: a bug in the check or the harness
            outcome, error = "crashed", err
        printed = out.getvalue()
        if outcome == "passed" and f"[passed] Exercise {n}" not in printed:
            outcome = "crashed"  # no verdict printed: the check cell never reached its check
        return Verdict(f"{self.notebook} exercise {n}", label, outcome, printed, error)


def core_path(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` without its ``## Going further`` cells (from the cell whose id is ``going-further``,
    after the exercises): what a test that is not about those cells runs (the hub-id
    matrix, nbgrader's autograde in the feedback, pipeline and class-hub tests, the browser's Run
    All). They carry no grade id (checked here), so nbgrader, which tracks only cells with one,
    accepts the rest as a submission; they are the slow live runs, which the chapter tests and the
    mirror run."""
    ids = [cell.get("id") for cell in nb.cells]
    if "going-further" in ids:
        rest = nb.cells[ids.index("going-further"):]
        assert not any("nbgrader" in cell.metadata for cell in rest), "a graded cell in Going further"
        nb.cells = nb.cells[:ids.index("going-further")]
    return nb


def student_copy(name: str, folder: Path, *, going_further: bool) -> Path:
    """The student edition of ``notebooks/<name>`` (stubs for the solutions, the hidden tests
    removed), written into ``folder``: what a student runs. Without ``going_further`` it stops
    at the exercises (:func:`core_path`)."""
    from classroom.grading import student_edition

    nb = student_edition(nbformat.read(NOTEBOOKS / name, as_version=4))
    path = folder / name
    nbformat.write(nb if going_further else core_path(nb), path)
    return path


def check_cell_ids(nb: nbformat.NotebookNode) -> list[str]:
    """The ids of a notebook's autograded check cells (written answers are graded by hand)."""
    return [c.id for c in nb.cells if c.cell_type == "code"
            and c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def append_to_first_cell(path, words: str) -> None:
    """Append ``words`` to a notebook file's first cell (an edit, as a person makes one)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += f"\n\n{words}"
    nbformat.write(nb, path)


def notebook_text(path) -> str:
    """Every cell's source of a notebook file, one after another."""
    import nbformat

    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)


# A lesson as a student meets it: what comes before its quiz and exercises.
MAX_CELLS = 45
MAX_WORDS = 2500
WORDS_PER_MINUTE = 200      # prose, read with care
CODE_LINES_PER_MINUTE = 10  # code, read and run


@dataclass(frozen=True)
class LessonSize:
    """A lesson's size before its exercises, and its reading time by the one rule: prose at
    ``WORDS_PER_MINUTE``, code at ``CODE_LINES_PER_MINUTE`` (read and run), rounded up to 5 min."""

    name: str
    cells: int
    words: int
    code_lines: int

    @property
    def minutes(self) -> int:
        raw = self.words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE
        return max(5, -(-int(raw + 0.999) // 5) * 5)


def core_cells(nb: nbformat.NotebookNode) -> list:
    """The cells before the first ``## Quiz`` or ``## Exercises`` heading."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and re.search(r"(?im)^#+\s*(exercises?|quiz)\b",
                                                      cell.source):
            return nb.cells[:i]
    return list(nb.cells)


def lesson_size(path: Path) -> LessonSize:
    """``path``'s cells, prose words and code lines before its exercises."""
    cells = core_cells(nbformat.read(path, as_version=4))
    words = sum(len(c.source.split()) for c in cells if c.cell_type == "markdown")
    code = sum(1 for c in cells if c.cell_type == "code"
               for line in c.source.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    return LessonSize(path.name, len(cells), words, code)


def hand_in_quiz(chapter: str, folder: Path, owner: str | None = None) -> Path | None:
    """Put the instructor's quiz choices for ``chapter`` (``NN_name``) in a submission ``folder``,
    as a student who clicked the right answers in the widget leaves them beside the notebook
    (``quiz_NN.json``); ``owner`` makes it that user's file. None when the chapter has none."""
    import shutil

    saved = NOTEBOOKS / f"quiz_{chapter[:2]}.json"
    if not saved.exists():
        return None
    target = Path(folder) / saved.name
    shutil.copy(saved, target)
    if owner is not None:
        shutil.chown(target, owner, owner)
    return target
