"""The held-out evaluation set: the note's three tasks and ten kin of each, with answer checks.

:func:`held_out_set` gives 33 :class:`~course.finetune.data.Trajectory` tasks without outputs:
the note's three (weather in Paris, the car James Bond drove, the two-bug script; the course
corpus and the recordings' task text) then ten seeded kin of each held-out family
(:data:`course.finetune.data.HELD_OUT_FAMILIES`), each with its own small search corpus or
script. :func:`course.finetune.evaluate.run_task` runs them; the training generators never
produce these families.

:func:`answer_problem` judges the answer, not only the trajectory, and says what is wrong in a
short phrase (``None``: the answer is right):

- ``weather``: the final answer names figures of exactly one source (a temperature one search
  result states); an answer with two sources' figures ("13-16 °C") or none fails;
- ``film_vehicle_photo``: the image tool was asked for the car the pages name (and not the
  other car the pages mention);
- ``debug_list_index``: the returned code runs in smolagents' own executor without an error and
  prints the list's values, in order, and nothing else that is a number.

Not handled: whether a weather figure is true (the pages are made up), the look of an image,
code that prints the values in another format than one whole number per value.
"""

from __future__ import annotations

import random
import re
from typing import Any

from course.finetune.data import Trajectory, forum_page, held_out_tasks, search_page

__all__ = ["KIN_PER_FAMILY", "answer_problem", "by_family", "by_family_text", "disagreement_counts",
           "held_out_set", "list_values", "lookup_tasks", "search_miss_counts", "source_figures"]

KIN_PER_FAMILY = 10

_CITIES = ["Lyon", "Oslo", "Porto", "Krakow", "Ghent", "Bergen", "Seville", "Tallinn", "Graz",
           "Bologna", "Malmo", "Cork"]
_CONDITIONS = ["overcast", "sunny", "partly cloudy", "clear sky", "rain", "cloudy", "fog"]
_HEROES = [  # (character, latest film, car, an earlier film, the car there)
    ("Jack Ryder", "Night Runner 3", "Lancia Stratos", "Night Runner 2", "Volvo P1800"),
    ("Mara Quill", "Silent Orbit", "Porsche 911 Targa", "Red Orbit", "Saab 900"),
    ("Captain Ode", "Harbour Lights", "Citroen DS", "Harbour Fog", "Renault Alpine"),
    ("Nina Sol", "The Glass Road", "Jaguar E-Type", "The Iron Road", "Mini Cooper"),
    ("Agent Kerr", "Zero Hour Protocol", "BMW M3", "First Hour Protocol", "Audi Quattro"),
    ("Detective Lune", "Rain over Vell", "Alfa Romeo Spider", "Snow over Vell", "Fiat 124"),
    ("Max Talon", "Dust Kingdom", "Ford Bronco", "Sand Kingdom", "Land Rover Defender"),
    ("Ivy Marsh", "Ghost Circuit", "Lotus Elise", "Iron Circuit", "Toyota Supra"),
    ("Ray Orlo", "The Last Ferry", "Mercedes 300SL", "The First Ferry", "Peugeot 205"),
    ("Sam Haldor", "Blue Meridian", "Chevrolet Corvette", "Green Meridian", "Dodge Viper"),
    ("Lena Voss", "Cold Signal", "Volkswagen Beetle", "Warm Signal", "Opel Manta"),
]
_OTHER_CARS = sorted({h[4] for h in _HEROES} | {"V8 Vantage", "DBS Superleggera", "Lotus Esprit",
                                                 "BMW Z3"})
"""Cars the pages name that are not the one asked for (an earlier film's, the note's others)."""
_DEBUG_TASKS = [
    "I have some code that has bugs: please debug it, then run it to make sure it works, and "
    "return the final code.",
    "This script does not work. Debug it, run it to check it, and give me the working code.",
    "Please fix the bugs in my code, run the fixed version to be sure, and return it.",
]


def _weather_kin(rng: random.Random, city: str) -> Trajectory:
    t1, t2 = rng.sample(range(2, 29), 2)
    c1, c2 = rng.sample(_CONDITIONS, 2)
    a = search_page(f"{city} weather now | {rng.choice(['MeteoCity', 'WeatherDesk'])}", "meteocity",
              city.lower(), f"{city} station: {t1} °C, {c1}. Wind N {rng.randint(3, 30)} km/h.")
    b = search_page(f"Weather in {city} right now - {rng.choice(['SkyReport', 'AirNow'])}", "skyreport",
              city.lower(), f"{city} now: {c2}, +{t2}°.")
    pages = [forum_page(rng, "current"), forum_page(rng, "current"), *rng.sample([a, b], 2)]
    task = rng.choice(["What is the current weather in {c}?", "What's the weather in {c} right now?",
                       "Tell me the current weather in {c}."]).format(c=city)
    return Trajectory("weather", task, ["web_search"], pages, expected_tool="web_search")


def _vehicle_kin(rng: random.Random, hero: tuple[str, str, str, str, str]) -> Trajectory:
    name, film, car, old_film, old_car = hero
    slug = film.lower().replace(" ", "-")
    pages = [search_page(f"{film} - the latest {name} movie", "filmfacts", slug,
                   f"{film} is the latest movie with {name}, released this year."),
             search_page(f"The cars of {film}", "motorscreen", f"{slug}-cars",
                   f"In {film}, the car {name} drives in the big chase is a {car}."),
             search_page(f"{old_film}: looking back", "filmfacts", old_film.lower().replace(" ", "-"),
                   f"In the earlier movie {old_film}, {name} drove a {old_car}.")]
    rng.shuffle(pages)
    tool = rng.choice(["image_generator", "text_to_image"])
    task = rng.choice(["Generate me a photo of the car that {h} drove in the latest movie",
                       "Make a picture of the car {h} drives in the latest movie",
                       "Create an image of the car that {h} drove in the newest film"]).format(h=name)
    return Trajectory("film_vehicle_photo", task, ["web_search", tool], pages,
                      expected_tool="web_search", answer=car)


def _debug_kin(rng: random.Random) -> Trajectory:
    name = rng.choice(["values", "items", "marks", "scores", "ages", "sizes"])
    values = rng.sample(range(0, 99), rng.randint(3, 5))
    extra = rng.randint(1, 3)
    body = rng.choice(["    print({n}(i))\n", "    x = {n}(i)\n    print(x)\n"]).format(n=name)
    script = f"{name}={values}\n\nfor i in range({len(values) + extra}):\n{body}"
    return Trajectory("debug_list_index", rng.choice(_DEBUG_TASKS), [], [],
                      additional_args={"code": script}, expected_tool="python")


def held_out_set(seed: int = 2000, kin: int = KIN_PER_FAMILY) -> list[Trajectory]:
    """The note's three tasks, then ``kin`` seeded kin of each held-out family (33 by default)."""
    if not 0 <= kin <= len(_HEROES):
        raise ValueError(f"kin={kin}: use 0 to {len(_HEROES)} kin per family.")
    rng = random.Random(seed)
    note = held_out_tasks(extra=0)
    note[1].answer = "Aston Martin DB5"  # the car the pages name, not only its maker
    cities = rng.sample(_CITIES, kin)
    heroes = rng.sample(_HEROES, kin)
    return [*note, *(_weather_kin(rng, c) for c in cities), *(_vehicle_kin(rng, h) for h in heroes),
            *(_debug_kin(rng) for _ in range(kin))]


# ----- answer checks -----
def source_figures(traj: Trajectory) -> dict[str, set[float]]:
    """The temperatures each search result of ``traj``'s corpus states, by page link (pages of
    the course corpus when the task has none: those that name the task's city)."""
    from course.agents.evaluation import facts_in

    pages = traj.corpus()
    if pages is None:
        from course.agents.offline_tools import load_corpus

        city = traj.task.rstrip("?. ").split(" in ")[-1].split()[0]
        pages = [p for p in load_corpus() if city in p.title or city in p.description]
    figures = {}
    for page in pages:
        for facts in facts_in(page.as_result()):
            if facts.temperatures:
                figures[page.link] = {abs(t) for t in facts.temperatures}
    return figures


def list_values(script: str) -> list[int]:
    """The whole numbers of the first list a script assigns (``numbers=[0, 1, 2]`` -> 0, 1, 2)."""
    match = re.search(r"=\s*\[([^\]]*)\]", script)
    return [int(v) for v in re.findall(r"-?\d+", match.group(1))] if match else []


def _is_image(answer: Any) -> bool:
    """``answer`` is an image: a PIL image (smolagents' ``AgentImage`` is one, what the image
    tool returns) or the path of an image file that exists."""
    from pathlib import Path

    from PIL import Image

    if isinstance(answer, Image.Image):
        return True
    path = Path(answer) if isinstance(answer, str) else None
    return path is not None and path.suffix.lower() in {".png", ".jpg", ".jpeg", ".webp"} and path.is_file()


def _printed(code: str) -> tuple[str, str | None]:
    """What ``code`` prints in smolagents' executor, and the error it raised (``None``: none)."""
    from smolagents.local_python_executor import LocalPythonExecutor

    executor = LocalPythonExecutor([], max_print_outputs_length=10_000)
    executor.send_tools({})
    try:
        out = executor(code)
    except Exception as err:  # the executor raises InterpreterError and friends
        return "", f"{type(err).__name__}: {str(err)[:120]}"
    return out.logs, None


def answer_problem(traj: Trajectory, answer: Any, drawn: list[str]) -> str | None:
    """What is wrong with the answer to a held-out task (``None``: nothing); ``drawn`` are the
    prompts the image tool received. Families other than the held-out ones: ``None``."""
    text = "" if answer is None else str(answer)
    if traj.family == "weather":
        numbers = {abs(float(n)) for n in re.findall(r"\d+(?:\.\d+)?", text)}
        named = [link for link, temps in source_figures(traj).items() if temps & numbers]
        if not named:
            return "names no source's temperature"
        if len(named) > 1:
            return f"glues the figures of {len(named)} sources"
        return None
    if traj.family == "film_vehicle_photo":
        wrong = [c for c in _OTHER_CARS if c.lower() in " ".join(drawn).lower()]
        if not drawn:
            return "no image was generated"
        if not any(traj.answer.lower() in p.lower() for p in drawn):
            return f"the image tool was not asked for the {traj.answer}"
        if wrong:
            return f"the image tool was asked for the {wrong[0]}, another car the pages name"
        if not _is_image(answer):
            kind = "nothing" if answer is None else f"a {type(answer).__name__}"
            return f"the answer is {kind}, not the image the tool made"
        return None
    if traj.family == "debug_list_index":
        script = traj.additional_args.get("code", "")
        if not text.strip() or text.strip() == script.strip():
            return "returned no fixed code"
        printed, error = _printed(text)
        if error:
            return f"the returned code fails: {error}"
        if [int(v) for v in re.findall(r"-?\d+", printed)] != list_values(script):
            return f"the returned code prints {printed.strip()[:60]!r}, not the list's values"
        return None
    return None


# ----- side by side, per family -----
def by_family(results: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """One row per (family, model): tasks, successes, final answers and the answer problems
    found, from :class:`~course.finetune.evaluate.TaskResult` lists keyed by model label."""
    rows = []
    families = list(dict.fromkeys(r.family for runs in results.values() for r in runs))
    for family in families:
        for model, runs in results.items():
            mine = [r for r in runs if r.family == family]
            problems: dict[str, int] = {}
            for r in mine:
                if r.answer_problem:
                    problems[r.answer_problem.split(":")[0]] = problems.get(
                        r.answer_problem.split(":")[0], 0) + 1
            rows.append({"family": family, "model": model, "tasks": len(mine),
                         "success": sum(r.success for r in mine),
                         "final_answer": sum(r.final_answer for r in mine),
                         "answer_problems": problems})
    return rows


def by_family_text(rows: list[dict[str, Any]]) -> str:
    """:func:`by_family`'s rows as lines: ``family | model | success k/n | final answers``."""
    return "\n".join(f"{r['family']} | {r['model']} | success {r['success']}/{r['tasks']} | "
                     f"final answers {r['final_answer']}/{r['tasks']}" for r in rows)


def disagreement_counts(results: list[Any]) -> dict[str, int]:
    """What a model did on the tasks where two sources disagree (the ``weather`` family of
    ``results``, :class:`~course.finetune.evaluate.TaskResult` objects), counted: the tasks, the
    answers that named one source's figure (successes), each answer problem, and the runs that
    searched more than once."""
    weather = [r for r in results if r.family == "weather"]
    counts = {"tasks": len(weather), "named one source's figure": sum(r.success for r in weather)}
    for r in weather:
        if r.answer_problem:
            key = r.answer_problem.split(":")[0]
            counts[key] = counts.get(key, 0) + 1
    counts["searched more than once"] = sum(r.tools_called.count("web_search") > 1 for r in weather)
    return counts


def lookup_tasks(tasks: list[Trajectory]) -> list[Trajectory]:
    """The tasks of ``tasks`` that give the agent ``web_search`` (weather and film vehicle)."""
    return [t for t in tasks if "web_search" in t.tools]


def search_miss_counts(results: list[Any]) -> dict[str, int]:
    """What a model did when its first search found nothing (``results``:
    :class:`~course.finetune.evaluate.TaskResult` objects of a run with ``search_misses=1``),
    counted: the tasks, the runs that searched at all, searched again after the miss, searched
    again with another query than the first, and succeeded."""
    searched = [r for r in results if r.search_queries]
    again = [r for r in searched if len(r.search_queries) > 1]
    return {"tasks": len(results), "searched": len(searched), "searched again": len(again),
            "with another query": sum(r.search_queries[1] != r.search_queries[0] for r in again),
            "succeeded": sum(r.success for r in results)}
