"""Every command line of the course, given nonsense: it ends in a line or two on stderr naming
the input and the fix, with exit status 2, no stack trace, before any model is loaded or any
work starts; a result the course ships (``course/data/``) is never overwritten by default.

Each case runs the real command in a subprocess (about a second: nothing loads a model), from a
temporary working folder. The table of cases, with how each ended before, is in
``docs/adversarial.md``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
COMMITTED_BFCL = ROOT / "course" / "data" / "bfcl_bundled.json"
COMMITTED_TOOL_COUNT = ROOT / "course" / "data" / "tool_count_accuracy.json"


def run(argv: list[str], cwd: Path, timeout: float = 120,
        **settings: str) -> subprocess.CompletedProcess:
    env = {"PATH": str(Path(PY).parent) + ":/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HOME": str(Path.home()), "LANG": "C.UTF-8", **settings}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


def refused(proc: subprocess.CompletedProcess, *says: str) -> str:
    """The contract of a refusal: status 2, no traceback, a short message saying ``says``."""
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1500:], err[-1500:])
    assert "Traceback" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    message = [line for line in lines if not line.startswith(("usage:", " "))]
    assert 1 <= len(message) <= 3, err
    for text in says:
        assert text in err, (text, err)
    return err


def module(name: str, *args: str) -> list[str]:
    return [PY, "-m", name, *args]


def script(name: str, *args: str) -> list[str]:
    return [PY, str(ROOT / "scripts" / name), *args]


def case(kind: str, argv: list[str], *says: str, id: str):
    return pytest.param(argv, says, marks=pytest.mark.contract(kind), id=id)


@pytest.fixture
def tables(tmp_path: Path) -> Path:
    (tmp_path / "not-json.json").write_text("not json")
    (tmp_path / "a-list.json").write_text("[1, 2]")
    (tmp_path / "rows-5.json").write_text('{"rows": 5}')
    return tmp_path


NUMBER = "is not allowed: give a whole number"

CASES = [
    # python -m course.tools.bfcl (chapter 01's benchmark run)
    case("raw crash", module("course.tools.bfcl", "--limit", "0"), "--limit", NUMBER,
         id="bfcl --limit 0"),
    case("wrong result", module("course.tools.bfcl", "--limit", "-5"), "--limit", NUMBER,
         id="bfcl --limit -5"),
    case("wrong result", module("course.tools.bfcl", "--threads", "0"), "--threads", NUMBER,
         id="bfcl --threads 0"),
    case("unclear error", module("course.tools.bfcl", "--categories", "nonsense"),
         "'nonsense' not measured here", "choose from simple, multiple",
         id="bfcl --categories nonsense"),
    case("unclear error", module("course.tools.bfcl", "--model", "nonsense model"),
         "--model: COURSE_MODEL='nonsense model' is not understood", "Fix:",
         id="bfcl --model nonsense"),
    case("raw crash", module("course.tools.bfcl", "--merge", "not-json.json"),
         "not-json.json is not a BFCL table", "Fix:", id="bfcl --merge not JSON"),
    case("raw crash", module("course.tools.bfcl", "--merge", "a-list.json"),
         "a-list.json is not a BFCL table", id="bfcl --merge a list"),
    case("raw crash", module("course.tools.bfcl", "--merge", "rows-5.json"),
         "rows-5.json is not a BFCL table", id="bfcl --merge rows=5"),
    case("unclear error", module("course.tools.bfcl", "--limit", "1", "--out", "."),
         "is a folder: give a file name", id="bfcl --out a folder"),
    case("data loss", module("course.tools.bfcl", "--limit", "1", "--out", "no-dir/t.json"),
         "its folder", "does not exist", "Fix:", id="bfcl --out in a missing folder"),
    # python -m course.tools.tool_count (chapter 01's tool-count curve)
    case("raw crash", module("course.tools.tool_count", "--jobs", "0"), "--jobs", NUMBER,
         id="tool_count --jobs 0"),
    case("raw crash", module("course.tools.tool_count", "--sizes", "abc"), "--sizes", NUMBER,
         id="tool_count --sizes abc"),
    case("wrong result", module("course.tools.tool_count", "--draws", "0"), "--draws", NUMBER,
         id="tool_count --draws 0"),
    # python -m course.finetune (appendix A4)
    case("wrong result", module("course.finetune", "--threads", "0"), "--threads", NUMBER,
         id="finetune --threads 0"),
    case("raw crash", module("course.finetune", "--threads", "-3"), "--threads", NUMBER,
         id="finetune --threads -3"),
    case("wrong result", module("course.finetune", "--eval-steps", "0"), "--eval-steps", NUMBER,
         id="finetune --eval-steps 0"),
    case("wrong result", module("course.finetune", "--steps", "0"), "--steps", NUMBER,
         id="finetune --steps 0"),
    case("wrong result", module("course.finetune", "--name="), "--name", "is not a name",
         "no '/'", id="finetune --name ''"),
    case("data loss", module("course.finetune", "--name", "../../x"), "'../../x' is not a name",
         id="finetune --name ../../x"),
    case("wrong result", module("course.finetune", "--eval-only", "--no-eval"),
         "not allowed with argument", id="finetune --eval-only --no-eval"),
    case("wrong result", module("course.finetune", "--eval-only", "--name", "no-such-adapter"),
         "--eval-only --name no-such-adapter", "adapters here: smollm2-agent, smollm2-tools",
         id="finetune --eval-only, no such adapter"),
    # python -m course.memory.store (chapter 04's second process)
    case("raw crash", module("course.memory.store", "append", "m.sqlite", "t", "w", "1",
                             "--delay", "-1"), "--delay", "give seconds from 0",
         id="store append --delay -1"),
    case("wrong result", module("course.memory.store", "append", "m.sqlite", "t", "w", "-3"),
         "turns", NUMBER, id="store append -3 turns"),
    case("raw crash", module("course.memory.store", "read", "no-such.sqlite", "t"),
         "no checkpoint file at no-such.sqlite", "Fix:", id="store read, no such file"),
    case("raw crash", module("course.memory.store", "append", "m.sqlite", "\udcff", "w", "1"),
         "not valid Unicode", id="store append, thread id not valid Unicode"),
    # python -m course.memory.prefix_cache (chapter 04, going further)
    case("raw crash", module("course.memory.prefix_cache", "--max-new-tokens", "0"),
         "--max-new-tokens", NUMBER, id="prefix_cache --max-new-tokens 0"),
    case("unclear error", module("course.memory.prefix_cache", "--turns", "99"),
         "--turns", "from 1 to 12", id="prefix_cache --turns 99"),
    # python -m course.guards.warehouse (chapter 06's approval across processes)
    case("raw crash", module("course.guards.warehouse", "--db", "w.sqlite", "--thread", "t",
                             "edit", "--arguments", "not json"),
         "--arguments", "is not JSON", "give a JSON object", id="warehouse --arguments not JSON"),
    case("data loss", module("course.guards.warehouse", "--db", ":memory:", "--thread", "t",
                             "show"), "nothing would persist", "Fix:",
         id="warehouse --db :memory:"),
    case("raw crash", module("course.guards.warehouse", "--db", "w.sqlite", "--thread", "t",
                             "approve"), "not waiting for a decision", "Fix:",
         id="warehouse approve, nothing waiting"),
    # python -m classroom.grading (the class grader)
    case("wrong result", module("classroom.grading", "grade", "sub", "--workers", "0"),
         "--workers", NUMBER, id="grading --workers 0"),
    case("wrong result", module("classroom.grading", "grade", "sub", "--cell-timeout", "-1"),
         "--cell-timeout", NUMBER, id="grading --cell-timeout -1"),
    case("wrong result", module("classroom.grading", "grade", "sub", "--memory-gb", "-1"),
         "--memory-gb", "from 0.25 to 4096", id="grading --memory-gb -1"),
    case("raw crash", module("classroom.grading", "student", "no-such-folder"),
         "no-such-folder: not a notebook or a folder of notebooks", "Fix:",
         id="grading student, no such source"),
    # python -m classroom.workspace (the student's copy)
    case("unclear error", module("classroom.workspace", "--dest", "a-file", "sync"),
         "a-file is a file", "Fix: rename or move that file", id="workspace --dest a file"),
    case("unclear error", module("classroom.workspace", "--dest", "st", "restore", "1" * 5000),
         "no chapter", "(5000 characters)", id="workspace restore, 5000 digits"),
    # python -m classroom.hub (the class on JupyterHub)
    case("wrong result", module("classroom.hub", "--port", "0"), "--port", NUMBER,
         id="classroom.hub --port 0"),
    case("wrong result", module("classroom.hub", "--prefix", "../x"),
         "cannot start an account name", id="classroom.hub --prefix ../x"),
    # python -m course
    case("unclear error", module("course", "nonsense"), "invalid choice", id="course nonsense"),
    # scripts/
    case("hang", script("adversarial.py", "--timeout", "-1"), "--timeout", "give seconds",
         id="adversarial.py --timeout -1"),
    case("wrong result", script("colab_mirror.py", "--timeout", "0"), "--timeout 0",
         "from 1 to 86400", id="colab_mirror.py --timeout 0"),
]


@pytest.mark.parametrize(("argv", "says"), CASES)
def test_a_command_line_refuses_nonsense_in_a_line_or_two(argv, says, tables):
    (tables / "a-file").write_text("my notes\n")
    refused(run(argv, tables), *says)
    assert (tables / "a-file").read_text() == "my notes\n"  # nothing in the way was touched


# --- a committed result is never overwritten by default -----------------------------------------


@pytest.mark.contract("data loss")
@pytest.mark.parametrize(("command", "committed"), [("course.tools.bfcl", COMMITTED_BFCL),
                                                    ("course.tools.tool_count",
                                                     COMMITTED_TOOL_COUNT)])
def test_a_committed_result_is_not_overwritten_without_the_flag(command, committed, tmp_path):
    before = committed.read_bytes()
    err = refused(run(module(command, "--out", str(committed)), tmp_path),
                  "is a result the course ships", "--overwrite", "leave out --out")
    assert str(committed) in err
    assert committed.read_bytes() == before


@pytest.mark.contract("data loss")
def test_bfcl_merge_writes_a_new_file_here_by_default(tmp_path):
    """The run's default output is a new dated file in the working folder, never the committed
    table (a --merge runs no model, so the default is exercised end to end)."""
    before = COMMITTED_BFCL.read_bytes()
    table = tmp_path / "mine.json"
    shutil.copy(COMMITTED_BFCL, table)
    proc = run(module("course.tools.bfcl", "--merge", str(table)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = [p for p in tmp_path.glob("bfcl_bundled.*.json")]
    assert len(written) == 1 and f"written to {written[0]}" in proc.stdout
    assert json.loads(written[0].read_text())["rows"] == json.loads(before)["rows"]
    assert COMMITTED_BFCL.read_bytes() == before


@pytest.mark.contract("data loss")
def test_an_existing_output_needs_the_flag_and_the_flag_replaces_it(tmp_path):
    table = tmp_path / "mine.json"
    shutil.copy(COMMITTED_BFCL, table)
    out = tmp_path / "out.json"
    out.write_text("a table I keep\n")
    refused(run(module("course.tools.bfcl", "--merge", str(table), "--out", str(out)), tmp_path),
            "out.json exists", "--overwrite")
    assert out.read_text() == "a table I keep\n"
    proc = run(module("course.tools.bfcl", "--merge", str(table), "--out", str(out),
                      "--overwrite"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["model"] == json.loads(table.read_text())["model"]


@pytest.mark.contract("data loss")
def test_the_adapter_name_cannot_leave_the_adapters_folder():
    from course.cli import safe_name

    for bad in ("", "..", "../../x", "a/b", ".hidden", "-rf", "x" * 101, "a\x00b"):
        with pytest.raises(Exception, match="is not a name"):
            safe_name(bad)
    assert safe_name("smollm2-tools") == "smollm2-tools"


@pytest.mark.contract("raw crash")
def test_prepare_with_a_course_cache_under_a_file_says_so(tmp_path):
    (tmp_path / "a-file").write_text("my notes\n")
    cache = tmp_path / "a-file" / "cache"
    err = refused(run(module("course", "prepare"), tmp_path, COURSE_CACHE=str(cache)),
                  "python -m course prepare: COURSE_CACHE=", "is a file, not a folder", "Fix:")
    assert str(tmp_path / "a-file") in err
    assert (tmp_path / "a-file").read_text() == "my notes\n"
