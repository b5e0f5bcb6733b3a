"""The explorer's snippets in headless Chromium: matches marked, the stored text shown as text.

Documents hold markup (``<b>``, an ``<img onerror>``): the page must show it literally, mark
only the query's matches (``<mark>``, from the server's code point offsets, astral characters
included) and run nothing. ``WEFT_UPDATE_SCREENSHOT=1`` rewrites ``docs/explorer-highlight.png``;
otherwise the screenshot goes to the test's temporary directory.
"""

from __future__ import annotations

import os
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

from tests.server.test_explorer_browser import CHROMIUM
from weftsearch import Document, Index
from weftsearch.ranking.profiles import ProfileStore
from weftsearch.server.app import create_app
from weftsearch.server.launch import free_port

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "explorer-highlight.png"
DOCS = {
    "markup": "Graph search with <b>bold</b> tags and <img src=x onerror=window.pwned=1> in the text.",
    "astral": "\U0001f600 emoji first, then the graph walk and a random walk on the link graph.",
    "plain": "Nothing to see here about graphs? Yes: graphs, graph theory and walking.",
    "other": "Unrelated words only.",
}

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason=f"no chromium binary at {CHROMIUM} (.ci/run installs Debian's chromium where apt-get exists)",
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The app under uvicorn in a thread, over four documents and a BM25 profile."""
    path = tmp_path / "idx"
    with Index.create(path) as index:
        index.add_many([Document(key, text) for key, text in DOCS.items()], progress=False)
    ProfileStore(path).create("text-v1", "bm25", depth=50, description="BM25 alone")
    port = free_port()
    config = uvicorn.Config(create_app(path), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
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


def test_snippets_mark_matches_and_show_markup_as_text(server: str, tmp_path: Path) -> None:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 640})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.set_default_timeout(10_000)
            page.goto(server + "/")
            page.wait_for_selector("body[data-ready='1']")
            page.select_option("#profile", "text-v1")
            page.fill("#q", "graph walk")
            page.press("#q", "Enter")
            page.wait_for_selector("#results .hit .snippet mark")

            snippets = {
                str(key): str(text)
                for key, text in page.eval_on_selector_all(
                    "#results .hit",
                    "els => els.map(e => [e.dataset.key, (e.querySelector('.snippet') || {}).textContent])",
                )
            }
            assert set(snippets) == {"markup", "astral", "plain"}
            # The stored text as text: the markup is shown, never made into elements or run.
            assert (
                "<b>bold</b>" in snippets["markup"]
                and "<img src=x onerror=window.pwned=1>" in snippets["markup"]
            )
            assert page.query_selector_all("#results .snippet b, #results .snippet img") == []
            assert page.evaluate("() => window.pwned") is None
            # Only the matches are marked, at the right characters past an astral one.
            marks = page.eval_on_selector_all(
                "#results .hit[data-key='astral'] .snippet mark", "els => els.map(e => e.textContent)"
            )
            assert marks == ["graph", "walk", "walk", "graph"]
            assert snippets["astral"] == DOCS["astral"]
            marks = page.eval_on_selector_all(
                "#results .hit[data-key='plain'] .snippet mark", "els => els.map(e => e.textContent)"
            )
            assert marks == ["graphs", "graphs", "graph", "walking"]
            # The marks are drawn (a background of their own), not just present in the DOM.
            colour = page.eval_on_selector(
                "#results .snippet mark", "e => getComputedStyle(e).backgroundColor"
            )
            assert colour == "rgb(253, 230, 138)"

            shot = (
                SCREENSHOT if os.environ.get("WEFT_UPDATE_SCREENSHOT") == "1" else tmp_path / "explorer.png"
            )
            page.locator("#results-panel").screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
            assert errors == []
        finally:
            browser.close()
