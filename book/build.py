"""Build the workbook as a static website: the instructor edition, executed, one page per chapter.

    make book                       # = .venv/bin/python book/build.py
    .venv/bin/python book/build.py --reuse build/executed --out build/book

Each chapter is executed by the notebook tests' own harness (``tests/nbharness.run_notebook``:
a fresh offline kernel, the bundled model), or taken from ``--reuse`` (where the tests save
their runs with ``COURSE_SAVE_EXECUTED``) when it was run from the notebook as it is now. The
executed notebooks and an index made from the README's chapter map go to ``<out>/src``; Sphinx
with myst-nb (no execution of its own) renders them to ``<out>/html``.

Widgets need a kernel: each widget output becomes a note that says so, followed by the text the
widget shows first (the site loads no JavaScript from the network, so no widget manager). Not handled: serving the
site (open ``<out>/html/index.html`` or ``python -m http.server -d <out>/html``).
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from hashlib import sha256
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from nbharness import NOTEBOOKS, run_notebook  # noqa: E402

__all__ = ["WIDGET_NOTE", "build_book", "chapter_map", "executed_notebook", "for_the_web"]

BOOK = ROOT / "book"
OUT = ROOT / "build" / "book"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("Interactive widget: it needs a running kernel. Open this chapter in JupyterLab "
               "(make lab) to use it. What it shows first:")


def chapter_map(readme: Path = ROOT / "README.md") -> list[tuple[str, str]]:
    """(notebook stem, what it teaches) for each row of the README's chapter table."""
    rows = re.findall(r"^\| `([0-9A]\d_\w+)` \| ([^|]+) \|", readme.read_text(), re.M)
    if not rows:
        raise ValueError(f"{readme}: no chapter table (rows like '| `00_start_here` | ... |')")
    return [(stem, teaches.strip()) for stem, teaches in rows]


def _source_hash(path: Path) -> str:
    return sha256(path.read_bytes()).hexdigest()


def _execute(path: Path) -> tuple[nbformat.NotebookNode, float]:
    run = run_notebook(path)
    return run.nb, run.seconds


def executed_notebook(path: Path, reuse: Path | None) -> nbformat.NotebookNode | None:
    """The run saved in ``reuse`` for ``path`` if it was made from the notebook as it is now."""
    saved = reuse / path.name if reuse else None
    if saved is None or not saved.exists():
        return None
    nb = nbformat.read(saved, as_version=4)
    made = nb.metadata.get("course_executed", {})
    # Only a run of the default path (the bundled model, offline) is shown on the site.
    fresh = made.get("source_sha256") == _source_hash(path) and made.get("model") == "bundled"
    return nb if fresh else None


def for_the_web(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with each widget output replaced by :data:`WIDGET_NOTE` followed by the widget's
    own text (what it shows first, e.g. a trace stepper's first step), and no widget state."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_MIME in data:
                text = data.get("text/plain", "")
                first_view = "" if not text or re.match(r"^\w+\(", text) else \
                    f'<pre class="widget-text">{html.escape(text)}</pre>'
                out["data"] = {"text/plain": WIDGET_NOTE,
                               "text/html": f'<p class="widget-note"><em>{WIDGET_NOTE}</em></p>'
                                            + first_view}
    return nb


def _index(chapters: list[tuple[str, str]]) -> str:
    rows = "\n".join(f"| [{stem}]({stem}.ipynb) | {teaches} |" for stem, teaches in chapters)
    toc = "\n".join(stem for stem, _ in chapters)
    return f"""# Tool use, code agents and conversation memory

The workbook's chapters, executed offline on a laptop CPU with the bundled model
(SmolLM2-135M-Instruct) exactly as the tests run them. This is the **instructor edition**:
exercises show their solutions. To run the chapters yourself, `make lab` opens the student
edition in JupyterLab (widgets need a running kernel, so here each one is a note).

| chapter | what it teaches |
|---|---|
{rows}

```{{toctree}}
:maxdepth: 1
:caption: Chapters

{toc}
```
"""


def build_book(out: Path = OUT, reuse: Path | None = None, workers: int = 2) -> Path:
    """Execute (or reuse) every chapter, render the site; return the path of its index page."""
    chapters = chapter_map()
    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    for stale in src.glob("*.ipynb"):
        stale.unlink()
    paths = [NOTEBOOKS / f"{stem}.ipynb" for stem, _ in chapters]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"the README's chapter map names missing notebooks: {missing}")
    ready = {p: executed_notebook(p, reuse) for p in paths}
    to_run = [p for p, nb in ready.items() if nb is None]
    print(f"book: {len(paths) - len(to_run)} chapters reused from {reuse}, "
          f"{len(to_run)} to execute", flush=True)
    failed = []
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(_execute, path): path for path in to_run}
        for future in as_completed(futures):
            path = futures[future]
            try:
                ready[path], seconds = future.result()
            except Exception as err:  # nbclient's CellExecutionError names the cell
                failed.append(f"{path.name}: {str(err)[-1500:]}")
                print(f"book: {path.name} FAILED", flush=True)
                continue
            print(f"book: executed {path.name} in {seconds:.1f} s", flush=True)
    if failed:
        raise RuntimeError("chapters that did not run top to bottom:\n" + "\n".join(failed))
    for path, nb in ready.items():
        nbformat.write(for_the_web(nb), src / path.name)
    (src / "index.md").write_text(_index(chapters))
    html = out / "html"
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(BOOK),
                    "-d", str(out / "doctrees"), str(src), str(html)], check=True)
    return html / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--reuse", type=Path, default=None,
                        help="folder of executed notebooks saved by the tests")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    index = build_book(args.out, args.reuse, args.workers)
    print(f"book: {index} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
