"""One small tool of each kind the note lists, each with a narrow contract, all in one registry.

Note 003's kinds: an API, the shell, files, a database, a computation, web search. Each tool
here does one narrow thing, and the registry's door plus the tool's own guard enforce it:

- **API** ``exchange_rate(base, quote)``: an HTTP GET to a JSON service on loopback (started
  here, :class:`RatesService`), with a request timeout; a currency outside the enum never
  reaches the network.
- **shell** ``run_command(command)``: one of an allowlist of read-only commands, run without a
  shell (no pipes, no arguments from the model), with a timeout.
- **files** ``read_note(name)``: a file under one folder; the resolved path must stay inside it
  (``..``, absolute paths and symlinks out are refused).
- **database** ``find_customers(query, limit=5)``: SQLite opened read-only, a parameterised
  ``LIKE`` query; never ``database(query)``.
- **computation** ``loan_payment(principal, annual_rate_percent, months)``: exact ``Decimal``.
- **web search** ``web_search(query)``: an offline corpus of a few pages standing in for the web
  (no network), ranked by word overlap.

Not handled: authentication, rate limits, retries, paging; the shell allowlist is not a sandbox
(chapter 06 runs code in one); the rates, customers and pages are invented.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import urllib.error
import urllib.request
from decimal import ROUND_HALF_UP, Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, urlparse

from course.tools.registry import ToolError, ToolRegistry

__all__ = ["RatesService", "tool_kinds_registry"]

RATES = {("EUR", "USD"): "1.0842", ("EUR", "GBP"): "0.8551", ("USD", "JPY"): "151.20"}
SHELL_COMMANDS = {"date": ["date", "-u", "+%Y-%m-%d"], "uptime": ["uptime"],
                  "disk": ["df", "-h", "/"]}
PAGES = {
    "https://example.org/refunds": "Refund policy: refunds within 30 days of delivery, "
                                   "damaged goods always refunded.",
    "https://example.org/shipping": "Shipping: we ship to Germany, France and the Netherlands.",
    "https://example.org/hours": "Opening hours: Monday to Friday, 8 to 18.",
}
CUSTOMERS = [("C-1001", "Acme Coffee Bar", "north"), ("C-1002", "Bean Brothers", "south"),
             ("C-1003", "Cafe Lena", "east"), ("C-1004", "Acme Catering", "west")]


class _RatesHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        pair = (query.get("base", [""])[0], query.get("quote", [""])[0])
        body = json.dumps({"base": pair[0], "quote": pair[1], "rate": RATES.get(pair)})
        self.send_response(200 if pair in RATES else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


class RatesService:
    """A JSON exchange-rate service on a free loopback port (a real HTTP API, offline)."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _RatesHandler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/rate"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop the service."""
        self.server.shutdown()
        self.server.server_close()


def tool_kinds_registry(workdir: str | Path, rates_url: str) -> ToolRegistry:
    """A registry with one narrow tool of each kind; files and the database live in ``workdir``."""
    root = Path(workdir) / "notes"
    root.mkdir(parents=True, exist_ok=True)
    (root / "welcome.txt").write_text("Welcome to the shop. Orders ship within 2 days.\n")
    db = Path(workdir) / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS customers (id TEXT, name TEXT, region TEXT)")
        conn.execute("DELETE FROM customers")
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?)", CUSTOMERS)
    conn.close()

    def exchange_rate(base: Literal["EUR", "USD"], quote: Literal["USD", "GBP", "JPY"]) -> str:
        """Current exchange rate from a rates API.

        Args:
            base: Currency to convert from.
            quote: Currency to convert to.
        """
        try:
            with urllib.request.urlopen(f"{rates_url}?base={base}&quote={quote}",
                                        timeout=5) as response:
                return json.loads(response.read())["rate"]
        except urllib.error.HTTPError as err:
            raise ToolError(f"the rates API has no rate for {base}/{quote} (HTTP {err.code})") \
                from err

    def run_command(command: Literal["date", "uptime", "disk"]) -> str:
        """Run one read-only shell command from an allowlist.

        Args:
            command: Which command: date, uptime or disk.
        """
        done = subprocess.run(SHELL_COMMANDS[command], capture_output=True, text=True,
                              timeout=5, check=False)
        return (done.stdout or done.stderr).strip()[:500]

    def read_note(name: str) -> str:
        """Read a text file from the notes folder.

        Args:
            name: File name inside the notes folder, e.g. welcome.txt.
        """
        path = (root / name).resolve()
        if not path.is_relative_to(root.resolve()):
            raise ToolError(f"'{name}' is outside the notes folder; only files in it can be read")
        if not path.is_file():
            raise ToolError(f"there is no note called '{name}'")
        return path.read_text(encoding="utf-8")[:2000]

    def find_customers(query: str, limit: int = 5) -> str:
        """Customers whose name contains the query (read-only).

        Args:
            query: Part of the customer's name.
            limit: How many to return, 1 to 5.
        """
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT id, name, region FROM customers WHERE name LIKE ? "
                                "ORDER BY id LIMIT ?", (f"%{query}%", limit)).fetchall()
        finally:
            conn.close()
        return json.dumps([dict(zip(("id", "name", "region"), r, strict=True)) for r in rows])

    def loan_payment(principal: float, annual_rate_percent: float, months: int) -> str:
        """Monthly payment of a fixed-rate loan, exact to the cent.

        Args:
            principal: Amount borrowed.
            annual_rate_percent: Yearly interest rate in percent.
            months: Number of monthly payments.
        """
        p, r = Decimal(str(principal)), Decimal(str(annual_rate_percent)) / 1200
        payment = p / months if r == 0 else p * r / (1 - (1 + r) ** -months)
        return str(payment.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))

    def web_search(query: str) -> str:
        """Search the web (an offline corpus of a few pages) and return the best pages.

        Args:
            query: What to look for.
        """
        words = set(query.lower().split())
        scored = sorted(PAGES.items(), key=lambda kv: -len(words & set(kv[1].lower().split())))
        hits = [f"{url}: {text}" for url, text in scored[:2]
                if words & set(text.lower().split())]
        return "\n".join(hits) or "no results"

    registry = ToolRegistry()
    registry.register(exchange_rate)
    registry.register(run_command, timeout=10)
    registry.register(read_note)
    registry.register(find_customers, schema={
        "properties": {"query": {"type": "string", "maxLength": 40},
                       "limit": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["query"]})
    registry.register(loan_payment, schema={
        "properties": {"principal": {"type": "number", "exclusiveMinimum": 0},
                       "annual_rate_percent": {"type": "number", "minimum": 0, "maximum": 100},
                       "months": {"type": "integer", "minimum": 1, "maximum": 600}},
        "required": ["principal", "annual_rate_percent", "months"]})
    registry.register(web_search)
    return registry
