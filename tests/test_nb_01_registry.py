"""One truth: the registry written in chapter 01's cells and the package's ``ToolRegistry`` agree.

The cells ``note-registry`` (note 003's twelve lines) and ``door-registry`` (grown by a schema
check and refusal as a result) are run from the notebook's source, without a kernel or a model;
then every case the chapter shows, and a few more, goes through both registries. For the notebook
itself see test_nb_01_tool_calling.py (NOTEBOOK = "01_tool_calling.ipynb").
"""

import contextlib
import io

import pytest

from nbharness import cell_sources

REFUSALS = {"unknown_tool", "not_allowed", "invalid_arguments"}


@pytest.fixture(scope="module")
def cells():
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from course.tools.examples import get_weather
    from course.tools.registry import ToolError, ToolRegistry

    sources = cell_sources("01_tool_calling.ipynb")
    namespace = {"get_weather": get_weather, "ToolError": ToolError, "ToolRegistry": ToolRegistry,
                 "convert_to_openai_tool": convert_to_openai_tool}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell_id in ("note-registry", "door-registry"):
            exec(compile(sources[cell_id], cell_id, "exec"), namespace)
    return namespace


def _both(cells, switched_off=()):
    grown, package = cells["CheckedRegistry"](), cells["ToolRegistry"]()
    for fn in (cells["get_weather"], cells["divide"]):
        allowed = fn.__name__ not in switched_off
        grown.register(fn.__name__, fn, allowed=allowed)
        package.register(fn, allowed=allowed)
    return grown, package


CASES = [
    ("get_weather", {"city": "Berlin"}),
    ("get_weather", {"city": "Oslo", "units": "imperial"}),
    ("get_weather", {"city": "Tokyo"}),
    ("get_weather", {"city": "Berlin", "units": "kelvin"}),
    ("get_weather", {"town": "Rome"}),
    ("get_weather", {"city": 42}),
    ("get_weather", {"units": "metric"}),
    ("get_weather", {"city": "Berlin", "country": "DE"}),
    ("delete_everything", {}),
    ("divide", {"a": 1, "b": 4}),
    ("divide", {"a": 1, "b": 0}),
    ("divide", {"a": "1", "b": 2}),
]


@pytest.mark.parametrize(("name", "arguments"), CASES, ids=[f"{n}{a}" for n, a in CASES])
def test_the_cell_registry_and_the_package_agree(cells, name, arguments):
    grown, package = _both(cells)
    status, text = grown.execute(name, arguments)
    result = package.execute(name, arguments)
    if result.status == "ok":
        assert (status, text) == ("ok", result.content)
    elif result.status == "bug":
        assert status == "bug" and type(result.exception).__name__ in text
    else:
        assert result.status in REFUSALS and status == "refused", (result.status, status, text)
        assert name in text  # both refusals name the tool, for the model


def test_a_switched_off_tool_is_refused_by_both(cells):
    grown, package = _both(cells, switched_off={"divide"})
    assert grown.execute("divide", {"a": 1, "b": 4}) == ("refused", "Tool 'divide' is not allowed.")
    assert package.execute("divide", {"a": 1, "b": 4}).status == "not_allowed"
    package.allow("divide")
    grown.allowlist.add("divide")
    assert grown.execute("divide", {"a": 1, "b": 4}) == ("ok", "0.25")
    assert package.execute("divide", {"a": 1, "b": 4}).content == "0.25"


def test_the_notes_registry_checks_the_name_only(cells):
    note = cells["NoteRegistry"]()
    note.register("get_weather", cells["get_weather"])
    assert note.call("get_weather", city="Berlin", units="kelvin") == "Berlin: 9 °C, rain"
    with pytest.raises(cells["ToolError"], match="not allowed"):
        note.call("divide", a=1, b=2)
