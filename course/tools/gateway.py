"""The gateway: the registry's door with a subject, risk classes, vetoes, confirmation and audit.

:class:`ToolGateway` holds a :class:`~course.tools.registry.ToolRegistry` and adds what a
bare registry cannot know: **who** asks (a subject, granted risk classes ``read`` / ``write`` /
``critical``), deterministic **vetoes** (a :class:`Policy` is code that forbids a proposed call,
e.g. an amount over a limit; the refusal goes back as a result), **confirmation** of critical
calls by a human (held as a :class:`ConfirmationRequest` until approved or denied, or asked at
once through a ``confirm`` callback) and an :class:`AuditRecord` for every decision. It stands
between the door's two steps: ``registry.check`` first, then the gateway's own checks, then
``registry.run``, so the door checks each call once. An approved call is checked again before it
runs (``run`` with ``confirmed_by``), since the allowlist may have changed while it waited.
Policy rules and ``confirm`` callbacks run in a worker thread with a deadline each; the tool
itself runs as the registry runs it.

Not handled: authentication of the subject (the caller states it; the gateway trusts the
caller), persistence of the audit log beyond memory (``AuditLog.to_jsonl`` writes it out),
expiry of pending requests, and policies that need state beyond the call itself.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from course.records import Record, json_safe
from course.tools.registry import (
    REFUSALS,
    RISK_CLASSES,
    Overran,
    ToolRegistry,
    ToolResult,
    ToolStatus,
    call_within,
)

__all__ = ["CONFIRM_TIMEOUT", "POLICY_TIMEOUT", "AuditLog", "AuditRecord",
           "ConfirmationRequest", "Policy", "ToolGateway"]

_request_ids = itertools.count(1)

#: How long a policy rule may take (seconds): a rule still running then vetoes the call.
POLICY_TIMEOUT = 5.0
#: How long a ``confirm`` callback may take (seconds): no answer by then is a denial.
CONFIRM_TIMEOUT = 300.0


@dataclass
class ConfirmationRequest:
    """A critical call held until a human approves or denies it."""

    request_id: str
    subject: str
    tool: str
    arguments: dict[str, Any]
    risk: str


@dataclass(frozen=True)
class Policy:
    """A deterministic veto: ``rule(tool, arguments)`` returns a reason to refuse, or ``None``.

    ``tools`` limits the policy to some tool names (empty: every tool). The rule is ordinary
    code, so the same call is refused every time, whatever the model says. A rule that raises
    vetoes the call (fail closed).
    """

    name: str
    rule: Callable[[str, dict[str, Any]], str | None]
    tools: tuple[str, ...] = ()

    def veto(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """The reason this call is forbidden, or ``None`` when the policy lets it pass."""
        if self.tools and tool not in self.tools:
            return None
        return self.rule(tool, arguments)


@dataclass
class AuditRecord:
    """One decision of the gateway: who asked for what, and what happened."""

    seq: int
    subject: str
    tool: str
    risk: str
    arguments: dict[str, Any]
    decision: str  # allowed | refused | vetoed | needs_confirmation | confirmed | denied
    status: str  # the ToolResult's ToolStatus value ("ok", "not_allowed", ...)
    message: str
    approver: str = ""
    timestamp: float = 0.0

    def line(self) -> str:
        """One readable line for a table or a log."""
        who = f" by {self.approver}" if self.approver else ""
        return (f"#{self.seq} {self.subject:<16} {self.tool:<16} {self.risk:<8} "
                f"{self.decision + who:<24} {self.status}")


@dataclass
class AuditLog(Record):
    """Every decision the gateway made, in order (displayed: the table, and its records as values)."""

    records: list[AuditRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _exported: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def add(self, record: AuditRecord) -> None:
        """Append one decision and number it (LangGraph's ToolNode runs calls in threads)."""
        with self._lock:
            record.seq = len(self.records) + 1
            self.records.append(record)

    def decisions(self) -> list[str]:
        """The decision of every record, in order (handy in tests)."""
        return [r.decision for r in self.records]

    def to_jsonl(self, path: str | Path) -> Path:
        """Append the log to ``path`` as JSON lines (one record a line) and return the path.

        An existing file is never overwritten: records are appended after what it holds, and a
        second call with the same path appends only the records added since the first. A
        value JSON cannot hold (a 5,000-digit integer, an object, a structure nested too deep)
        is written as a marked string (``"<not JSON: ...>"``) and the record gets
        ``"export_note"``; every other record is written as it is. A folder, or a file that
        cannot be written, raises ``OSError`` naming the path and the fix.
        """
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(
                f"{path} is a folder: give AuditLog.to_jsonl a file name, e.g. "
                f"{path / 'audit.jsonl'}")
        key = str(path.resolve())
        with self._lock:
            records = self.records[self._exported.get(key, 0):]
            lines = "".join(_record_line(r) + "\n" for r in records)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a+b") as f:
                    f.seek(0, 2)
                    if f.tell():  # a file that does not end its last line: end it first
                        f.seek(-1, 2)
                        if f.read(1) != b"\n":
                            lines = "\n" + lines
                    f.write(lines.encode("utf-8"))
            except OSError as err:
                raise type(err)(err.errno, f"cannot append the audit log to {path} "
                                f"({err.strerror}): give AuditLog.to_jsonl a file name in a "
                                "folder you can write to") from err
            self._exported[key] = self._exported.get(key, 0) + len(records)
        return path

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __str__(self) -> str:
        header = f"{'#':<3}{'subject':<17}{'tool':<17}{'risk':<9}{'decision':<25}status"
        return "\n".join([header] + [r.line() for r in self.records])

    def __repr__(self) -> str:
        return f"AuditLog({len(self.records)} records)\n{self}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def record(self) -> dict[str, Any]:
        return {"records": [json_safe(r) for r in self.records]}


_MAX_DEPTH = 50


def _json_safe(value: Any, depth: int = 0) -> tuple[Any, list[str]]:
    """``value`` with everything JSON cannot hold replaced by a marked string, and what was."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value, []
    if isinstance(value, int):
        try:
            str(value)
            return value, []
        except ValueError:  # over Python's limit for int -> str (4,300 digits)
            digits = int(value.bit_length() * 0.30103) + 1
            return f"<not JSON: int of about {digits} digits, hex {value:#x}>", [
                f"an int of about {digits} digits"]
    if depth >= _MAX_DEPTH:
        return f"<not JSON: nested deeper than {_MAX_DEPTH} levels>", ["a structure nested "
                                                                         "too deep"]
    if isinstance(value, dict):
        out, notes = {}, []
        for k, v in value.items():
            safe, more = _json_safe(v, depth + 1)
            out[k if isinstance(k, str) else repr(k)] = safe
            notes += more
        return out, notes
    if isinstance(value, (list, tuple)):
        out_list, notes = [], []
        for v in value:
            safe, more = _json_safe(v, depth + 1)
            out_list.append(safe)
            notes += more
        return out_list, notes
    try:
        text = str(value)
    except Exception:  # an object whose __str__ raises
        text = object.__repr__(value)
    return f"<not JSON: {type(value).__name__}: {text[:200]}>", [type(value).__name__]


def _record_line(record: AuditRecord) -> str:
    """One record as one JSON line; what JSON cannot hold is marked, never fatal."""
    data = {f.name: getattr(record, f.name) for f in fields(record)}
    try:
        return json.dumps(data, default=str)
    except Exception:  # a huge int, a cycle, a __str__ that raises...
        safe, notes = _json_safe(data)
        safe["export_note"] = ("written as marked strings (not JSON): "
                               + ", ".join(dict.fromkeys(notes)))
        return json.dumps(safe)


class ToolGateway:
    """The registry's door with a subject, risk classes, vetoes, confirmation and an audit record.

    ``grants`` maps a subject to the risk classes it may use, e.g.
    ``{"agent:support": {"read", "write"}, "human:dana": {"read", "write", "critical"}}``;
    a subject not listed may use nothing. ``policies`` are checked after the grant and before
    confirmation: a vetoed call is never offered to a human. A tool that requires confirmation
    is not run by :meth:`execute`: it becomes a pending :class:`ConfirmationRequest` and the
    model gets a "needs confirmation" result; :meth:`approve` (a human) runs it, :meth:`deny`
    declines it. With ``confirm`` (a callable shown the request, returning True/False),
    :meth:`execute` asks at once; a callback that raises counts as a denial (the request does
    not stay pending) and the audit says why.

    Nothing the gateway adds waits without a bound: a policy rule gets ``policy_timeout``
    seconds (default :data:`POLICY_TIMEOUT`; one still running then vetoes the call), a
    ``confirm`` callback gets ``confirm_timeout`` seconds (default :data:`CONFIRM_TIMEOUT`; no
    answer by then is a denial that says so). The tool runs as the registry runs it: inline, or
    within the ``timeout`` it was registered with.
    ``subject`` must be a string (``"agent:support"``); anything else is a ``TypeError``.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        grants: Mapping[str, Iterable[str]],
        confirm: Callable[[ConfirmationRequest], bool] | None = None,
        approver: str = "human",
        policies: Iterable[Policy] = (),
        *,
        policy_timeout: float = POLICY_TIMEOUT,
        confirm_timeout: float = CONFIRM_TIMEOUT,
    ):
        for label, value in (("policy_timeout", policy_timeout),
                             ("confirm_timeout", confirm_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0 < value < float("inf")):
                raise ValueError(f"{label} must be a positive number of seconds, got {value!r}; "
                                 f"fix: ToolGateway(..., {label}=5)")
        self.policy_timeout = float(policy_timeout)
        self.confirm_timeout = float(confirm_timeout)
        self.registry = registry
        self.confirm = confirm
        self.approver = approver
        self.policies = list(policies)
        if not isinstance(grants, Mapping):
            raise TypeError(f"grants must map each subject to a set of risk class names, got "
                            f"{type(grants).__name__} {grants!r:.80}; fix: "
                            'grants={"agent:support": {"read"}}')
        for subject, classes in grants.items():
            if not isinstance(subject, str):
                raise TypeError(f"grants name a subject {subject!r} that is not a string; fix: "
                                'grants={"agent:support": {"read"}}')
            if isinstance(classes, (str, bytes)) or not isinstance(classes, Iterable):
                example = classes if classes in RISK_CLASSES else "read"
                split = " (a string is not split into names)" if isinstance(
                    classes, (str, bytes)) else ""
                raise TypeError(
                    f"grants for {subject!r} is {type(classes).__name__} {classes!r:.80}, but "
                    f"grants are a set of risk class names per subject{split}; fix: "
                    f"grants={{{subject!r}: {{{example!r}}}}}")
        self.grants = {subject: set(classes) for subject, classes in grants.items()}
        for subject, classes in self.grants.items():
            bad = classes - set(RISK_CLASSES)
            if bad:
                raise ValueError(f"grants for {subject!r} name unknown risk classes {sorted(bad)}")
        self.audit = AuditLog()
        self._pending: dict[str, ConfirmationRequest] = {}

    @property
    def pending(self) -> list[ConfirmationRequest]:
        """Confirmation requests waiting for a human."""
        return list(self._pending.values())

    def _record(self, subject: str, tool: str, risk: str, arguments: dict[str, Any],
                decision: str, result: ToolResult, approver: str = "") -> ToolResult:
        self.audit.add(AuditRecord(0, subject, tool, risk, arguments,
                                   decision, result.status, result.content, approver,
                                   time.time()))
        return result

    def execute(self, name: Any, arguments: Any = None, *, subject: str) -> ToolResult:
        """Check the door, the subject's grant, the policies and confirmation; run or refuse.

        The door checks the call once (:meth:`ToolRegistry.check`); an allowed call then runs
        with :meth:`ToolRegistry.run`, without a second check. ``subject`` that is not a
        string (``["agent"]``, say) raises ``TypeError`` naming it: who asks is the caller's
        statement, and a wrong one is a bug in the caller, not a refusal for the model.
        """
        if not isinstance(subject, str):
            raise TypeError(f"subject must be a string such as 'agent:support', got "
                            f"{type(subject).__name__} {subject!r}; fix: "
                            f"execute(..., subject={_subject_hint(subject)!r})")
        checked = self.registry.check(name, arguments)
        if isinstance(checked, ToolResult):
            risk = self.registry.spec(name).risk if name in self.registry else "?"
            return self._record(subject, checked.tool, risk, checked.arguments, "refused", checked)
        spec, args_record = checked.spec, checked.arguments
        if spec.risk not in self.grants.get(subject, set()):
            message = REFUSALS[ToolStatus.SUBJECT_NOT_PERMITTED].format(
                subject=subject, risk=spec.risk, tool=name)
            result = ToolResult(name, args_record, ToolStatus.SUBJECT_NOT_PERMITTED, message)
            return self._record(subject, name, spec.risk, args_record, "refused", result)
        for policy in self.policies:
            try:
                reason = call_within(self.policy_timeout, policy.veto, name, args_record,
                                     thread_name=f"policy-{policy.name}")
            except Overran:  # a rule that does not answer fails closed, never a hang
                reason = (f"the policy did not answer within {self.policy_timeout:g} s "
                          "(POLICY_TIMEOUT), so the call is refused")
            except Exception as err:  # a broken policy fails closed: the call does not run
                reason = f"the policy itself failed ({type(err).__name__}), so the call is refused"
            if reason:
                message = REFUSALS[ToolStatus.VETOED].format(policy=policy.name, tool=name,
                                                             reason=reason)
                result = ToolResult(name, args_record, ToolStatus.VETOED, message)
                return self._record(subject, name, spec.risk, args_record, "vetoed", result)
        if not spec.requires_confirmation:
            result = self.registry.run(checked)
            return self._record(subject, name, spec.risk, args_record, "allowed", result)
        request = ConfirmationRequest(f"c{next(_request_ids)}", subject, name,
                                      args_record, spec.risk)
        self._pending[request.request_id] = request
        message = REFUSALS[ToolStatus.NEEDS_CONFIRMATION].format(
            tool=name, risk=spec.risk, request_id=request.request_id)
        result = ToolResult(name, args_record, ToolStatus.NEEDS_CONFIRMATION, message)
        self._record(subject, name, spec.risk, args_record, "needs_confirmation", result)
        if self.confirm is None:
            return result
        try:
            approved = call_within(self.confirm_timeout, self.confirm, request,
                                   thread_name=f"confirm-{request.request_id}") is True
        except Overran:  # nobody answered in time: a "no" that says so, never a hang
            return self.deny(request.request_id,
                             f"{self.approver} (no answer within {self.confirm_timeout:g} s, "
                             "CONFIRM_TIMEOUT)")
        except Exception as err:  # a broken approval channel is a "no", never a hang
            return self.deny(request.request_id,
                             f"{self.approver} (confirm callback failed: {type(err).__name__})")
        if approved:
            return self.approve(request.request_id, self.approver)
        return self.deny(request.request_id, self.approver)

    def _take(self, request_id: str) -> ConfirmationRequest:
        if request_id not in self._pending:
            raise KeyError(f"no pending confirmation request {request_id!r}; "
                           f"pending: {sorted(self._pending)}")
        return self._pending.pop(request_id)

    def approve(self, request_id: str, approver: str) -> ToolResult:
        """A human approves a pending request: the call goes through the door now, audited."""
        request = self._take(request_id)
        result = self.registry.run(self.registry.check(request.tool, request.arguments),
                                   confirmed_by=approver or "human")
        return self._record(request.subject, request.tool, request.risk, request.arguments,
                            "confirmed", result, approver)

    def deny(self, request_id: str, approver: str) -> ToolResult:
        """A human declines a pending request: the model is told it was declined."""
        request = self._take(request_id)
        message = REFUSALS[ToolStatus.CONFIRMATION_DENIED].format(
            approver=approver, request_id=request_id, tool=request.tool)
        result = ToolResult(request.tool, request.arguments, ToolStatus.CONFIRMATION_DENIED,
                            message)
        return self._record(request.subject, request.tool, request.risk, request.arguments,
                            "denied", result, approver)


def _subject_hint(subject: Any) -> str:
    """A string subject to suggest for a wrong one (``["agent"]`` -> ``"agent"``)."""
    if isinstance(subject, (list, tuple)) and len(subject) == 1 and isinstance(subject[0], str):
        return subject[0]
    return "agent:support"
