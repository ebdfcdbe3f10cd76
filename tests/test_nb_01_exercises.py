"""Chapter 01's exercise checks reject wrong answers: constants, keyword stuffing, half solutions.

Each check cell of the instructor notebook (hidden tests included) is run, in grading mode,
against the instructor's solution (must pass) and against a few wrong answers (each must fail).
"""

from pathlib import Path

import nbformat
import pytest

from course.checks import CheckFailed

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "01_tool_calling.ipynb"


def _cell(cell_id: str) -> str:
    nb = nbformat.read(NOTEBOOK, 4)
    (cell,) = [c for c in nb.cells if c.id == cell_id]
    return cell.source


def _namespace() -> dict:
    from course.tools.protocol import parse_model_output
    from course.tools.registry import ToolError, ToolRegistry
    from course.tools.sales import sales_summary

    return {"parse_model_output": parse_model_output, "ToolError": ToolError,
            "ToolRegistry": ToolRegistry, "sales_summary": sales_summary}


def _grade(check_id: str, solution_source: str) -> None:
    namespace = _namespace()
    exec(solution_source, namespace)
    exec(_cell(check_id), namespace)


@pytest.fixture(autouse=True)
def grading_mode(monkeypatch):
    monkeypatch.setenv("COURSE_GRADING", "1")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_instructor_solution_passes(n, capsys):
    _grade(f"ex{n}-check", _cell(f"ex{n}-solution"))
    assert "[passed]" in capsys.readouterr().out


WRONG = {
    "ex1-check": {
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
    "ex2-check": {
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
    "ex3-check": {
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
}


@pytest.mark.parametrize(("check_id", "label"),
                         [(check, label) for check, answers in WRONG.items() for label in answers])
def test_a_wrong_answer_fails_its_check(check_id, label):
    with pytest.raises(CheckFailed):
        _grade(check_id, WRONG[check_id][label])
