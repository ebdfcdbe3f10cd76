"""Reproducibility switches for a notebook, in one helper called once at the top.

``setup_notebook()`` seeds Python, NumPy and torch, sets torch's thread count
(``COURSE_TORCH_THREADS``, a whole number from 1, anything else refused by name; the test
harness sets 1, because two kernels share two cores and torch threads that compete for a core
run several times slower), quiets library warnings that
say nothing to a student (the progress bars stay), and returns the active model choice so the
first cell can print it. It does not load a model and does not choose one (see course.models).
"""

from __future__ import annotations

import logging
import os
import random
import warnings

from course.settings import CourseSettingError, ModelChoice, active_model

__all__ = ["DEFAULT_SEED", "THREADS_SETTING", "setup_notebook", "torch_threads_setting"]

DEFAULT_SEED = 0
THREADS_SETTING = "COURSE_TORCH_THREADS"


def torch_threads_setting() -> int | None:
    """``COURSE_TORCH_THREADS``: a whole number of torch threads from 1, or None when unset;
    anything else is a :class:`~course.settings.CourseSettingError` naming it and the fix."""
    raw = os.environ.get(THREADS_SETTING, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 4 and 1 <= int(raw) <= 1024):
        raise CourseSettingError(
            f"{THREADS_SETTING}={raw[:40]!r} is not a number of threads. Fix: set it to a whole "
            "number from 1 to 1024 (1 when several kernels share the cores), or unset it for "
            "torch's default, capped at the number of cores.")
    return int(raw)


def setup_notebook(seed: int = DEFAULT_SEED, quiet: bool = True) -> ModelChoice:
    """Seed every generator, set quiet logging, and return the active model choice."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy comes with torch
        pass
    import torch

    torch.manual_seed(seed)
    threads = torch_threads_setting()
    torch.set_num_threads(threads or max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    if quiet:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*fallback GPT-2 tokenizer.*")
        warnings.filterwarnings("ignore", message=".*generation flags are not valid.*")
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        logging.getLogger("smolagents").setLevel(logging.WARNING)
        logging.getLogger("httpx").setLevel(logging.WARNING)
    return active_model()
