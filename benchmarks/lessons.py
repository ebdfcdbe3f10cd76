"""Each lesson as a student meets it, in one table: its cells, prose words and code lines before
the quiz and exercises, its reading time by the one rule, and the seconds its core path takes.

    .venv/bin/python benchmarks/lessons.py                    # runs each core path in a fresh kernel
    .venv/bin/python benchmarks/lessons.py --executed build/executed   # reads saved runs instead

The core path is every cell before the lesson's ``## Quiz`` (nbharness.core_cells); it runs in a
fresh kernel with every core for torch, as a student's kernel has them, one lesson at a time.
``--executed`` sums the same cells' times from notebooks the tests saved (``COURSE_SAVE_EXECUTED``;
their kernels had one torch thread each and shared the machine, so those seconds are higher).
Prints figures and marks what is over a limit; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run_all import CORE_LIMIT_S, seconds_in  # noqa: E402

from nbharness import MAX_CELLS, MAX_WORDS, NOTEBOOKS, core_cells, lesson_size, run_notebook  # noqa: E402


def core_seconds(nb: nbformat.NotebookNode) -> float:
    """Seconds in the cells before the quiz, from their execution stamps."""
    return seconds_in(nb, core_cells(nb))


def run_core(path: Path) -> nbformat.NotebookNode:
    """``path``'s core path executed in a fresh kernel (a copy beside the lesson, then removed)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells = core_cells(nb)
    with tempfile.NamedTemporaryFile("w", suffix=".ipynb", dir=path.parent, delete=False) as f:
        nbformat.write(nb, f)
    copy = Path(f.name)
    try:
        return run_notebook(copy, env={"COURSE_TORCH_THREADS": str(os.cpu_count() or 1)}).nb
    finally:
        copy.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executed", type=Path, default=None,
                        help="read the tests' saved runs instead of running each core path")
    args = parser.parse_args()
    print(f"{'lesson':32} {'cells':>6} {'words':>6} {'code':>5} {'minutes':>8} {'core s':>7}")
    # the lessons, then the appendices (A1_...), which keep the same limits
    for path in sorted(NOTEBOOKS.glob("[0-9A][0-9]_*.ipynb")):
        size = lesson_size(path)
        if args.executed is not None:
            saved = args.executed / path.name
            seconds = core_seconds(nbformat.read(saved, as_version=4)) if saved.exists() else None
        else:
            seconds = core_seconds(run_core(path))
        over = [what for what, value, limit in (("cells", size.cells, MAX_CELLS),
                                                 ("words", size.words, MAX_WORDS),
                                                 ("core s", seconds or 0, CORE_LIMIT_S))
                if value > limit]
        shown = f"{seconds:7.1f}" if seconds is not None else " (none)"
        print(f"{path.stem:32} {size.cells:6d} {size.words:6d} {size.code_lines:5d} "
              f"{size.minutes:8d} {shown}" + (f"  over: {', '.join(over)}" if over else ""))
    print(f"limits: {MAX_CELLS} cells and {MAX_WORDS} words before the quiz (an appendix: in all); "
          f"core path {CORE_LIMIT_S} s on a quiet 2-core machine")


if __name__ == "__main__":
    main()
