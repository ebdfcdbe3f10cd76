"""One truth: the door chapter 01 writes (``course.tools.door.SingleDoor``, the lesson's cell) and
the package's ``ToolRegistry`` (the same door with more checks) agree on every case.

The note's twelve-line registry is run from the notebook's source (cell ``note-registry``),
without a kernel or a model. The notebook itself is executed by test_nb_01_tool_calling.py
(NOTEBOOK = "01_tool_calling.ipynb").
"""

import contextlib
import io

import pytest

from course.tools.door import SingleDoor, ToolError
from course.tools.examples import get_weather
from course.tools.registry import ToolRegistry
from nbharness import cell_sources

REFUSALS = {"unknown_tool", "not_allowed", "invalid_arguments"}


def divide(a: int, b: int) -> float:
    """Divide a by b.

    Args:
        a: numerator
        b: denominator
    """
    return a / b


def _both(switched_off=()):
    door, package = SingleDoor(), ToolRegistry()
    for fn in (get_weather, divide):
        allowed = fn.__name__ not in switched_off
        door.register(fn.__name__, fn, allowed=allowed)
        package.register(fn, allowed=allowed)
    return door, package


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
    ("divide", {"a": "1", "b": 2}),
]


@pytest.mark.parametrize(("name", "arguments"), CASES, ids=[f"{n}{a}" for n, a in CASES])
def test_the_lessons_door_and_the_package_agree(name, arguments):
    door, package = _both()
    text = door.execute(name, arguments)
    result = package.execute(name, arguments)
    if result.status == "ok":
        assert text == result.content
    else:
        assert result.status in REFUSALS, result.status
        assert name in text and "NOT run" in text, text  # both name the tool, for the model
        with pytest.raises(ToolError) as refused:
            door.call(name, **arguments)
        assert refused.value.status in {"not_allowed", "invalid_arguments"}
        assert refused.value.tool == name


def test_a_bug_surfaces_from_the_lesson_door_and_is_a_result_of_the_package():
    door, package = _both()
    with pytest.raises(ZeroDivisionError):
        door.execute("divide", {"a": 1, "b": 0})
    result = package.execute("divide", {"a": 1, "b": 0})
    assert result.status == "bug" and isinstance(result.exception, ZeroDivisionError)


def test_a_switched_off_tool_is_refused_by_both_until_configuration():
    door, package = _both(switched_off={"divide"})
    assert door.execute("divide", {"a": 1, "b": 4}) == "Tool 'divide' is not allowed, so it was NOT run."
    assert package.execute("divide", {"a": 1, "b": 4}).status == "not_allowed"
    package.allow("divide")
    door.allowlist.add("divide")
    assert door.execute("divide", {"a": 1, "b": 4}) == "0.25"
    assert package.execute("divide", {"a": 1, "b": 4}).content == "0.25"


def test_a_tools_own_refusal_is_a_result_of_both():
    def cancel(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id: Order id.
        """
        raise ToolError(f"order {order_id} has shipped and was NOT cancelled")

    door, package = SingleDoor(), ToolRegistry()
    door.register("cancel", cancel)
    package.register(cancel)
    assert door.execute("cancel", {"order_id": "O-1"}) == "order O-1 has shipped and was NOT cancelled"
    result = package.execute("cancel", {"order_id": "O-1"})
    assert result.status == "refused" and "order O-1 has shipped" in result.content


def test_the_package_catches_the_lessons_tool_error_with_its_status():
    from course.tools.registry import ToolError as PackageToolError

    def lookup(order_id: str) -> str:
        """Look an order up.

        Args:
            order_id: Order id.
        """
        raise ToolError(f"order {order_id} is not ours")

    package = ToolRegistry()
    package.register(lookup)
    result = package.execute("lookup", {"order_id": "X-1"})
    assert PackageToolError is ToolError and type(result.exception) is ToolError
    assert result.status == "refused" and result.content == (
        "Tool 'lookup' refused the request: order X-1 is not ours")


def test_the_notes_registry_checks_the_name_only():
    namespace = {"get_weather": get_weather}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(cell_sources("01_tool_calling.ipynb")["note-registry"], "note-registry", "exec"),
             namespace)
    note = namespace["NoteRegistry"]()
    note.register("get_weather", get_weather)
    assert note.call("get_weather", city="Berlin", units="kelvin") == "Berlin: 9 °C, rain"
    with pytest.raises(ToolError, match="not allowed"):
        note.call("divide", a=1, b=2)
