"""A chapter kernel loads the model only when a cell asks for it, and after a cell that ran the
model it gives back what the forward passes freed (course/memory_release.py).

The kernel test runs real cells in a real ipykernel (nbclient, the tests' kernel environment),
the one ``make lab`` gives a student: forked from the lab's pre-imported process, like
``nbharness.run_notebook``'s. A chapter's first cell maps no weights; a forward pass over a
long prompt whose outputs are left in a reference cycle (as a library's caught exception leaves
a KV cache in its frame) is given back after the cell; with the hook unregistered, the same
cell keeps the memory.
"""

from __future__ import annotations

import json
import os
import sys

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from course import memory_release
from nbharness import CELL_TIMEOUT_S, NOTEBOOKS, lab_kernel_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/smaps_rollup and /proc/self/maps")

MEASURE = """\
import json
def anon_mb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024
def weights_mapped():
    return any(line.rstrip().endswith("model.safetensors") for line in open("/proc/self/maps"))
"""

CYCLE = """\
class Holder:  # a reference cycle holding the outputs, like a caught exception's frame
    pass
holder = Holder()
holder.me = holder
ids = probe.tokenizer(" ".join(["memory"] * 1500), return_tensors="pt")
with torch.no_grad():
    holder.out = probe.model(**ids)  # logits of 1,500 positions: about 295 MB
del holder
before_release = anon_mb()
"""


def run_cells(sources: list[str]) -> list[str]:
    """Run ``sources`` as the cells of one notebook in a fresh kernel; each cell's stdout."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(lab_kernel_env())
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return ["".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
            for c in nb.cells]


def test_a_kernel_loads_the_model_only_when_a_cell_asks_and_gives_back_what_it_freed():
    first_cell = nbformat.read(NOTEBOOKS / "00_start_here.ipynb", as_version=4).cells
    setup = next(c.source for c in first_cell if c.get("id") == "setup")
    out = run_cells([
        MEASURE,
        setup,  # the chapter's own first cell, as a student reopening the lab runs it
        "import course.models as m, course.memory_release as r\n"
        "print(json.dumps([weights_mapped(), m.load_model_on.cache_info().currsize, r.LOG.registered]))",
        "import torch\nfrom course.models import probe_model\nprobe = probe_model()\n"
        "print(json.dumps([weights_mapped(), r.LOG.registered, r.LOG.frozen > 100_000]))",
        "start = anon_mb()",
        CYCLE,
        "print(json.dumps([before_release - start, anon_mb() - start, r.LOG.releases]))",
        "get_ipython().events.unregister('post_execute', r._after_cell)\nstart = anon_mb()",
        CYCLE,
        "print(json.dumps([anon_mb() - start]))",
    ])
    assert json.loads(out[2]) == [False, 0, False]  # set up, nothing loaded, no hook
    assert json.loads(out[3]) == [True, True, True]  # loaded when asked: mapped, hook on
    held, after, releases = json.loads(out[6])
    assert held > 200, f"the cycle held only {held:.0f} MB: the test does not test"
    assert after < 60, f"{after:.0f} MB kept after the cell that ran the model"
    assert releases == 1  # the cell that ran the model, not the ones that only measured
    (kept,) = json.loads(out[9])
    assert kept > 200, f"without the hook only {kept:.0f} MB stayed: the hook did nothing"


def test_nothing_is_registered_outside_a_kernel_or_without_glibc(monkeypatch):
    layer = torch.nn.Linear(2, 2)
    assert memory_release._ipython() is None  # pytest is no IPython shell
    assert memory_release.release_after_model_cells(layer) is False
    assert not layer._forward_pre_hooks
    monkeypatch.setattr(memory_release, "_ipython", lambda: object())
    monkeypatch.setattr(memory_release, "glibc_malloc_trim", lambda: None)
    assert memory_release.release_after_model_cells(layer) is False
    assert not layer._forward_pre_hooks
    assert memory_release.release(collect=False) >= 0.0  # without glibc: nothing to trim


def test_glibc_trim_is_found_here():
    trim = memory_release.glibc_malloc_trim()
    assert trim is not None and trim(0) in (0, 1)


def test_the_doctor_does_not_keep_the_tokenizers_it_checked():
    """Chapter 00's doctor loads the GPT-2 (LangChain's counter) and Qwen tokenizers to check
    them; it leaves neither in a cache (about 170 MB a kernel would otherwise keep)."""
    from langchain_core.language_models.base import get_tokenizer

    from course import assets, doctor

    get_tokenizer.cache_clear()
    assets._load_qwen.cache_clear()
    checks = {check.name: check for check in (doctor._gpt2(), doctor._qwen())}
    assert checks["GPT-2 tokenizer"].ok, checks
    assert checks["Qwen tokenizer"].ok or checks["Qwen tokenizer"].optional, checks
    assert get_tokenizer.cache_info().currsize == 0
    assert assets._load_qwen.cache_info().currsize == 0
    kept = get_tokenizer()  # a tokenizer someone else loaded first stays loaded
    doctor._gpt2()
    assert get_tokenizer() is kept
