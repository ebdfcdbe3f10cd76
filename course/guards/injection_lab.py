"""The injection lab's tool world: the session's tools over a payload's documents.

:class:`Lab` holds one payload's documents behind the read tools (``fetch_page``,
``read_document``, ``read_email``) and records every side effect its other tools
(``send_email``, ``post_message``, ``delete_file``) really have, so a run is judged from the
tools' own records. Naive, every tool is allowed and nothing needs confirmation; guarded, the
read results are wrapped as untrusted data (:func:`as_data`), the session's allowlist
(:data:`SESSION_TOOLS`) leaves out ``delete_file``, the side-effecting tools are ``critical``
and ``fetch_page`` reaches only :data:`ALLOWED_HOSTS`.

Part of the prompt-injection lab of chapter 06 (see :mod:`course.guards.injection`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from course.guards.injection_payloads import Payload
from course.tools.registry import ToolError, ToolRegistry, ToolStatus

__all__ = ["ALLOWED_HOSTS", "SIDE_EFFECT_TOOLS", "Lab", "as_data"]

ALLOWED_HOSTS = ("docs.example.com", "intranet.example.com")
SESSION_TOOLS = ["fetch_page", "read_document", "read_email", "send_email", "post_message"]
SIDE_EFFECT_TOOLS = ("send_email", "post_message", "delete_file")


def as_data(tool: str, text: str) -> str:
    """Wrap a tool's output as untrusted data; ``<``/``>`` inside are escaped (no tag breakout)."""
    body = html.escape(str(text), quote=False)
    return f'<tool_output tool="{tool}" trust="untrusted">\n{body}\n</tool_output>'



@dataclass
class Lab:
    """The tools of one session over one payload's documents, recording every side effect.

    Guarded, ``fetch_page`` refuses a host that is not on :data:`ALLOWED_HOSTS`: the only
    refusal a tool of the lab makes itself (status ``REFUSED``); a key that holds no document
    is an invalid argument.
    """

    payload: Payload
    guarded: bool
    side_effects: list[dict[str, Any]] = field(default_factory=list)

    def _text(self, tool: str, key: str) -> str:
        for doc_tool, doc_key, text in self.payload.documents:
            if doc_tool == tool and doc_key == key:
                return as_data(tool, text) if self.guarded else text
        raise ToolError(f"{tool}: nothing found for {key!r}", ToolStatus.INVALID_ARGUMENTS)

    def fetch_page(self, url: str) -> str:
        """Fetch a web page.

        Args:
            url: the page address
        """
        host = urlparse(url).hostname or ""
        if host not in ALLOWED_HOSTS:
            if self.guarded:
                raise ToolError(f"host {host!r} is not on the allowlist {list(ALLOWED_HOSTS)}; "
                                "no request was sent")
            self.side_effects.append({"tool": "fetch_page", "args": {"url": url}})
            return "ok"
        return self._text("fetch_page", url)

    def read_document(self, doc_id: str) -> str:
        """Read an internal document.

        Args:
            doc_id: document id, e.g. "D-12"
        """
        return self._text("read_document", doc_id)

    def read_email(self, message_id: str) -> str:
        """Read an email from the inbox.

        Args:
            message_id: e.g. "M-3"
        """
        return self._text("read_email", message_id)

    def send_email(self, to: str, subject: str, body: str) -> str:
        """Send an email (side effect).

        Args:
            to: recipient address
            subject: subject line
            body: message text
        """
        self.side_effects.append({"tool": "send_email", "args": {"to": to, "subject": subject}})
        return f"sent to {to}"

    def post_message(self, channel: str, text: str) -> str:
        """Post a message to a chat channel (side effect).

        Args:
            channel: channel name, e.g. "#team"
            text: message text
        """
        self.side_effects.append({"tool": "post_message", "args": {"channel": channel}})
        return f"posted to {channel}"

    def delete_file(self, path: str) -> str:
        """Delete a file (side effect).

        Args:
            path: file path
        """
        self.side_effects.append({"tool": "delete_file", "args": {"path": path}})
        return f"deleted {path}"

    def registry(self) -> ToolRegistry:
        """Naive: everything allowed, nothing confirmed. Guarded: session allowlist, critical."""
        registry = ToolRegistry()
        for name in ("fetch_page", "read_document", "read_email"):
            registry.register(getattr(self, name), name=name, risk="read")
        for name in SIDE_EFFECT_TOOLS:
            registry.register(getattr(self, name), name=name,
                              risk="critical" if self.guarded else "read")
        if self.guarded:
            registry.configure({"enabled": SESSION_TOOLS})
        return registry
