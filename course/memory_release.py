"""A kernel gives back the memory its model's forward passes freed, after the cell that ran them.

Seven chapter kernels open at once share one copy of the weights (the safetensors
file is mapped, see :func:`course.models.load_local_model`), but each kept what its forward passes
had freed, hundreds of MB after an agent step on a 2,400-token prompt, for two reasons:

* reference cycles: an exception caught inside a library (smolagents' parsing errors keep their
  traceback, whose frame holds the step's KV cache) stays until Python's next full collection,
  which may not come for the rest of the lesson;
* glibc's allocator keeps freed heap for reuse: after the first large free its mmap threshold
  rises, so later activations come from the heap, and a heap is only shrunk from its top.

:func:`release_after_model_cells` (called by :func:`course.models.load_local_model` when it loads
a model) registers an IPython ``post_execute`` hook: after every cell in which that model ran a
forward pass, it collects cycles (``gc.collect()``) and asks glibc to return the free pages
(``malloc_trim(0)``). Neither changes a value a cell computes or prints. To keep the collection
short (a full one walks about half a million objects: 0.8-1.1 s measured here on a loaded
machine, 0.07 s once they are frozen), the objects alive when the model is loaded (the imported
libraries, mostly) are collected once and then frozen (``gc.freeze()``): later collections skip
them. The price: a cycle among those objects that becomes garbage later is never collected (at
most what the kernel held when the model loaded).

What it does not handle: other allocators (macOS, Windows, musl: nothing is registered), memory
still referenced (a kept prefix cache, a cached tokenizer), GPU memory, and code run outside
IPython (a script or a test process registers nothing). :func:`release` does one release by hand.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReleaseLog", "glibc_malloc_trim", "release", "release_after_model_cells"]


@dataclass
class ReleaseLog:
    """What the hook has done in this kernel: releases, their total time, and the models it
    watches (weakly: a model dropped by the kernel is not kept alive by the hook)."""

    releases: int = 0
    seconds: float = 0.0
    frozen: int = 0
    watched: list[Any] = field(default_factory=list)  # weakrefs to the watched models
    model_ran: bool = False
    registered: bool = False


LOG = ReleaseLog()


def glibc_malloc_trim() -> Any | None:
    """glibc's ``malloc_trim`` through ctypes, or None on another C library or system."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl (Alpine) has no libc.so.6 with malloc_trim
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release(collect: bool = True) -> float:
    """Collect reference cycles (``collect``) and give glibc's free pages back to the system;
    returns the seconds it took (nothing but the collection on a system without glibc)."""
    start = time.perf_counter()
    if collect:
        gc.collect()
    trim = glibc_malloc_trim()
    if trim is not None:
        trim(0)
    return time.perf_counter() - start


def _ipython() -> Any | None:
    """The running IPython shell (a Jupyter kernel), without importing IPython in a script."""
    module = sys.modules.get("IPython")
    shell = module.get_ipython() if module is not None else None
    return shell if shell is not None and hasattr(shell, "events") else None


def _after_cell(*_: Any) -> None:
    if not LOG.model_ran:
        return
    LOG.model_ran = False
    LOG.seconds += release()
    LOG.releases += 1


def _ran(*_: Any) -> None:
    LOG.model_ran = True


def release_after_model_cells(model: Any) -> bool:
    """After every IPython cell in which ``model`` (a torch module) ran a forward pass, collect
    cycles and trim glibc's heap; True when the hook is registered (a Jupyter kernel on glibc).

    The first call collects once and freezes what is alive (see the module's docstring); a model
    loaded later is watched by the same hook.
    """
    shell = _ipython()
    if shell is None or glibc_malloc_trim() is None or not hasattr(
            model, "register_forward_pre_hook"):
        return False
    import weakref

    if not any(ref() is model for ref in LOG.watched):
        model.register_forward_pre_hook(_ran)
        LOG.watched.append(weakref.ref(model))
    if not LOG.registered:
        release()
        gc.freeze()
        LOG.frozen = gc.get_freeze_count()
        shell.events.register("post_execute", _after_cell)
        LOG.registered = True
    return True
