"""Training trajectories at scale: a seeded generator over many task families.

Each family is a function ``(rng) -> Trajectory`` that writes a task, its tools, the small search
corpus the task searches, and the outputs of a careful agent (``Thought:`` then a ``<code>``
block per step). As in :mod:`course.finetune.data`, the outputs are scripted and everything else
is real: :func:`course.finetune.data.render` runs them through a real smolagents ``CodeAgent``
and refuses a trajectory that does not reach its answer or fails the trajectory checks.

The families (:data:`FAMILIES`), by the behaviour each teaches:

- lookups: ``lookup_one`` (one source), ``lookup_refine`` (the first query's results are noise
  that only share a word with it; search again, more precisely), ``lookup_two_agree`` (two
  sources, the same value), ``lookup_conflict`` (two sources disagree: answer with one and name
  it, never a range or a mix), ``lookup_miss`` (the search finds nothing: search again, shorter);
- a lookup, then an action: ``lookup_then_draw`` (find what to draw, then draw it),
  ``two_hop_draw`` (find a name, then find the thing it leads to, then draw it);
- ``run_and_fix``: run the given script, read the error, fix it, run the fix, return the code;
  ``fix_loop``: the same for a loop over a string, a tuple or a dict (called like a function,
  read past its end, a loop over a number, a number added to a string), in several layouts;
  ``fix_twice``: two such bugs one behind the other (fix, run into the second, fix, run, return);
- ``compute``: compute with code, then answer with the printed value;
- ``refusal``: no tool can do what is asked: say so; ``tool_error``: a tool call with a wrong
  argument fails, read the error and call it right;
- ``no_tool``: a task that needs no tool: answer in one step.

The held-out families (:data:`course.finetune.data.HELD_OUT_FAMILIES`: current weather, a photo
of a film character's vehicle, a script whose list is called instead of indexed and read past its
end) are never generated: no task, output or script here mentions weather, films or vehicles,
no script calls a list or reads a list past its end, and the families of the default weights have
no index error at all (tested). ``fix_loop`` and ``fix_twice`` do read strings and tuples past
their end and call them like functions: the held-out bug's neighbours, taught on other types.

Not handled: more than three agent steps, tools other than ``web_search`` and the image tool,
languages other than English.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from course.finetune.data import (
    Trajectory,
    code_step,
    compute_trajectory,
    fact_lookup_trajectory,
    fix_trajectory,
    lookup_then_draw_trajectory,
    made_up_name,
    script_bug,
    search_page,
)

__all__ = ["FAMILIES", "FAMILY_WEIGHTS", "MIXES", "generate"]


# ----- lookups -----
def lookup_one(rng: random.Random) -> Trajectory:
    t = fact_lookup_trajectory(rng, "direct")
    t.family = "lookup_one"
    return t


def lookup_refine(rng: random.Random) -> Trajectory:
    t = fact_lookup_trajectory(rng, "refine")
    t.family = "lookup_refine"
    return t


_PRICES = [  # (question, query, what, sentence with {x} {v})
    ("How much does a ticket to the {x} Gardens cost?", "{x} Gardens ticket price", "gardens",
     "A ticket to the {x} Gardens costs {v} for adults."),
    ("What time does the {x} Library open on Mondays?", "{x} Library opening time Monday",
     "library", "The {x} Library opens at {v} on Mondays."),
    ("How long is the {x} hiking trail?", "{x} hiking trail length", "trail",
     "The {x} hiking trail is {v} long from end to end."),
    ("How many seats does the {x} Arena have?", "{x} Arena seats", "arena",
     "The {x} Arena has {v} seats."),
    ("How deep is Lake {x}?", "Lake {x} depth", "lake", "Lake {x} is {v} deep at its deepest point."),
]


def _price_value(what: str, rng: random.Random) -> str:
    if what == "gardens":
        return f"{rng.randint(4, 30)} euros"
    if what == "library":
        return f"{rng.randint(7, 10)}:{rng.choice(['00', '15', '30', '45'])}"
    if what == "trail":
        return f"{rng.randint(3, 40)} km"
    if what == "arena":
        return f"{rng.randint(2, 60)},{rng.randint(100, 999)}"
    return f"{rng.randint(12, 300)} metres"


def lookup_two_agree(rng: random.Random) -> Trajectory:
    question, query, what, sentence = rng.choice(_PRICES)
    x = made_up_name(rng)
    v = _price_value(what, rng)
    a = search_page(f"{x} {what}: visitor information", f"{x.lower()}-info", "visit", sentence.format(x=x, v=v))
    b = search_page(f"Guide to {x}", rng.choice(["cityguide", "almanac", "localnews"]), x.lower(),
              f"Good to know before you go: {sentence.format(x=x, v=v)}")
    pages = [a, b] if rng.random() < 0.5 else [b, a]
    outputs = [
        code_step(f"I need to find this out. I will search the web for the {what}.",
              f'results = web_search(query="{query.format(x=x)}")\nprint(results)'),
        code_step(f"Two sources agree: '{a['title']}' and '{b['title']}' both say {v}. I can answer.",
              f'final_answer("{v} (source: {a["title"]})")'),
    ]
    return Trajectory("lookup_two_agree", question.format(x=x), ["web_search"], pages, outputs,
                      expected_tool="web_search", answer=v)


def lookup_conflict(rng: random.Random) -> Trajectory:
    if rng.random() < 0.4:
        t = fact_lookup_trajectory(rng, "disagree")
        t.family = "lookup_conflict"
        return t
    question, query, what, sentence = rng.choice(_PRICES)
    x = made_up_name(rng)
    v = _price_value(what, rng)
    v2 = _price_value(what, rng)
    while v2 == v:
        v2 = _price_value(what, rng)
    y_new, y_old = rng.randint(2022, 2025), rng.randint(2010, 2019)
    new = search_page(f"{x} {what} - updated {y_new}", f"{x.lower()}-official", "info",
                f"Updated {y_new}. {sentence.format(x=x, v=v)}")
    old = search_page(f"{x}: a visit in {y_old}", "someblog", x.lower(),
                f"Written in {y_old}. {sentence.format(x=x, v=v2)}")
    pages = [old, new] if rng.random() < 0.5 else [new, old]
    outputs = [
        code_step(f"I need the {what} information. I will search the web first.",
              f'results = web_search(query="{query.format(x=x)}")\nprint(results)'),
        code_step(f"The sources disagree: '{new['title']}' says {v}, '{old['title']}' says {v2}. "
              f"I will not merge them. The page updated in {y_new} is newer, so I answer with "
              "its value and name it.",
              f'final_answer("{v}, according to {new["title"]} (an older page says otherwise)")'),
    ]
    return Trajectory("lookup_conflict", question.format(x=x), ["web_search"], pages, outputs,
                      expected_tool="web_search", answer=v)


def lookup_miss(rng: random.Random) -> Trajectory:
    question, _query, what, sentence = rng.choice(_PRICES)
    x = made_up_name(rng)
    v = _price_value(what, rng)
    good = search_page(f"{x} {what}", rng.choice(["cityguide", "almanac"]), x.lower(), sentence.format(x=x, v=v))
    other = search_page(f"{made_up_name(rng)} market days", "events", "market", "Fresh bread and cheese every Saturday.")
    typo = x[:-2] + x[-1] + x[-2] if x[-1] != x[-2] else x + "h"  # two letters swapped
    junk = rng.choice(["official brochure 2031", "exact figure scan", "archived flyer pdf"])
    long_query = f"{typo} {junk}"
    short = f"{x} {what}"
    outputs = [
        code_step("I need to find this. I will search the web.",
              f'results = web_search(query="{long_query}")\nprint(results)'),
        code_step(f"The search found nothing. I will search again with a shorter query, with the "
              f"name spelt as in the task: {x}.", f'results = web_search(query="{short}")\nprint(results)'),
        code_step(f"The page '{good['title']}' says: {good['description']} I can answer.",
              f'final_answer("{v} (source: {good["title"]})")'),
    ]
    return Trajectory("lookup_miss", question.format(x=x), ["web_search"], [other, good], outputs,
                      expected_tool="web_search", answer=v)


# ----- a lookup, then an action -----
def lookup_then_draw(rng: random.Random) -> Trajectory:
    return lookup_then_draw_trajectory(rng)


_HOPS = [  # (task, first query, first sentence, second query, second sentence, things)
    ("Draw the mascot of the club that won the latest {x} Cup",
     "winner latest {x} Cup", "The latest {x} Cup was won by {y} FC, who beat {z} in the final.",
     "{y} FC mascot", "The mascot of {y} FC is a {v}.",
     ["red fox", "snowy owl", "grey wolf", "brown bear", "golden eagle", "badger", "lynx", "heron"]),
    ("Make a picture of the flower the winner of the newest {x} Prize is named after",
     "newest {x} Prize winner", "The newest {x} Prize went to the garden designer {y}, ahead of {z}.",
     "garden designer {y} flower", "The designer {y} has a {v} named after them.",
     ["lotus", "tulip", "rose", "edelweiss", "lily", "orchid", "sunflower", "poppy"]),
    ("Create an image of the instrument played by the leader of the band that won the last "
     "{x} Festival", "last {x} Festival winning band", "The last {x} Festival was won by the band {y}.",
     "band {y} leader instrument", "The leader of the band {y} plays the {v}.",
     ["cello", "harp", "trumpet", "accordion", "double bass", "oboe", "sitar", "banjo"]),
]


def two_hop_draw(rng: random.Random) -> Trajectory:
    task, q1, s1, q2, s2, things = rng.choice(_HOPS)
    x, y, z, v = made_up_name(rng), made_up_name(rng), made_up_name(rng), rng.choice(things)
    image_tool = rng.choice(["image_generator", "text_to_image"])
    p1 = search_page(f"{x}: results", "sportsnews", x.lower(), s1.format(x=x, y=y, z=z))
    p2 = search_page(f"{y}: facts", "wikifacts", y.lower(), s2.format(y=y, v=v))
    p3 = search_page(f"{z}: facts", "wikifacts", z.lower(), f"{z} is known for its long history.")
    outputs = [
        code_step("I do not know what to draw yet. First I find out who won, then what to draw.",
              f'result = web_search(query="{q1.format(x=x)}")\nprint(result)'),
        code_step(f"The search says: {p1['description']} Now I look up {y}.",
              f'result = web_search(query="{q2.format(y=y)}")\nprint(result)'),
        code_step(f"The search says: {p2['description']} Now I generate an image of a {v}.",
              f'image = {image_tool}(prompt="a {v}, detailed, high-res")\nfinal_answer(image)'),
    ]
    return Trajectory("two_hop_draw", task.format(x=x), ["web_search", image_tool], [p1, p2, p3],
                      outputs, expected_tool="web_search", answer=v)


# ----- run, read the error, fix, run again -----
def _more_bugs(rng: random.Random) -> tuple[str, str, str]:
    """Bugs of other kinds than :func:`course.finetune.data.script_bug` (none is an index error)."""
    kind = rng.choice(["upper", "none_len", "int_text", "zero_div", "unpack", "dict_attr"])
    name = rng.choice(["names", "words", "labels", "cities", "colours"])
    words = [made_up_name(rng).lower() for _ in range(rng.randint(2, 4))]
    if kind == "upper":
        bad = f"{name} = {words}\nfor w in {name}:\n    print(w.uppercase())\n"
        good = f"{name} = {words}\nfor w in {name}:\n    print(w.upper())\n"
        why = "strings have no method uppercase; the method is upper"
    elif kind == "none_len":
        bad = (f"def first_long(items):\n    for w in items:\n        if len(w) > 20:\n"
               f"            return w\n\n{name} = {words}\nprint(len(first_long({name})))\n")
        good = (f"def first_long(items):\n    for w in items:\n        if len(w) > 20:\n"
                f"            return w\n    return ''\n\n{name} = {words}\n"
                f"print(len(first_long({name})))\n")
        why = "first_long returns None when no item is long enough, and None has no length"
    elif kind == "int_text":
        n = rng.randint(2, 9)
        bad = f"count = '{n}.5'\nprint(int(count) * 2)\n"
        good = f"count = '{n}.5'\nprint(float(count) * 2)\n"
        why = f"int() cannot read '{n}.5'; float() can"
    elif kind == "zero_div":
        total = rng.randint(10, 90)
        bad = f"total = {total}\nparts = 0\nprint('Each:', total / parts)\n"
        good = (f"total = {total}\nparts = 0\nif parts == 0:\n    print('Each: no parts')\n"
                f"else:\n    print('Each:', total / parts)\n")
        why = "parts is 0 and a division by zero fails; I handle that case"
    elif kind == "unpack":
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        bad = f"pair = ({a}, {b}, {a + b})\nx, y = pair\nprint(x + y)\n"
        good = f"pair = ({a}, {b}, {a + b})\nx, y, total = pair\nprint(x + y)\n"
        why = "the tuple has three values but only two names receive them"
    else:
        key = rng.choice(words)
        bad = f"ages = {{'{key}': {rng.randint(20, 80)}}}\nprint(ages.{key})\n"
        good = f"ages = {{'{key}': {rng.randint(20, 80)}}}\nprint(ages['{key}'])\n"
        why = f"a dict's values are read with ages['{key}'], not as an attribute"
    return bad, good, why


_FIX_TASKS = [
    "Here is a script that fails: fix it, run it to check that it works, and return the fixed code.",
    "This code has a bug. Please find it, test your fix by running it, and give me the corrected code.",
    "Fix the bug in the code I give you; run it first to see the error, and return the working code.",
    "My script crashes. Run it, find out why, fix it and return the version that works.",
    "Please debug this code: run it, correct it, run the correction and send me the final code.",
]


def run_and_fix(rng: random.Random) -> Trajectory:
    bad, good, why = script_bug(rng) if rng.random() < 0.45 else _more_bugs(rng)
    return fix_trajectory(bad, good, why, rng.choice(_FIX_TASKS))



# ----- more scripts to fix: strings, tuples and dicts in loops, other layouts, two bugs -----
_FIX_MORE_TASKS = [
    "Something in this script is broken. Run it, fix what the error names, and return the code that works.",
    "Can you repair my program? Run it first, correct it, check that the correction runs, then give it back.",
    "This snippet raises errors: run it, fix the problems one at a time, and return the working version.",
    "Please get this code working: run it, read the error, fix it, test it again and return it.",
    "My little program stops with an error. Run it to find the bugs, fix them and return the code.",
    "Correct the code below: execute it to see the error, repair it, execute the repair, return it.",
]


def _loop_script(rng: random.Random, bugs: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A short script with a loop over a string, a tuple or a dict, in one of several layouts,
    and the scripts after fixing each of ``bugs`` in turn: ([script, after 1st fix, ...], [why
    of each fix]). No list is called or read past its end (those are the held-out bug)."""
    eq, gap = rng.choice([" = ", "="]), rng.choice(["\n", "\n\n"])
    kind = {"call_str": "str", "end_str": "str", "call_tuple": "tuple", "end_tuple": "tuple",
            "iter_tuple": "tuple", "call_dict": "dict", "concat_dict": "dict"}[bugs[0]]
    if kind == "str":
        name = rng.choice(["word", "label", "text", "tag", "key"])
        letters = made_up_name(rng, rng.randint(2, 3)).lower()
        value, size = repr(letters), len(letters)
    elif kind == "tuple":
        name = rng.choice(["sizes", "levels", "points", "steps", "parts"])
        items = rng.sample(range(1, 99), rng.randint(3, 5))
        value, size = str(tuple(items)), len(items)
    else:
        name = rng.choice(["ages", "stock", "heights", "rooms", "seats"])
        keys = rng.sample([made_up_name(rng, 1).lower() for _ in range(6)], 3)
        value = "{" + ", ".join(f"'{k}': {rng.randint(2, 90)}" for k in dict.fromkeys(keys)) + "}"
        size = 0  # a dict's loop goes over its keys: no count to get wrong
    extra = rng.randint(1, 3)
    state = {"call": any("call" in b for b in bugs), "end": any("end" in b for b in bugs),
             "iter": "iter_tuple" in bugs, "concat": "concat_dict" in bugs}
    via_x = rng.random() < 0.4

    def script() -> str:
        if kind == "dict":
            read = f"{name}(k)" if state["call"] else f"{name}[k]"
            line = f"k + ': ' + {read}" if state["concat"] else f"k + ': ' + str({read})"
            head = f"for k in {name}:"
        else:
            read = f"{name}(i)" if state["call"] else f"{name}[i]"
            line = read
            count = f"range({size + extra})" if state["end"] else f"range(len({name}))"
            head = f"for i in {f'len({name})' if state['iter'] else count}:"
        body = f"    x = {line}\n    print(x)\n" if via_x else f"    print({line})\n"
        return f"{name}{eq}{value}{gap}{head}\n{body}"

    whys = {
        "call_str": f"a string cannot be called like a function: {name}(i) must be {name}[i]",
        "call_tuple": f"a tuple cannot be called like a function: {name}(i) must be {name}[i]",
        "call_dict": f"a dict cannot be called like a function: {name}(k) must be {name}[k]",
        "end_str": f"range({size + extra}) reads past the end of {name}, which has {size} letters; "
                   f"range(len({name})) stops at its end",
        "end_tuple": f"range({size + extra}) reads past the end of {name}, which has {size} items; "
                     f"range(len({name})) stops at its end",
        "iter_tuple": f"len({name}) is a number and a loop cannot go over a number; "
                      f"range(len({name})) can",
        "concat_dict": f"the values of {name} are numbers and a string cannot be added to a number, "
                       f"so I convert the value with str()",
    }
    scripts, why = [script()], []
    for bug in bugs:
        state[{"call_str": "call", "call_tuple": "call", "call_dict": "call", "end_str": "end",
               "end_tuple": "end", "iter_tuple": "iter", "concat_dict": "concat"}[bug]] = False
        scripts.append(script())
        why.append(whys[bug])
    return scripts, why


def fix_loop(rng: random.Random) -> Trajectory:
    """Run, read the error, fix, run, return: one bug in a loop over a string, tuple or dict."""
    bug = rng.choice(["call_str", "call_tuple", "call_dict", "end_str", "end_tuple", "iter_tuple",
                      "concat_dict"])
    (bad, good), (why,) = _loop_script(rng, (bug,))
    t = fix_trajectory(bad, good, why, rng.choice(_FIX_MORE_TASKS))
    t.family = "fix_loop"
    return t


def fix_twice(rng: random.Random) -> Trajectory:
    """Two bugs, one behind the other: run, fix the first, run into the second, fix it, run the
    fixed code and return it in the same step (three steps in all)."""
    bugs = rng.choice([("call_str", "end_str"), ("call_tuple", "end_tuple"), ("iter_tuple", "call_tuple"),
                       ("call_dict", "concat_dict")])
    (bad, mid, good), (why1, why2) = _loop_script(rng, bugs)
    fixed = good.rstrip("\n")
    outputs = [
        code_step("Before changing anything I run the code as it is, to see what goes wrong.", bad),
        code_step(f"The run failed: {why1}. I fix that and run it again.", mid),
        code_step(f"It gets further and fails again: {why2}. I fix that too, run the fixed code "
                  "and return it.", f'{fixed}\nfixed_code = """{fixed}\n"""\nfinal_answer(fixed_code)'),
    ]
    return Trajectory("fix_twice", rng.choice(_FIX_MORE_TASKS), [], [], outputs, {"code": bad},
                      expected_tool="python")


# ----- compute -----
def compute(rng: random.Random) -> Trajectory:
    if rng.random() < 0.5:
        return compute_trajectory(rng)
    kind = rng.choice(["mean", "convert", "count", "minutes"])
    if kind == "mean":
        xs = [rng.randint(1, 99) for _ in range(rng.randint(3, 6))]
        task = f"What is the average of {', '.join(map(str, xs))}?"
        code, value = f"values = {xs}\nprint(sum(values) / len(values))", sum(xs) / len(xs)
    elif kind == "convert":
        km = rng.randint(2, 500)
        task = f"How many miles are {km} kilometres? Round to one decimal."
        code, value = f"print(round({km} / 1.609344, 1))", round(km / 1.609344, 1)
    elif kind == "count":
        word = made_up_name(rng, 3).lower()
        letter = rng.choice(sorted(set(word)))
        task = f"How many times does the letter '{letter}' occur in the word '{word}'?"
        code, value = f"print('{word}'.count('{letter}'))", word.count(letter)
    else:
        h, m = rng.randint(1, 9), rng.randint(1, 59)
        task = f"How many minutes are {h} hours and {m} minutes?"
        code, value = f"print({h} * 60 + {m})", h * 60 + m
    outputs = [
        code_step("I will compute this with code instead of guessing, and print the result.", code),
        code_step(f"The code printed {value}. That is the answer.", f"final_answer({value!r})"),
    ]
    return Trajectory("compute", task, [], [], outputs, expected_tool="python", answer=str(value))


# ----- refusals and tool errors -----
_CANNOT = [  # (task, what is missing)
    ("Send an email to {x} saying that the meeting moved to Friday.", "send emails"),
    ("Book a table for two at the {x} restaurant for tonight.", "book restaurants"),
    ("Switch off the lights in the {x} room.", "control lights"),
    ("Pay the invoice from {x} Ltd with my card.", "make payments"),
    ("Delete the file called {x}.txt from my computer.", "delete files on your computer"),
    ("Call {x} on the phone and ask for the report.", "make phone calls"),
]


def refusal(rng: random.Random) -> Trajectory:
    task, what = rng.choice(_CANNOT)
    x = made_up_name(rng)
    tools = rng.choice([["web_search"], [], ["web_search", "image_generator"]])
    listed = ", ".join(tools) if tools else "no tools except final_answer"
    outputs = [
        code_step(f"The task asks me to {what.split(' on ')[0]}. My tools are: {listed}. None of them "
              f"can do it, so I say so instead of pretending.",
              f'final_answer("I cannot do this: I have no tool to {what}.")'),
    ]
    return Trajectory("refusal", task.format(x=x), tools, [], outputs, expected_tool="final_answer")


def tool_error(rng: random.Random) -> Trajectory:
    t = fact_lookup_trajectory(rng, "direct")
    wrong = rng.choice(["q", "text", "search"])
    first, answer = t.outputs
    code = first.split("<code>\n", 1)[1].rsplit("\n</code>", 1)[0]
    bad_code = code.replace("web_search(query=", f"web_search({wrong}=", 1)
    outputs = [
        code_step("I need to find this. I will search the web first.", bad_code),
        code_step(f"The call failed: web_search takes an argument named query, not {wrong}. "
              "I call it again with the right argument.", code),
        answer,
    ]
    return Trajectory("tool_error", t.task, t.tools, t.pages, outputs,
                      expected_tool="web_search", answer=t.answer)


# ----- no tool needed -----
def no_tool(rng: random.Random) -> Trajectory:
    kind = rng.choice(["greet", "upper", "larger", "thanks"])
    x = made_up_name(rng)
    if kind == "greet":
        task, answer = f"Write a one-line greeting for my colleague {x}.", f"Hello {x}, good to see you!"
    elif kind == "upper":
        task, answer = f"Write the name {x} in capital letters.", x.upper()
    elif kind == "larger":
        a, b = rng.sample(range(1, 999), 2)
        task, answer = f"Which number is larger, {a} or {b}?", str(max(a, b))
    else:
        task, answer = f"Say thank you to {x} for the flowers, in one short sentence.", (
            f"Thank you for the flowers, {x}!")
    tools = rng.choice([["web_search"], []])
    outputs = [code_step("This needs no tool and no search: I can answer directly.",
                     f"final_answer({answer!r})")]
    return Trajectory("no_tool", task, tools, [], outputs, expected_tool="final_answer", answer=answer)


FAMILIES: dict[str, Callable[[random.Random], Trajectory]] = {
    "lookup_one": lookup_one, "lookup_refine": lookup_refine, "lookup_two_agree": lookup_two_agree,
    "lookup_conflict": lookup_conflict, "lookup_miss": lookup_miss,
    "lookup_then_draw": lookup_then_draw, "two_hop_draw": two_hop_draw,
    "run_and_fix": run_and_fix, "fix_loop": fix_loop, "fix_twice": fix_twice, "compute": compute,
    "refusal": refusal, "tool_error": tool_error, "no_tool": no_tool,
}
"""Every training family, by name (none of :data:`course.finetune.data.HELD_OUT_FAMILIES`)."""

FAMILY_WEIGHTS: dict[str, int] = {
    "lookup_one": 8, "lookup_refine": 10, "lookup_two_agree": 6, "lookup_conflict": 12,
    "lookup_miss": 8, "lookup_then_draw": 10, "two_hop_draw": 10, "run_and_fix": 16,
    "compute": 8, "refusal": 4, "tool_error": 4, "no_tool": 4, "fix_loop": 0, "fix_twice": 0,
}
"""How often each family is drawn (relative weights): most where the held-out tasks need it.
``fix_loop`` and ``fix_twice`` are 0 here, so the first runs' data stays as it was drawn."""

MIXES: dict[str, dict[str, int]] = {
    "default": FAMILY_WEIGHTS,
    "code": {**FAMILY_WEIGHTS, "fix_loop": 30, "fix_twice": 40},
}
"""Named family weights for ``python -m course.finetune --mix``: ``code`` keeps every family of
the default and adds as much again of scripts to fix (loops, other layouts, two bugs)."""


def generate(n: int, seed: int = 0, weights: dict[str, int] | None = None) -> list[Trajectory]:
    """``n`` training trajectories, seeded: the same ``(n, seed, weights)`` give the same list.

    Families are drawn by ``weights`` (default :data:`FAMILY_WEIGHTS`); each family appears at
    least once when ``n`` is at least the number of families.
    """
    weights = FAMILY_WEIGHTS if weights is None else weights
    unknown = sorted(set(weights) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; use some of {sorted(FAMILIES)}.")
    if n < 1:
        raise ValueError(f"n={n}: ask for at least one trajectory.")
    rng = random.Random(seed)
    names = sorted(k for k, w in weights.items() if w > 0)
    picks = names[:n] if n >= len(names) else []
    picks += rng.choices(names, weights=[weights[k] for k in names], k=n - len(picks))
    rng.shuffle(picks)
    return [FAMILIES[name](rng) for name in picks]

