"""Error contracts of the registry, the gateway and the library tools, as one table.

``ToolRegistry.execute`` and ``ToolGateway.execute`` never raise: every bad input comes back as
a :class:`ToolResult` with a status and a text that names the problem. Bad registrations and
bad configurations raise a typed error at once, naming the field.
"""

import threading
import time

import pytest

from course.tools.examples import get_weather
from course.tools.for_libraries import langchain_tool, smolagents_tools
from course.tools.gateway import ToolGateway
from course.tools.registry import ToolRegistry


class Unprintable:
    def __str__(self):
        raise RuntimeError("no text for you")

    __repr__ = __str__


def unprintable() -> object:
    """Returns a value whose text cannot be made."""
    return Unprintable()


def exits() -> str:
    """Calls sys.exit inside the tool."""
    raise SystemExit(3)


def hangs(seconds: float) -> str:
    """Sleeps for a while.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return "woke up"


def deep(levels: int) -> object:
    nested: object = 0
    for _ in range(levels):
        nested = {"a": nested}
    return nested


@pytest.fixture
def registry():
    reg = ToolRegistry()
    reg.register(get_weather)
    reg.register(unprintable)
    reg.register(exits)
    reg.register(hangs, timeout=0.2)
    reg.register(lambda city: city, name="echo", schema={"properties": {"city": {"type": "string"}}})
    return reg


# (name, arguments, expected status, words the text must contain)
EXECUTE_TABLE = [
    (["get_weather"], {}, "unknown_tool", "does not exist"),
    ({"name": "get_weather"}, {}, "unknown_tool", "does not exist"),
    (None, {}, "unknown_tool", "does not exist"),
    ("get_weather", deep(100_000), "invalid_arguments", "nested deeper"),
    ("get_weather", {"city": deep(50)}, "invalid_arguments", "city"),
    ("get_weather", ["Paris"], "invalid_arguments", "must be a JSON object"),
    ("get_weather", "Paris", "invalid_arguments", "must be a JSON object"),
    ("get_weather", {"city": "Paris", "units": "kelvin"}, "invalid_arguments", "kelvin"),
    ("unprintable", {}, "bug", "RuntimeError"),
    ("exits", {}, "bug", "SystemExit"),
    ("hangs", {"seconds": 5}, "timeout", "UNKNOWN"),
    ("hangs", {"seconds": 0.01}, "ok", "woke up"),
    ("echo", {"city": "Oslo"}, "ok", "Oslo"),
]


@pytest.mark.parametrize(("name", "arguments", "status", "words"), EXECUTE_TABLE,
                         ids=[f"{i}-{row[2]}" for i, row in enumerate(EXECUTE_TABLE)])
def test_execute_never_raises(registry, name, arguments, status, words):
    result = registry.execute(name, arguments)
    assert result.status == status, result.content
    assert words in result.content
    gateway = ToolGateway(registry, {"agent": {"read"}})
    through = gateway.execute(name, arguments, subject="agent")
    assert through.status == status and words in through.content
    assert len(gateway.audit) == 1  # every decision is audited, refusals included


def test_a_timed_out_tool_does_not_block_the_caller(registry):
    start = time.perf_counter()
    result = registry.execute("hangs", {"seconds": 3})
    waited = time.perf_counter() - start
    assert result.status == "timeout" and waited < 2.5  # generous bound: the tool sleeps 3 s
    assert any(t.name == "tool-hangs" for t in threading.enumerate())  # still running: we say so


def test_a_tool_without_a_timeout_runs_inline_in_the_callers_thread():
    seen = []

    def where(city: str) -> str:
        """Which thread runs the tool.

        Args:
            city: a city
        """
        seen.append(threading.current_thread())
        return city

    reg = ToolRegistry()
    reg.register(where)
    reg.register(where, name="where_bounded", timeout=5)
    assert reg.spec("where").timeout is None and reg.execute("where", {"city": "Oslo"}).ok
    assert reg.execute("where_bounded", {"city": "Oslo"}).ok
    assert seen[0] is threading.current_thread() and seen[1].name == "tool-where_bounded"


REGISTER_TABLE = [
    (dict(fn=get_weather, name=123), TypeError, "must be a string"),
    (dict(fn=get_weather, name="has space"), ValueError, "not a Python identifier"),
    (dict(fn=lambda x: x, schema={"properties": {}}), ValueError, "<lambda>"),
    (dict(fn="not callable"), TypeError, "callable"),
    (dict(fn=get_weather, risk="extreme"), ValueError, "risk"),
    (dict(fn=get_weather, timeout=-1), ValueError, "timeout"),
]


@pytest.mark.parametrize(("kwargs", "error", "words"), REGISTER_TABLE)
def test_register_refuses_bad_input_and_keeps_the_registry_usable(kwargs, error, words):
    reg = ToolRegistry()
    reg.register(get_weather, name="weather")
    fn = kwargs.pop("fn")
    with pytest.raises(error, match=words):
        reg.register(fn, **kwargs)
    assert reg.names() == ["weather"]
    assert reg.execute("weather", {"city": "Paris"}).content == "Paris: 14 °C, partly cloudy"
    assert [t.name for t in smolagents_tools(reg)] == ["weather"]


@pytest.mark.parametrize(("config", "error"), [
    ({"enabled": "get_weather"}, TypeError),
    ({"enabled": [1, 2]}, TypeError),
    ({"enabled": ["nope"]}, KeyError),
    ({}, KeyError),
    (["get_weather"], KeyError),
])
def test_configure_refuses_bad_configuration_and_changes_nothing(registry, config, error):
    before = registry.allowed_names()
    with pytest.raises(error):
        registry.configure(config)
    assert registry.allowed_names() == before


def test_a_lambda_does_not_break_the_smolagents_adapter(registry):
    tools = {t.name: t for t in smolagents_tools(registry)}
    assert {"echo", "get_weather", "hangs"} <= set(tools)
    assert tools["echo"](city="Oslo") == "Oslo"


def test_smolagents_adapter_refuses_extra_positional_arguments(registry):
    weather = {t.name: t for t in smolagents_tools(registry)}["get_weather"]
    assert weather("Paris", "imperial") == "Paris: 57 °F, partly cloudy"
    reply = weather("Paris", "metric", "tomorrow")
    assert "NOT run" in reply and "'tomorrow'" in reply


def test_a_confirm_callback_that_raises_is_a_denial_not_a_pending_request():
    reg = ToolRegistry()
    reg.register(get_weather, risk="critical")

    def broken(request):
        raise ConnectionError("approval service down")

    gateway = ToolGateway(reg, {"agent": {"critical"}}, confirm=broken)
    result = gateway.execute("get_weather", {"city": "Paris"}, subject="agent")
    assert result.status == "confirmation_denied" and gateway.pending == []
    assert gateway.audit.decisions() == ["needs_confirmation", "denied"]
    assert "ConnectionError" in gateway.audit.records[-1].approver


def test_approval_goes_through_the_door_again():
    reg = ToolRegistry()
    reg.register(get_weather, risk="critical")
    gateway = ToolGateway(reg, {"agent": {"critical"}})
    held = gateway.execute("get_weather", {"city": "Paris"}, subject="agent")
    assert held.status == "needs_confirmation"
    reg.disallow("get_weather")  # switched off while the request waited
    result = gateway.approve(gateway.pending[0].request_id, approver="human:dana")
    assert result.status == "not_allowed"


def test_bare_registry_still_refuses_critical_calls_without_a_confirmer():
    reg = ToolRegistry()
    reg.register(get_weather, risk="critical")
    assert reg.execute("get_weather", {"city": "Paris"}).status == "confirmation_unavailable"
    assert reg.run(reg.check("get_weather", {"city": "Paris"}), confirmed_by="human:dana").ok


def test_langchain_tool_goes_through_a_registry():
    tool = langchain_tool(get_weather)
    assert tool.invoke({"city": "Paris"}) == "Paris: 14 °C, partly cloudy"
    assert "kelvin" in tool.invoke({"city": "Paris", "units": "kelvin"})  # refusal text
    shared = ToolRegistry()
    langchain_tool(get_weather, shared, name="weather")
    assert shared.names() == ["weather"]


def test_a_policy_that_raises_vetoes_the_call():
    from course.tools.gateway import Policy

    ran = []

    def weather(city: str) -> str:
        """Weather.

        Args:
            city: a city
        """
        ran.append(city)
        return "sunny"

    reg = ToolRegistry()
    reg.register(weather)
    gateway = ToolGateway(reg, {"agent": {"read"}}, policies=[Policy("broken", lambda t, a: 1 / 0)])
    result = gateway.execute("weather", {"city": "Paris"}, subject="agent")
    assert result.status == "vetoed" and "ZeroDivisionError" in result.content and ran == []
