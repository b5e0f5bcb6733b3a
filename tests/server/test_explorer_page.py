"""The explorer page's files as the app serves them (no browser needed; see test_explorer_browser.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import KEY
from weftsearch.server.app import create_app

STATIC = Path(__file__).resolve().parents[2] / "src" / "weftsearch" / "server" / "static"


def test_the_page_and_its_files_are_served_without_the_key_and_the_api_still_needs_it(
    index_path: Path,
) -> None:
    with TestClient(create_app(index_path, api_key=KEY, read_key_required=True)) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"] == "default-src 'self'"
        for ref in re.findall(r'(?:src|href)="([^"]+)"', page.text):
            asset = client.get("/" + ref.lstrip("/"))  # relative to the page at /
            assert asset.status_code == 200, ref
            assert asset.headers["content-type"].split(";")[0] in ("text/javascript", "text/css")
        assert client.get("/v1/profiles").status_code == 401
        assert client.get("/explorer/../v1/profiles").status_code == 401
        assert client.get("/explorer/other.js").status_code == 401  # only the page's own files are open
        assert client.post("/", json={}).status_code in (401, 405)


def test_the_page_routes_are_not_in_the_api_schema(index_path: Path) -> None:
    with TestClient(create_app(index_path)) as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert "/" not in paths
    assert not any(path.startswith("/explorer") for path in paths)


def test_the_page_loads_nothing_from_elsewhere() -> None:
    """No CDN, no external font or script: the page works offline."""
    names = sorted(p.name for p in STATIC.iterdir())
    assert names == ["explorer.css", "explorer.html", "explorer.js"]
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), path.name
        assert "@import" not in text
    # Text from the index is set with textContent only, never parsed as HTML.
    assert "innerHTML" not in (STATIC / "explorer.js").read_text(encoding="utf-8")


NODE = shutil.which("node")
HARNESS = Path(__file__).with_name("explorer_harness.js")


def _run_page(answers: list[Any], steps: list[str]) -> list[dict[str, Any]]:
    """explorer.js under node with a minimal DOM (explorer_harness.js): what it shows after each step."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(HARNESS), str(STATIC / "explorer.js"), json.dumps(answers), json.dumps(steps)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown: list[dict[str, Any]] = json.loads(done.stdout)
    return shown


def _hits(*keys: str) -> dict[str, Any]:
    return {
        "generation": 1,
        "ranking": {"spec": "bm25"},
        "fuser": "passthrough",
        "signals": ["bm25"],
        "depth": 100,
        "cut_short": [],
        "query_vector": {"source": "none", "model": None, "vectors": None, "dims": None},
        "hits": [
            {"key": key, "rank": i + 1, "score": 1.0 / (i + 1), "fields": {}, "signals": []}
            for i, key in enumerate(keys)
        ],
    }


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_an_error_clears_the_results_it_replaces() -> None:
    """After a search that failed, the page shows the error and no hit of the search before.

    Before, the previous results stayed under the error, as if they answered the new query.
    """
    error = {"error": {"type": "MissingInputError", "field": "vector", "message": "needs a query vector"}}
    profiles: dict[str, list[Any]] = {"profiles": []}
    compared = {
        "a": {"spec": "bm25"},
        "b": {"spec": "bm25"},
        "k": 10,
        "p": 0.9,
        "queries": {
            "q": {
                "a": [{"key": "d1", "score": 1.0}],
                "b": [{"key": "d1", "score": 1.0}],
                "moved": [{"key": "d1", "rank_a": 1, "rank_b": 1, "change": 0}],
                "jaccard": 1.0,
                "rbo": 1.0,
            }
        },
    }
    answers = [[200, profiles], [200, _hits("d1", "d2")], [400, error], [200, compared], [400, error]]
    first, failed, compare_ok, compare_failed = _run_page(answers, ["search", "search", "compare", "compare"])
    assert [r["key"] for r in first["results"]] == ["d1", "d2"]
    assert failed["statusClass"] == "error" and "needs a query vector (vector)" in failed["status"]
    assert not any(r["key"] for r in failed["results"]), failed["results"]
    assert "needs a query vector" in failed["results"][0]["text"] and failed["label"] == ""
    assert "d1" in compare_ok["compare"] and compare_ok["overlap"]
    assert "d1" not in compare_failed["compare"] and compare_failed["overlap"] == ""
    assert "needs a query vector" in compare_failed["compare"]


def _page(offset: int, keys: list[str], cursor: str | None) -> dict[str, Any]:
    answer = _hits(*keys)
    for i, hit in enumerate(answer["hits"]):
        hit["rank"] = offset + i + 1
    return {**answer, "offset": offset, "next_cursor": cursor}


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_next_and_previous_page_send_the_cursors_of_the_pages_seen() -> None:
    profiles: dict[str, list[Any]] = {"profiles": []}
    answers = [
        [200, profiles],
        [200, _page(0, ["d1", "d2"], "c1")],
        [200, _page(2, ["d3", "d4"], "c2")],
        [200, _page(4, ["d5"], None)],
        [200, _page(2, ["d3", "d4"], "c2")],
    ]
    first, second, last, back = _run_page(answers, ["search", "next", "next", "prev"])
    assert [r["key"] for r in first["results"]] == ["d1", "d2"]
    assert first["pager"] == {"hidden": False, "info": "page 1 · hits 1\u20132", "prev": True, "next": False}
    assert "after" not in first["requests"][-1]["body"]
    assert second["requests"][0]["body"]["after"] == "c1" and second["requests"][0]["body"]["text"] == "graph"
    assert second["pager"]["info"] == "page 2 · hits 3\u20134" and not second["pager"]["prev"]
    assert last["requests"][0]["body"]["after"] == "c2"
    assert last["pager"] == {"hidden": False, "info": "page 3 · hits 5\u20135", "prev": False, "next": True}
    assert back["requests"][0]["body"]["after"] == "c1"  # page 2 again, from the cursor that made it
    assert [r["key"] for r in back["results"]] == ["d3", "d4"] and not back["pager"]["next"]


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_a_server_that_cannot_highlight_still_answers_searches() -> None:
    """A server that refuses ``highlight`` (400 naming it): the page searches again without it,
    shows the hits, and asks no more."""
    refused = {"error": {"type": "InvalidParameterError", "field": "highlight", "message": "sharded"}}
    profiles: dict[str, list[Any]] = {"profiles": []}
    answers = [[200, profiles], [400, refused], [200, _hits("d1")], [200, _hits("d2")]]
    first, second = _run_page(answers, ["search", "search"])
    assert [r["key"] for r in first["results"]] == ["d1"] and first["statusClass"] == ""
    assert [r["key"] for r in second["results"]] == ["d2"]
    bodies = [r["body"] for r in first["requests"] + second["requests"] if r["path"] == "v1/search"]
    assert [("highlight" in body) for body in bodies] == [True, False, False]
    assert bodies[0]["highlight"] == {"fields": ["text"], "fragment_size": 160, "number_of_fragments": 1}


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_facets_are_asked_for_shown_and_a_click_filters_on_the_value() -> None:
    """Issue 30: the page sends the facet fields, lists each value with its count, and a click
    adds ``field == value`` (on a list field: the list holds it) to the filter and searches again."""
    profiles: dict[str, list[Any]] = {"profiles": []}
    faceted = {
        **_hits("d1", "d2"),
        "facets": {"tags": [{"value": 'say "hi"', "count": 2}], "and": [{"value": 3, "count": 1}]},
    }
    answers = [[200, profiles], [200, faceted], [200, _hits("d1")]]
    asked, clicked = _run_page(answers, ["facets", "click-facet"])
    assert asked["sent"][1]["facets"] == ["tags", "year"]
    assert 'say "hi"2' in asked["facets"] and "and31" in asked["facets"]
    assert clicked["filter"] == 'tags == "say \\"hi\\""'
    assert clicked["sent"][1]["filter"] == 'tags == "say \\"hi\\""'
    assert [r["key"] for r in clicked["results"]] == ["d1"]


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_the_document_view_shows_named_text_fields_as_text() -> None:
    """Issue 29: a schema's ``title`` text field titles the document; every other named field is
    shown under its name, set as text (markup in it is shown, never parsed)."""
    profiles: dict[str, list[Any]] = {"profiles": []}
    document: dict[str, Any] = {
        "key": "d1",
        "text": "body <b>text</b>",
        "fields": {"year": 2020, "title": "metadata title"},
        "text_fields": {"title": "A <i>title</i>", "notes": "<img src=x onerror=alert(1)>"},
        "time": None,
        "links": [],
        "vector": None,
    }
    older = {**document, "key": "d2"}
    del older["text_fields"]  # a document as a server before named fields answered it
    answers = [[200, profiles], [200, _hits("d1")], [200, document], [200, _hits("d2")], [200, older]]
    _, opened, _, opened_older = _run_page(answers, ["search", "open-first", "search", "open-first"])
    assert opened["doc"][0] == ["h3", "A <i>title</i>"]
    assert ["h4", "notes"] in opened["doc"] and ["p", "<img src=x onerror=alert(1)>"] in opened["doc"]
    assert ["h4", "title"] not in opened["doc"]  # shown once, as the title
    assert ["p", "body <b>text</b>"] in opened["doc"]
    assert opened_older["doc"][0] == ["h3", "metadata title"]
    assert not any(tag == "h4" and text != "links" for tag, text in opened_older["doc"])
