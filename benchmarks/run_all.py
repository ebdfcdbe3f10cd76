"""Measure, in one run: cold and warm load of the bundled model, greedy generation speed, the
time to execute each notebook, the seconds before ``going-further`` and its slowest
cells. Prints figures and ratios; asserts nothing
(tests never time).

    make benchmark            # or: .venv/bin/python benchmarks/run_all.py [--skip-notebooks]
    .venv/bin/python benchmarks/run_all.py --cells-only [--executed build/executed]

Cell times come from the same nbclient run (nbclient records when each cell started and
replied in ``cell.metadata.execution``). ``--executed`` reads notebooks the tests saved with
``COURSE_SAVE_EXECUTED`` instead of running them again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

LOAD_SNIPPET = """
import time, json
t0 = time.perf_counter()
import torch, transformers
from course.models import load_local_model
t1 = time.perf_counter()
local = load_local_model()
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1}))
"""


def load_in_fresh_process(env: dict[str, str]) -> dict[str, float]:
    """Import + load the active model in a new interpreter, as a new kernel would."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", LOAD_SNIPPET], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["process_s"] = time.perf_counter() - start
    return figures


def generation_speed(new_tokens: int = 64, repeats: int = 3) -> float:
    """Greedy tokens per second of the bundled model (median of ``repeats`` runs)."""
    import torch

    from course.models import load_local_model

    local = load_local_model()
    inputs = local.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Tell me about the city of Paris."}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    speeds = []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            out = local.model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                       do_sample=False, pad_token_id=local.tokenizer.eos_token_id)
        made = out.shape[1] - inputs["input_ids"].shape[1]
        speeds.append(made / (time.perf_counter() - start))
    return sorted(speeds)[len(speeds) // 2]


CELL_LIMIT_S = 15  # the slowest a cell may be with the bundled model on 2 cores


def cell_seconds(nb: nbformat.NotebookNode) -> list[tuple[str, float]]:
    """(cell id, seconds from execute_input to execute_reply) of each executed code cell."""
    times = []
    for cell in nb.cells:
        stamps = cell.get("metadata", {}).get("execution", {})
        start, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
        if start and end:
            seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                       - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            times.append((cell.get("id", "?"), seconds))
    return times


CORE_LIMIT_S = 60  # a lesson's cells before its quiz (benchmarks/lessons.py), quiet 2-core machine


def seconds_in(nb: nbformat.NotebookNode, cells: list) -> float:
    """Seconds spent in ``cells`` (some of ``nb``'s executed cells), from their stamps."""
    ids = {c.get("id") for c in cells}
    return sum(sec for cell, sec in cell_seconds(nb) if cell in ids)


def core_seconds(nb: nbformat.NotebookNode) -> float:
    """Seconds spent before ``going-further``: every cell a student runs but the live extras."""
    ids = [c.get("id") for c in nb.cells]
    return seconds_in(nb, nb.cells[:ids.index("going-further")] if "going-further" in ids
                      else nb.cells)


def print_slowest_cells(name: str, nb: nbformat.NotebookNode, top: int = 3) -> None:
    times = sorted(cell_seconds(nb), key=lambda t: -t[1])
    shown = ", ".join(f"{cell} {sec:.1f} s" + (f" (over {CELL_LIMIT_S} s)" if sec > CELL_LIMIT_S else "")
                      for cell, sec in times[:top])
    print(f"  slowest cells of {name}: {shown or 'no timings recorded'}")


def notebook_times(executed: Path | None) -> None:
    """Each notebook's run time and slowest cells, from a fresh run or saved runs."""
    from nbharness import NOTEBOOKS, run_notebook

    total = 0.0
    if executed is None:
        print(f"notebooks run one at a time, torch on {os.cpu_count()} threads (a student's kernel)")
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        if executed is not None:
            saved = executed / path.name
            if not saved.exists():
                print(f"notebook {path.name}: no saved run in {executed}")
                continue
            nb = nbformat.read(saved, as_version=4)
            seconds = sum(sec for _, sec in cell_seconds(nb))
            print(f"notebook {path.name}: {seconds:.1f} s in its cells (saved run)")
        else:
            # One kernel at a time, as a student runs them: every core for torch (the tests
            # give each kernel one thread, because two kernels share the cores there).
            run = run_notebook(path, env={"COURSE_TORCH_THREADS": str(os.cpu_count() or 1)})
            nb, seconds = run.nb, run.seconds
            print(f"notebook {path.name}: {seconds:.1f} s")
        total += seconds
        core = core_seconds(nb)
        print(f"  before Going further, {path.name}: {core:.1f} s in its cells")
        print_slowest_cells(path.name, nb)
    print(f"all notebooks, one after another: {total:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-notebooks", action="store_true")
    parser.add_argument("--cells-only", action="store_true",
                        help="only the notebooks' times and slowest cells")
    parser.add_argument("--executed", type=Path, default=None,
                        help="read saved executed notebooks instead of running them")
    args = parser.parse_args()
    if args.cells_only:
        notebook_times(args.executed)
        return
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("COURSE_MODEL", None)

    with tempfile.TemporaryDirectory() as cache:
        cold = load_in_fresh_process(dict(env, COURSE_CACHE=cache))
        warm = load_in_fresh_process(dict(env, COURSE_CACHE=cache))
    print("model load in a fresh process (as a new kernel does):")
    print(f"  cold (GGUF dequantised, converted, saved): {cold['load_s']:.1f} s "
          f"+ {cold['import_s']:.1f} s torch/transformers imports")
    print(f"  warm (converted safetensors copy):         {warm['load_s']:.2f} s "
          f"+ {warm['import_s']:.1f} s torch/transformers imports")
    print(f"cold / warm load ratio: {cold['load_s'] / warm['load_s']:.0f}x")
    print(f"greedy generation: {generation_speed():.1f} tokens/s")

    if not args.skip_notebooks:
        notebook_times(args.executed)


if __name__ == "__main__":
    main()
