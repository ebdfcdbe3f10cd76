"""Measure, in one run: cold and warm load of the bundled model, greedy generation speed, and the
time to execute each notebook. Prints figures and ratios; asserts nothing (tests never time).

    make benchmark            # or: .venv/bin/python benchmarks/run_all.py [--skip-notebooks]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-notebooks", action="store_true")
    args = parser.parse_args()
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
        from nbharness import NOTEBOOKS, run_notebook

        total = 0.0
        for path in sorted(NOTEBOOKS.glob("*.ipynb")):
            seconds = run_notebook(path).seconds
            total += seconds
            print(f"notebook {path.name}: {seconds:.1f} s")
        print(f"all notebooks, one after another: {total:.1f} s")


if __name__ == "__main__":
    main()
