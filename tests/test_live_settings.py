"""Error contracts of the model settings and the memory guard.

Every bad ``COURSE_MODEL`` / ``COURSE_DEVICE`` value, and every malformed server answer, gives a
CourseSettingError that names the setting and the fix; ``import course`` never fails; a model
that cannot fit is refused before any weight is read. A server that never answers ends both
libraries' calls with an error naming the URL after two attempts, each cut at its share of
``COURSE_SERVER_TIMEOUT``: run with a 3 s budget, and the default budget's arithmetic (60 s,
retry included) checked by value on the clients it builds.
"""

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import models
from course.settings import CourseSettingError, ModelChoice, parse_model_setting, use_model

BAD_SETTINGS = ["x" * 5000, "Qwen/x#y", "http://[::1/v1", "junk id", "a/b/c", "nobody/", "/x",
                "http://:80/v1", "http://host:port/v1", "Qwen/..", "-bad/id", "a\nb/c",
                "http://127.0.0.1:99999/v1", "https://user@/v1"]


@pytest.mark.parametrize("value", BAD_SETTINGS, ids=lambda v: repr(v[:20]))
def test_bad_setting_is_a_course_setting_error(value):
    with pytest.raises(CourseSettingError) as err:
        parse_model_setting(value)
    message = str(err.value)
    assert "COURSE_MODEL" in message and "Fix" in message
    assert len(message) < 600  # a 5,000-character value is not echoed whole


@pytest.mark.parametrize("value", [*BAD_SETTINGS, "http://127.0.0.1:9/v1", "http://[::1]:9/v1"],
                         ids=lambda v: repr(v[:20]))
def test_describe_models_reports_a_bad_setting_instead_of_raising(monkeypatch, value):
    """The doctor's view: every bad setting (or a server that is down) is a reported problem."""
    monkeypatch.setenv("COURSE_MODEL", value)
    report = models.describe_models()
    assert not report.ok and "COURSE_MODEL" in report.problem and "Fix" in report.problem
    assert "problem: COURSE_MODEL" in str(report)


@pytest.mark.parametrize("value", [123, 1.5, ["Qwen/a"], {"a": 1}, b"bundled"])
def test_use_model_with_a_non_string(value):
    with pytest.raises(CourseSettingError, match=r"COURSE_MODEL must be a string.*Fix"):
        use_model(value)


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_parses_or_is_a_course_setting_error(value):
    try:
        choice = parse_model_setting(value)
    except CourseSettingError as err:
        assert "COURSE_MODEL" in str(err)
    else:
        assert choice.kind in ("bundled", "hub", "path", "server")


def test_import_course_never_fails():
    values = ["x" * 5000, "Qwen/x#y", "http://[::1/v1", "junk id", "\udcff" * 3]
    code = "import course, sys; sys.stdout.write('imported')"
    for value in values:
        env = {"COURSE_MODEL": value.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
               "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.stdout == "imported", (value[:20], out.stderr[-400:])


class _Answer(BaseHTTPRequestHandler):
    body: bytes = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_):
        pass


@pytest.fixture
def fake_models_endpoint():
    """A loopback HTTP server whose GET /v1/models answers whatever the test sets."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    # a short poll: shutdown() waits for the serving loop's next look (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()

    def answer(body: object) -> ModelChoice:
        _Answer.body = json.dumps(body).encode()
        return ModelChoice("server", f"http://127.0.0.1:{server.server_port}/v1")

    yield answer
    server.shutdown()


@pytest.mark.parametrize("body", [[{"id": "m"}], {"data": "abc"}, {"data": [{"name": "m"}]},
                                  {"data": [{"id": 3}]}, {"object": "list"}, "text", None])
def test_malformed_models_answer(fake_models_endpoint, body):
    choice = fake_models_endpoint(body)
    with pytest.raises(CourseSettingError, match=r"COURSE_MODEL.*model list.*Fix"):
        models.server_models(choice)


def test_models_answer_read_and_reported(fake_models_endpoint, monkeypatch):
    choice = fake_models_endpoint({"object": "list", "data": [{"id": "a"}, {"id": "b"}]})
    assert models.server_models(choice) == ["a", "b"]
    monkeypatch.setenv("COURSE_MODEL", choice.value + "#b")
    report = models.describe_models()
    assert report.ok and report.server_answers and report.served_model == "b"
    assert "lists a, b" in str(report) and "probe model: SmolLM2" in str(report)
    monkeypatch.setenv("COURSE_MODEL", choice.value + "#zzz")
    assert "does not list 'zzz'" in models.describe_models().problem


def test_a_served_folder_is_counted_with_one_tokenizer(fake_models_endpoint):
    """A server of the bundled model's folder (what the served-notebook tests start): every chat
    model a kernel builds for it counts with one tokenizer, the very object the probe model
    loaded, read once instead of once per chat model."""
    from course.assets import converted_model_dir
    from course.models.local import tokenizer_at

    folder = str(converted_model_dir())
    choice = fake_models_endpoint({"object": "list", "data": [{"id": folder}]})
    first, label = models.agent_tokenizer(choice)
    again, _ = models.agent_tokenizer(choice)
    assert first is again is tokenizer_at(folder)
    assert label == "smollm2-135m-instruct tokenizer (the served model's own, read locally)"
    assert first.encode("Hello world", add_special_tokens=False) == [19556, 905]


SILENT_BUDGET_S = 3.0  # a small COURSE_SERVER_TIMEOUT: the calls below end in about 3 s
LOAD_GRACE_S = 4.0  # what a loaded 2-core machine may add to a call's end


def _never_answers() -> socket.socket:
    """A loopback socket whose kernel accepts connections that nothing ever answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def _connections(sock: socket.socket) -> int:
    """How many connections the socket's clients opened (each one attempt of a chat call)."""
    sock.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def _longest_call(budget: models.CallBudget) -> float:
    """The longest a chat call to a server that never answers takes: each attempt waits its
    share, openai pauses once before its retry (at most its INITIAL_RETRY_DELAY), and a loaded
    machine adds a little."""
    from openai._constants import INITIAL_RETRY_DELAY

    return (1 + models.REQUEST_RETRIES) * budget.attempt + INITIAL_RETRY_DELAY + LOAD_GRACE_S


def test_the_default_server_budget_ends_a_call_within_60_s(monkeypatch):
    """The default COURSE_SERVER_TIMEOUT as both libraries' clients get it, by value: each
    attempt 27 s, one retry, so a call to a server that never answers ends well within 60 s
    (the run below measures the same arithmetic with a small budget)."""
    import httpx

    monkeypatch.setenv("COURSE_MODEL", "http://127.0.0.1:9/v1#m")
    monkeypatch.delenv("COURSE_SERVER_TIMEOUT", raising=False)
    assert models.request_timeout() == models.REQUEST_TIMEOUT_S == 60.0
    budget = models.CallBudget(models.request_timeout())
    assert budget.attempt == 27.0 and budget.longest_wait == 6.0
    chat = models.chat_model(custom_get_token_ids=lambda text: [])
    agent = models.smolagents_model()
    assert chat.max_retries == models.REQUEST_RETRIES == agent.client_kwargs["max_retries"] == 1
    assert chat.request_timeout == budget.attempt == agent.client_kwargs["timeout"]
    for client in (chat.http_client, chat.http_async_client, agent.client_kwargs["http_client"]):
        assert client.timeout == httpx.Timeout(budget.attempt)
    assert _longest_call(budget) < 60


def test_a_server_that_never_answers_is_a_clear_error_within_its_budget(monkeypatch):
    """A server that accepts and never replies: both libraries' calls make two attempts (one
    retry), each cut at its share of COURSE_SERVER_TIMEOUT, and end with an error naming the
    URL, the timeout and the fix, within the budget's arithmetic."""
    from concurrent.futures import ThreadPoolExecutor

    from smolagents.models import ChatMessage, MessageRole

    monkeypatch.setenv("COURSE_SERVER_TIMEOUT", f"{SILENT_BUDGET_S:g}")
    budget = models.CallBudget(models.request_timeout())
    socks = {"langchain": _never_answers(), "smolagents": _never_answers()}
    urls = {name: f"http://127.0.0.1:{sock.getsockname()[1]}/v1" for name, sock in socks.items()}
    monkeypatch.setenv("COURSE_MODEL", urls["langchain"] + "#m")
    chat = models.chat_model(custom_get_token_ids=lambda text: [])
    monkeypatch.setenv("COURSE_MODEL", urls["smolagents"] + "#m")
    agent = models.smolagents_model()
    message = [ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": "hi"}])]

    def timed(call):
        start = time.monotonic()
        with pytest.raises(models.ServerError) as caught:
            call()
        return time.monotonic() - start, str(caught.value)

    try:
        with ThreadPoolExecutor(2) as pool:
            calls = [lambda: chat.invoke("hi"), lambda: agent.generate(message)]
            results = dict(zip(socks, pool.map(timed, calls), strict=True))
        attempts = {name: _connections(sock) for name, sock in socks.items()}
    finally:
        for sock in socks.values():
            sock.close()
    tries = 1 + models.REQUEST_RETRIES
    assert attempts == {"langchain": tries, "smolagents": tries}  # the first and one retry
    for name, (elapsed, text) in results.items():
        assert f"COURSE_MODEL={urls[name]!r}" in text and "timeout" in text, text
        assert f"within {budget.attempt:g} s" in text and "Fix:" in text, text
        assert f"COURSE_SERVER_TIMEOUT={SILENT_BUDGET_S:g} s" in text, text
        assert 2 * budget.attempt <= elapsed < _longest_call(budget), f"{name}: {elapsed:.1f} s"


def test_server_token_counter_never_downloads(monkeypatch):
    """ChatOpenAI would fetch cl100k_base; ours counts with a local tokenizer and says which."""
    monkeypatch.setenv("COURSE_MODEL", "http://127.0.0.1:9/v1#not/a-cached-model")
    chat = models.chat_model()
    assert "probe model's" in chat.token_counter_label
    from langchain_core.messages import HumanMessage

    probe = models.probe_model()
    n = chat.get_num_tokens_from_messages([HumanMessage("Hello world")])
    assert n >= probe.count_tokens("Hello world") > 0


@pytest.mark.parametrize("value,match", [("bogus", "COURSE_DEVICE='bogus' is not a device"),
                                         ("cuda", "no CUDA GPU"), ("mps", "no Apple GPU")])
def test_device_setting_errors(monkeypatch, value, match):
    import torch

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setenv("COURSE_DEVICE", value)
    with pytest.raises(CourseSettingError, match=match):
        models.placement()


def test_device_and_dtype_choice(monkeypatch):
    import torch

    assert models.placement("cpu") == models.Placement("cpu", "float32", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert models.placement() == models.Placement("cuda", "float16", "auto")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert models.placement() == models.Placement("cuda", "bfloat16", "auto")


LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
             "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
             "tie_word_embeddings": False}


def test_a_model_that_cannot_fit_is_refused_before_loading(tmp_path, monkeypatch):
    """A config-only folder (no weight file): refused by the estimate, not by a missing file."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_70B))
    params, needed = models.estimate_weight_bytes(str(tmp_path), "float32")
    assert 69e9 < params < 72e9 and needed == 4 * params
    choice = parse_model_setting(str(tmp_path))
    with pytest.raises(CourseSettingError) as err:
        models.load_local_model(choice)
    message = str(err.value)
    print("\nmemory guard:", message)
    assert "70.55 B parameters in float32" in message and "282.2 GB" in message
    assert "Nothing was loaded" in message and "COURSE_MODEL=http://" in message
    assert "available RAM" in message and "smaller model" in message
