"""Show, then save: a lesson's cell that writes a mechanism and the package that keeps it for later
lessons hold the same definition.

A code cell whose first line is ``# saved in course.<module>`` defines functions or classes (and
may use them below the definitions); every top-level ``def`` and ``class`` in it must equal, as
code (docstrings and comments aside), the definition of the same name in that module. The cell is
the lesson; the module is the same code for the lessons after it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import nbformat
import pytest

from nbharness import NOTEBOOKS

SAVED = re.compile(r"^# saved in (course(?:\.\w+)+)\s*$")


def _saved_cells():
    for path in sorted(NOTEBOOKS.glob("[0-9A][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            first = cell.source.splitlines()[:1]
            if cell.cell_type == "code" and first and SAVED.match(first[0]):
                yield pytest.param(cell.source, SAVED.match(first[0]).group(1),
                                   id=f"{path.stem}:{cell.get('id')}")


def _without_docstrings(node: ast.AST) -> str:
    node = ast.parse(ast.unparse(node))  # a copy
    for sub in ast.walk(node):
        body = getattr(sub, "body", None)
        if (isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            sub.body = body[1:] or [ast.Pass()]
    return ast.dump(node)


def _definitions(source: str) -> dict[str, ast.AST]:
    return {node.name: node for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def test_lessons_save_what_they_show():
    assert list(_saved_cells()), "no lesson cell says where its definition is saved"


@pytest.mark.parametrize("source,module", list(_saved_cells()))
def test_the_cell_and_the_package_hold_the_same_definition(source, module):
    cell = _definitions(source)
    assert cell, f"the cell saved in {module} defines nothing"
    package = _definitions(inspect.getsource(importlib.import_module(module)))
    for name, node in cell.items():
        assert name in package, f"{module} has no {name}, which the lesson's cell defines"
        assert _without_docstrings(node) == _without_docstrings(package[name]), (
            f"{name}: the lesson's cell and {module} differ; change both together")
