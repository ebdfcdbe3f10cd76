"""The command line: ``python -m classroom.grading student|grade`` (``--help`` for the options).

``student`` writes the student edition of instructor notebooks; ``grade`` has nbgrader grade a
folder of submissions into a CSV (see :mod:`classroom.grading.submissions`). Not handled:
nbgrader's other commands (``make nbgrader-*`` runs those with the course template in
``nbgrader/``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from classroom.grading.bubblewrap import SandboxUnavailable
from classroom.grading.results import OutputPathError, ResourceLimits
from classroom.grading.student import write_student_editions
from classroom.grading.submissions import grade_class
from course.cli import whole_number

__all__ = ["main"]


def _gigabytes(text: str) -> float:
    """argparse type: a memory size in GB, above 0 (at least 0.25, what a kernel needs)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.25 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not allowed: give the memory one "
                                         "kernel may use in GB, from 0.25 to 4096, e.g. 6")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m classroom.grading",
        description="Student edition and class grading for the workbook's exercises.")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("student", help="write the student edition of instructor notebooks")
    st.add_argument("sources", nargs="+", type=Path, help="instructor notebooks or folders")
    st.add_argument("--out", type=Path, default=Path("student"), help="output folder")
    gr = sub.add_parser("grade", help="grade a folder of submissions, write a CSV of scores")
    gr.add_argument("submissions", type=Path, help="folder of <student>/<notebook>.ipynb")
    gr.add_argument("--source", type=Path, nargs="+", default=[Path("notebooks")],
                    help="instructor notebooks or folders (default: notebooks)")
    gr.add_argument("--out", type=Path, default=Path("scores.csv"), help="CSV to write")
    gr.add_argument("--feedback", type=Path, default=None,
                    help="folder for the executed notebooks, one sub-folder per student")
    gr.add_argument("--workers", type=whole_number(1, 64, example=2), default=2,
                    help="notebooks graded at once")
    gr.add_argument("--cell-timeout", type=whole_number(1, 86400, example=60),
                    default=ResourceLimits.cell_timeout_s, help="seconds one cell may run")
    gr.add_argument("--notebook-timeout", type=whole_number(1, 86400, example=600),
                    default=ResourceLimits.notebook_timeout_s,
                    help="seconds one notebook may run")
    gr.add_argument("--memory-gb", type=_gigabytes, default=ResourceLimits.memory_bytes / 2**30,
                    help="memory one kernel may use, in GB")
    gr.add_argument("--output-cap", type=whole_number(1, example=100_000),
                    default=ResourceLimits.output_bytes_per_cell,
                    help="bytes of output kept per cell")
    gr.add_argument("--no-sandbox", action="store_true",
                    help="run kernels with the grader's rights (a trusted class only)")
    args = parser.parse_args(argv)
    if args.command == "student":
        try:
            for path in write_student_editions(args.sources, args.out):
                print(f"wrote {path}")
        except (OSError, ValueError, RuntimeError) as err:  # a missing source, a bad marker
            parser.exit(2, f"{parser.prog} student: {err}. Fix: give instructor notebooks or "
                           "folders of them, e.g. `python -m classroom.grading student notebooks`\n")
        return 0
    limits = ResourceLimits(cell_timeout_s=args.cell_timeout,
                            notebook_timeout_s=args.notebook_timeout,
                            memory_bytes=int(args.memory_gb * 2**30),
                            cpu_seconds=max(args.notebook_timeout * 2, 60),
                            output_bytes_per_cell=args.output_cap)
    start = time.perf_counter()
    try:
        results = grade_class(args.submissions, args.source, args.out, args.workers, limits,
                              feedback_dir=args.feedback, sandbox=not args.no_sandbox)
    except SandboxUnavailable as err:
        print(f"cannot grade in a sandbox: {err} (or pass --no-sandbox for a trusted class)",
              file=sys.stderr)
        return 2
    except (OutputPathError, ValueError, FileNotFoundError) as err:  # before any grading
        print(f"cannot grade: {err}", file=sys.stderr)
        return 2
    print(f"graded {len(results)} notebooks in {time.perf_counter() - start:.1f} s; "
          f"scores in {args.out}")
    return 0
