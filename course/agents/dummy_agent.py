"""A ReAct agent with no framework: a raw prompt, a stop sequence, a parser, the call, the loop.

Chapter 02 writes this agent in its cells before it uses smolagents (as the Hugging Face Agents
Course's unit 1 "dummy agent" does); this module holds the same definitions for later cells and
chapters (show, then save: the two are kept equal). The whole mechanism:

1. :func:`system_prompt` lists the tools (name, signature, first docstring line) and the reply
   format: ``Thought: ...`` then ``Action: tool(arg="value")``, or ``Final Answer: ...``.
2. The model is called with the stop sequence :data:`STOP` (``"Observation:"``): the model must
   not write the observation itself; a reply is cut there even if the engine ignored the stop.
3. :func:`parse_reply` reads the action out of the text (the call syntax of note 000's ideal
   trajectory, parsed with :mod:`ast`, literal arguments only) or the final answer.
4. :func:`call_tool` runs it; an unknown tool or a tool that raises becomes observation text.
5. :func:`run_dummy_agent` appends the reply and ``Observation: <result>`` and loops, until a
   final answer, a reply with no parseable action, or ``max_steps``. Its ``parse`` argument takes
   another parser (the chapter's exercise writes one for JSON actions).

``generate(messages, stop) -> str`` is any chat function; :func:`active_generate` builds one for
the active model (the course's smolagents model object, kernel or server).

Not handled: several actions in one reply (the first is run), arguments that are not Python
literals, retries after a parse error (the loop stops and says why), token counting (the records
keep the text; smolagents' agents report tokens).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from course.records import Record, json_safe

__all__ = ["NOTE_REPLIES", "STOP", "Action", "ActionParseError", "DummyRun", "DummyStep",
           "FinalAnswer", "active_generate", "call_tool", "cut_at_stop", "dummy_tools",
           "parse_reply", "run_dummy_agent", "scripted_generate", "system_prompt"]

STOP = "Observation:"
"""The stop sequence: the runtime, not the model, writes what comes after it."""

Generate = Callable[[list[dict[str, str]], list[str]], str]


@dataclass(frozen=True)
class Action:
    """A parsed ``Action:`` line: the tool's name and its literal arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinalAnswer:
    """A parsed ``Final Answer:`` line."""

    text: str


class ActionParseError(ValueError):
    """A reply holds neither a parseable ``Action:`` nor a ``Final Answer:``; says which and why."""


def system_prompt(tools: dict) -> str:
    """The raw prompt: the tools, one line each, and the reply format the parser reads."""
    lines = [f"- {name}{str(inspect.signature(fn, eval_str=True)).replace('typing.', '')}: "
             f"{(inspect.getdoc(fn) or '').splitlines()[0]}" for name, fn in tools.items()]
    return ("Answer the question. You can call these tools:\n" + "\n".join(lines) + "\n\n"
            "Reply in exactly this format:\n"
            "Thought: what to do next\n"
            'Action: tool_name(argument="value")\n'
            "Then stop: the runtime runs the action and replies with 'Observation: <result>'.\n"
            "When you know the answer, reply:\n"
            "Thought: I know the answer\n"
            "Final Answer: the answer")


def cut_at_stop(text: str, stop: list[str]) -> str:
    """``text`` up to the first stop sequence (an engine may ignore the stop parameter)."""
    for s in stop:
        text = text.split(s, 1)[0]
    return text.strip()


def parse_reply(text: str) -> Action | FinalAnswer:
    """The first ``Action: name(...)`` line of ``text``, or its ``Final Answer:``."""
    action = re.search(r"^\s*Action:\s*(.*)$", text, re.M)
    final = re.search(r"^\s*Final Answer:\s*(.*)", text, re.M | re.S)
    if final and (not action or final.start() < action.start()):
        return FinalAnswer(final.group(1).strip())
    if not action:
        raise ActionParseError(f"expected a line 'Action: tool(arg=...)' or 'Final Answer: ...'; "
                               f"the reply has neither: {' '.join(text.split())[:80]!r}")
    source = action.group(1).strip().strip("`")
    try:
        call = ast.parse(source, mode="eval").body
    except SyntaxError as err:
        raise ActionParseError(f"the action {source[:80]!r} is not a Python call ({err.msg})") from err
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        raise ActionParseError(f"the action {source[:80]!r} is not a call like tool(arg=...)")
    try:
        args = tuple(ast.literal_eval(a) for a in call.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except ValueError as err:
        raise ActionParseError(f"the action {source[:80]!r} has an argument that is not a "
                               "literal (a string or a number)") from err
    return Action(call.func.id, args, kwargs)


def call_tool(action: Action, tools: dict) -> str:
    """Run ``action``; an unknown tool or an error comes back as text for the model to read."""
    if action.name not in tools:
        return f"there is no tool {action.name!r}; the tools are {', '.join(tools)}"
    try:
        return str(tools[action.name](*action.args, **action.kwargs))
    except Exception as err:  # the model reads what went wrong, as smolagents does
        return f"{action.name} failed: {type(err).__name__}: {err}"


@dataclass
class DummyStep:
    """One turn of the loop: the model's reply, what was parsed, the observation or the error."""

    number: int
    reply: str
    parsed: Action | FinalAnswer | None = None
    observation: str | None = None
    error: str | None = None


@dataclass
class DummyRun(Record):
    """A run of :func:`run_dummy_agent`: the question, its steps, the answer, why it stopped."""

    question: str
    steps: list[DummyStep]
    answer: str | None
    stopped: str
    messages: list[dict[str, str]]

    def record(self) -> dict[str, Any]:
        """What a test reads: the answer, why the loop stopped, and per step what was parsed."""
        def parsed(step: DummyStep) -> dict[str, Any] | None:
            if isinstance(step.parsed, Action):
                return {"action": step.parsed.name, "args": json_safe(step.parsed.args),
                        "kwargs": json_safe(step.parsed.kwargs)}
            return None if step.parsed is None else {"final_answer": step.parsed.text}

        return {"question": self.question, "answer": self.answer, "stopped": self.stopped,
                "steps": [{"number": s.number, "reply": s.reply, "parsed": parsed(s),
                           "observation": s.observation, "error": s.error} for s in self.steps]}

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def __str__(self) -> str:
        lines = [f"question: {self.question}"]
        for s in self.steps:
            lines.append(f"  step {s.number}: model wrote {' '.join(s.reply.split())[:120]!r}")
            if isinstance(s.parsed, Action):
                lines.append(f"    parsed action: {s.parsed.name}{s.parsed.args or ''}"
                             f"{s.parsed.kwargs or ''} -> observation: {(s.observation or '')[:90]!r}")
            if s.error:
                lines.append(f"    no action: {s.error}")
        lines.append(f"  stopped: {self.stopped}; answer: {self.answer!r}")
        return "\n".join(lines)


def run_dummy_agent(question: str, tools: dict, generate, max_steps: int = 4,
                    parse=parse_reply) -> DummyRun:
    """The ReAct loop: ask, cut at the stop, parse, call, append the observation, repeat.
    ``parse`` reads one reply (another action format: the chapter's exercise 1)."""
    messages = [{"role": "system", "content": system_prompt(tools)},
                {"role": "user", "content": question}]
    steps = []
    for number in range(1, max_steps + 1):
        reply = cut_at_stop(generate(messages, [STOP]), [STOP])
        step = DummyStep(number, reply)
        steps.append(step)
        try:
            step.parsed = parse(reply)
        except ActionParseError as err:
            step.error = str(err)
            return DummyRun(question, steps, None, "no action to run", messages)
        if isinstance(step.parsed, FinalAnswer):
            return DummyRun(question, steps, step.parsed.text, "final answer", messages)
        step.observation = call_tool(step.parsed, tools)
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": f"{STOP} {step.observation}"}]
    return DummyRun(question, steps, None, f"step limit ({max_steps})", messages)


def scripted_generate(replies: list[str]) -> Generate:
    """A ``generate`` that returns ``replies`` in order (a replay; it reads nothing it is sent)."""
    queue = list(replies)

    def generate(messages: list[dict[str, str]], stop: list[str]) -> str:
        if not queue:
            raise RuntimeError(f"the replay has {len(replies)} replies; the loop asked for one more")
        return queue.pop(0)

    return generate


def active_generate(max_new_tokens: int = 48) -> Generate:
    """``generate`` for the active model: the course's smolagents model object, greedy, with the
    stop sequences passed to the engine (a server that ignores them is cut by the loop)."""
    from course.models import smolagents_model

    model = smolagents_model(max_new_tokens=max_new_tokens)

    def generate(messages: list[dict[str, str]], stop: list[str]) -> str:
        chat = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
                for m in messages]
        return model.generate(chat, stop_sequences=stop).content or ""

    generate.model = model  # type: ignore[attr-defined]
    return generate


NOTE_REPLIES: dict[str, tuple[str, str, list[str]]] = {
    "weather": (
        "What is the current weather in Paris?",
        "recorded: the two queries and the answer (quoted by note 000); reconstructed: the "
        "Thought lines (the note describes them)",
        ['Thought: I need the current weather in Paris.\n'
         'Action: web_search(query="current weather in Paris")',
         "Thought: These are forum posts about the word current. I refine the query.\n"
         'Action: web_search(query="current weather in Paris, France")',
         "Thought: I know the answer\nFinal Answer: Clear sky, around 13-16°C"]),
    "ideal_bond": (
        "Generate me a photo of the car that James Bond drove in the latest movie",
        "reconstructed (from the note): the ideal ReAct trajectory note 000 writes out, as "
        "replies for this loop (no model wrote them)",
        ["Thought: I need the car model first, then an image.\n"
         'Action: web_search(query="car James Bond latest movie")',
         "Thought: Now generate the image.\nAction: text_to_image(prompt=\"Aston Martin DB5\")",
         "Final Answer: <image>"]),
}
"""The note's runs as ReAct replies: question, provenance, one reply per model call."""


def dummy_tools() -> dict[str, Callable[..., Any]]:
    """Plain functions for the loop: the course's ``get_weather`` and the offline search and
    image tools of :mod:`course.agents.offline_tools` (an image comes back as a short text)."""
    from course.agents.offline_tools import OfflineImageTool, OfflineWebSearchTool
    from course.tools.examples import get_weather

    search, image = OfflineWebSearchTool(), OfflineImageTool("text_to_image")

    def web_search(query: str) -> str:
        """Search the web; returns the best pages' titles and snippets."""
        return search.forward(query)

    def text_to_image(prompt: str) -> str:
        """Draw an image of the prompt; returns where the image was saved."""
        image.forward(prompt)
        return f"<image {image.calls[-1]['path']}>"

    return {"get_weather": get_weather, "web_search": web_search, "text_to_image": text_to_image}
