"""Too many tools: a catalogue of 120+ business tools and tool retrieval before the call.

:func:`build_catalogue` makes 122 tool descriptions (20 business objects x 6 actions, plus the
two contrasting designs ``find_customers(query, limit=5)`` and ``database(query)``).
:class:`ToolRetriever` ranks them for a request with BM25 (``rank-bm25``) over name and
description and returns the top k; only those are shown to the model. :func:`recall_at_k`
measures how often the right tool is among them, on :data:`LABELLED_REQUESTS` (44 requests
written by hand, each with the one tool that serves it).

Not handled: the tools here are descriptions only (nothing executes them), the ranker is
lexical (no embeddings; a request that shares no word with the right description is missed),
and the labelled set is small and written by the authors of the descriptions, so the figure is
optimistic for real traffic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["LABELLED_REQUESTS", "CatalogueTool", "ToolRetriever", "build_catalogue", "recall_at_k",
           "tokenize"]

OBJECTS: dict[str, str] = {
    "customer": "client buyer account holder contact person company",
    "order": "purchase basket checkout order placed by a customer",
    "invoice": "bill billing document amount due vat",
    "shipment": "delivery parcel package tracking courier",
    "product": "item article sku catalogue goods",
    "stock": "inventory quantity on hand warehouse level",
    "employee": "staff member worker colleague personnel hr",
    "ticket": "support case complaint issue helpdesk",
    "payment": "transaction card transfer money received",
    "refund": "money back reimbursement returned amount",
    "subscription": "plan recurring membership renewal",
    "supplier": "vendor provider purchasing partner",
    "warehouse": "depot storage site location facility",
    "campaign": "marketing promotion newsletter advertising",
    "lead": "prospect sales opportunity potential customer",
    "contract": "agreement terms signed document legal",
    "meeting": "calendar appointment event schedule call",
    "expense": "cost receipt spending reimbursement claim travel",
    "report": "dashboard kpi summary figures analytics",
    "coupon": "discount code voucher promo price reduction",
}

ACTIONS: dict[str, str] = {
    "find": "Search {o}s by name or keyword and return up to 5 matches ({k}).",
    "get": "Show all details of one {o} given its id ({k}).",
    "create": "Create a new {o} record ({k}).",
    "update": "Change fields of an existing {o}, e.g. fix or edit it ({k}).",
    "cancel": "Cancel, delete or close a {o} ({k}).",
    "list": "List recent {o}s in a date period, newest first ({k}).",
}


@dataclass
class CatalogueTool:
    """One tool's description, as a model would be shown it."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


def _params(action: str, obj: str) -> dict[str, Any]:
    props: dict[str, Any]
    if action == "find":
        props = {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5,
                                                       "maximum": 20}}
        required = ["query"]
    elif action == "list":
        props = {"start_date": {"type": "string"}, "end_date": {"type": "string"}}
        required = ["start_date", "end_date"]
    elif action == "create":
        props = {"fields": {"type": "object"}}
        required = ["fields"]
    else:
        props = {f"{obj}_id": {"type": "string"}}
        if action == "update":
            props["fields"] = {"type": "object"}
        required = list(props)
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


def build_catalogue() -> list[CatalogueTool]:
    """The 122 tools: every action on every business object, plus ``database(query)``."""
    tools = []
    for obj, keywords in OBJECTS.items():
        for action, template in ACTIONS.items():
            name = f"{action}_{obj}s" if action in ("find", "list") else f"{action}_{obj}"
            tools.append(CatalogueTool(name, template.format(o=obj, k=keywords),
                                       _params(action, obj)))
    tools.append(CatalogueTool(
        "database", "Run any SQL query against the company database.",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
         "additionalProperties": False}))
    tools.append(CatalogueTool(
        "find_customers_by_region", "List customers located in one sales region "
        "(north, south, east, west) (client buyer account region area).",
        {"type": "object", "properties": {"region": {"type": "string",
         "enum": ["north", "south", "east", "west"]}}, "required": ["region"],
         "additionalProperties": False}))
    return tools


_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-case words with a crude plural strip (``orders`` -> ``order``) and ``_`` split."""
    words = _WORD.findall(text.lower().replace("_", " "))
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words]


class ToolRetriever:
    """BM25 over each tool's name and description; ``top(request, k)`` picks candidates."""

    def __init__(self, tools: list[CatalogueTool]):
        from rank_bm25 import BM25Okapi

        if not tools:
            raise ValueError("ToolRetriever needs at least one tool")
        self.tools = list(tools)
        self._bm25 = BM25Okapi([tokenize(t.name + " " + t.name + " " + t.description)
                                for t in self.tools])

    def top(self, request: str, k: int = 5) -> list[CatalogueTool]:
        """The ``k`` best-matching tools for ``request``, best first (ties: catalogue order)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        scores = self._bm25.get_scores(tokenize(request))
        order = sorted(range(len(self.tools)), key=lambda i: (-scores[i], i))
        return [self.tools[i] for i in order[:k]]


#: (request, the tool that serves it). Written by hand; phrased as users would, not as names.
LABELLED_REQUESTS: list[tuple[str, str]] = [
    ("Look up the client called Acme Corp", "find_customers"),
    ("What are the contact details of customer C-1042?", "get_customer"),
    ("Add a new buyer named Lena Fischer", "create_customer"),
    ("Change the email address of client C-77", "update_customer"),
    ("Where is my parcel? Tracking for shipment SH-551", "get_shipment"),
    ("Show deliveries sent last week", "list_shipments"),
    ("Cancel order O-3321, the customer changed their mind", "cancel_order"),
    ("What did order O-889 contain?", "get_order"),
    ("List all orders placed in March", "list_orders"),
    ("Create an invoice for the Berlin workshop", "create_invoice"),
    ("How much is due on bill INV-2024-17?", "get_invoice"),
    ("Show me the invoices from last quarter", "list_invoices"),
    ("Search the catalogue for espresso machines", "find_products"),
    ("Change the price of article SKU-12", "update_product"),
    ("How many units of SKU-77 are on hand in inventory?", "get_stock"),
    ("Open a support case about a broken grinder", "create_ticket"),
    ("Close helpdesk ticket T-900, it is solved", "cancel_ticket"),
    ("Find complaints mentioning late delivery", "find_tickets"),
    ("Did we receive the card payment for order O-12?", "find_payments"),
    ("Show payment transaction P-4431", "get_payment"),
    ("Reimburse the customer for the returned kettle", "create_refund"),
    ("List refunds issued in April", "list_refunds"),
    ("Cancel the premium membership of account 88", "cancel_subscription"),
    ("Which plan renewal is coming up for subscription SUB-3?", "get_subscription"),
    ("Find a vendor that sells paper cups", "find_suppliers"),
    ("Add a new supplier: Bean Brothers", "create_supplier"),
    ("Which storage sites do we have in the south?", "find_warehouses"),
    ("Start a newsletter promotion for spring", "create_campaign"),
    ("Pause the advertising campaign CMP-5", "cancel_campaign"),
    ("Find prospects from the trade fair", "find_leads"),
    ("Update the sales opportunity L-19 with the new budget", "update_lead"),
    ("Show the signed agreement with Bean Brothers, contract K-7", "get_contract"),
    ("Schedule a call with the supplier next Tuesday", "create_meeting"),
    ("Move my appointment M-41 to Friday", "update_meeting"),
    ("Submit a travel receipt for the Hamburg trip", "create_expense"),
    ("List expense claims from May", "list_expenses"),
    ("Show the KPI dashboard for revenue", "get_report"),
    ("Create a discount code of 10 percent", "create_coupon"),
    ("Delete voucher SPRING10, it was leaked", "cancel_coupon"),
    ("Find staff members who work in the warehouse", "find_employees"),
    ("Change the job title of employee E-3", "update_employee"),
    ("Which customers are in the north region?", "find_customers_by_region"),
    ("List new hires from January", "list_employees"),
    ("Edit the terms of contract K-9", "update_contract"),
]


def recall_at_k(retriever: ToolRetriever, labelled: list[tuple[str, str]] | None = None,
                k: int = 5) -> tuple[float, list[tuple[str, str, list[str]]]]:
    """Share of requests whose right tool is in the top ``k``, and the misses.

    Each miss is ``(request, expected tool, the k names retrieved)``.
    """
    labelled = LABELLED_REQUESTS if labelled is None else labelled
    if not labelled:
        raise ValueError("recall_at_k needs at least one labelled request")
    names = {t.name for t in retriever.tools}
    unknown = sorted({tool for _, tool in labelled if tool not in names})
    if unknown:
        raise ValueError(f"labelled requests name tools not in the catalogue: {unknown}")
    misses = []
    for request, expected in labelled:
        got = [t.name for t in retriever.top(request, k)]
        if expected not in got:
            misses.append((request, expected, got))
    return 1 - len(misses) / len(labelled), misses
