"""Served models: an OpenAI-compatible server named by ``COURSE_MODEL``, asked within a bound.

A server setting (``http://HOST:PORT/v1#model``) is asked ``GET /models`` for its model ids
(:func:`server_models`, :func:`served_model_name`), and chat calls go through the client
libraries (openai, under LangChain and smolagents) with their own knobs: an ``httpx.Timeout``
per attempt and openai's ``max_retries``. ``COURSE_SERVER_TIMEOUT`` (default 60 s) bounds one
call, its retry included (:class:`CallBudget`): each of the two attempts gets 45% of it, and a
server that asks to be retried later is waited for only up to 10% of it. httpx's timeouts bound
each read; :class:`RequestDeadline` bounds a whole request, so a server that trickles its answer
a byte at a time is cut too. Whatever goes wrong reaches the student as one :class:`ServerError`
naming the setting, what happened and the fix (:func:`server_errors`, the one place that reads
httpx's and openai's errors).

What this module does not handle: starting a server, API keys (``api_key=`` is passed through),
HTTP/2, or a stream that has already shown part of its answer (it is not retried).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from course.settings import MODEL_SETTING, CourseSettingError, ModelChoice

SERVER_TIMEOUT_S = 3.0  # GET /models: a server that is up answers at once
REQUEST_TIMEOUT_SETTING = "COURSE_SERVER_TIMEOUT"
REQUEST_TIMEOUT_S = 60.0  # one chat call to a server, its retry included
MAX_REQUEST_TIMEOUT_S = 3600.0
REQUEST_RETRIES = 1  # openai's max_retries: one more attempt after a failed one
ATTEMPT_SHARE = 0.45  # of the call's time, for each of the 1 + REQUEST_RETRIES attempts
WAIT_SHARE = 0.10  # of the call's time, the longest Retry-After a call waits for

FIX = (f"Fix: start the server (or wait until it has loaded the model), check the URL and port "
       f"(it usually ends in /v1) and the '#model-name', raise {REQUEST_TIMEOUT_SETTING} for a "
       f"slow server, or unset {MODEL_SETTING} to use the bundled model.")


class ServerError(CourseSettingError):
    """A server named by ``COURSE_MODEL`` failed a request; the message says what and the fix."""


def server_error(choice: ModelChoice, what: str) -> ServerError:
    """The one error for a server that fails (listing models or answering a chat request)."""
    return ServerError(f"{MODEL_SETTING}={choice.shown!r}: {what}. {FIX}")


def request_timeout() -> float:
    """``COURSE_SERVER_TIMEOUT`` in seconds (default 60); a value that cannot work is refused."""
    raw = os.environ.get(REQUEST_TIMEOUT_SETTING, "").strip()
    if not raw:
        return REQUEST_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_REQUEST_TIMEOUT_S:  # also refuses nan and inf
        raise CourseSettingError(
            f"{REQUEST_TIMEOUT_SETTING}={raw[:40]!r} is not a request timeout. Fix: set it to a "
            f"number of seconds above 0 and at most {MAX_REQUEST_TIMEOUT_S:.0f} (e.g. 60), or "
            "unset it for the default of 60 s.")
    return value


@dataclass(frozen=True)
class CallBudget:
    """How one chat call spends ``seconds`` (``COURSE_SERVER_TIMEOUT``): two attempts of
    :data:`ATTEMPT_SHARE` each, and at most :data:`WAIT_SHARE` waiting for a Retry-After.
    openai's own pause before a retry, without a Retry-After, is under a second."""

    seconds: float = REQUEST_TIMEOUT_S

    @property
    def attempt(self) -> float:
        """Seconds one HTTP request may take: connect, wait, and the whole answer."""
        return self.seconds * ATTEMPT_SHARE

    @property
    def longest_wait(self) -> float:
        """The longest Retry-After a call waits for before its retry."""
        return self.seconds * WAIT_SHARE


# --- the bound on one HTTP request ---------------------------------------------------------------

def _thread_timer(delay: float, action: Callable[..., None], *args: Any) -> threading.Timer:
    timer = threading.Timer(delay, action, args)
    timer.daemon = True
    timer.start()
    return timer


class RequestDeadline:
    """The end of one HTTP request, however slowly its bytes arrive.

    httpx's timeouts bound each read, so a server that sends a byte a second never trips them.
    This bounds the whole request, through httpcore's ``trace`` extension: when the request has
    connected, a timer is set to shut its socket down ``seconds`` after the request started; the
    read in progress then returns at once, and reading the answer ends in ``ReadTimeout`` (not
    in an answer cut short). The clients of :func:`http_client` keep no connection alive, so
    every request connects its own socket and no other request shares it.
    """

    def __init__(self, request: Any, seconds: float, asynchronous: bool = False) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.timer: Any = None
        self.passed = False
        request.extensions["trace"] = self.atrace if asynchronous else self.trace

    def trace(self, event: str, info: dict) -> None:
        self._follow(event, info, _thread_timer)

    async def atrace(self, event: str, info: dict) -> None:
        import asyncio

        self._follow(event, info, asyncio.get_running_loop().call_later)

    def _follow(self, event: str, info: dict, call_later: Callable[..., Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.stop()
            sock = info["return_value"].get_extra_info("socket")
            if sock is not None:
                left = max(0.0, self.deadline - time.monotonic())
                self.timer = call_later(left, self.cut, sock)
        elif event.startswith("http11.receive_response") and self.passed:
            import httpcore

            raise httpcore.ReadTimeout(f"no complete answer within {self.seconds:g} s")
        elif event.endswith(".response_closed.complete"):
            self.stop()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def cut(self, sock: socket.socket) -> None:
        self.passed = True
        with contextlib.suppress(OSError):  # already closed: nothing to cut
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS


def retry_after(response: Any) -> float | None:
    """The seconds a response's ``Retry-After`` header asks for, or None."""
    raw = (getattr(response, "headers", None) or {}).get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def http_client(seconds: float, longest_wait: float | None = None, asynchronous: bool = False):
    """An httpx client whose every request ends within ``seconds`` (``httpx.Timeout`` for each
    read, :class:`RequestDeadline` for the whole request). A failed response that asks to retry
    after more than ``longest_wait`` seconds raises ``httpx.HTTPStatusError`` at once, so
    openai does not wait for it (openai waits up to two minutes)."""
    import httpx

    def too_long(response: httpx.Response) -> bool:
        wait = retry_after(response)
        return (longest_wait is not None and response.is_error and wait is not None
                and wait > longest_wait)

    options: dict[str, Any] = {"timeout": httpx.Timeout(seconds),
                               "limits": httpx.Limits(max_keepalive_connections=0)}
    if asynchronous:
        async def on_request(request: httpx.Request) -> None:
            RequestDeadline(request, seconds, asynchronous=True)

        async def on_response(response: httpx.Response) -> None:
            if too_long(response):
                response.raise_for_status()

        return httpx.AsyncClient(**options, event_hooks={"request": [on_request],
                                                         "response": [on_response]})

    def on_request_sync(request: httpx.Request) -> None:
        RequestDeadline(request, seconds)

    def on_response_sync(response: httpx.Response) -> None:
        if too_long(response):
            response.raise_for_status()

    return httpx.Client(**options, event_hooks={"request": [on_request_sync],
                                                "response": [on_response_sync]})


# --- what the server lists -----------------------------------------------------------------------


def server_models(choice: ModelChoice, timeout: float = SERVER_TIMEOUT_S) -> list[str]:
    """The model ids ``GET <url>/models`` lists; CourseSettingError for anything else."""
    import httpx

    try:
        with http_client(timeout) as client:
            response = client.get(f"{choice.value}/models")
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as err:
        raise server_error(choice, f"the server did not answer GET /models within "
                                   f"{timeout:.0f} s ({err})") from err
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(
            isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"] for m in data):
        raise server_error(choice, "GET /models did not answer an OpenAI model list "
                                   f"({{'data': [{{'id': ...}}]}}), got {str(body)[:120]!r}")
    return [m["id"] for m in data]


def served_model_name(choice: ModelChoice) -> str:
    """The served model name: from the setting, or the first one ``GET /models`` lists.

    Asked once per server setting in a kernel: the chat model, its token counter and the
    smolagents model share the answer (a failed look-up is not kept, so it is asked again).
    """
    if choice.served_model:
        return choice.served_model
    return _first_served_model(choice)


@lru_cache(maxsize=8)
def _first_served_model(choice: ModelChoice) -> str:
    ids = server_models(choice)
    if not ids:
        raise server_error(choice, "the server lists no models")
    return ids[0]


# --- the libraries' errors as the course's -------------------------------------------------------

_STATUS_WORDS = {401: "401 Unauthorized (the server wants an API key: set OPENAI_API_KEY or "
                      "pass api_key=...)",
                 403: "403 Forbidden", 404: "404 Not Found (wrong URL, or no such model)",
                 429: "429 Too Many Requests"}

NOT_A_STREAM = ("the answer to a streaming request is not a stream of OpenAI chat completion "
                "chunks: no 'data:' event held a reply (the body is not server-sent events, or "
                "every event's 'choices' list is empty)")


def _status(err: Any, budget: CallBudget) -> str:
    response = err.response
    words = _STATUS_WORDS.get(response.status_code, f"HTTP {response.status_code}")
    wait = retry_after(response)
    if wait is not None and wait > budget.longest_wait:
        words += (f"; it asks to retry after {wait:g} s, longer than the {budget.longest_wait:g} s "
                  f"a call waits ({REQUEST_TIMEOUT_SETTING}={budget.seconds:g} s), so it was not "
                  "waited for")
    detail = getattr(err, "message", None)  # openai's: the server's own words
    return f"the server answered {words}" + (f": {str(detail)[:160]!r}" if detail else "")


def explain(choice: ModelChoice, budget: CallBudget, err: BaseException) -> BaseException:
    """The :class:`ServerError` that ``err`` means (raised by httpx, openai, or a library reading
    the answer); any other error is returned unchanged."""
    import asyncio
    import json

    import httpx
    import openai

    def failed(what: str) -> ServerError:
        return server_error(choice, f"the chat request failed: {what}")

    if isinstance(err, ServerError):
        return err
    if isinstance(err, (openai.APIStatusError, httpx.HTTPStatusError)):
        return failed(_status(err, budget))
    if isinstance(err, (openai.APITimeoutError, httpx.TimeoutException, TimeoutError,
                        asyncio.TimeoutError)):
        return failed(f"timeout: no complete answer within {budget.attempt:g} s, "
                      f"{1 + REQUEST_RETRIES} attempts ({REQUEST_TIMEOUT_SETTING}="
                      f"{budget.seconds:g} s bounds the call)")
    if isinstance(err, (openai.APIConnectionError, httpx.TransportError)):
        cause = err.__cause__ or err
        return failed(f"connection refused or lost, no server answered "
                      f"({type(cause).__name__}: {str(cause)[:120]})")
    if isinstance(err, json.JSONDecodeError):
        return failed("the body is not JSON, so not an OpenAI chat completion")
    if isinstance(err, (IndexError, KeyError, TypeError, AttributeError, ValueError)):
        return failed("the answer is not an OpenAI chat completion (empty or missing "
                      f"'choices'?): {type(err).__name__}: {str(err)[:120]}")
    return err


@contextlib.contextmanager
def server_errors(choice: ModelChoice, budget: CallBudget) -> Iterator[None]:
    """Around a call to a served model: its failure leaves as one :class:`ServerError`."""
    try:
        yield
    except Exception as err:
        course_error = explain(choice, budget, err)
        if course_error is err:
            raise
        raise course_error from err


def has_reply(choice: ModelChoice, result: Any) -> Any:
    """``result`` (a LangChain ChatResult) when it holds a reply, else the ServerError."""
    if not getattr(result, "generations", None):
        raise server_error(choice, "the chat request failed: the answer is not an OpenAI chat "
                                   "completion: its 'choices' list is empty, so there is no reply")
    return result


def replies(choice: ModelChoice, chunks: Iterator[Any],
            is_reply: Callable[[Any], bool]) -> Iterator[Any]:
    """``chunks`` as they come; a stream in which none ``is_reply`` is a ServerError."""
    replied = False
    for chunk in chunks:
        replied = replied or is_reply(chunk)
        yield chunk
    if not replied:
        raise server_error(choice, f"the chat request failed: {NOT_A_STREAM}")


async def areplies(choice: ModelChoice, chunks: AsyncIterator[Any],
                   is_reply: Callable[[Any], bool]) -> AsyncIterator[Any]:
    """:func:`replies` for an async stream."""
    replied = False
    async for chunk in chunks:
        replied = replied or is_reply(chunk)
        yield chunk
    if not replied:
        raise server_error(choice, f"the chat request failed: {NOT_A_STREAM}")
