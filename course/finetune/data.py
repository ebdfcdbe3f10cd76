"""Seeded training trajectories for the bundled model, in the agent format of chapters 02-03.

Every trajectory is a task, the tools it gets (the offline tools of
:mod:`course.agents.offline_tools`, each search over a small corpus written for that task), and
the model outputs a careful agent would write, step by step: ``Thought: ...`` then a ``<code>``
block. The outputs are *scripted* (written by this generator, no model); everything else is
real: :func:`render` runs them through a real smolagents ``CodeAgent`` (the course's
:class:`~course.agents.replay.ReplayModel`, the tools behind chapter 01's door, smolagents' own
executor), so the observations, errors and the prompt text a model is trained on are exactly
what smolagents builds at run time. Each rendered trajectory must pass the course's trajectory
checks (:func:`course.agents.evaluation.check_trajectory`) and end with a final answer, or
:func:`render` raises.

The behaviours taught, by task family (:data:`TRAIN_FAMILIES`):

- ``fact_lookup``: search before answering; refine a query whose results miss the point; when
  two sources disagree, answer from one and name it (never glue them).
- ``lookup_then_draw``: find what to draw with a search, then send the image tool that thing.
- ``run_and_fix``: run the given script first, read the error, fix it, run the fix, answer.
- ``compute``: run code to compute a figure before stating it.

The evaluation families (:data:`HELD_OUT_FAMILIES`: current weather, a photo of the vehicle a
film character drove, a script whose list is called instead of indexed and read past its end)
are the note's three tasks and their kin; :func:`training_tasks` never yields them (tested), and
:func:`held_out_tasks` yields only them.

Not handled: real web pages, languages other than English, tasks needing more than three steps.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from course.agents.offline_tools import OfflineImageTool, OfflineWebSearchTool, SearchPage

__all__ = ["HELD_OUT_FAMILIES", "TRAIN_FAMILIES", "Rendered", "Trajectory", "code_step",
           "compute_trajectory", "data_hash", "fact_lookup_trajectory", "fix_trajectory",
           "forum_page", "held_out_tasks", "lookup_then_draw_trajectory", "made_up_name", "render",
           "render_all", "script_bug", "search_page", "training_tasks"]

TRAIN_FAMILIES = ("fact_lookup", "lookup_then_draw", "run_and_fix", "compute")
HELD_OUT_FAMILIES = ("weather", "film_vehicle_photo", "debug_list_index")


@dataclass
class Trajectory:
    """One task and the scripted outputs of a careful agent (empty ``outputs``: evaluation only)."""

    family: str
    task: str
    tools: list[str]
    pages: list[dict[str, str]] = field(default_factory=list)
    """The search corpus of this task (``[]`` with ``web_search`` listed: the course corpus)."""
    outputs: list[str] = field(default_factory=list)
    additional_args: dict[str, str] = field(default_factory=dict)
    expected_tool: str = ""
    """The tool a right first action calls (``python`` for running the given script)."""
    answer: str = ""
    """What the final answer should contain (empty: the checks alone judge)."""

    def corpus(self) -> list[SearchPage] | None:
        return [SearchPage(**p) for p in self.pages] if self.pages else None

    def make_tools(self, search_misses: int = 0) -> list[Any]:
        """Fresh offline tools for this task (a search over its own corpus, whose first
        ``search_misses`` calls find nothing)."""
        tools: list[Any] = []
        for name in self.tools:
            if name == "web_search":
                tools.append(OfflineWebSearchTool(corpus=self.corpus(), misses=search_misses))
            else:
                tools.append(OfflineImageTool(name=name))
        return tools


def code_step(thought: str, code: str) -> str:
    """One model output in smolagents' CodeAgent format: a thought, then a ``<code>`` block."""
    return f"Thought: {thought}\n<code>\n{code.strip()}\n</code>"


def search_page(title: str, site: str, slug: str, description: str) -> dict[str, str]:
    """One result of the offline web search: title, a made-up link, description."""
    return {"title": title, "link": f"https://{site}.example/{slug}", "description": description}


# ----- made-up names, so that answers must be read from observations, not remembered -----
_SYL = ["var", "kel", "mon", "dra", "sil", "tor", "bel", "nor", "quin", "os", "lar", "ven", "ath",
        "ris", "pol", "gan", "mer", "tal", "zu", "hal"]


def made_up_name(rng: random.Random, parts: int = 2) -> str:
    """A name no model remembers, so that an answer must be read from an observation."""
    return "".join(rng.choice(_SYL) for _ in range(parts)).capitalize()


def forum_page(rng: random.Random, word: str) -> dict[str, str]:
    """A search result that talks about ``word`` without giving its value (a distractor)."""
    name = made_up_name(rng)
    return search_page(f"Question about the {word} - {name} Community", f"{name.lower()}-forum",
                 f"t/{rng.randint(100, 999)}", f"Has anyone else seen the {word} change? The {word} "
                 f"in my account is not the {word} the app showed yesterday. Any {word} tips welcome.")


# ----- fact_lookup -----
_FACTS = [  # (question, query, what, value maker, sentence)
    ("Who wrote the novel {x}?", "author of the novel {x}", "novel", "author",
     "{x} is a novel written by {v}, first published in {y}."),
    ("How tall is the {x} Tower?", "height of the {x} Tower", "tower", "height",
     "The {x} Tower is {v} tall and was finished in {y}."),
    ("When did the {x} Museum open?", "{x} Museum opening year", "museum", "year",
     "The {x} Museum opened to the public in {v}; it holds about {y} objects."),
    ("What is the population of {x}?", "population of the town {x}", "town", "population",
     "{x} is a town of {v} inhabitants, according to the {y} census."),
    ("Who founded the company {x} Labs?", "founder of {x} Labs", "company", "founder",
     "{x} Labs was founded by {v} in {y}."),
]


def _fact_value(kind: str, rng: random.Random) -> str:
    if kind in ("author", "founder"):
        return f"{made_up_name(rng)} {made_up_name(rng, 3)}"
    if kind == "height":
        return f"{rng.randint(80, 600)} metres"
    if kind == "year":
        return str(rng.randint(1850, 2015))
    return f"{rng.randint(2, 90)},{rng.randint(100, 999)}"


def fact_lookup_trajectory(rng: random.Random, variant: str) -> Trajectory:
    """A lookup task: search, read the value, answer it (``variant``: "direct", "refine", ...)."""
    question, query, what, kind, sentence = rng.choice(_FACTS)
    x = made_up_name(rng)
    v, y = _fact_value(kind, rng), str(rng.randint(1990, 2020))
    site = rng.choice(["wikifacts", "cityguide", "almanac", "reference"])
    good = search_page(f"{x} - {what} facts", site, x.lower(), sentence.format(x=x, v=v, y=y))
    other = search_page(f"Visiting {made_up_name(rng)}: a travel guide", "travelnotes", "guide",
                  f"Where to eat, where to stay and how to get around {made_up_name(rng)}.")
    q = query.format(x=x)
    task = question.format(x=x)
    if variant == "direct":
        pages = [other, good]
        outputs = [
            code_step(f"I need to find the {kind} of {x}. I will search the web first.",
                  f'results = web_search(query="{q}")\nprint(results)'),
            code_step(f"The page '{good['title']}' says: {good['description']} I can answer.",
                  f'final_answer("{v} (source: {good["title"]})")'),
        ]
        return Trajectory("fact_lookup", task, ["web_search"], pages, outputs,
                          expected_tool="web_search", answer=v)
    if variant == "refine":
        word = rng.choice(["current", "balance", "plan", "latest"])
        vague = f"{word} {kind} {x}"
        noise = [forum_page(rng, word) for _ in range(3)]  # each repeats the word: they outrank the fact
        pages = [*noise, other, good]
        outputs = [
            code_step(f"I need the {kind} of {x}. I will search the web.",
                  f'results = web_search(query="{vague}")\nprint(results)'),
            code_step(f"These results are forum posts that only match the word '{word}'; none of "
                  f"them is about {x}. I will make the query more precise.",
                  f'results = web_search(query="{q} {what}")\nprint(results)'),
            code_step(f"The page '{good['title']}' says: {good['description']} I can answer.",
                  f'final_answer("{v} (source: {good["title"]})")'),
        ]
        return Trajectory("fact_lookup", task, ["web_search"], pages, outputs,
                          expected_tool="web_search", answer=v)
    # disagree: two sources give different values; answer from the more specific one, say so
    v2 = _fact_value(kind, rng)
    while v2 == v:
        v2 = _fact_value(kind, rng)
    official = search_page(f"{x} - official {what} page", f"{x.lower()}-official", "about",
                     sentence.format(x=x, v=v, y=y))
    blog = search_page(f"My notes on {x}", "someblog", x.lower(), sentence.format(x=x, v=v2, y=y))
    pages = [blog, official]
    outputs = [
        code_step(f"I need the {kind} of {x}. I will search the web first.",
              f'results = web_search(query="{q}")\nprint(results)'),
        code_step(f"The sources disagree: '{official['title']}' says {v}, '{blog['title']}' says "
              f"{v2}. I will not combine them: the official page is the better source, so I "
              "answer with its value and say that another page differs.",
              f'final_answer("{v}, according to {official["title"]} (another page says '
              f'otherwise)")'),
    ]
    return Trajectory("fact_lookup", task, ["web_search"], pages, outputs,
                      expected_tool="web_search", answer=v)


# ----- lookup_then_draw -----
_DRAW = [  # (task, query, sentence, things)
    ("Draw a picture of the animal that is the mascot of the {x} football club",
     "{x} football club mascot", "The mascot of the {x} football club is a {v}, chosen by fans in {y}.",
     ["red fox", "snowy owl", "grey wolf", "brown bear", "golden eagle", "badger", "lynx"]),
    ("Make an image of the flower on the flag of {x}",
     "flower on the flag of {x}", "The flag of {x} shows a white {v} on a green field since {y}.",
     ["lotus", "tulip", "rose", "edelweiss", "lily", "orchid", "sunflower"]),
    ("Generate an image of the instrument that the musician {x} plays",
     "musician {x} instrument", "{x} is a musician who plays the {v}; the first album came out in {y}.",
     ["cello", "harp", "trumpet", "accordion", "double bass", "oboe", "sitar"]),
    ("Create a picture of the bridge that the city of {x} is famous for",
     "famous bridge city of {x}", "The city of {x} is famous for its {v}, built in {y}.",
     ["stone arch bridge", "red suspension bridge", "wooden covered bridge",
      "white cable-stayed bridge", "iron swing bridge"]),
]


def lookup_then_draw_trajectory(rng: random.Random) -> Trajectory:
    """Search what to draw, then call the image tool with what the search returned."""
    task, query, sentence, things = rng.choice(_DRAW)
    x, v, y = made_up_name(rng), rng.choice(things), str(rng.randint(1900, 2020))
    image_tool = rng.choice(["image_generator", "text_to_image"])
    good = search_page(f"{x}: facts and history", rng.choice(["wikifacts", "localnews"]), x.lower(),
                 sentence.format(x=x, v=v, y=y))
    other = search_page(f"{made_up_name(rng)} weekend events", "events", "weekend",
                  f"Markets, concerts and exhibitions in {made_up_name(rng)} this weekend.")
    outputs = [
        code_step("I do not know what to draw yet: I need to find it first, then make the image. "
              "I will search the web.",
              f'result = web_search(query="{query.format(x=x)}")\nprint(result)'),
        code_step(f"The search says: {good['description']} Now I generate an image of a {v}.",
              f'image = {image_tool}(prompt="a {v}, detailed, high-res")\nfinal_answer(image)'),
    ]
    return Trajectory("lookup_then_draw", task.format(x=x), ["web_search", image_tool],
                      [good, other], outputs, expected_tool="web_search", answer=v)


# ----- run_and_fix (bugs of other kinds than the held-out list-index ones) -----
def script_bug(rng: random.Random) -> tuple[str, str, str]:
    """(buggy script, fixed script, what the fix is)."""
    kind = rng.choice(["str_plus_int", "join", "key", "push", "empty_mean"])
    name = rng.choice(["prices", "scores", "sizes", "counts", "weights"])
    values = [rng.randint(1, 40) for _ in range(rng.randint(3, 5))]
    if kind == "str_plus_int":
        bad = f"{name} = {values}\ntotal = sum({name})\nprint('Total: ' + total)\n"
        good = f"{name} = {values}\ntotal = sum({name})\nprint('Total: ' + str(total))\n"
        why = "a string cannot be added to an integer, so I convert total with str()"
    elif kind == "join":  # (a misspelt name is no bug to smolagents: it resolves close names)
        bad = f"{name} = {values}\nprint('All: ' + ', '.join({name}))\n"
        good = f"{name} = {values}\nprint('All: ' + ', '.join(str(v) for v in {name}))\n"
        why = "join needs strings and the list holds integers, so I convert each item with str()"
    elif kind == "key":
        key = rng.choice(["red", "blue", "green"])
        bad = (f"stock = {{'{key}': {values[0]}, 'other': {values[1]}}}\n"
               f"print('In stock:', stock['{key.capitalize()}'])\n")
        good = (f"stock = {{'{key}': {values[0]}, 'other': {values[1]}}}\n"
                f"print('In stock:', stock['{key}'])\n")
        why = f"the key is '{key}' in lower case, not '{key.capitalize()}'"
    elif kind == "push":
        bad = f"{name} = {values}\n{name}.push({values[0] + 1})\nprint({name})\n"
        good = f"{name} = {values}\n{name}.append({values[0] + 1})\nprint({name})\n"
        why = "Python lists have no push method; the method is append"
    else:
        bad = (f"def mean(items):\n    return sum(items) / len(items)\n\n"
               f"{name} = []\nprint('Mean:', mean({name}))\n")
        good = (f"def mean(items):\n    if not items:\n        return 0\n    return sum(items) / len(items)\n\n"
                f"{name} = []\nprint('Mean:', mean({name}))\n")
        why = "the list is empty, so len(items) is 0 and the division fails; I return 0 for an empty list"
    return bad, good, why


_FIX_TASKS = [
    "Here is a script that fails: fix it, run it to check that it works, and return the fixed code.",
    "This code has a bug. Please find it, test your fix by running it, and give me the corrected code.",
    "Fix the bug in the code I give you; run it first to see the error, and return the working code.",
]


def fix_trajectory(bad: str, good: str, why: str, task: str) -> Trajectory:
    """Run the given script, read the error (``why``), run the fix, return the fixed code."""
    fixed = good.rstrip("\n")
    outputs = [
        code_step("Before changing anything I run the code as it is, to see what goes wrong.", bad),
        code_step(f"The run failed: {why}. I fix it and run the fixed version.", good),
        code_step("The fixed code runs without an error and prints what it should. I return it.",
              f'fixed_code = """{fixed}\n"""\nfinal_answer(fixed_code)'),
    ]
    return Trajectory("run_and_fix", task, [], [], outputs, {"code": bad}, expected_tool="python")


def _run_and_fix(rng: random.Random) -> Trajectory:
    bad, good, why = script_bug(rng)
    return fix_trajectory(bad, good, why, rng.choice(_FIX_TASKS))


# ----- compute -----
def compute_trajectory(rng: random.Random) -> Trajectory:
    """A compute task: the code computes the value, then answers it."""
    kind = rng.choice(["squares", "days", "percent", "factorial"])
    value: int | float  # a whole number, except a percent
    if kind == "squares":
        n = rng.randint(5, 40)
        task = f"What is the sum of the squares of the whole numbers from 1 to {n}?"
        code, value = f"print(sum(i * i for i in range(1, {n} + 1)))", sum(i * i for i in range(1, n + 1))
    elif kind == "days":
        import datetime

        a = datetime.date(2020 + rng.randint(0, 5), rng.randint(1, 12), rng.randint(1, 28))
        b = a + datetime.timedelta(days=rng.randint(10, 900))
        task = f"How many days are there between {a.isoformat()} and {b.isoformat()}?"
        code = (f"import datetime\nprint((datetime.date({b.year}, {b.month}, {b.day}) - "
                f"datetime.date({a.year}, {a.month}, {a.day})).days)")
        value = (b - a).days
    elif kind == "percent":
        p, total = rng.choice([5, 12, 15, 20, 35, 40]), rng.randint(50, 5000)
        task = f"What is {p} percent of {total}?"
        code, value = f"print({p} * {total} / 100)", p * total / 100
    else:
        n = rng.randint(5, 15)
        task = f"What is the factorial of {n}?"
        code, value = f"import math\nprint(math.factorial({n}))", __import__("math").factorial(n)
    outputs = [
        code_step("I will compute this with code instead of guessing, and print the result.", code),
        code_step(f"The code printed {value}. That is the answer.", f"final_answer({value!r})"),
    ]
    return Trajectory("compute", task, [], [], outputs, expected_tool="python", answer=str(value))


# ----- the sets -----
TRAIN_MIX = (("fact_direct", 16), ("fact_refine", 10), ("fact_disagree", 10),
             ("lookup_then_draw", 24), ("run_and_fix", 24), ("compute", 12))
"""How many trajectories of each kind :func:`training_tasks` makes (96 in all)."""


def training_tasks(seed: int = 0, mix: tuple[tuple[str, int], ...] = TRAIN_MIX) -> list[Trajectory]:
    """The training trajectories, seeded, shuffled; only :data:`TRAIN_FAMILIES`."""
    rng = random.Random(seed)
    makers = {"fact_direct": lambda: fact_lookup_trajectory(rng, "direct"),
              "fact_refine": lambda: fact_lookup_trajectory(rng, "refine"),
              "fact_disagree": lambda: fact_lookup_trajectory(rng, "disagree"),
              "lookup_then_draw": lambda: lookup_then_draw_trajectory(rng),
              "run_and_fix": lambda: _run_and_fix(rng), "compute": lambda: compute_trajectory(rng)}
    unknown = [k for k, _ in mix if k not in makers]
    if unknown:
        raise ValueError(f"training mix: unknown kinds {unknown}; use {sorted(makers)}.")
    out = [makers[kind]() for kind, n in mix for _ in range(n)]
    rng.shuffle(out)
    return out


def held_out_tasks(seed: int = 1000, extra: int = 1) -> list[Trajectory]:
    """The evaluation tasks: the note's three (their recordings' task, tools and additional_args,
    the course corpus), then ``extra`` seeded kin of each held-out family. No outputs."""
    from course.agents.live import NOTE_TASKS
    from course.agents.traces import RECORDINGS_DIR, load_run

    families = {"weather": "weather", "bond": "film_vehicle_photo", "debug": "debug_list_index"}
    expected = {"weather": "web_search", "bond": "web_search", "debug": "python"}
    tasks = []
    for short, recording in NOTE_TASKS.items():
        run = load_run(RECORDINGS_DIR / f"{recording}.json")
        tasks.append(Trajectory(families[short], run.task, list(run.tools), [],
                                additional_args=dict(run.additional_args),
                                expected_tool=expected[short],
                                answer="Aston Martin" if short == "bond" else ""))
    rng = random.Random(seed)
    for _ in range(extra):
        city = rng.choice(["Lyon", "Oslo", "Porto", "Krakow"])
        t1, t2 = rng.randint(4, 12), rng.randint(14, 22)
        pages = [forum_page(rng, "current"), forum_page(rng, "current"),
                 search_page(f"{city} weather now | MeteoCity", "meteocity", city.lower(),
                       f"{city} station: {t1} °C, overcast. Wind N 8 km/h."),
                 search_page(f"Weather in {city} right now - SkyReport", "skyreport", city.lower(),
                       f"{city} now: sunny, +{t2}°. Feels like +{t2 - 1}°.")]
        tasks.append(Trajectory("weather", f"What is the current weather in {city}?",
                                ["web_search"], pages, expected_tool="web_search"))
        hero, film, car = rng.choice([("Ethan Hunt", "Dead Reckoning", "Fiat 500"),
                                      ("Dominic Toretto", "Fast X", "Dodge Charger"),
                                      ("Batman", "The Batman", "Batmobile muscle car")])
        pages = [search_page(f"{film} - the latest {hero} movie", "filmfacts", film.lower().replace(" ", "-"),
                       f"{film} is the latest movie with {hero}."),
                 search_page(f"The cars of {film}", "motorscreen", "cars",
                       f"In {film}, the car {hero} drives in the big chase is a {car}.")]
        tasks.append(Trajectory("film_vehicle_photo",
                                f"Generate me a photo of the car that {hero} drove in the latest movie",
                                ["web_search", "image_generator"], pages, expected_tool="web_search",
                                answer=car))
        name, n = rng.choice(["values", "items", "marks"]), rng.randint(3, 4)
        values = [rng.randint(0, 9) for _ in range(n)]
        script = f"{name}={values}\n\nfor i in range({n + 2}):\n    print({name}(i))\n"
        tasks.append(Trajectory("debug_list_index", "I have some code that has bugs: please debug "
                                "it, then run it to make sure it works, and return the final code.",
                                [], [], additional_args={"code": script}, expected_tool="python"))
    return tasks


# ----- rendering through the real CodeAgent -----
@dataclass
class Rendered:
    """A trajectory as the model sees it: the prompt text and where the model's own words are."""

    family: str
    task: str
    text: str
    """The whole conversation in the chat template, ending with the last output's end token."""
    prefix: str
    """The start of ``text`` shared by every task with the same tools (system prompt and tools)."""
    spans: list[tuple[int, int]]
    """Character spans of ``text`` written by the model (its outputs): the trained part."""
    steps: int
    observations: list[str]


def render(traj: Trajectory, tokenizer: Any, prompt_templates: dict[str, Any] | None = None) -> Rendered:
    """Run ``traj``'s scripted outputs through a real ``CodeAgent``; check the trajectory passes.

    ``prompt_templates``: the agent's prompts (default smolagents' own; the course's compact
    system prompt is :func:`course.agents.prompts.prompt_templates`)."""
    from smolagents import CodeAgent

    from course.agents.evaluation import check_trajectory
    from course.agents.replay import ReplayModel
    from course.agents.traces import run_from_spans
    from course.tools import spans as tracing
    from course.tools.for_libraries import smolagents_door

    if not traj.outputs:
        raise ValueError(f"trajectory {traj.task!r} has no outputs: it is an evaluation task.")
    model = ReplayModel(traj.outputs, model_id="scripted trajectory", tokenizer=tokenizer)
    agent = CodeAgent(tools=smolagents_door(traj.make_tools()), model=model,
                      max_steps=len(traj.outputs), verbosity_level=-1,
                      prompt_templates=prompt_templates)
    with tracing.capture(provenance="scripted") as captured:
        agent.run(traj.task, additional_args=dict(traj.additional_args) or None)
    run = run_from_spans(captured)
    run.additional_args = dict(traj.additional_args)
    flags = check_trajectory(run)
    if len(model.prompts) != len(traj.outputs) or not run.steps[-1].is_final_answer:
        raise ValueError(f"trajectory {traj.task!r}: the agent ran {len(model.prompts)} of "
                         f"{len(traj.outputs)} steps without reaching its final answer "
                         f"(errors: {[s.error for s in run.steps if s.error]}).")
    if flags:
        raise ValueError(f"trajectory {traj.task!r} fails the course's checks: {flags}")
    observations = [s.observation or s.error or "" for s in run.steps]
    if traj.family == "run_and_fix" and not (run.steps[0].error and not run.steps[1].error):
        raise ValueError(f"trajectory {traj.task!r}: the given script must fail when run and the "
                         f"fix must not (errors: {[s.error for s in run.steps]}).")
    if traj.answer and traj.family != "compute" and not any(traj.answer in o for o in observations):
        raise ValueError(f"trajectory {traj.task!r}: no observation shows {traj.answer!r}.")
    last = model.outputs[-1]
    text = model.prompts[-1] + last + "<|im_end|>"
    spans, pos = [], 0
    for out in traj.outputs:
        cut = out if out in text else out.rsplit("</code>", 1)[0]
        start = text.find(cut, pos)
        if start < 0:
            raise ValueError(f"trajectory {traj.task!r}: output not found in the rendered prompt.")
        end = start + len(cut)
        if text.startswith("<|im_end|>", end):
            end += len("<|im_end|>")
        spans.append((start, end))
        pos = end
    marker = "New task:\n"
    prefix = text[: text.index(marker) + len(marker)]
    return Rendered(traj.family, traj.task, text, prefix, spans, len(traj.outputs), observations)


def render_all(trajectories: list[Trajectory], tokenizer: Any,
               prompt_templates: dict[str, Any] | None = None, progress: bool = False) -> list[Rendered]:
    """:func:`render` for each trajectory, in order (``progress``: a progress bar)."""
    from tqdm.auto import tqdm

    return [render(t, tokenizer, prompt_templates)
            for t in tqdm(trajectories, desc="rendering trajectories", disable=not progress)]


def data_hash(rendered: list[Rendered]) -> str:
    """sha256 of the training texts and their trained spans, in order."""
    digest = hashlib.sha256()
    for r in rendered:
        digest.update(json.dumps([r.text, r.spans], ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def trajectories_jsonl(trajectories: list[Trajectory]) -> str:
    """The trajectories as JSON lines (what the command writes beside the adapter)."""
    return "".join(json.dumps(asdict(t), ensure_ascii=False) + "\n" for t in trajectories)
