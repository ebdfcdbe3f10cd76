"""Settings that cannot work are refused with their name; a server URL's password is never shown."""

from __future__ import annotations

import pytest

from course.settings import CourseSettingError, parse_model_setting


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("raw", ["0", "-1", "abc", "nan", "-inf", "1e9", "3601", pytest.param(
    "inf", marks=pytest.mark.contract("raw crash"))])  # inf crashed (OverflowError), the rest: 60
def test_a_request_timeout_that_cannot_work_is_refused_with_its_name(raw, monkeypatch):
    from course.models import _request_timeout

    monkeypatch.setenv("COURSE_SERVER_TIMEOUT", raw)
    with pytest.raises(CourseSettingError) as err:
        _request_timeout()
    assert "COURSE_SERVER_TIMEOUT" in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize(("raw", "seconds"), [("", 60.0), ("2", 2.0), (" 0.5 ", 0.5),
                                              ("3600", 3600.0)])
def test_a_request_timeout_that_works_is_used(raw, seconds, monkeypatch):
    from course.models import _request_timeout

    monkeypatch.setenv("COURSE_SERVER_TIMEOUT", raw)
    assert _request_timeout() == seconds


@pytest.mark.contract("wrong result")
def test_a_server_password_is_masked_everywhere_it_is_shown(monkeypatch):
    from course.models import _server_error, describe_models, probe_note

    choice = parse_model_setting("http://alice:s3cret@127.0.0.1:9/v1#m")
    assert choice.shown == "http://alice:***@127.0.0.1:9/v1"
    assert "s3cret" not in choice.describe() and "s3cret" not in str(_server_error(choice, "x"))
    monkeypatch.setenv("COURSE_MODEL", "http://alice:s3cret@127.0.0.1:9/v1#m")
    assert "s3cret" not in probe_note()
    report = describe_models()  # port 9 is closed: the report says so, without the password
    assert not report.server_answers and "s3cret" not in str(report)
    assert parse_model_setting("http://127.0.0.1:9/v1").shown == "http://127.0.0.1:9/v1"


@pytest.mark.contract("wrong result")
def test_the_doctor_does_not_print_a_server_password(monkeypatch, capsys):
    """The finding: ``python -m course doctor`` printed a URL's password back."""
    from course import doctor

    monkeypatch.setenv("COURSE_MODEL", "http://alice:s3cret@127.0.0.1:9/v1")  # closed port
    for check in (doctor._model(), doctor._roles()):
        assert "s3cret" not in check.line() and "alice:***@127.0.0.1:9" in check.line(), check
