"""Misbehaving OpenAI-compatible servers on loopback reach the student as one course error.

Each server in the table runs on 127.0.0.1 in a thread. Both builders (LangChain's
``chat_model()`` and ``smolagents_model()``), with ``COURSE_SERVER_TIMEOUT=2`` (1 for the
servers that only a timeout ends), must raise
:class:`course.models.ServerError` (a ``CourseSettingError``) naming ``COURSE_MODEL``, what
happened and a fix, within a bound; a well-behaved server still answers through both; the
doctor's ``GET /models`` ends in about 3 s against a server that trickles its body.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from course import models
from course.settings import CourseSettingError, active_model

BOUND_S = 8.0  # COURSE_SERVER_TIMEOUT=2 (or 1), one retry: a failure in seconds, never minutes
TIMED_OUT = {"silent", "trickle", "trickle-headers", "stall"}  # end only when the budget does:
# COURSE_SERVER_TIMEOUT=1 cuts them as surely as 2 does; a server that answers keeps 2, so its
# answer arrives within an attempt (0.9 s) on a loaded machine

COMPLETION = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "hello from the server"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
}


def _chunk(delta: dict | None, finish: str | None = None, choices: bool = True,
           usage: dict | None = None) -> bytes:
    """One server-sent event of an OpenAI chat completion stream."""
    event = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []}
    if usage:
        event["usage"] = usage
    return b"data: " + json.dumps(event).encode() + b"\n\n"


STREAM = (_chunk({"role": "assistant", "content": ""}) + _chunk({"content": "hello from "})
          + _chunk({"content": "the server"}) + _chunk({}, "stop")
          + _chunk(None, choices=False, usage=COMPLETION["usage"]) + b"data: [DONE]\n\n")
EMPTY_STREAM = (_chunk(None, choices=False) * 3
                + _chunk(None, choices=False, usage=COMPLETION["usage"]) + b"data: [DONE]\n\n")


def _handler(behaviour: str):
    class Handler(BaseHTTPRequestHandler):
        streaming = False  # the request asked for "stream": true

        def log_message(self, *_):
            pass

        def _events(self, body: bytes, per_byte: float = 0.0, stall_after: int = 0) -> None:
            """Send ``body`` as server-sent events, a byte every ``per_byte`` s, or stall
            (send nothing more until the server stops) after ``stall_after`` bytes."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            try:
                if stall_after:
                    self.wfile.write(body[:stall_after])
                    self.wfile.flush()
                    self.server.stopping.wait(60)
                    return
                for index in range(len(body)):
                    if self.server.stopping.is_set():
                        return
                    self.wfile.write(body[index:index + 1])
                    self.wfile.flush()
                    if per_byte:
                        time.sleep(per_byte)
            except OSError:
                return

        def _reply(self, status: int, body: bytes, ctype: str = "application/json",
                   headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _answer(self) -> None:
            if self.streaming and behaviour in ("ok", "empty-choices", "trickle", "stall",
                                                "sse-not-json"):
                body = {"ok": STREAM, "empty-choices": EMPTY_STREAM, "trickle": STREAM,
                        "stall": STREAM, "sse-not-json": b"data: <html>no</html>\n\n"}[behaviour]
                self._events(body, per_byte=1.0 if behaviour == "trickle" else 0.0,
                             stall_after=len(_chunk({"role": "assistant", "content": ""})
                                             + _chunk({"content": "hello from "}))
                             if behaviour == "stall" else 0)
            elif behaviour == "ok":
                body = COMPLETION if self.command == "POST" else {
                    "object": "list", "data": [{"id": "m"}]}
                self._reply(200, json.dumps(body).encode())
            elif behaviour in ("500", "401", "404"):
                self._reply(int(behaviour), json.dumps({"error": {"message": "no"}}).encode())
            elif behaviour == "not-json":
                self._reply(200, b"<html>this is not json</html>")
            elif behaviour == "empty-choices":
                self._reply(200, json.dumps({**COMPLETION, "choices": []}).encode())
            elif behaviour == "429":
                self._reply(429, json.dumps({"error": {"message": "slow down"}}).encode(),
                            headers={"Retry-After": "50"})
            elif behaviour == "trickle-headers":
                head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"X-Slow: " + b"a" * 60 + b"\r\n\r\n")
                try:
                    for index in range(len(head)):
                        if self.server.stopping.is_set():
                            return
                        self.wfile.write(head[index:index + 1])
                        self.wfile.flush()
                        time.sleep(1)
                except OSError:
                    return
            elif behaviour == "trickle":
                body = json.dumps(COMPLETION).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.flush()
                try:
                    for index in range(len(body)):
                        if self.server.stopping.is_set():
                            return
                        self.wfile.write(body[index:index + 1])
                        self.wfile.flush()
                        time.sleep(1)
                except OSError:
                    return

        def do_GET(self):
            self._answer()

        def do_POST(self):
            request = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                self.streaming = bool(json.loads(request).get("stream"))
            except (ValueError, AttributeError):
                self.streaming = False
            self._answer()

    return Handler


@pytest.fixture(scope="module", autouse=True)
def _imported():
    """The client libraries imported before any clock starts: only the server is timed."""
    import course.models.for_langchain
    import course.models.for_smolagents  # noqa: F401


@pytest.fixture
def server(monkeypatch):
    """Start a server with a behaviour; returns its ``COURSE_MODEL`` URL (with ``#m``)."""
    stops = []

    def start(behaviour: str) -> str:
        monkeypatch.setenv("COURSE_SERVER_TIMEOUT", "1" if behaviour in TIMED_OUT else "2")
        if behaviour == "closed":
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            sock.close()  # nothing listens there
        elif behaviour == "silent":
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(8)  # accepts (the kernel does) and never answers
            port = sock.getsockname()[1]
            stops.append(sock.close)
        else:
            httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
            httpd.daemon_threads = True
            httpd.stopping = threading.Event()
            # a short poll: shutdown() waits for the loop's next look (0.5 s by default)
            threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
            port = httpd.server_port

            def stop(httpd=httpd):
                httpd.stopping.set()
                httpd.shutdown()
                httpd.server_close()

            stops.append(stop)
        url = f"http://127.0.0.1:{port}/v1"
        monkeypatch.setenv("COURSE_MODEL", url + "#m")
        return url

    yield start
    for stop in stops:
        stop()


def _langchain():
    models.chat_model(custom_get_token_ids=lambda text: []).invoke("hi")


def _smolagents():
    from smolagents.models import ChatMessage, MessageRole

    models.smolagents_model().generate(
        [ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": "hi"}])])


CASES = [  # behaviour, what the message must say, the kind a failure would be
    ("closed", r"connection refused", "raw crash"),
    ("silent", r"timeout", "hang"),
    ("500", r"HTTP 500", "raw crash"),
    ("401", r"401 Unauthorized", "raw crash"),
    ("404", r"404 Not Found", "raw crash"),
    ("not-json", r"not JSON|not an OpenAI chat completion", "raw crash"),
    ("empty-choices", r"not an OpenAI chat completion.*choices", "raw crash"),
    ("trickle", r"timeout", "hang"),
    ("trickle-headers", r"timeout", "hang"),
    ("429", r"429.*retry after 50 s", "hang"),
]


@pytest.mark.parametrize("call", [_langchain, _smolagents], ids=["langchain", "smolagents"])
@pytest.mark.parametrize(("behaviour", "what"), [
    pytest.param(b, w, marks=pytest.mark.contract(k), id=b) for b, w, k in CASES])
def test_a_misbehaving_server_is_one_course_error(server, behaviour, what, call):
    url = server(behaviour)
    start = time.monotonic()
    with pytest.raises(models.ServerError) as caught:
        call()
    elapsed = time.monotonic() - start
    message = str(caught.value)
    assert isinstance(caught.value, CourseSettingError)
    assert f"COURSE_MODEL={url!r}" in message
    assert "Fix:" in message
    assert pytest.importorskip("re").search(what, message), message
    assert elapsed < BOUND_S, f"{behaviour}: {elapsed:.1f} s"


@pytest.mark.contract("hang")
def test_the_langchain_async_path_is_the_same_error(server):
    import asyncio

    url = server("trickle")
    chat = models.chat_model(custom_get_token_ids=lambda text: [])
    start = time.monotonic()
    with pytest.raises(models.ServerError, match=r"timeout") as caught:
        asyncio.run(chat.ainvoke("hi"))
    assert url in str(caught.value) and time.monotonic() - start < BOUND_S


@pytest.mark.contract("wrong result")
def test_a_working_server_still_answers_through_both(server):
    server("ok")
    reply = models.chat_model(custom_get_token_ids=lambda text: []).invoke("hi")
    assert reply.content == "hello from the server"
    from smolagents.models import ChatMessage, MessageRole

    answer = models.smolagents_model().generate(
        [ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": "hi"}])])
    assert answer.content == "hello from the server"


@pytest.mark.contract("wrong result")
def test_a_password_in_the_url_is_not_shown(server, monkeypatch):
    url = server("500")
    secret = url.replace("http://", "http://user:s3cret@")
    monkeypatch.setenv("COURSE_MODEL", secret + "#m")
    with pytest.raises(models.ServerError) as caught:
        _langchain()
    assert "s3cret" not in str(caught.value) and "COURSE_MODEL=" in str(caught.value)


@pytest.mark.contract("hang")
@pytest.mark.parametrize("behaviour", ["trickle", "trickle-headers"])
def test_the_doctor_check_of_a_trickling_server_is_bounded(server, monkeypatch, behaviour):
    url = server(behaviour)
    monkeypatch.setenv("COURSE_MODEL", url)  # no '#m': the doctor asks GET /models
    models.placement()  # torch imported before the clock starts: only the server is timed
    start = time.monotonic()
    with pytest.raises(CourseSettingError, match=r"COURSE_MODEL.*GET /models.*Fix"):
        models.server_models(active_model())
    assert time.monotonic() - start < models.SERVER_TIMEOUT_S + 1.5
    start = time.monotonic()
    report = models.describe_models()
    elapsed = time.monotonic() - start
    assert not report.ok and not report.server_answers
    assert "COURSE_MODEL" in report.problem and "Fix:" in report.problem
    assert elapsed < 5.0, f"{elapsed:.1f} s"


# --- streaming: .stream / .astream and smolagents' generate_stream -----------------------------

def _text(chunk) -> str:
    return chunk.content if isinstance(chunk.content, str) else ""


def _langchain_stream():
    chat = models.chat_model(custom_get_token_ids=lambda text: [])
    return "".join(_text(chunk) for chunk in chat.stream("hi"))


def _langchain_astream():
    import asyncio

    async def collect():
        chat = models.chat_model(custom_get_token_ids=lambda text: [])
        return "".join([_text(chunk) async for chunk in chat.astream("hi")])

    return asyncio.run(collect())


def _smolagents_stream():
    from smolagents.models import ChatMessage, MessageRole

    deltas = models.smolagents_model().generate_stream(
        [ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": "hi"}])])
    return "".join(delta.content or "" for delta in deltas)


STREAM_CALLS = [_langchain_stream, _langchain_astream, _smolagents_stream]
STREAM_IDS = ["langchain-stream", "langchain-astream", "smolagents-stream"]
STREAM_CASES = [  # behaviour, what the message must say, the kind a failure would be
    ("closed", r"connection refused", "raw crash"),
    ("silent", r"timeout", "hang"),
    ("500", r"HTTP 500", "raw crash"),
    ("401", r"401 Unauthorized", "raw crash"),
    ("404", r"404 Not Found", "raw crash"),
    ("not-json", r"not a stream of OpenAI chat completion chunks", "wrong result"),
    ("sse-not-json", r"not JSON", "raw crash"),
    ("empty-choices", r"not a stream of OpenAI chat completion chunks.*choices", "wrong result"),
    ("trickle", r"timeout", "hang"),
    ("trickle-headers", r"timeout", "hang"),
    ("stall", r"timeout", "hang"),
    ("429", r"429.*retry after 50 s", "hang"),
]


@pytest.mark.parametrize("call", STREAM_CALLS, ids=STREAM_IDS)
@pytest.mark.parametrize(("behaviour", "what"), [
    pytest.param(b, w, marks=pytest.mark.contract(k), id=b) for b, w, k in STREAM_CASES])
def test_a_misbehaving_server_streams_one_course_error(server, behaviour, what, call):
    url = server(behaviour)
    start = time.monotonic()
    with pytest.raises(models.ServerError) as caught:  # was raw (or '' for empty choices)
        call()
    elapsed = time.monotonic() - start
    message = str(caught.value)
    assert f"COURSE_MODEL={url!r}" in message and "Fix:" in message, message
    assert pytest.importorskip("re").search(what, message), message
    assert elapsed < BOUND_S, f"{behaviour}: {elapsed:.1f} s"


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("call", STREAM_CALLS, ids=STREAM_IDS)
def test_a_working_server_still_streams(server, call):
    server("ok")
    assert call() == "hello from the server"


@pytest.mark.contract("hang")
def test_a_langgraph_messages_stream_is_bounded_too(server):
    """LangGraph's stream_mode='messages' makes ``invoke`` inside a node take the streaming path
    (``_stream``, not ``_generate``): it is wrapped the same way."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    url = server("stall")
    chat = models.chat_model(custom_get_token_ids=lambda text: [])
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [chat.invoke(state["messages"])]})
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    app = graph.compile()
    start = time.monotonic()
    with pytest.raises(models.ServerError, match="timeout") as caught:
        list(app.stream({"messages": [("user", "hi")]}, stream_mode="messages"))
    assert url in str(caught.value) and time.monotonic() - start < BOUND_S
