"""The workbook as a website: `make book`'s site, walked in headless Chromium.

The site is built by ``book/build.py`` (what `make book` runs) into a temporary folder, from the
notebook runs the notebook tests saved in ``build/executed`` (``make test`` sets
``COURSE_SAVE_EXECUTED``) where their source is unchanged, else from fresh runs. It is served on
localhost; Chromium opens the index, follows the sidebar's navigation to every chapter of the
README's chapter map, and compares each page with the executed notebook it was made from: the
title, as many figures and output tables as the notebook's outputs hold, a note in place of each
widget, and every output line that carries a provenance label (measured, recorded,
reconstructed, derived, scripted) shown as the notebook shows it. The page must load nothing
from outside localhost and log no console error.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from live_models import free_port

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ROOT / "build" / "executed"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BUNDLED = "SmolLM2-135M-Instruct (bundled)"  # course.settings.BUNDLED_MODEL_NAME
PROVENANCE = re.compile(r"\b(measured|recorded|reconstructed|derived|scripted)\b", re.I)


def _book_module():
    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its worker processes find _execute by this name
    spec.loader.exec_module(module)
    return module


book = _book_module()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    index = book.build_book(out, reuse=EXECUTED if EXECUTED.is_dir() else None)
    assert index.exists()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "-d", str(index.parent)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/index.html", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        yield {"url": url, "src": out / "src"}
    finally:
        server.terminate()
        server.wait(10)


def _squash(text: str) -> str:
    """Whitespace squashed, and Sphinx's smart quotes (course’s) read as typed (course's)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip()


def expected(nb: nbformat.NotebookNode) -> dict:
    """What the page of ``nb`` must show: counts of figures, tables and widget notes, and the
    plain-text output lines that carry a provenance label."""
    images = tables = widgets = 0
    labelled: list[str] = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html = data.get("text/html", "")
            if book.WIDGET_NOTE in data.get("text/plain", ""):
                widgets += 1
                continue
            # myst-nb shows one representation: HTML before a PNG, a PNG before plain text.
            images += ("image/png" in data and not html) + len(re.findall(r"<img\b", html))
            tables += len(re.findall(r"<table\b", html))
            text = out.get("text", "") if out.get("output_type") == "stream" else \
                ("" if html else data.get("text/plain", ""))
            text = ANSI.sub("", text)
            labelled += [_squash(line) for line in text.splitlines()
                         if PROVENANCE.search(line) and _squash(line)]
    return {"images": images, "tables": tables, "widgets": widgets, "labelled": labelled}


def test_the_navigation_reaches_every_chapter_with_its_outputs(site, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and "Failed to load resource" not in m.text else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(site["url"]) else outside.append(r.url))
    # Chromium asks every site for /favicon.ico; the site has none, and that is no error.
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
            if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)

    chapters = book.chapter_map()
    seen = {"images": 0, "tables": 0, "labelled": 0}
    for stem, _teaches in chapters:
        page.goto(f"{site['url']}/index.html")
        nav = page.locator(".sphinxsidebar a.reference.internal")
        assert stem in " ".join(nav.evaluate_all("els => els.map(e => e.href)")), stem
        page.locator(f'.sphinxsidebar a.reference.internal[href="{stem}.html"]').first.click()
        page.wait_for_load_state()
        assert page.url.endswith(f"/{stem}.html"), page.url

        nb = nbformat.read(site["src"] / f"{stem}.ipynb", as_version=4)
        title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
        assert _squash(page.locator("h1").first.inner_text()).rstrip("¶#").strip() == _squash(title)

        want = expected(nb)
        outputs = page.locator(".cell_output")
        assert page.locator(".cell_output img").count() == want["images"], stem
        assert page.locator(".cell_output table").count() == want["tables"], stem
        assert page.locator(".cell_output .widget-note").count() == want["widgets"], stem
        shown = _squash(" ".join(outputs.all_inner_texts()))
        # The site shows the default path: the bundled model, never a matrix run's server (a
        # notebook that runs no model, such as the sandbox escape suite, names none).
        ran_a_model = any(BUNDLED in str(out) for cell in nb.cells for out in cell.get("outputs", []))
        assert BUNDLED in shown or not ran_a_model, f"{stem}: the page does not say it ran {BUNDLED}"
        assert "OpenAI-compatible server" not in shown, stem
        missing = [line for line in want["labelled"] if line not in shown]
        assert missing == [], f"{stem}: provenance lines not shown as in the notebook: {missing}"
        for key in seen:
            seen[key] += want[key] if key != "labelled" else len(want["labelled"])
        print(f"{stem}: {want['images']} figures, {want['tables']} tables, "
              f"{want['widgets']} widget notes, {len(want['labelled'])} labelled lines")

    # The site as a whole shows figures, tables (the trace tables) and provenance labels.
    assert seen["images"] > 0 and seen["tables"] > 0 and seen["labelled"] > 0, seen
    assert errors == [], errors
    assert outside == [], f"the site loads from outside localhost: {outside}"
    page.close()


OUTPUT_LIMIT = 3_000  # characters: summaries first, details on demand


def test_no_output_is_a_wall_of_text(site):
    """In the default run no single output of any chapter is over OUTPUT_LIMIT characters."""
    walls = []
    for stem, _ in book.chapter_map():
        nb = nbformat.read(site["src"] / f"{stem}.ipynb", as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                text = out.get("text", "") if out.get("output_type") == "stream" else \
                    data.get("text/plain", "")
                if book.WIDGET_NOTE in text:
                    continue  # a widget's own text, cut by the book
                if len(ANSI.sub("", text)) > OUTPUT_LIMIT:
                    walls.append(f"{stem}:{cell.get('id')} ({len(text)} chars)")
    assert walls == [], f"outputs over {OUTPUT_LIMIT} characters: {walls}"


def test_only_a_run_of_the_default_path_is_kept_for_the_site(tmp_path, monkeypatch):
    """A run with COURSE_MODEL set (the model-setting matrix) is not saved, and a saved run that
    does not say it ran the bundled model is not reused."""
    import nbharness

    source = tmp_path / "notebooks"
    source.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nbformat.write(nb, source / "x.ipynb")
    saved = tmp_path / "executed"
    monkeypatch.setattr(nbharness, "NOTEBOOKS", source)
    monkeypatch.setenv("COURSE_SAVE_EXECUTED", str(saved))
    nbharness.run_notebook(source / "x.ipynb", env={"COURSE_MODEL": "http://127.0.0.1:9/v1"})
    assert not (saved / "x.ipynb").exists()
    nbharness.run_notebook(source / "x.ipynb")
    kept = nbformat.read(saved / "x.ipynb", as_version=4)
    assert kept.metadata["course_executed"]["model"] == "bundled"
    assert kept.cells[0].outputs[0].text == "42\n"
    assert book.executed_notebook(source / "x.ipynb", saved) is not None
    del kept.metadata["course_executed"]["model"]  # a run saved before this rule
    nbformat.write(kept, saved / "x.ipynb")
    assert book.executed_notebook(source / "x.ipynb", saved) is None


def test_the_code_agent_chapter_shows_its_trace_table_figures_and_stepper_text(site, browser):
    page = browser.new_page()
    page.goto(f"{site['url']}/02_code_agent_runs.html")
    # The runs side by side: one row per run, its steps and token figures with their labels.
    tables = page.locator(".cell_output table").all_inner_texts()
    header = r"(?i)\bsteps\b.*\binput\b.*\boutput\b"
    assert any(re.search(header, t.splitlines()[0]) and re.search(r"\brecorded\b", t)
               for t in tables), tables[:3]
    assert page.locator(".cell_output img").count() >= 2  # the Bond image, the prompt growth
    # Each trace stepper: the note, then the first step as the widget shows it.
    texts = page.locator(".cell_output pre.widget-text").all_inner_texts()
    steppers = [t for t in texts if not t.startswith("Quiz (")]  # the chapter's quiz is a widget too
    assert len(steppers) < len(texts), "the quiz's text is shown in place of its widget"
    assert steppers and all(re.match(r"step 1 of \d+", t) for t in steppers), steppers[:2]
    page.close()
