"""Memory of the seven chapter kernels kept alive together, as a student who opens every chapter
and runs them all would have them.

Every chapter notebook 00-06 is run top to bottom in its own kernel with nbclient (one after the
other, offline, the bundled model, the tests' kernel environment); all seven kernels are kept
alive, then each kernel process is measured (psutil ``memory_full_info``: RSS resident, USS
private to it, PSS its proportional share, shared pages divided among the processes that map
them) with its run time, and the seven PSS are summed. The column ``weights`` says how the kernel
holds the model file: resident pages of the mapped ``model.safetensors`` and how many of them are
private dirty (copied on write); with the copying load the file is not mapped at all. The column
``release`` is what course/memory_release.py did in that kernel: how many cells it released
after, and their total seconds (part of the run time).

    .venv/bin/python benchmarks/kernel_memory.py              # the course as the lab runs it
    .venv/bin/python benchmarks/kernel_memory.py --compare    # ordinary vs forked, in one run
    .venv/bin/python benchmarks/kernel_memory.py --compare --before copy --rounds 2

Configurations, each made by a cell put before the notebook's first one and by the kernelspec
(nothing else differs):

* ``copy`` (the course before the weights were shared): the weights read into each kernel
  (``disable_mmap=True``) and no release after model cells, ordinary kernels;
* ``mapped``: the weights mapped and shared, no release after model cells, ordinary kernels;
* ``course``: the course's code (weights mapped, freed memory given back after model cells) in
  ordinary kernels (jupyter_client's own ``python3`` kernelspec, a process per kernel);
* ``forked``: the same code in kernels forked from one pre-imported process, the lab's
  kernelspec ``lab/kernels/python3`` (classroom/kernels.py). Its zygote runs from a runtime folder
  of the benchmark's own (a zygote another process started is not used), and the sum of PSS
  **includes the zygote's PSS** (it holds the pages the seven share); it is stopped at the end.

``--compare`` runs ``--before`` (default ``course``) then ``forked`` and prints the ratios
after/before, and checks that every chapter printed the same text both ways (measured seconds
masked, see :func:`text_outputs`); ``--rounds N`` alternates them N times (before, after,
before, after, ...) and takes the ratio of run times from each chapter's median (the memory of
every round is printed).
``--mmap-threshold 131072`` is an experiment: glibc's mmap and trim thresholds set in each
kernel first. Run times are wall-clock on a machine others may be using: read them with the load
average printed beside them. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
import psutil
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from nbharness import CELL_TIMEOUT_S, NOTEBOOKS, ExecutedNotebook, kernel_env  # noqa: E402

CHAPTERS = sorted(p.name for p in NOTEBOOKS.glob("0[0-6]_*.ipynb"))
WEIGHTS_FILE = "model.safetensors"
MB = 1e6

COPY_CELL = """\
# benchmark only (kernel_memory.py --copy): the weights read into the kernel's own memory
import transformers as _tf
_pretrained = _tf.AutoModelForCausalLM.from_pretrained.__func__
def _copying(cls, *args, **kwargs):
    kwargs.setdefault("disable_mmap", True)
    return _pretrained(cls, *args, **kwargs)
_tf.AutoModelForCausalLM.from_pretrained = classmethod(_copying)
"""

NO_RELEASE_CELL = """\
# benchmark only (kernel_memory.py --before): the course without its release after model cells
import course.memory_release as _release
_release.release_after_model_cells = lambda model: False
"""

RELEASE_LOG_CELL = """\
# benchmark only (kernel_memory.py): what course/memory_release.py did in this kernel
import json as _json, course.memory_release as _release
print(_json.dumps([_release.LOG.releases, _release.LOG.seconds]))
"""

CONFIGS = {  # name: (label, prelude cells, forked kernels)
    "copy": ("weights copied into each kernel (disable_mmap=True), no release, ordinary kernels",
             [COPY_CELL, NO_RELEASE_CELL], False),
    "mapped": ("weights mapped, no release after model cells, ordinary kernels",
               [NO_RELEASE_CELL], False),
    "course": ("the course's code (weights mapped, release after model cells), ordinary kernels",
               [], False),
    "forked": ("the course's code in kernels forked from one pre-imported process (the lab's "
               "kernelspec)", [], True),
}
LAB_KERNELS = ROOT / "lab"  # JUPYTER_PATH of the forked configuration: lab/kernels/python3


@functools.cache
def zygote_dir() -> str:
    """The runtime folder of this run's zygote (private, made on first use, once)."""
    return tempfile.mkdtemp(prefix="kernel-memory-zygotes-")


MASKS = [  # what differs from run to run: measured times a cell prints, and object addresses
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?= ?(?:s|ms|seconds?|tokens/s)\b)"), "<seconds>"),
    (re.compile(r"(?<=seconds per run = )\d+(?:\.\d+)?"), "<seconds>"),
    (re.compile(r"(?<=seconds=)\d+(?:\.\d+)?"), "<seconds>"),
    (re.compile(r"(?<= at )0x[0-9a-fA-F]+\b"), "<address>"),
]


def text_outputs(run: ExecutedNotebook) -> list[tuple[str, str]]:
    """Each code cell's id and the text a student sees under it, with the measured seconds a
    cell prints replaced by ``<seconds>`` and object addresses by ``<address>`` (:data:`MASKS`:
    the only text expected to differ between two runs)."""
    texts = []
    for cell in run.nb.cells:
        if cell.cell_type == "code":
            text = run.text(cell.id) if cell.get("id") else ""
            for pattern, mask in MASKS:
                text = pattern.sub(mask, text)
            texts.append((cell.get("id", "?"), text))
    return texts

MMAP_THRESHOLD_CELL = """\
# benchmark only (kernel_memory.py --mmap-threshold): glibc serves allocations from {n} bytes up
# with mmap and gives them back on free (activations do not stay in the heap after a forward pass)
import ctypes as _ctypes
_libc = _ctypes.CDLL("libc.so.6")
assert _libc.mallopt(-3, {n}) == 1 and _libc.mallopt(-1, {n}) == 1  # M_MMAP_, M_TRIM_THRESHOLD
"""


def weights_mapping(pid: int) -> tuple[int, int]:
    """``(resident, private dirty)`` bytes of ``model.safetensors`` mapped in process ``pid``."""
    rss = dirty = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 1)[0]
            if not head.endswith(":"):  # a mapping's first line: address range, perms, ..., path
                inside = line.rstrip().endswith(WEIGHTS_FILE)
            elif inside and head == "Rss:":
                rss += int(line.split()[1]) * 1024
            elif inside and head == "Private_Dirty:":
                dirty += int(line.split()[1]) * 1024
    return rss, dirty


def resident_together(pids: list[int]) -> int | None:
    """Bytes of physical memory the processes ``pids`` hold together, each page counted once
    (the physical frames of their resident pages, from ``/proc/<pid>/pagemap``), or None where
    the frame numbers cannot be read (they read as 0 without CAP_SYS_ADMIN).

    Unlike the sum of PSS, a page the seven share with a process outside them (another kernel,
    a test run mapping the same weights) counts whole here."""
    import numpy as np

    page = os.sysconf("SC_PAGE_SIZE")
    frames = []
    for pid in pids:
        ranges, rss = [], {}
        with open(f"/proc/{pid}/smaps") as smaps:
            for line in smaps:
                head = line.split(None, 1)[0]
                if not head.endswith(":"):
                    start, end = (int(x, 16) for x in head.split("-"))
                    ranges.append((start, end))
                elif head == "Rss:" and int(line.split()[1]):
                    rss[ranges[-1]] = True
        with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
            for start, end in rss:
                if end - start > 1 << 36:  # a 64 GB reservation: nothing of it is read
                    continue
                pagemap.seek(start // page * 8)
                entries = np.frombuffer(pagemap.read((end - start) // page * 8), dtype="<u8")
                present = entries[(entries >> np.uint64(63)) == 1]
                frames.append(present & np.uint64((1 << 55) - 1))
    found = np.unique(np.concatenate(frames)) if frames else np.zeros(0, dtype="<u8")
    if found.size and found.max() == 0:
        return None
    return int(found.size) * page


ALLOW_ERRORS = False  # --allow-errors: a failing cell is reported, and the run goes on


def run_kept_alive(name: str, prelude: list[str], threads: str, forked: bool = False
                   ) -> tuple[NotebookClient, float, tuple[int, float], list[tuple[str, str]]]:
    """Run ``notebooks/<name>`` top to bottom in a new kernel (forked from the zygote when
    ``forked``), after the ``prelude`` cells, and leave the kernel running; the run time,
    ``(releases, their seconds)`` of the kernel and the notebook's :func:`text_outputs`."""
    path = NOTEBOOKS / name
    nb = nbformat.read(path, as_version=4)
    first = len(prelude)
    nb.cells[:0] = [nbformat.v4.new_code_cell(source) for source in prelude]
    nb.cells.append(nbformat.v4.new_code_cell(RELEASE_LOG_CELL))
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            allow_errors=ALLOW_ERRORS,
                            resources={"metadata": {"path": str(path.parent)}})
    saved = dict(os.environ)
    os.environ.clear()
    extra = {"COURSE_TORCH_THREADS": threads, "COURSE_FORK_KERNELS": "1" if forked else "0"}
    if forked:
        extra.update(JUPYTER_PATH=str(LAB_KERNELS), COURSE_FORK_RUNTIME_DIR=zygote_dir())
    os.environ.update(kernel_env(extra))
    start = time.perf_counter()
    try:
        client.execute(cleanup_kc=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = time.perf_counter() - start  # the last cell only prints: its time is in the noise
    failed = [c.get("id", "?") for c in nb.cells if c.cell_type == "code"
              and any(o.output_type == "error" for o in c.get("outputs", []))]
    if failed:
        print(f"  {name}: cells that raised (--allow-errors): {', '.join(failed)}", flush=True)
    log = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    releases, released_s = json.loads(log)
    kind = type(client.km.provisioner.process).__name__
    if (kind == "ForkedKernel") != forked:
        raise SystemExit(f"{name}: the kernel is a {kind}, not what the configuration asks for "
                         f"({'forked' if forked else 'ordinary'}): see the messages above")
    lesson = nbformat.from_dict({**nb, "cells": nb.cells[first:-1]})
    return client, seconds, (releases, released_s), text_outputs(
        ExecutedNotebook(name, lesson, seconds))


def zygote_of(clients: list[NotebookClient]) -> int | None:
    """The pid of the zygote the kernels were forked from (None: ordinary kernels)."""
    zygotes = {getattr(c.km.provisioner.process, "zygote", None) for c in clients}
    if len(zygotes) != 1:
        raise SystemExit(f"the kernels came from {len(zygotes)} zygotes, not one: {zygotes}")
    return zygotes.pop()


def measure(config: str, threads: str, mmap_threshold: int = 0) -> dict[str, dict[str, Any]]:
    """Run the seven chapters, all kept alive; their memory, run times and text outputs, printed
    and returned (``"zygote"``: the zygote's, when the kernels were forked)."""
    label, prelude, forked = CONFIGS[config]
    prelude = list(prelude)
    if mmap_threshold:
        label += f", glibc mmap threshold {mmap_threshold} bytes"
        prelude.append(MMAP_THRESHOLD_CELL.format(n=mmap_threshold))
    print(f"\n== {config}: {label}; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    clients, figures = [], {}
    try:
        for name in CHAPTERS:
            client, seconds, (releases, released_s), texts = run_kept_alive(
                name, prelude, threads, forked)
            clients.append(client)
            figures[name] = {"seconds": seconds, "releases": releases, "released_s": released_s,
                             "texts": texts}
            print(f"  ran {name:<26} {seconds:6.1f} s (load average "
                  f"{os.getloadavg()[0]:.2f})", flush=True)
        time.sleep(2)
        print(f"  {'chapter':<26} {'RSS MB':>8} {'USS MB':>8} {'PSS MB':>8} {'time s':>7}  "
              "weights: mapped resident / private dirty MB; release: cells, s")
        for name, client in zip(CHAPTERS, clients, strict=True):
            pid = client.km.provisioner.pid
            info = psutil.Process(pid).memory_full_info()
            mapped, dirty = weights_mapping(pid)
            figures[name].update(rss=info.rss / MB, uss=info.uss / MB, pss=info.pss / MB)
            f = figures[name]
            print(f"  {name:<26} {f['rss']:8.0f} {f['uss']:8.0f} {f['pss']:8.0f} "
                  f"{f['seconds']:7.1f}  {mapped / MB:.0f} / {dirty / MB:.0f}; "
                  f"{f['releases']}, {f['released_s']:.1f}")
        pids = [c.km.provisioner.pid for c in clients]
        zygote = zygote_of(clients)
        if zygote is not None:
            info = psutil.Process(zygote).memory_full_info()
            figures["zygote"] = {"rss": info.rss / MB, "uss": info.uss / MB, "pss": info.pss / MB}
            z = figures["zygote"]
            print(f"  {'zygote (forked them)':<26} {z['rss']:8.0f} {z['uss']:8.0f} "
                  f"{z['pss']:8.0f}")
            pids.append(zygote)
        total = sum(figures[name]["pss"] for name in [*CHAPTERS, "zygote"] if name in figures)
        print(f"  {'seven kernels' + (' + zygote' if zygote else '') + ', sum of PSS':<26} "
              f"{'':>8} {'':>8} {total:8.0f} "
              f"{sum(figures[name]['seconds'] for name in CHAPTERS):7.1f}", flush=True)
        together = resident_together(pids)
        if together is not None:
            figures["together"] = {"rss": together / MB}
            print(f"  {'the seven, each page once':<26} {together / MB:8.0f}  (resident, "
                  "pages shared with processes outside the seven counted whole"
                  + ("; the zygote included" if zygote else "") + ")", flush=True)
    finally:
        zygotes = {getattr(c.km.provisioner.process, "zygote", None) for c in clients} - {None}
        for client in clients:
            client._cleanup_kernel()
        for zygote in zygotes:  # the benchmark's own: it would otherwise wait for its idle time
            with contextlib.suppress(ProcessLookupError):
                os.kill(zygote, signal.SIGTERM)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--copy", action="store_true",
                      help="one run of the 'copy' configuration (weights copied, no release)")
    mode.add_argument("--compare", action="store_true",
                      help="--before, then forked kernels, in one run, with ratios")
    parser.add_argument("--before", choices=["copy", "mapped", "course"], default="course",
                        help="the configuration --compare starts from (default: course, "
                             "ordinary kernels); after is always forked")
    parser.add_argument("--rounds", type=int, default=1,
                        help="--compare: alternate before and after this many times (default 1)")
    parser.add_argument("--threads", default="1",
                        help="COURSE_TORCH_THREADS of each kernel (default 1, as the tests)")
    parser.add_argument("--mmap-threshold", type=int, default=0, metavar="BYTES",
                        help="an experiment: glibc's mmap and trim thresholds set in each kernel "
                             "(e.g. 131072), so freed activations go back to the system")
    parser.add_argument("--allow-errors", action="store_true",
                        help="go on past a cell that raises (named in the output) instead of "
                             "stopping the run")
    args = parser.parse_args()
    global ALLOW_ERRORS
    ALLOW_ERRORS = args.allow_errors
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more")
    print(f"{psutil.cpu_count()} cores, {psutil.virtual_memory().total / 1e9:.1f} GB RAM, "
          f"{psutil.virtual_memory().available / 1e9:.1f} GB available", flush=True)
    if not args.compare:
        measure("copy" if args.copy else "forked", args.threads, args.mmap_threshold)
        return
    rounds = []
    for _ in range(args.rounds):
        rounds.append((measure(args.before, args.threads, args.mmap_threshold),
                       measure("forked", args.threads, args.mmap_threshold)))
    print(f"\n== forked / {args.before} (after / before), {args.rounds} round(s); run time from "
          "each chapter's median; load average now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  {'chapter':<26} {'RSS':>6} {'USS':>6} {'PSS':>6} {'time':>6}   "
          "PSS MB before -> after   time s before -> after")
    for name in CHAPTERS:
        b, a = rounds[-1][0][name], rounds[-1][1][name]
        tb = statistics.median(r[0][name]["seconds"] for r in rounds)
        ta = statistics.median(r[1][name]["seconds"] for r in rounds)
        print(f"  {name:<26} " + " ".join(f"{a[k] / b[k]:6.2f}" for k in ("rss", "uss", "pss"))
              + f" {ta / tb:6.2f}   {b['pss']:6.0f} -> {a['pss']:5.0f}"
              + f"          {tb:6.1f} -> {ta:5.1f}")
    def total(figures: dict, key: str) -> float:
        return sum(figures[name][key] for name in [*CHAPTERS, "zygote"]
                   if name in figures and key in figures[name])

    for i, (before, after) in enumerate(rounds, 1):
        once = (f"; each page once {before['together']['rss']:.0f} MB before, "
                f"{after['together']['rss']:.0f} MB after"
                if "together" in before and "together" in after else "")
        zygote = f" (the zygote's {after['zygote']['pss']:.0f} included)" if "zygote" in after else ""
        print(f"  round {i}: sum of PSS {total(before, 'pss'):.0f} MB before, "
              f"{total(after, 'pss'):.0f} MB after{zygote}{once}; run time "
              f"{total(before, 'seconds'):.0f} s before, {total(after, 'seconds'):.0f} s after")
        for name in CHAPTERS:
            b, a = before[name]["texts"], after[name]["texts"]
            differ = [x[0] for x, y in zip(b, a, strict=False) if x != y]
            same = "same" if b == a else f"DIFFERENT in {len(differ)} cell(s): {', '.join(differ)}"
            print(f"    {name:<26} text outputs before and after: {same}")


if __name__ == "__main__":
    main()
