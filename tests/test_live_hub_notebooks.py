"""Lessons' core paths, with the agent model named by a Hugging Face id, offline.

The test writes a Hugging Face cache in which the bundled model is
``HuggingFaceTB/SmolLM2-135M-Instruct`` (``hub/models--ORG--NAME/{refs/main,snapshots/<rev>}``),
points the kernel's ``HF_HUB_CACHE`` at it and sets ``COURSE_MODEL`` to the id: the path a user
with network (or a prepared cache) takes. Nothing is downloaded (``HF_HUB_OFFLINE=1``). The
lessons' values are asserted by the bundled runs; this module asserts what the setting changes.

What runs is the *student edition* of each notebook (``classroom.grading.student_edition``: stubs
instead of solutions, hidden tests removed), as a student who picked a hub model would run it.
So the same run also shows that the student edition runs top to bottom and prints
``[not yet done]`` under every graded check, without executing every chapter once
more for that alone. Which lessons run here, and which under a served model instead, is said once,
in ``nbharness.HUB_NAMES``. Each chapter's ``## Going further`` is left out (nbharness.core_path): it holds
no graded check, and the bundled runs execute it.
"""

import re

import nbformat
import pytest

from course.assets import converted_model_dir
from live_models import HUB_ID, write_hub_cache
from nbharness import HUB_NAMES, NOTEBOOKS, check_cell_ids, run_notebook, student_copy

NAMES = HUB_NAMES
pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.matrix]


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    return write_hub_cache(tmp_path_factory.mktemp("hf"), converted_model_dir())


@pytest.mark.parametrize("name", NAMES)
def test_student_edition_runs_with_a_hub_id(hub_cache, name, tmp_path):
    checks = check_cell_ids(nbformat.read(NOTEBOOKS / name, as_version=4))
    run = run_notebook(student_copy(name, tmp_path, going_further=False),
                       env={"COURSE_MODEL": HUB_ID, "HF_HUB_CACHE": str(hub_cache)})
    print(f"\n{name}, student edition, with {HUB_ID}: {run.seconds:.1f} s")
    assert checks, f"{name} has no graded check"
    for cell_id in checks:
        assert "[not yet done]" in run.text(cell_id), (name, cell_id, run.text(cell_id))
        assert "[passed]" not in run.text(cell_id), (name, cell_id)
    for line in re.findall(r"^probe model: .*$", run.all_text(), re.M):
        assert line.startswith(f"probe model: {HUB_ID}, the same model as the agent"), (name, line)
    if name == "00_start_here.ipynb":
        assert f"Agent model: Hugging Face model {HUB_ID}" in run.text("setup")
        assert "chat model: ChatHuggingFace at this kernel" in run.text("first-answer")
        assert re.search(r"^answer: .*Paris", run.text("first-answer"), re.M)
        assert f"back to: Hugging Face model {HUB_ID}" in run.text("bad-setting")
