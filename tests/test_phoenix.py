"""Phoenix, appendix A5's trace UI, as a person uses it: ``course.phoenix`` starts it from
``.venv-phoenix`` on a free loopback port (as ``python -m course phoenix`` does on 6006),
appendix A5 runs with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing there (what the appendix tells a
student for a class's Phoenix) and sends the note's three runs, and Chromium opens Phoenix's UI:
the project's three runs, the weather run's trace with its AGENT span and glued answer, its
three LLM spans with the note's prompt tokens, its two ``web_search`` TOOL spans with their
queries and the door's verdict. No request of the page leaves the machine.

A screenshot of that trace goes to a temporary folder, or to
``docs/screenshots/phoenix-weather.png`` with ``COURSE_UPDATE_SCREENSHOTS=1`` (the README's).
Then what the start refuses, with the fix in its message: a taken port, a Phoenix silent past
its bound, no network to install.

Needs ``.venv-phoenix`` and the OTLP exporter (``make phoenix-env``, which ``make test`` runs)
and Debian's chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from course.phoenix import (
    PHOENIX_VERSION,
    PhoenixError,
    make_phoenix_env,
    phoenix_installed,
    phoenix_version,
    start_phoenix,
)
from live_models import free_port
from nbharness import NOTEBOOKS, run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "A5_traces_as_spans.ipynb"
WEATHER_ANSWER = "Clear sky, around 13-16°C"
QUERIES = ["current weather in Paris", "current weather in Paris, France"]
PROMPT_TOKENS = ["2,083", "3,345", "4,100"]  # the note's figures, as Phoenix's tree writes them
WEATHER_TREE = [  # (span kind as Phoenix's icon names it, span name), depth first
    ("agent", "CodeAgent.run"),
    ("chain", "Step 1"), ("llm", "ReplayModel.generate"),
    ("tool", "web_search"), ("tool", "OfflineWebSearchTool"),
    ("chain", "Step 2"), ("llm", "ReplayModel.generate"),
    ("tool", "web_search"), ("tool", "OfflineWebSearchTool"),
    ("chain", "Step 3"), ("llm", "ReplayModel.generate"), ("tool", "FinalAnswerTool"),
]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    if not phoenix_installed():
        pytest.fail("needs Phoenix's environment: run `make phoenix-env` (make test does)")
    start = time.perf_counter()
    server = start_phoenix(free_port(), grpc_port=free_port(), timeout=300,
                           working_dir=tmp_path_factory.mktemp("phoenix"))
    print(f"\nPhoenix {server.version} answered after {time.perf_counter() - start:.1f} s")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def a5(phoenix, tmp_path_factory):
    """Appendix A5 run top to bottom, its spans sent to ``phoenix`` (from a copy of the notebook:
    the executed copy the website shows is the run without Phoenix)."""
    folder = tmp_path_factory.mktemp("a5")
    shutil.copy(NOTEBOOKS / NOTEBOOK, folder / NOTEBOOK)
    result = run_notebook(folder / NOTEBOOK, env={"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url})
    print(f"\n{NOTEBOOK} with Phoenix executed in {result.seconds:.1f} s")
    return result



def _stored_spans(phoenix, expected: int, within: float = 30.0) -> list[dict]:
    """The spans Phoenix's REST API returns once it stored ``expected`` (it inserts in batches)."""
    deadline = time.monotonic() + within
    while True:
        spans = httpx.get(f"{phoenix.url}/v1/projects/default/spans", params={"limit": 1000},
                          timeout=10).json()["data"]
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_appendix_a5_sends_the_note_s_three_runs_to_phoenix(a5, phoenix):
    shown = a5.shown("send")
    assert list(shown) == ["weather", "bond", "debug"]
    sent = {name: values[0] for name, values in shown.items()}
    for target in sent.values():
        assert (target["endpoint"], target["outcome"]) == (phoenix.otlp_endpoint, "SUCCESS")
        assert target["why"] == "OTEL_EXPORTER_OTLP_ENDPOINT is set"
    assert sent["weather"]["sent"] == 12
    assert a5.text("send").splitlines()[0] == (
        f"the weather run: sent 12 spans to {phoenix.otlp_endpoint} "
        "(OTEL_EXPORTER_OTLP_ENDPOINT is set): SUCCESS")
    total = sum(target["sent"] for target in sent.values())
    spans = _stored_spans(phoenix, total)
    assert len(spans) == total
    roots = [s for s in spans if s["parent_id"] is None]
    assert [s["name"] for s in roots] == ["CodeAgent.run"] * 3
    assert sorted(s["attributes"]["course.provenance"] for s in roots) == ["recorded"] * 3
    weather = next(s for s in roots if s["attributes"]["output.value"] == WEATHER_ANSWER)
    tools = [s for s in spans if s["context"]["trace_id"] == weather["context"]["trace_id"]
             and s["span_kind"] == "TOOL" and s["name"] == "web_search"]
    assert [json.loads(s["attributes"]["course.tool.arguments"])["query"] for s in
            sorted(tools, key=lambda s: s["start_time"])] == QUERIES


def _value(page, key: str):
    """The value cell of ``key`` in the selected span's attribute table."""
    row = page.get_by_role("row").filter(has=page.get_by_text(key, exact=True))
    return row.get_by_role("cell").nth(1)


def test_the_weather_run_in_phoenix_s_ui(a5, phoenix, browser, shots):
    start = time.perf_counter()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    elsewhere: list[str] = []
    page.on("request", lambda r: elsewhere.append(r.url)
            if not r.url.startswith((phoenix.url, "data:", "blob:")) else None)
    page.goto(phoenix.url)  # Phoenix's home: its projects
    assert page.evaluate("[window.Config.allowExternalResources, "
                         "window.Config.agentAssistantDisabled, window.Config.platformVersion]") \
        == [False, True, PHOENIX_VERSION]
    project = page.get_by_role("link").filter(has=page.get_by_text("default", exact=True))
    expect(project).to_contain_text(re.compile(r"Traces\s*3(?!\d)"))  # the note's three runs
    project.click()
    runs = page.get_by_role("row").filter(has_text="CodeAgent.run")
    expect(runs).to_have_count(3, timeout=30_000)
    runs.filter(has_text=WEATHER_ANSWER).get_by_text("CodeAgent.run").click()

    nodes = page.locator(".span-node-wrap")  # the trace's tree, one node per span
    expect(nodes).to_have_count(len(WEATHER_TREE), timeout=30_000)
    tree = [(node.locator("[title]").first.get_attribute("title"), node.inner_text().split("\n"))
            for node in nodes.all()]
    assert [(kind, text[0]) for kind, text in tree] == WEATHER_TREE
    assert [text[-1] for kind, text in tree if kind == "llm"] == PROMPT_TOKENS

    for node, query in zip(nodes.filter(has_text="web_search").all(), QUERIES, strict=True):
        node.click()
        page.get_by_role("tab", name="Attributes").click()
        expect(_value(page, "course.tool.arguments")).to_have_text(json.dumps({"query": query}))
        expect(_value(page, "course.door.verdict")).to_have_text("allowed")
        expect(_value(page, "course.provenance")).to_have_text("recorded")

    nodes.first.click()  # the AGENT span: the run's answer
    page.get_by_role("tab", name="Info").click()
    output = page.locator("section").filter(has=page.get_by_role("heading", name="Output"))
    expect(output.last).to_contain_text(WEATHER_ANSWER)
    page.mouse.move(0, 0)  # no tooltip over the tree
    page.screenshot(path=str(shots / "phoenix-weather.png"))
    page.close()
    assert elsewhere == []
    print(f"\nPhoenix's UI checked in {time.perf_counter() - start:.1f} s")


def test_a_taken_port_is_refused_with_the_fix(phoenix):
    with pytest.raises(PhoenixError, match=re.escape(
            f"a Phoenix ({PHOENIX_VERSION}) already answers at {phoenix.url}")):
        start_phoenix(int(phoenix.url.rsplit(":", 1)[1]))
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert phoenix_version(f"http://127.0.0.1:{port}", timeout=0.5) is None
        cli = subprocess.run([sys.executable, "-m", "course", "phoenix", "--port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2
    assert cli.stderr == (f"python -m course phoenix: port {port} on 127.0.0.1 is taken by "
                          "another program. Fix: choose another port (--port), or stop that "
                          "program.\n")


def test_a_phoenix_silent_past_its_bound_is_stopped(tmp_path):
    server = start_phoenix(free_port(), grpc_port=free_port(), working_dir=tmp_path,
                           timeout=None)
    with pytest.raises(PhoenixError, match=r"did not answer at http://127\.0\.0\.1:\d+ within "
                       r"0\.2 s and was stopped; .*Fix: on a busy machine give it longer"):
        server.wait(0.2)
    assert server.process is not None and server.process.poll() is not None


def test_no_network_to_install_says_so(tmp_path, monkeypatch):
    closed = free_port()  # nothing listens there: the package index cannot be reached
    wheels = tmp_path / "no-wheels"
    wheels.mkdir()
    for name, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL":
                        f"http://127.0.0.1:{closed}/simple", "PIP_FIND_LINKS": str(wheels),
                        "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    venv = tmp_path / "venv-phoenix"
    with pytest.raises(PhoenixError, match=re.escape(
            f"pip could not download arize-phoenix=={PHOENIX_VERSION} (no network to the "
            "package index?")) as raised:
        make_phoenix_env(venv)
    assert "run this again where the package index is reachable" in str(raised.value)
    assert not venv.exists()  # the next run starts clean
