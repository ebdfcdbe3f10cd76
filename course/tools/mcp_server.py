"""A small MCP server (official ``mcp`` package) with 4 coarse business actions, and a client.

Run it over stdio with ``python -m course.tools.mcp_server``. Its tools are a business facade, not a
database: ``sales_report``, ``find_customers(query, limit=5)``, ``order_status`` and
``request_refund`` (which never refunds: it files a request for a human, and says so).

:func:`connect` starts the server as a subprocess and yields an initialised ``ClientSession``;
leaving the ``async with`` block shuts the server down. :func:`langchain_tools` wraps the
server's tools as LangChain ``StructuredTool`` objects (schema = the server's ``inputSchema``)
so a LangGraph ``ToolNode`` can call them.

Not handled: authentication, other transports (HTTP), resources and prompts, progress
notifications; the data are a few invented rows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer

from course.tools.registry import ToolError
from course.tools.sales import sales_summary

__all__ = ["connect", "find_customers", "langchain_tools", "order_status", "request_refund",
           "sales_report", "server"]

server = MCPServer("shop-facade", instructions="Coarse business actions of a small coffee shop.")

CUSTOMERS = [
    {"id": "C-1001", "name": "Acme Coffee Bar", "region": "north"},
    {"id": "C-1002", "name": "Bean Brothers", "region": "south"},
    {"id": "C-1003", "name": "Cafe Lena", "region": "east"},
    {"id": "C-1004", "name": "Acme Catering", "region": "west"},
]
ORDERS = {"O-1": "shipped on 2024-03-02", "O-2": "waiting for payment", "O-3": "delivered"}


@server.tool()
def sales_report(category: str, start_date: str, end_date: str) -> str:
    """Revenue and units of one product category between two dates (inclusive), by month.

    Args:
        category: coffee, tea, pastry or equipment.
        start_date: First day, ISO format.
        end_date: Last day, ISO format.
    """
    try:
        return json.dumps(sales_summary(category, start_date, end_date))
    except ToolError as err:  # refusal is a result: the client gets the text
        return f"sales_report refused: {err}"


@server.tool()
def find_customers(query: str, limit: int = 5) -> str:
    """Customers whose name contains the query (case-insensitive), at most `limit` (max 5).

    Args:
        query: Part of the customer's name.
        limit: How many to return, 1 to 5.
    """
    limit = max(1, min(int(limit), 5))
    found = [c for c in CUSTOMERS if query.lower() in c["name"].lower()][:limit]
    return json.dumps(found) if found else f"No customer name contains {query!r}."


@server.tool()
def order_status(order_id: str) -> str:
    """Current status of one order.

    Args:
        order_id: Order id such as O-1.
    """
    return ORDERS.get(order_id, f"Order {order_id!r} does not exist.")


@server.tool()
def request_refund(order_id: str, amount: float, reason: Literal["damaged", "late", "other"]) -> str:
    """File a refund request; a human approves it later. Nothing is paid out by this call.

    Args:
        order_id: Order id such as O-1.
        amount: Amount in euros.
        reason: damaged, late or other.
    """
    if order_id not in ORDERS:
        return f"Refund refused: order {order_id!r} does not exist."
    return (f"Refund request for {order_id} ({amount:.2f} EUR, {reason}) is waiting for a "
            "human to approve it; nothing has been paid yet.")


@asynccontextmanager
async def connect() -> AsyncIterator[Any]:
    """Start this server over stdio and yield an initialised ``mcp.ClientSession``.

    The subprocess is stopped when the block exits (normally or with an error).
    """
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "course.tools.mcp_server"],
        cwd=str(Path(__file__).resolve().parents[2]))
    async with stdio_client(params, errlog=_errlog()) as streams, \
            ClientSession(*streams[:2]) as session:
        await session.initialize()
        yield session


def _errlog() -> Any:
    """Where the server's stderr goes: this process's stderr when it is a real file, else the
    interpreter's original one. A Jupyter kernel's ``sys.stderr`` has no file descriptor when
    ipykernel does not capture fds (it does not when ``PYTEST_CURRENT_TEST`` is set, as under
    the notebook tests), and a subprocess needs one."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return sys.__stderr__


def _result_text(result: Any) -> str:
    parts = [getattr(c, "text", str(c)) for c in result.content]
    text = "\n".join(parts)
    return f"MCP tool error: {text}" if getattr(result, "is_error", False) else text


async def langchain_tools(session: Any) -> list[Any]:
    """The server's tools as LangChain ``StructuredTool`` objects (async, schema from MCP)."""
    from langchain_core.tools import StructuredTool

    listed = await session.list_tools()
    tools = []
    for tool in listed.tools:
        async def call(_name: str = tool.name, **arguments: Any) -> str:
            return _result_text(await session.call_tool(_name, arguments))

        tools.append(StructuredTool(
            name=tool.name, description=tool.description or "",
            args_schema=tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema,
            coroutine=call))
    return tools


if __name__ == "__main__":
    server.run("stdio")
