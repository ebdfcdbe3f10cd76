"""Slot filling keeps partial arguments in graph state and calls the tool only when it validates."""

from typing import Literal

from course.checkpoints import thread_config
from course.tools.registry import ToolRegistry
from course.tools.slots import invalid_slots, keyword_extractor, missing_slots, slot_filling_graph


def book(city: str, nights: int, room: Literal["single", "double"]) -> str:
    """Book a hotel.

    Args:
        city: City.
        nights: Number of nights.
        room: Room type.
    """
    calls.append((city, nights, room))
    return f"booked {nights} nights in {city} ({room})"


calls: list = []


def test_the_tool_runs_once_and_only_when_valid():
    calls.clear()
    registry = ToolRegistry()
    registry.register(book, risk="write")
    app = slot_filling_graph(registry, "book")
    turns = ["a double room please", "city: Oslo", "nights is many", "nights 3"]
    replies = [app.invoke({"messages": [("user", t)]}, thread_config("b"))["messages"][-1].content
               for t in turns]
    assert "still need: city, nights" in replies[0]
    assert "still need: nights" in replies[1]
    assert "nights='many'" in replies[2]
    assert replies[3] == "booked 3 nights in Oslo (double)"
    assert calls == [("Oslo", 3, "double")]
    other = app.invoke({"messages": [("user", "nights 2")]}, thread_config("other-thread"))
    assert other["slots"] == {"nights": 2} and calls == [("Oslo", 3, "double")]


def test_helpers():
    schema = ToolRegistry()
    schema.register(book)
    params = schema.spec("book").parameters
    assert "city" not in keyword_extractor("single room in Rome", params)  # needs "city <x>"
    assert keyword_extractor("city Rome, nights 2, single", params) == {
        "city": "Rome", "nights": 2, "room": "single"}
    assert missing_slots(params, {"city": "Rome"}) == ["nights", "room"]
    assert invalid_slots(params, {"nights": "two", "room": "suite"}) == ["nights", "room"]
