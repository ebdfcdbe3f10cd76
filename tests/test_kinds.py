"""One tool of each kind: each narrow contract holds at the door or in the tool's own guard."""

import json
import sqlite3

import pytest

from course.tools.kinds import RatesService, tool_kinds_registry


@pytest.fixture
def kinds(tmp_path):
    service = RatesService()
    yield tool_kinds_registry(tmp_path, service.url), tmp_path
    service.close()


@pytest.mark.parametrize(("tool", "arguments", "status", "content"), [
    ("exchange_rate", {"base": "EUR", "quote": "GBP"}, "ok", "0.8551"),
    ("exchange_rate", {"base": "USD", "quote": "GBP"}, "refused", "HTTP 404"),
    ("run_command", {"command": "date; rm -rf /"}, "invalid_arguments", "is not one of"),
    ("read_note", {"name": "/etc/passwd"}, "refused", "outside the notes folder"),
    ("read_note", {"name": "missing.txt"}, "refused", "no note called"),
    ("find_customers", {"query": "a", "limit": 6}, "invalid_arguments", "maximum of 5"),
    ("loan_payment", {"principal": 1200, "annual_rate_percent": 0, "months": 12}, "ok", "100.00"),
    ("loan_payment", {"principal": -5, "annual_rate_percent": 1, "months": 12},
     "invalid_arguments", "principal"),
    ("web_search", {"query": "zebra"}, "ok", "no results"),
])
def test_contracts(kinds, tool, arguments, status, content):
    registry, _ = kinds
    result = registry.execute(tool, arguments)
    assert result.status == status and content in result.content


def test_symlink_out_of_the_folder_is_refused(kinds, tmp_path):
    registry, root = kinds
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (root / "notes" / "link.txt").symlink_to(secret)
    assert registry.execute("read_note", {"name": "link.txt"}).status == "refused"


def test_database_is_opened_read_only_and_the_query_is_a_parameter(kinds):
    registry, root = kinds
    result = registry.execute("find_customers", {"query": "%' OR 1=1 --"})
    assert json.loads(result.content) == []
    with sqlite3.connect(root / "shop.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (4,)
