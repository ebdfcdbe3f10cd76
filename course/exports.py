"""A chapter package's public names, each imported from its module the first time it is used.

Every chapter package's ``__init__`` lists what notebooks, later chapters and the widgets take
from it, by the module that defines each name, and hands the list to :func:`lazy_exports`::

    _EXPORTS = {"registry": ("ToolRegistry", "ToolResult"), "gateway": ("ToolGateway",)}
    __all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

``from course.tools import ToolRegistry`` then imports :mod:`course.tools.registry` only, so a
module run as its own process (``python -m course.tools.mcp_server``, the sandbox's child, the
memory store's second writer) never finds itself already imported by its package, and importing
one module does not load the chapter's heavy neighbours. This module does not check that a
listed name exists until it is asked for (tests/test_surface.py does).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]
                 ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package`` exporting ``exports`` on first use."""
    module_of = {name: module for module, names in exports.items() for name in names}
    names = sorted(module_of)
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module_of[name]}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return names, __getattr__, __dir__
