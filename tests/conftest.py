import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

NOTE_AND_REFERENCE_RUNS = ["weather_note", "bond_note", "debug_note", "bond_reference_72b",
                           "debug_reference_72b", "bond_ideal_react"]


@pytest.fixture(scope="session")
def replays():
    """The shipped note runs, 72B references and ideal run, replayed once per test process."""
    from course.agents.replay import replay_run
    from course.agents.traces import RECORDINGS_DIR, load_run

    return {name: replay_run(load_run(RECORDINGS_DIR / f"{name}.json"))
            for name in NOTE_AND_REFERENCE_RUNS}


@pytest.fixture(scope="module")
def run(request):
    """The test module's ``NOTEBOOK``, executed once top to bottom in a fresh offline kernel."""
    from nbharness import execute_notebook

    name = getattr(request.module, "NOTEBOOK", None)
    if name is None:
        raise pytest.UsageError(f"{request.module.__name__} uses the run fixture but sets no "
                                "NOTEBOOK = '<name>.ipynb'")
    result = execute_notebook(name)
    print(f"\n{name} executed in {result.seconds:.1f} s")
    return result
