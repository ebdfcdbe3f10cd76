"""A compact CodeAgent system prompt of the course's own, beside smolagents' default one.

smolagents' default ``CodeAgent`` system prompt (``code_agent.yaml``) is about 2,000 tokens of
worked examples and rules before the tool list, and every step of every trajectory re-reads it.
:data:`COMPACT_SYSTEM_PROMPT` says the same contract in a few lines (Thought, one code block,
``print`` for observations, ``final_answer``), the behaviours the course teaches (search first,
one source when sources disagree, run the given code before fixing it) and the tool list, in
the same Jinja template language, so the same ``CodeAgent`` renders it with the same tools.

- :func:`prompt_templates` gives smolagents' templates with the system prompt replaced
  (``compact=False``: smolagents' own, unchanged), to pass as ``CodeAgent(prompt_templates=...)``.
- :func:`system_prompt_tokens` counts the rendered system prompt for a tool set.

A model taught with one prompt must be run with the same prompt: a compact-prompt adapter run
under the default prompt sees text it was never taught on. :func:`templates_for` gives the
templates a model was taught with (its adapter's manifest says which). Not handled: planning prompts, managed
agents (the compact prompt lists tools only).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["COMPACT_SYSTEM_PROMPT", "prompt_templates", "system_prompt_text", "system_prompt_tokens",
           "templates_for"]

COMPACT_SYSTEM_PROMPT = """\
You solve a task by writing Python code, one step at a time.
Each step: a line starting with 'Thought:' that says what you know and what you do next, then one \
code block opened with '{{code_block_opening_tag}}' and closed with '{{code_block_closing_tag}}'.
What the code prints comes back to you as 'Observation:', and so does an error.
Finish with final_answer(...) in a code block.
Rules:
1. A fact about the world: search first and copy the value from the results. If the results \
miss the point, or there are none, search again with a better query.
2. If two sources disagree, answer with one source's value and name that source. Never merge \
two values into one answer.
3. To draw something you must look up first: search, then send the image tool the thing you found.
4. Code given to fix: run it as it is first, read the error, fix it, run the fix, then return \
the fixed code.
5. Compute with code instead of guessing. If no tool can do what is asked, say so.
You can import: {{authorized_imports}}
The tools are Python functions:
{{code_block_opening_tag}}
{%- for tool in tools.values() %}
{{ tool.to_code_prompt() }}
{% endfor %}
{{code_block_closing_tag}}"""


def prompt_templates(compact: bool = True) -> dict[str, Any]:
    """smolagents' CodeAgent prompt templates, with :data:`COMPACT_SYSTEM_PROMPT` as the system
    prompt when ``compact`` (a copy: smolagents' own stay as they are)."""
    import importlib.resources

    import yaml

    text = importlib.resources.files("smolagents.prompts").joinpath("code_agent.yaml").read_text()
    templates = copy.deepcopy(yaml.safe_load(text))
    if compact:
        templates["system_prompt"] = COMPACT_SYSTEM_PROMPT
    return templates


def templates_for(model: Any) -> dict[str, Any] | None:
    """The prompt templates to run ``model`` with: the compact prompt's when its adapter was
    trained with it (:func:`course.adapter_manifest.taught_prompt`), else ``None`` (smolagents'
    own), so that a model always runs with the prompt it was taught with."""
    from course.adapter_manifest import taught_prompt

    return prompt_templates() if taught_prompt(model) == "compact" else None


def system_prompt_text(tools: list[Any], compact: bool = True) -> str:
    """The system prompt a CodeAgent with ``tools`` (behind chapter 01's door) sends."""
    from smolagents import CodeAgent

    from course.agents.replay import ReplayModel
    from course.tools.for_libraries import smolagents_door

    agent = CodeAgent(tools=smolagents_door(tools), model=ReplayModel(["x"]), verbosity_level=-1,
                      prompt_templates=prompt_templates(compact))
    return agent.initialize_system_prompt()


def system_prompt_tokens(tools: list[Any], tokenizer: Any, compact: bool = True) -> int:
    """Tokens of :func:`system_prompt_text` under ``tokenizer``."""
    return len(tokenizer(system_prompt_text(tools, compact), add_special_tokens=False)["input_ids"])
