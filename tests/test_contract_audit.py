"""Contract cases of the audit log (course/tools/gateway.py, ``AuditLog.to_jsonl``): an export
appends and never overwrites, one record JSON cannot hold never loses the others, a bad path is a
clear error naming it and the fix. Table tests with a real gateway and hand-made records."""

import json
import re

import pytest

from course.tools.gateway import AuditLog, AuditRecord, ToolGateway
from course.tools.registry import ToolRegistry


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


def _gateway() -> ToolGateway:
    registry = ToolRegistry()
    registry.register(divide)
    return ToolGateway(registry, grants={"agent": {"read"}})


def _log(*arguments) -> AuditLog:
    log = AuditLog()
    for args in arguments:
        log.add(AuditRecord(0, "agent", "divide", "read", args, "allowed", "ok", "done"))
    return log


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# ----------------------------------------------------------------- an existing log is appended to


@pytest.mark.contract("data loss")
def test_an_existing_log_is_appended_to_not_overwritten(tmp_path):
    path = tmp_path / "audit.jsonl"
    _log({"a": 1, "b": 1}, {"a": 2, "b": 1}, {"a": 3, "b": 1}).to_jsonl(path)
    first = path.read_text()
    _log({"a": 9, "b": 9}).to_jsonl(path)
    assert path.read_text().startswith(first)  # the three records are kept as they were
    assert [r["arguments"]["a"] for r in _lines(path)] == [1, 2, 3, 9]


@pytest.mark.contract("data loss")
def test_exporting_the_same_log_twice_appends_only_the_new_records(tmp_path):
    path = tmp_path / "audit.jsonl"
    gateway = _gateway()
    gateway.execute("divide", {"a": 1, "b": 2}, subject="agent")
    gateway.audit.to_jsonl(path)
    gateway.audit.to_jsonl(path)
    gateway.execute("divide", {"a": 3, "b": 4}, subject="agent")
    gateway.audit.to_jsonl(path)
    assert [r["seq"] for r in _lines(path)] == [1, 2]


@pytest.mark.contract("data loss")
def test_a_log_whose_last_line_is_cut_keeps_its_lines_apart(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text('{"seq": 1}\n{"seq": 2')  # an earlier export cut mid-line
    _log({"a": 1, "b": 2}).to_jsonl(path)
    lines = path.read_text().splitlines()
    assert lines[:2] == ['{"seq": 1}', '{"seq": 2'] and json.loads(lines[2])["tool"] == "divide"


# --------------------------------------------------------- one odd record never loses the others


class Opaque:
    def __str__(self):
        raise RuntimeError("no text")


def _deep(n):
    value = []
    for _ in range(n):
        value = [value]
    return value


def _cycle():
    value = []
    value.append(value)
    return value


ODD_ARGUMENTS = {
    # case: (the argument, what the marked string says)
    "5000-digit int": (10 ** 5000, r"int of about 500\d digits"),
    "nested 10k deep": (_deep(10_000), "nested deeper than"),
    "a cycle": (_cycle(), "nested deeper than"),
    "object whose str raises": (Opaque(), "Opaque"),
}


@pytest.mark.contract("data loss")
@pytest.mark.parametrize("case", ODD_ARGUMENTS)
def test_one_record_json_cannot_hold_is_marked_and_the_rest_written(tmp_path, case):
    value, says = ODD_ARGUMENTS[case]
    path = tmp_path / "audit.jsonl"
    _log({"a": 1, "b": 1}, {"a": value, "b": 1}, {"a": 3, "b": 1}).to_jsonl(path)
    records = _lines(path)
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[0]["arguments"] == {"a": 1, "b": 1} and "export_note" not in records[0]
    assert records[2]["arguments"] == {"a": 3, "b": 1}
    odd = records[1]
    assert odd["arguments"]["b"] == 1 and odd["tool"] == "divide"
    assert "<not JSON:" in json.dumps(odd["arguments"]) and re.search(says, json.dumps(odd["arguments"]))
    assert odd["export_note"].startswith("written as marked strings")


@pytest.mark.contract("data loss")
def test_a_5000_digit_argument_through_the_gateway_is_exported(tmp_path):
    gateway = _gateway()
    gateway.execute("divide", {"a": 1, "b": 2}, subject="agent")
    gateway.execute("divide", {"a": 10 ** 5000, "b": 3}, subject="agent")
    records = _lines(gateway.audit.to_jsonl(tmp_path / "audit.jsonl"))
    assert len(records) == 2 and records[0]["arguments"] == {"a": 1, "b": 2}
    assert records[1]["arguments"]["a"].startswith("<not JSON: int of about 500")


# -------------------------------------------------------------- a bad path names itself and the fix


@pytest.mark.contract("raw crash")
def test_a_folder_is_a_clear_error_and_writes_nothing(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"is a folder: give AuditLog\.to_jsonl a file") \
            as err:
        _log({"a": 1, "b": 1}).to_jsonl(tmp_path)
    assert str(tmp_path) in str(err.value) and "audit.jsonl" in str(err.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.contract("raw crash")
def test_a_missing_folder_is_made(tmp_path):
    path = tmp_path / "logs" / "today" / "audit.jsonl"
    assert _lines(_log({"a": 1, "b": 1}).to_jsonl(path))[0]["seq"] == 1


@pytest.mark.contract("raw crash")
def test_a_path_under_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=r"cannot append the audit log to .*file.*a file name in a "
                                      r"folder you can write to"):
        _log({"a": 1, "b": 1}).to_jsonl(tmp_path / "file" / "audit.jsonl")
