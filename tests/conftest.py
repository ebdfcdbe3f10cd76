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
    from course.replay import replay_run
    from course.traces import RECORDINGS_DIR, load_run

    return {name: replay_run(load_run(RECORDINGS_DIR / f"{name}.json"))
            for name in NOTE_AND_REFERENCE_RUNS}
