"""Rules every notebook follows. Committed notebooks hold no outputs (CI makes them fresh)."""

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert any(p.name == "00_start_here.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: cell {cell.get('id')} has outputs; run `make clean-outputs`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_its_own_test_module(path):
    module = ROOT / "tests" / f"test_nb_{path.stem}.py"
    assert module.is_file(), f"{path.name} is not executed by any test: add {module.name}"
    assert path.name in module.read_text()


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if not p.name.startswith("00")],
                         ids=lambda p: p.name)
def test_chapters_end_with_summary_and_exercises(path):
    nb = nbformat.read(path, as_version=4)
    headings = [line for c in nb.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("## ")]
    assert "## Summary" in headings and "## Exercises" in headings, path.name
