"""Every notebook, top to bottom, with the agent model behind a real OpenAI-compatible server.

``transformers serve`` serves the bundled model on a loopback port (the setting a class shares a
vLLM or Ollama server with: ``COURSE_MODEL=http://HOST:PORT/v1``). Each notebook must run, its
model cells must really reach the server (counted in the server's request log), and cells that
read model internals must say they probe the bundled model, not the server. The lessons' values
are asserted by the bundled runs (tests/test_nb_*.py); this module asserts what the setting
changes. The whole notebook runs: in some chapters (02, 04) only the live runs under Going further
call the agent model.
"""

import re

import pytest

from course.assets import converted_model_dir
from live_models import ServedModel
from nbharness import MATRIX_NAMES, NOTEBOOKS, run_notebook

NAMES = MATRIX_NAMES  # every chapter but 07 (nbharness says why)
pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.matrix]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = ServedModel(converted_model_dir(), tmp_path_factory.mktemp("serve") / "serve.log")
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_against_the_server(served, name):
    before = served.chat_requests()
    run = run_notebook(NOTEBOOKS / name, env=served.setting)
    requests = served.chat_requests() - before
    print(f"\n{name} under a server: {run.seconds:.1f} s, {requests} chat requests")
    assert requests > 0, f"{name}: no cell sent a chat request to the server"
    for line in re.findall(r"^probe model: .*$", run.all_text(), re.M):
        assert line.startswith("probe model: SmolLM2-135M-Instruct (bundled); the agent model "
                               f"is a server at {served.url}"), (name, line)
    if name == "00_start_here.ipynb":
        assert f"chat model: ServedChatOpenAI at {served.url}" in run.text("first-answer")
        assert re.search(r"^answer: \S", run.text("first-answer"), re.M)
        roles = run.text("roles")
        assert f"server: {served.url} answers GET /models" in roles and "problem" not in roles
