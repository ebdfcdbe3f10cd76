"""course.records.show: a shown line is the text ``print`` writes, and its value as a record."""

import json

from IPython.core.formatters import DisplayFormatter

from course.records import RECORD_MIME, Shown, show


def test_outside_a_notebook_show_prints_what_print_prints(capsys):
    assert show("allowed:", ["divide", "get_weather"], key="enabled") is None
    print("allowed:", ["divide", "get_weather"])
    shown, printed = capsys.readouterr().out.splitlines()
    assert shown == printed


def test_a_shown_line_is_its_text_for_the_student_and_its_value_for_a_machine():
    line = Shown("tokens", "prompt tokens: 5,021", 5021)
    data, _ = DisplayFormatter().format(line)
    assert data["text/plain"] == "prompt tokens: 5,021"  # what the student sees
    assert data[RECORD_MIME] == {"shown": "tokens", "value": 5021}  # what a test reads
    json.dumps(data[RECORD_MIME])


def test_the_value_is_the_last_part_unless_named(capsys):
    from unittest import mock

    shown = []
    with mock.patch("IPython.get_ipython", return_value=object()), \
            mock.patch("IPython.display.display", side_effect=shown.append):
        show("free reply:", repr("hi"), key="free", value="hi")
        show("count:", 3, key="count")
    assert [(s.key, s.text, s.value) for s in shown] == [
        ("free", "free reply: 'hi'", "hi"), ("count", "count: 3", 3)]
    assert Shown("x", "x", {"a": (1, 2)}).record() == {"shown": "x", "value": {"a": [1, 2]}}
