"""The explorer page end to end in headless Chromium (Playwright driving Debian's ``chromium``).

The real app runs under uvicorn on a free loopback port over the demo corpus with two
profiles; the test searches, toggles a signal, switches profile, opens a document and the
side-by-side view, and checks each step changed what the page shows.

``WEFT_UPDATE_SCREENSHOT=1`` rewrites ``docs/explorer.png`` (README.md shows it); without
it the screenshot goes to the test's temporary directory, so a normal run leaves the tree clean.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the explorer test needs the 'server' extra")
pytest.importorskip("uvicorn", reason="the explorer test needs uvicorn (the 'server' extra)")
pytest.importorskip("playwright.sync_api", reason="the explorer test needs playwright (the 'dev' extra)")

import uvicorn
from playwright import sync_api

from weftsearch.demo import build_demo_index, demo_documents
from weftsearch.ranking.profiles import ProfileStore
from weftsearch.server.app import create_app
from weftsearch.server.launch import free_port

CHROMIUM = os.environ.get("WEFT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "explorer.png"
KEY = "explorer-key-0123"
QUERY = "random walk on a link graph"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason=f"no chromium binary at {CHROMIUM} (.ci/run installs Debian's chromium where apt-get exists)",
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The app under uvicorn in a thread, over the demo corpus with profiles text-v1 and graph-v1.

    Reads need the key, so the page must ask for it.
    """
    path = tmp_path / "idx"
    build_demo_index(path).close()
    profiles = ProfileStore(path)
    profiles.create("text-v1", "bm25", depth=50, description="BM25 alone")
    profiles.create("graph-v1", "rrf(bm25, pagerank(seed=bm25), recency(half_life=365), k=60)", depth=50)
    port = free_port()
    config = uvicorn.Config(
        create_app(path, api_key=KEY, read_key_required=True),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
    )
    app_server = uvicorn.Server(config)
    thread = threading.Thread(target=app_server.run, daemon=True)
    thread.start()
    for _ in range(200):  # started within 20 s, or the test fails below
        if app_server.started:
            break
        time.sleep(0.1)
    assert app_server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        app_server.should_exit = True
        thread.join(timeout=20)


def keys(page: sync_api.Page, selector: str) -> list[str]:
    return [str(k) for k in page.eval_on_selector_all(selector, "els => els.map(e => e.dataset.key)")]


def wait_for_change(page: sync_api.Page, selector: str, before: list[str]) -> list[str]:
    """Wait until the keys listed under ``selector`` differ from ``before``; return them."""
    page.wait_for_function(
        "([sel, before]) => JSON.stringify(Array.from(document.querySelectorAll(sel))"
        ".map(e => e.dataset.key)) !== JSON.stringify(before)",
        arg=[selector, before],
    )
    return keys(page, selector)


def test_explorer_page_in_headless_chromium(server: str, tmp_path: Path) -> None:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.set_default_timeout(10_000)
            page.goto(server + "/")

            # Reads need the key: the page asks for it, then lists the profiles.
            page.wait_for_selector("#key-form:not([hidden])")
            page.fill("#key", KEY)
            page.click("#key-form button")
            page.wait_for_selector("body[data-ready='1']")
            stored = page.evaluate("() => [localStorage.length, sessionStorage.length, document.cookie]")
            assert stored == [0, 0, ""], "the key must stay in the page's memory only"
            options = page.eval_on_selector_all("#profile option", "els => els.map(e => e.value)")
            assert options == ["", "graph-v1", "text-v1"]

            # The default ranking, rrf(bm25, vector), needs a query vector the page does not send and
            # this server cannot make (no vectors record): the error shows, and no result stands.
            page.fill("#q", QUERY)
            page.press("#q", "Enter")
            page.wait_for_selector("#results li.note.error")
            assert "needs a query vector" in page.inner_text("#status")
            assert keys(page, "#results .hit") == []

            # A profile without the vector scorer: hits with a bar per signal; the error is gone.
            page.select_option("#profile", "text-v1")
            page.wait_for_selector("#results .hit")
            default = keys(page, "#results .hit")
            assert len(default) >= 3
            assert page.query_selector("#results li.note.error") is None
            bars = page.eval_on_selector_all(
                "#results .hit:first-child .bar", "els => els.map(e => e.dataset.signal)"
            )
            assert bars == ["bm25"]
            assert "text-v1 v1" in page.inner_text("#ranking-label")

            # Toggle a signal on: the page searches with an inline spec and the ranking changes.
            page.check("#signals input[data-signal='pagerank']")
            toggled = wait_for_change(page, "#results .hit", default)
            assert "pagerank" in page.inner_text("#spec")
            assert "weighted(" in page.inner_text("#ranking-label")
            bars = page.eval_on_selector_all(
                "#results .hit:first-child .bar", "els => els.map(e => e.dataset.signal)"
            )
            assert "pagerank" in bars

            # A weight: the spec carries it and the fused scores change.
            scores = page.eval_on_selector_all("#results .hit .score", "els => els.map(e => e.textContent)")
            page.fill("#signals .signal:has(input[data-signal='pagerank']) .weight", "5")
            page.press("#signals .signal:has(input[data-signal='pagerank']) .weight", "Tab")
            page.wait_for_function(
                "before => JSON.stringify(Array.from(document.querySelectorAll('#results .hit .score'))"
                ".map(e => e.textContent)) !== JSON.stringify(before)",
                arg=scores,
            )
            assert "weights=[1, 5]" in page.inner_text("#spec")
            toggled = keys(page, "#results .hit")

            # Switch profile: the toggles follow the profile and the results change again.
            page.select_option("#profile", "graph-v1")
            page.wait_for_function(
                "() => document.querySelector('#ranking-label').textContent.includes('graph-v1 v1')"
            )
            graph = keys(page, "#results .hit")
            assert graph != toggled
            assert page.is_checked("#signals input[data-signal='recency']")
            page.select_option("#profile", "text-v1")
            page.wait_for_function(
                "() => document.querySelector('#ranking-label').textContent.includes('text-v1 v1')"
            )
            text = keys(page, "#results .hit")
            assert text != graph

            # A filter narrows the same ranking; clearing it restores the list.
            page.fill("#filter", "topic == 'graph'")
            page.press("#filter", "Enter")
            narrowed = wait_for_change(page, "#results .hit", text)
            assert narrowed and set(narrowed) < set(text)
            page.fill("#filter", "")
            page.press("#q", "Enter")
            assert wait_for_change(page, "#results .hit", narrowed) == text

            # Facets (issue 30): topic counts over every match, most frequent first; a click on a
            # value filters on it, after which the topic facet holds that value alone.
            page.fill("#facet-fields", "topic")
            page.press("#q", "Enter")
            page.wait_for_selector("#facets .facet-value")
            counts = page.eval_on_selector_all(
                "#facets .facet-value .count", "els => els.map(e => Number(e.textContent))"
            )
            assert counts == sorted(counts, reverse=True)
            assert sum(counts) == sum(1 for d in demo_documents() if "topic" in d.fields)
            first = page.inner_text("#facets li:first-child .facet-value .value")
            page.click("#facets li:first-child .facet-value")
            page.wait_for_function("() => document.querySelectorAll('#facets .facet-value').length === 1")
            assert page.input_value("#filter") == f'topic == "{first}"'
            assert page.inner_text("#facets .facet-value .count") == str(counts[0])
            page.fill("#filter", "")
            page.fill("#facet-fields", "")
            page.press("#q", "Enter")
            page.wait_for_function("() => document.querySelectorAll('#facets .facet-value').length === 0")
            assert keys(page, "#results .hit") == text

            # Open a document.
            page.click(f"#results .hit[data-key='{text[0]}']")
            page.wait_for_selector(f"#doc[data-key='{text[0]}']")
            assert page.inner_text("#doc h3")

            # Side by side: text-v1 against graph-v1, moves highlighted, overlap shown.
            page.click("#compare-toggle")
            page.select_option("#compare-a", "text-v1")
            page.select_option("#compare-b", "graph-v1")
            before = keys(page, "#compare-result .column:last-child li")
            page.click("#compare-run")
            compared_b = wait_for_change(page, "#compare-result .column:last-child li", before)
            compared_a = keys(page, "#compare-result .column:first-child li")
            assert compared_a == text
            assert compared_b == graph
            overlap = page.inner_text("#overlap")
            assert "Jaccard@10" in overlap and "RBO(p=0.9)" in overlap
            marks = page.eval_on_selector_all("#compare-result li.moved", "els => els.map(e => e.className)")
            assert any(m.endswith((" up", " down", " new")) for m in marks)
            # Back to a fused profile for the picture: a bar per signal on every hit.
            page.select_option("#profile", "graph-v1")
            page.wait_for_function(
                "() => document.querySelector('#ranking-label').textContent.includes('graph-v1 v1')"
            )
            page.click(f"#results .hit[data-key='{graph[0]}']")
            page.wait_for_selector(f"#doc[data-key='{graph[0]}']")
            assert not errors, errors

            shot = (
                SCREENSHOT if os.environ.get("WEFT_UPDATE_SCREENSHOT") == "1" else tmp_path / "explorer.png"
            )
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
