"""The single door as chapter 01 writes it: note 003's registry, grown by a schema check and
refusal as a result.

:class:`SingleDoor` resolves a tool's name to its function AND checks an allowlist before
anything runs. Registration (``register``) and permission (``allowlist``) are separate, so a
registered tool can be switched off by configuration; it is an allowlist, never a denylist. The
arguments are validated with ``jsonschema`` against the schema LangChain makes of the typed
function, with ``additionalProperties: false``, before the function runs. :class:`ToolError`
means "the tool (or the door in front of it) refused": ``execute`` returns its text, written for
the model, as the call's result; any other exception is a bug in our code and propagates.

``ToolError`` is the package's one refusal exception (:mod:`course.tools.registry` raises the
same class). Not handled here: :class:`course.tools.registry.ToolRegistry` is the same door with
more checks (a status and a refusal text per outcome, unknown vs switched-off names, size and
depth limits, a timeout, tools that need confirmation, configuration files, a bug returned as a
result for loops that must not crash); who asks, risk classes and confirmation are
:mod:`course.tools.gateway`.
"""

from __future__ import annotations

from collections.abc import Callable

import jsonschema
from langchain_core.utils.function_calling import convert_to_openai_tool

__all__ = ["SingleDoor", "ToolError"]


class ToolError(Exception):
    """The tool, or the door in front of it, refused: a result for the model, not a bug.

    ``str(error)`` is the text the model reads; ``status`` says which refusal it is (the
    registry's :class:`course.tools.registry.ToolStatus` values) and ``tool`` names the tool.
    """

    def __init__(self, message: str, status: str = "refused", tool: str = ""):
        super().__init__(message)
        self.status, self.tool = status, tool


class SingleDoor:
    """Name -> function, an allowlist and a schema check before execution; refusals as results."""

    def __init__(self):
        self._tools: dict[str, Callable] = {}
        self._schemas: dict[str, dict] = {}
        self.allowlist: set[str] = set()

    def register(self, name, fn, allowed=True):
        self._tools[name] = fn
        schema = convert_to_openai_tool(fn)["function"]["parameters"]
        self._schemas[name] = {**schema, "additionalProperties": False}
        if allowed:  # registration is not permission: allowed=False registers it switched off
            self.allowlist.add(name)

    def call(self, name, **arguments):
        if name not in self.allowlist:  # the gate, before execution
            raise ToolError(f"Tool '{name}' is not allowed, so it was NOT run.", "not_allowed", name)
        try:
            jsonschema.validate(arguments, self._schemas[name])
        except jsonschema.ValidationError as err:
            raise ToolError(f"Invalid arguments for '{name}', so it was NOT run: {err.message}.",
                            "invalid_arguments", name) from None
        return self._tools[name](**arguments)

    def execute(self, name, arguments):
        try:
            return str(self.call(name, **arguments))
        except ToolError as err:  # refusal is a result: a string written for the model
            return str(err)
