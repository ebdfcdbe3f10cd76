"""Chapter 01's exercise checks reject wrong answers: constants, keyword stuffing, half solutions,
a door with one mistake.

Each check cell of the instructor notebook (hidden tests included) is run, in grading mode,
against the instructor's solution (must pass) and against a few wrong answers (each must fail).
"""

import pytest

from nbharness import Exercises

EXERCISES = Exercises("01_tool_calling.ipynb")


def _names() -> dict:
    from course.tools.protocol import parse_model_output
    from course.tools.registry import ToolError, ToolRegistry

    return {"parse_model_output": parse_model_output, "ToolError": ToolError,
            "ToolRegistry": ToolRegistry}


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_the_instructor_solution_passes(n):
    verdict = EXERCISES.grade(n, _names())
    assert verdict.passed, verdict


# Exercise 4's wrong graphs: a student's whole cell up to the edges out of 'agent', where they differ.
GRAPH_START = (
    "from langgraph.graph import END, START, MessagesState, StateGraph\n"
    "from langgraph.prebuilt import ToolNode, tools_condition\n"
    "def build_tool_graph(tools, model):\n"
    "    bound = model.bind_tools(list(tools))\n"
    "    g = StateGraph(MessagesState)\n"
    "    g.add_node('agent', lambda s: {'messages': [bound.invoke(s['messages'])]})\n"
    "    g.add_node('tools', ToolNode(list(tools)))\n"
    "    g.add_edge(START, 'agent')\n")

WRONG = {
    1: {
        "always valid": "def check_reply(text, registry):\n    return 'valid'\n",
        "keyword stuffing": ("def check_reply(text, registry):\n"
                             "    return 'town city could not be parsed does not exist'\n"),
        "parses but never asks the registry": (
            "def check_reply(text, registry):\n"
            "    parsed = parse_model_output(text)\n"
            "    if parsed.kind != 'call':\n"
            "        return 'could not be parsed'\n"
            "    if 'city' not in parsed.arguments:\n"
            "        return 'town is unexpected, city is missing'\n"
            "    return 'valid'\n"),
    },
    2: {
        # each a whole answer cell: the instructor's solution with one thing wrong (_door_with)
        "a registered tool is allowed at once": (
            "        if confirm:\n", "        self.allowlist.add(fn.__name__)\n        if confirm:\n"),
        "a denylist: only switched-off names are refused": (
            "        if name not in self.allowlist:\n            raise ToolError(f\"Tool '{name}' is switched off",
            "        if name in {'debug_dump'}:\n            raise ToolError(f\"Tool '{name}' is switched off"),
        "no schema check": ("            jsonschema.validate(arguments, self._schemas[name])\n",
                            "            pass\n"),
        "refusals raised from execute": ("            return str(err)\n", "            raise\n"),
        "a bug swallowed as a refusal": ("        except ToolError as err:\n            return str(err)",
                                         "        except Exception as err:\n            return str(err)"),
        "confirmation ignored": ("if name in self._confirm and not confirmed_by:",
                                 "if False:"),
        "configure adds to the allowlist": ("        self.allowlist = set(enabled)\n",
                                            "        self.allowlist |= set(enabled)\n"),
    },
    3: {
        "never vetoes": "PAID = {'O-1': 120.0, 'O-2': 35.5, 'O-3': 80.0}\nREFUNDED = {'O-1': 100.0}\n"
                        "def refund_rule(tool, arguments):\n    return None\n",
        "always vetoes, naming every order": (
            "def refund_rule(tool, arguments):\n    return 'no refunds on O-1 O-2 O-3 O-9'\n"),
        "forgets what was already refunded": (
            "PAID = {'O-1': 120.0, 'O-2': 35.5, 'O-3': 80.0}\n"
            "def refund_rule(tool, arguments):\n"
            "    order, amount = arguments['order_id'], arguments['amount']\n"
            "    if amount <= 0 or order not in PAID or amount > PAID[order]:\n"
            "        return f'refund on {order} refused'\n"
            "    return None\n"),
        "a fixed limit instead of the payment": (
            "def refund_rule(tool, arguments):\n"
            "    order = arguments['order_id']\n"
            "    return f'{order} over 100' if arguments['amount'] > 100 else None\n"),
    },
    4: {
        "no way back from the tools": (
            GRAPH_START +
            "    g.add_conditional_edges('agent', tools_condition)\n"
            "    return g.compile()\n"),
        "always through the tools": (
            GRAPH_START +
            "    g.add_edge('agent', 'tools')\n"
            "    g.add_edge('tools', END)\n"
            "    return g.compile()\n"),
    },
}


def _door_with(old: str, new: str) -> str:
    """Exercise 2's solution cell with ``old`` replaced by ``new`` (one mistake)."""
    solution = EXERCISES.cells["ex2-solution"]
    assert solution.count(old) == 1, old
    return solution.replace(old, new)


@pytest.mark.parametrize(("n", "label"), [(n, label) for n, answers in WRONG.items() for label in answers])
def test_a_wrong_answer_fails_its_check(n, label):
    answer = WRONG[n][label]
    verdict = EXERCISES.grade(n, _names(), _door_with(*answer) if n == 2 else answer, label=label)
    assert verdict.rejected, verdict


def test_the_untouched_stub_is_not_yet_done():
    import nbformat

    from classroom.grading.student import student_edition
    from nbharness import NOTEBOOKS

    student = {c.id: c.source for c in student_edition(
        nbformat.read(NOTEBOOKS / EXERCISES.notebook, as_version=4)).cells}
    for n in (1, 2, 3, 4):
        assert "### BEGIN SOLUTION" not in student[f"ex{n}-solution"]
        verdict = EXERCISES.grade(n, _names(), student[f"ex{n}-solution"], label="the stub")
        assert verdict.outcome == "not yet done", verdict


def test_a_crashing_check_is_not_a_rejection():
    """A check cell that raises (here: the answer has the wrong signature) did not judge it."""
    verdict = EXERCISES.grade(1, _names(), lambda text: "valid", label="one argument")
    assert verdict.outcome == "crashed" and not verdict.rejected, verdict
    assert "[error] Exercise 1" in verdict.printed and isinstance(verdict.error, TypeError)
