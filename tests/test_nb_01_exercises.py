"""Chapter 01's exercise checks reject wrong answers: constants, keyword stuffing, half solutions.

Each check cell of the instructor notebook (hidden tests included) is run, in grading mode,
against the instructor's solution (must pass) and against a few wrong answers (each must fail).
"""

import pytest

from nbharness import Exercises

EXERCISES = Exercises("01_tool_calling.ipynb")


def _names() -> dict:
    from course.tools.protocol import parse_model_output
    from course.tools.registry import ToolError, ToolRegistry
    from course.tools.sales import sales_summary

    return {"parse_model_output": parse_model_output, "ToolError": ToolError,
            "ToolRegistry": ToolRegistry, "sales_summary": sales_summary}


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
        "a constant": "def best_region(category, start_date, end_date):\n"
                      "    return ('west', '448.61')\n",
        "the visible case only": (
            "def best_region(category, start_date, end_date):\n"
            "    by = sales_summary('tea', '2024-01-01', '2024-06-30', group_by='region')\n"
            "    r = max(by['by_region'], key=lambda k: float(by['by_region'][k]))\n"
            "    return r, by['by_region'][r]\n"),
        "the lowest region": (
            "def best_region(category, start_date, end_date):\n"
            "    by = sales_summary(category, start_date, end_date, group_by='region')['by_region']\n"
            "    r = min(by, key=lambda k: float(by[k]))\n"
            "    return r, by[r]\n"),
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


@pytest.mark.parametrize(("n", "label"), [(n, label) for n, answers in WRONG.items() for label in answers])
def test_a_wrong_answer_fails_its_check(n, label):
    verdict = EXERCISES.grade(n, _names(), WRONG[n][label], label=label)
    assert verdict.rejected, verdict


def test_a_crashing_check_is_not_a_rejection():
    """A check cell that raises (here: the answer has the wrong signature) did not judge it."""
    verdict = EXERCISES.grade(1, _names(), lambda text: "valid", label="one argument")
    assert verdict.outcome == "crashed" and not verdict.rejected, verdict
    assert "[error] Exercise 1" in verdict.printed and isinstance(verdict.error, TypeError)
