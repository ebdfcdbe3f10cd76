"""One way to import: a chapter package exports nothing of its own, and every user (notebooks,
other chapters, widgets, tests) imports a name from the module that defines it, where a reader
finds it (``from course.tools.registry import ToolRegistry``, never ``from course.tools import
ToolRegistry``). A submodule may still be imported from its package (``from course.tools import
bfcl``)."""

import ast
import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER_PACKAGES = ["course.tools", "course.agents", "course.loop", "course.guards",
                    "course.memory", "course.trimming"]


def _sources() -> dict[str, str]:
    """Code that uses the course: notebook code cells and every Python file of the repository."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found[path.name] = "\n".join(
            line for c in cells if c["cell_type"] == "code"
            for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
    for folder in ("course", "classroom", "widgets", "tests", "benchmarks", "scripts", "book"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "fixtures" not in path.parts:
                found[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return found


def _is_module(package: str, name: str) -> bool:
    folder = ROOT / package.replace(".", "/")
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


@pytest.mark.parametrize("package", CHAPTER_PACKAGES)
def test_a_chapter_package_exports_nothing_of_its_own(package):
    module = importlib.import_module(package)
    assert not hasattr(module, "__all__"), f"{package} lists exports: import from its modules"
    assert not hasattr(module, "__getattr__"), f"{package} makes names on demand"


@pytest.mark.parametrize("package", CHAPTER_PACKAGES)
def test_users_import_from_the_defining_module(package):
    wrong = []
    for where, source in _sources().items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module == package:
                wrong += [(where, a.name) for a in node.names if not _is_module(package, a.name)]
    assert not wrong, f"import these from their modules, not from {package}: {wrong}"
