"""Settings that cannot work are refused with their name; a server URL's password is never shown."""

from __future__ import annotations

import sys

import pytest

from course.settings import CourseSettingError, parse_model_setting


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("raw", ["0", "-1", "abc", "nan", "-inf", "1e9", "3601", pytest.param(
    "inf", marks=pytest.mark.contract("raw crash"))])  # inf crashed (OverflowError), the rest: 60
def test_a_request_timeout_that_cannot_work_is_refused_with_its_name(raw, monkeypatch):
    from course.models import request_timeout

    monkeypatch.setenv("COURSE_SERVER_TIMEOUT", raw)
    with pytest.raises(CourseSettingError) as err:
        request_timeout()
    assert "COURSE_SERVER_TIMEOUT" in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize(("raw", "seconds"), [("", 60.0), ("2", 2.0), (" 0.5 ", 0.5),
                                              ("3600", 3600.0)])
def test_a_request_timeout_that_works_is_used(raw, seconds, monkeypatch):
    from course.models import request_timeout

    monkeypatch.setenv("COURSE_SERVER_TIMEOUT", raw)
    assert request_timeout() == seconds


@pytest.mark.contract("wrong result")
def test_a_server_password_is_masked_everywhere_it_is_shown(monkeypatch):
    from course.models import describe_models, probe_note, server_error

    choice = parse_model_setting("http://alice:s3cret@127.0.0.1:9/v1#m")
    assert choice.shown == "http://alice:***@127.0.0.1:9/v1"
    assert "s3cret" not in choice.describe() and "s3cret" not in str(server_error(choice, "x"))
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


# --- folders the settings name, threads, the forked kernels' settings ---------------------------

LONG_NAME = "/tmp/" + "a" * 5000  # one name far beyond NAME_MAX (255 bytes)
LONG_PATH = "/tmp/" + "a/" * 2100  # short names, the whole path beyond PATH_MAX (4096 bytes)


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize(("raw", "says"), [(LONG_NAME, "255 bytes per file or folder name"),
                                           (LONG_PATH, "4096 bytes per path"),
                                           ("/etc/passwd/cache", "/etc/passwd is a file")])
def test_a_course_cache_that_cannot_be_a_folder_is_refused_with_its_name(raw, says, monkeypatch):
    from course.assets import AssetError, course_cache_dir

    monkeypatch.setenv("COURSE_CACHE", raw)
    with pytest.raises(AssetError) as err:
        course_cache_dir()
    text = str(err.value)
    assert "COURSE_CACHE=" in text and says in text and "Fix: set COURSE_CACHE to" in text
    assert len(text) < 400  # the value is shown shortened, not 5000 characters


@pytest.mark.contract("raw crash")
def test_the_doctor_says_a_too_long_course_cache_instead_of_crashing(monkeypatch, capsys):
    """``python -m course doctor``'s ``main()`` in this process (``COURSE_CACHE`` is read at each
    call, nothing reads it at import): a crash would raise here; the new interpreter a
    subprocess would start only adds its imports."""
    from course.__main__ import main

    monkeypatch.setenv("COURSE_CACHE", LONG_NAME)
    capsys.readouterr()
    status = main(["doctor"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "File name too long" not in out + err
    assert status == 1, out[-2000:] + err[-2000:]
    failed = [line for line in out.splitlines() if line.startswith("[FAIL]")]
    assert failed and any("COURSE_CACHE=" in line and "255 bytes" in line and "Fix:" in line
                          for line in failed), out


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("raw", ["abc", "0", "-1", "1.5", "99999", "٣"])
def test_a_torch_thread_count_that_cannot_work_is_refused_not_ignored(raw, monkeypatch):
    from course.setup import setup_notebook, torch_threads_setting

    monkeypatch.setenv("COURSE_TORCH_THREADS", raw)
    for call in (torch_threads_setting, setup_notebook):
        with pytest.raises(CourseSettingError) as err:
            call()
        assert "COURSE_TORCH_THREADS=" in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize(("raw", "threads"), [("", None), ("1", 1), (" 2 ", 2)])
def test_a_torch_thread_count_that_works_is_used(raw, threads, monkeypatch):
    from course.setup import torch_threads_setting

    monkeypatch.setenv("COURSE_TORCH_THREADS", raw)
    assert torch_threads_setting() == threads


def _fork_cases(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    return {"idle -1": ({"COURSE_FORK_IDLE_S": "-1"}, "COURSE_FORK_IDLE_S='-1'"),
            "idle soon": ({"COURSE_FORK_IDLE_S": "soon"}, "COURSE_FORK_IDLE_S='soon'"),
            "runtime dir is a file": ({"COURSE_FORK_RUNTIME_DIR": str(a_file)},
                                      f"{a_file} is a file"),
            "runtime dir under a file": ({"COURSE_FORK_RUNTIME_DIR": str(a_file / "sub")},
                                         f"{a_file} is a file"),
            "runtime dir too long for a socket": (
                {"COURSE_FORK_RUNTIME_DIR": str(tmp_path / ("d" * 100))}, "too long")}


FORK_CASES = ["idle -1", "idle soon", "runtime dir is a file", "runtime dir under a file",
              "runtime dir too long for a socket"]


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("case", FORK_CASES)
def test_a_forked_kernel_setting_that_cannot_work_stops_the_launch_by_name(case, tmp_path,
                                                                          monkeypatch):
    """Refused before a kernel starts (the ordinary launch would hide a wrong setting)."""
    import asyncio

    from classroom import kernels

    env, says = _fork_cases(tmp_path)[case]
    setting = next(iter(env))
    with pytest.raises(ValueError) as err:
        kernels.check_fork_settings(env)
    assert setting in str(err.value) and says in str(err.value)
    forked = []
    monkeypatch.setattr(kernels, "fork_kernel", lambda *args: forked.append(args))
    launch = kernels.ForkingProvisioner.launch_kernel(
        object(), [sys.executable, "-m", "ipykernel_launcher", "-f", "x.json"], env=env)
    with pytest.raises(ValueError, match=setting):
        asyncio.run(launch)
    assert not forked
