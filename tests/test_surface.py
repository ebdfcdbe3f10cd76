"""Each chapter package's ``__init__`` exports what the notebooks, the later chapters and the widgets
import from it, no more and no less, and each export is its module's own object."""

import ast
import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["course.tools", "course.agents", "course.loop", "course.guards", "course.memory",
            "course.trimming"]


def _sources() -> dict[str, str]:
    """Code that uses the course: notebook code cells, course/ and widgets/ modules."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found[path.name] = "\n".join(
            line for c in cells if c["cell_type"] == "code"
            for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
    for path in sorted([*ROOT.glob("course/**/*.py"), *ROOT.glob("widgets/*.py")]):
        found[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return found


def _imports_from(package: str):
    """``(where, module, alias)`` for each ``from package[.module] import name`` outside it."""
    folder = package.replace(".", "/") + "/"
    for where, source in _sources().items():
        if where.startswith(folder):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == package or node.module.startswith(package + ".")):
                for alias in node.names:
                    yield where, node.module, alias


def _used_from(package: str) -> dict[str, set[str]]:
    """Names imported from ``package`` or its modules by code outside it -> where."""
    used: dict[str, set[str]] = {}
    for where, _, alias in _imports_from(package):
        used.setdefault(alias.name, set()).add(where)
    return used


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_exports_what_its_users_import(package):
    exported = set(importlib.import_module(package).__all__)
    used = _used_from(package)
    missing = {name: sorted(where) for name, where in used.items() if name not in exported}
    assert not missing, f"{package}/__init__.py should export these (imported by): {missing}"
    assert not exported - set(used), f"{package} exports names nobody imports: {exported - set(used)}"


@pytest.mark.parametrize("package", [*PACKAGES, "classroom.grading"])
def test_each_export_is_its_modules_own_object(package):
    module = importlib.import_module(package)
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if home and home.startswith(package + "."):
            assert getattr(importlib.import_module(home), name) is value, name
        assert name in dir(module)


@pytest.mark.parametrize("package", PACKAGES)
def test_what_users_take_from_a_module_is_what_the_package_exports(package):
    """``from course.tools.registry import ToolRegistry`` and ``from course.tools import
    ToolRegistry`` give one object (a name imported under another name, ``as ...``, may be
    another module's: the MCP client's ``langchain_tools`` is not the registry's)."""
    exported = importlib.import_module(package)
    for where, module, alias in _imports_from(package):
        if module != package and alias.asname in (None, alias.name):
            theirs = getattr(importlib.import_module(module), alias.name)
            assert getattr(exported, alias.name) is theirs, (where, module, alias.name)
