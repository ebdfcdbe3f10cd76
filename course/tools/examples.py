"""The course's one example tool, ``get_weather``: typed, documented, deterministic, offline.

Chapter 01 builds its schema, registers it and lets models call it; chapter 03's failure demos
and any later chapter import this same function, so a "weather call" means one thing
everywhere. The figures come from the small table :data:`WEATHER` (invented, fixed), never from
a network service.

Not handled: any city outside the table (the tool says it has no data for it; it does not
guess), forecasts, dates, units other than metric and imperial.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["WEATHER", "get_weather"]

#: city -> (temperature in °C, sky); invented, fixed figures for the examples.
WEATHER: dict[str, tuple[int, str]] = {
    "Paris": (14, "partly cloudy"),
    "Berlin": (9, "rain"),
    "Madrid": (21, "clear sky"),
    "Oslo": (3, "snow"),
    "Rome": (18, "sunny"),
}


def get_weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Current weather for a city.

    Args:
        city: the city name, e.g. "Paris".
        units: "metric" (°C) or "imperial" (°F).
    """
    if city not in WEATHER:
        return f"no weather data for {city!r}"
    celsius, sky = WEATHER[city]
    if units == "imperial":
        return f"{city}: {round(celsius * 9 / 5 + 32)} °F, {sky}"
    return f"{city}: {celsius} °C, {sky}"
