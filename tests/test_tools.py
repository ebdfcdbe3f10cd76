"""The registry and the gateway: the single door, refusal as a result, audit records."""

import json
from typing import Literal

import pytest

from course.tools.for_libraries import langchain_tools, smolagents_tools
from course.tools.gateway import ToolGateway
from course.tools.registry import REFUSALS, CheckedCall, ToolError, ToolRegistry, ToolResult


def get_weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Current weather for a city.

    Args:
        city: City name, e.g. Berlin.
        units: Unit system for the temperature.
    """
    return f"{city}: 14 degrees ({units})"


def divide(a: int, b: int) -> float:
    """Divide a by b.

    Args:
        a: numerator
        b: denominator
    """
    return a / b


def debug_dump() -> str:
    """Dump internal state (debug only)."""
    return "secrets"


def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: the order id
    """
    if not order_id.startswith("A"):
        raise ToolError(f"Order '{order_id}' is not ours; order ids start with 'A'.")
    return f"order {order_id}: shipped"


def nothing(order_id: str) -> None:
    """Returns nothing.

    Args:
        order_id: the order id
    """


def refund_order(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id: the order id
        amount: amount in euros
    """
    return f"refunded {amount:.2f} EUR on {order_id}"


def update_address(order_id: str, address: str) -> str:
    """Change the delivery address.

    Args:
        order_id: the order id
        address: new address
    """
    return f"address of {order_id} set"


@pytest.fixture
def registry():
    reg = ToolRegistry()
    reg.register(get_weather)
    reg.register(divide)
    reg.register(debug_dump, allowed=False)
    reg.register(lookup_order)
    reg.register(nothing)
    reg.register(update_address, risk="write")
    reg.register(refund_order, risk="critical")
    return reg


def test_schema_comes_from_the_typed_function(registry):
    params = registry.spec("get_weather").parameters
    assert params["required"] == ["city"]
    assert params["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert params["additionalProperties"] is False
    assert registry.spec("get_weather").description.startswith("Current weather")


def test_valid_call_runs(registry):
    checked = registry.check("get_weather", {"city": "Berlin"})
    assert isinstance(checked, CheckedCall) and checked.arguments == {"city": "Berlin"}
    assert registry.run(checked).value == "Berlin: 14 degrees (metric)"
    result = registry.execute("get_weather", {"city": "Berlin", "units": "metric"})
    assert result.ok and result.status == "ok" and "Berlin" in result.content
    assert result.as_message("call_1") == {"role": "tool", "name": "get_weather",
                                           "content": result.content, "tool_call_id": "call_1"}


def test_unknown_tool_is_refused_and_named(registry):
    result = registry.execute("get_wether", {"city": "Berlin"})
    assert result.status == "unknown_tool" and not result.ok
    assert "'get_wether' does not exist" in result.content and "get_weather" in result.content
    assert "debug_dump" not in result.content  # the disabled tool is not advertised
    refusal = registry.check("get_wether", {"city": "Berlin"})  # a result, never an exception
    assert isinstance(refusal, ToolResult) and refusal.content == result.content
    assert registry.run(refusal) is refusal  # run hands a refusal back as it is


def test_disabled_tool_is_registered_but_unreachable(registry):
    assert "debug_dump" in registry and not registry.is_allowed("debug_dump")
    assert "debug_dump" not in [s["function"]["name"] for s in registry.schemas()]
    result = registry.execute("debug_dump", {})
    assert result.status == "not_allowed" and "'debug_dump' is not allowed" in result.content
    assert result.value is None


def test_configuration_switches_tools_without_code(registry, tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"enabled": ["get_weather", "debug_dump"]}))
    registry.configure(path)
    assert registry.execute("debug_dump", {}).content == "secrets"
    assert registry.execute("divide", {"a": 1, "b": 2}).status == "not_allowed"
    with pytest.raises(KeyError, match="no_such_tool"):
        registry.configure({"enabled": ["no_such_tool"]})
    with pytest.raises(KeyError, match="enabled"):
        registry.configure({"tools": []})


def test_wrong_types_are_caught_before_execution(registry):
    calls = []
    registry.register(lambda a: calls.append(a), name="spy", schema={
        "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    result = registry.execute("spy", {"a": "three"})
    assert result.status == "invalid_arguments" and calls == []
    assert "'a': 'three' is not of type 'integer'" in result.content
    result = registry.execute("get_weather", {"city": "Berlin", "units": "kelvin"})
    assert "'units'" in result.content and "kelvin" in result.content


def test_missing_and_extra_arguments_are_named(registry):
    result = registry.execute("get_weather", {})
    assert result.status == "invalid_arguments" and "missing required argument 'city'" in \
        result.content
    result = registry.execute("get_weather", {"city": "Berlin", "country": "DE"})
    assert "unexpected argument(s) 'country'" in result.content
    result = registry.execute("get_weather", ["Berlin"])
    assert "arguments must be a JSON object, got list" in result.content


def test_oversized_arguments_are_refused(registry):
    result = registry.execute("get_weather", {"city": "B" * 5000})
    assert result.status == "oversized_arguments"
    assert "'get_weather'" in result.content and "limit 2000" in result.content


def test_tool_refusal_vs_bug(registry):
    refused = registry.execute("lookup_order", {"order_id": "Z9"})
    assert refused.status == "refused" and "not ours" in refused.content
    assert "'lookup_order'" in refused.content
    bug = registry.execute("divide", {"a": 1, "b": 0})
    assert bug.is_bug and isinstance(bug.exception, ZeroDivisionError)
    assert "ZeroDivisionError" in bug.content and "'divide'" in bug.content


def test_none_is_reported_not_silent(registry):
    result = registry.execute("nothing", {"order_id": "A1"})
    assert result.content == REFUSALS["no_data"].format(tool="nothing") and result.ok


def test_bare_registry_refuses_critical_without_a_human(registry):
    result = registry.execute("refund_order", {"order_id": "A1", "amount": 5})
    assert result.status == "confirmation_unavailable" and "NOT run" in result.content


def test_register_rejects_bad_input(registry):
    with pytest.raises(ValueError, match="risk"):
        registry.register(get_weather, name="w2", risk="dangerous")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(get_weather)
    with pytest.raises(TypeError, match="callable"):
        registry.register("not a function", name="x", schema={})


def test_smolagents_tool_is_accepted():
    from smolagents import tool

    @tool
    def get_time(city: str) -> str:
        """Local time in a city.

        Args:
            city: City name.
        """
        return f"12:00 in {city}"

    reg = ToolRegistry()
    reg.register(get_time)
    assert reg.spec("get_time").parameters["required"] == ["city"]
    assert reg.execute("get_time", {"city": "Oslo"}).content == "12:00 in Oslo"


@pytest.fixture
def gateway(registry):
    return ToolGateway(registry, grants={
        "agent:support": {"read", "write", "critical"},
        "guest": {"read"},
    })


def test_gateway_subject_and_risk(gateway):
    ok = gateway.execute("get_weather", {"city": "Oslo"}, subject="guest")
    assert ok.ok
    no = gateway.execute("update_address", {"order_id": "A1", "address": "x"}, subject="guest")
    assert no.status == "subject_not_permitted" and "'guest' may not use write tools" in \
        no.content
    stranger = gateway.execute("get_weather", {"city": "Oslo"}, subject="mallory")
    assert stranger.status == "subject_not_permitted"
    assert [r.decision for r in gateway.audit] == ["allowed", "refused", "refused"]
    assert gateway.audit.records[1].risk == "write" and gateway.audit.records[1].subject == "guest"


def test_gateway_confirmation_runtime_half(gateway):
    held = gateway.execute("refund_order", {"order_id": "A1", "amount": 20},
                           subject="agent:support")
    assert held.status == "needs_confirmation" and "NOT run" in held.content
    request = gateway.pending[0]
    assert request.tool == "refund_order" and request.request_id in held.content
    done = gateway.approve(request.request_id, approver="human:dana")
    assert done.ok and done.content == "refunded 20.00 EUR on A1"
    assert gateway.pending == []
    again = gateway.execute("refund_order", {"order_id": "A2", "amount": 5},
                            subject="agent:support")
    denied = gateway.deny(gateway.pending[0].request_id, approver="human:dana")
    assert again.status == "needs_confirmation" and denied.status == "confirmation_denied"
    assert "denied" in denied.content and "NOT run" in denied.content
    assert gateway.audit.decisions() == ["needs_confirmation", "confirmed",
                                         "needs_confirmation", "denied"]
    assert gateway.audit.records[1].approver == "human:dana"
    with pytest.raises(KeyError, match="no pending confirmation"):
        gateway.approve("c999", approver="human:dana")


def test_gateway_bad_input_never_crashes(gateway, tmp_path):
    results = [
        gateway.execute("nope", {}, subject="guest"),
        gateway.execute("get_weather", {"city": 3}, subject="guest"),
        gateway.execute("get_weather", None, subject="guest"),
        gateway.execute("get_weather", "Berlin", subject="guest"),
        gateway.execute("debug_dump", {}, subject="agent:support"),
        gateway.execute("divide", {"a": 1, "b": 0}, subject="guest"),
    ]
    assert all(isinstance(r, ToolResult) for r in results)
    assert [r.status for r in results] == ["unknown_tool", "invalid_arguments",
                                           "invalid_arguments", "invalid_arguments",
                                           "not_allowed", "bug"]
    assert len(gateway.audit) == 6 and "#6" in str(gateway.audit)
    lines = gateway.audit.to_jsonl(tmp_path / "audit.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["tool"] == "nope"


def test_gateway_rejects_unknown_risk_classes(registry):
    with pytest.raises(ValueError, match="unknown risk classes"):
        ToolGateway(registry, grants={"x": {"read", "admin"}})


def test_gateway_with_a_confirm_callback(registry):
    asked = []

    def ask(request):
        asked.append(request.tool)
        return request.arguments["amount"] < 100

    gateway = ToolGateway(registry, {"agent": {"read", "critical"}}, confirm=ask,
                          approver="human:dana")
    small = gateway.execute("refund_order", {"order_id": "A1", "amount": 20}, subject="agent")
    large = gateway.execute("refund_order", {"order_id": "A1", "amount": 500}, subject="agent")
    assert small.ok and large.status == "confirmation_denied" and asked == ["refund_order"] * 2
    assert gateway.audit.decisions() == ["needs_confirmation", "confirmed",
                                         "needs_confirmation", "denied"]
    assert gateway.pending == [] and gateway.audit.records[3].approver == "human:dana"


def test_langchain_tools_go_through_the_door(gateway):
    from functools import partial

    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    tools = langchain_tools(
        gateway.registry, ["get_weather", "debug_dump", "update_address"],
        executor=partial(gateway.execute, subject="guest"))
    assert [t.name for t in tools] == ["get_weather", "update_address"]  # debug_dump is off
    calls = [{"name": "get_weather", "args": {"city": "Oslo", "units": "kelvin"}, "id": "1"},
             {"name": "update_address", "args": {"order_id": "A1", "address": "x"}, "id": "2"},
             {"name": "get_weather", "args": {"city": "Oslo"}, "id": "3"}]
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    out = graph.compile().invoke({"messages": [AIMessage("", tool_calls=calls)]})
    contents = [m.content for m in out["messages"][1:]]
    assert "'units'" in contents[0] and "may not use write tools" in contents[1]
    assert contents[2] == "Oslo: 14 degrees (metric)"
    # ToolNode runs the three calls in threads, so the log's order is the order they finished
    decided = sorted((r.tool, "units" in r.arguments, r.decision) for r in gateway.audit.records)
    assert decided == [("get_weather", False, "allowed"), ("get_weather", True, "refused"),
                       ("update_address", False, "refused")]
    assert sorted(r.seq for r in gateway.audit.records) == [1, 2, 3]


def test_smolagents_tools_go_through_the_door(gateway):
    from functools import partial

    tools = smolagents_tools(
        gateway.registry, ["get_weather", "debug_dump", "update_address"],
        executor=partial(gateway.execute, subject="guest"))
    weather, address = tools
    assert weather.name == "get_weather" and weather.inputs["units"]["nullable"] is True
    assert weather(city="Oslo") == "Oslo: 14 degrees (metric)"
    assert weather(city="Oslo", units=None) == "Oslo: 14 degrees (metric)"
    assert "'units'" in weather(city="Oslo", units="kelvin")
    from smolagents.local_python_executor import LocalPythonExecutor

    executor = LocalPythonExecutor(additional_authorized_imports=[])
    executor.send_tools({weather.name: weather})
    assert "Rome: 14 degrees (imperial)" in executor(
        'print(get_weather("Rome", "imperial"))').logs
    assert "may not use write tools" in address(order_id="A1", address="x")
    assert gateway.audit.decisions() == ["allowed", "allowed", "refused", "allowed", "refused"]
