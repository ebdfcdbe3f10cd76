import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # The workers share two cores: one torch thread each (read when torch is imported, which
    # no test module has done yet), like the notebook kernels (nbharness.kernel_env) and the
    # processes they start. Threads that compete for a core make a forward pass several times
    # slower.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("COURSE_TORCH_THREADS", "1")

NOTE_AND_REFERENCE_RUNS = ["weather_note", "bond_note", "debug_note", "bond_reference_72b",
                           "debug_reference_72b", "bond_ideal_react"]


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where the browser tests save screenshots: a temporary folder, or ``docs/screenshots/``
    with ``COURSE_UPDATE_SCREENSHOTS=1`` (how the committed ones are made)."""
    if os.environ.get("COURSE_UPDATE_SCREENSHOTS") == "1":
        folder = ROOT / "docs" / "screenshots"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="session")
def replays():
    """The shipped note runs, 72B references and ideal run, replayed once per test process."""
    from course.agents.replay import replay_run
    from course.agents.traces import RECORDINGS_DIR, load_run

    return {name: replay_run(load_run(RECORDINGS_DIR / f"{name}.json"))
            for name in NOTE_AND_REFERENCE_RUNS}


@pytest.fixture
def empty_cache(tmp_path):
    """A course cache with nothing prepared but the data files ``prepare`` fetches.

    The data packages' files (the GGUF, the BPE ranks) live in the course cache since
    ``prepare`` fetches them; a test of "nothing converted yet" links them in, as a machine that
    ran ``prepare`` once and lost its converted copies would have them.
    """
    from course.assets import course_cache_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "data").symlink_to(course_cache_dir() / "data", target_is_directory=True)
    return cache


@pytest.fixture
def folders(tmp_path):
    """For the workspace tests: a source folder holding chapters 00 and 05 of notebooks/ (the
    instructor edition), and where the student's copy goes (not made yet)."""
    import shutil

    source = tmp_path / "notebooks"
    source.mkdir()
    for name in ("00_start_here.ipynb", "05_trimming.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, source / name)
    return source, tmp_path / "student"


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright (no ``playwright install``), one per test module:
    the browser, website and class-hub tests click through it."""
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.fail("the browser tests need Debian's chromium: apt-get install -y chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


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


# How `make test` shares the work between its xdist workers: each test module is one unit
# (module fixtures such as ``run`` execute a notebook once), except the model-setting matrix,
# where each notebook is a unit of its own so that the workers split it. Units are handed
# out in collection order, which is sorted here longest first so that no long unit starts last:
# the chapter notebooks (whose saved runs the website test reuses, so they come early), then
# the other notebook-running modules, then the rest, and the website last.
# (xdist's own ``--dist loadgroup`` does not work with pytest 9.2: it renames ``item._nodeid``,
# which pytest no longer reads, so the scheduler below splits the units itself, whatever
# ``--dist`` says: ``-n 4`` is the whole flag. The hook is optional, so ``-p no:xdist`` runs.)
FIRST = ("test_nb_0", "test_nb_A")  # not test_nb_*_exercises: they grade check cells, no run
HEAVY = ("test_feedback", "test_class_hub", "test_live_server_notebooks", "test_live_hub_notebooks",
         "test_browser", "test_nbgrader_pipeline", "test_grading", "test_phoenix", "test_tool_count",
         "test_doctor", "test_lab")
MATRIX = ("test_live_server_notebooks", "test_live_hub_notebooks")
LAST = ("test_website",)


def _rank(item: pytest.Item) -> int:
    name = item.module.__name__
    if name.startswith(FIRST) and not name.endswith("_exercises"):
        return 0
    if name in HEAVY:
        return 1 + HEAVY.index(name)
    return 100 if name in LAST else 50


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: the order within a module is kept


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndMatrixNotebooks(LoadScopeScheduling):
        """A module per unit; each matrix notebook a unit of its own."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            stem = Path(module).stem
            if stem in MATRIX:
                return nodeid
            if stem.startswith(FIRST) and not stem.endswith("_exercises"):
                return stem[:len("test_nb_00")]  # a chapter's modules share its one run
            return module

    return ModulesAndMatrixNotebooks(config, log)
