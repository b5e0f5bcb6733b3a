"""The explorer page's files as the app serves them (no browser needed; see test_explorer_browser.py)."""

from __future__ import annotations

import re
from pathlib import Path

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
