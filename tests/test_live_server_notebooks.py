"""Lessons, top to bottom, with the agent model behind a real OpenAI-compatible server.

``transformers serve`` serves the bundled model on a loopback port (the setting a class shares a
vLLM or Ollama server with: ``COURSE_MODEL=http://HOST:PORT/v1``). Each notebook must run, its
model cells must really reach the server (counted in the server's request log), and cells that
read model internals must say they probe the bundled model, not the server. The lessons' values
are asserted by the bundled runs (tests/test_nb_*.py); this module asserts what the setting
changes. Which lessons run here, and which under a hub id instead, is said once, in
``nbharness.SERVER_NAMES``. What runs is the lesson's *student edition*, as a student of a class
with a shared server would run it, Going further included: in some chapters (02, 04) only the
live runs there call the agent model. So the same run also shows that the student edition runs
top to bottom and prints ``[not yet done]`` under every graded check.
"""

import re

import nbformat
import pytest

from course.assets import converted_model_dir
from live_models import ServedModel
from nbharness import NOTEBOOKS, SERVER_NAMES, check_cell_ids, run_notebook, student_copy

NAMES = SERVER_NAMES
pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.matrix]


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """One server per test process, kept until its session ends: the scheduler hands each
    lesson to whichever worker is free, so one worker may run two of them with other modules
    between, and a second start would cost another 5 CPU-seconds and 5-12 s. Idle, the server
    uses no CPU (0.02 CPU-s in 10 s) and about 350 MB of memory of its own (its 540 MB of
    weights map the same file the kernels map)."""
    server = ServedModel(converted_model_dir(), tmp_path_factory.mktemp("serve") / "serve.log")
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_against_the_server(served, name, tmp_path):
    checks = check_cell_ids(nbformat.read(NOTEBOOKS / name, as_version=4))
    before, cpu_before = served.chat_requests(), served.cpu_seconds()
    run = run_notebook(student_copy(name, tmp_path, going_further=True), env=served.setting)
    requests = served.chat_requests() - before
    print(f"\n{name}, student edition, under a server: {run.seconds:.1f} s, {requests} chat "
          f"requests, {served.cpu_seconds() - cpu_before:.1f} CPU-s in the server")
    assert requests > 0, f"{name}: no cell sent a chat request to the server"
    assert checks, f"{name} has no graded check"
    for cell_id in checks:
        assert "[not yet done]" in run.text(cell_id), (name, cell_id, run.text(cell_id))
        assert "[passed]" not in run.text(cell_id), (name, cell_id)
    for line in re.findall(r"^probe model: .*$", run.all_text(), re.M):
        assert line.startswith("probe model: SmolLM2-135M-Instruct (bundled); the agent model "
                               f"is a server at {served.url}"), (name, line)
    if name == "00_start_here.ipynb":
        assert f"chat model: ServedChatOpenAI at {served.url}" in run.text("first-answer")
        assert re.search(r"^answer: \S", run.text("first-answer"), re.M)
        roles = run.text("roles")
        assert f"server: {served.url} answers GET /models" in roles and "problem" not in roles
