"""Pages over HTTP (issue 30 item 4): ``offset``/``after`` in, ``next_cursor`` out; errors are 4xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from weftsearch import Document, Index
from weftsearch.engine.pages import CURSOR_GENERATIONS
from weftsearch.server.app import ServerLimits, create_app

WORDS = ["alpha", "beta", "gamma"]


@pytest.fixture
def paged(tmp_path: Path) -> TestClient:
    rng = np.random.default_rng(11)
    with Index.create(tmp_path / "idx", analyzer="simple") as index:
        index.add_many(
            [
                Document(
                    f"d{i:03d}",
                    " ".join(WORDS[int(w)] for w in rng.integers(0, 3, int(rng.integers(1, 4)))),
                    vector=rng.integers(-1, 2, 4).astype(np.float32),
                )
                for i in range(80)
            ],
            progress=False,
        )
    return TestClient(create_app(tmp_path / "idx", limits=ServerLimits(max_k=50)))


REQUEST: dict[str, Any] = {"text": "alpha beta", "vector": [1.0, 0.5, -0.5, 0.0], "spec": "rrf(bm25, vector)"}


def rows(answers: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    return [(hit["key"], hit["rank"], hit["score"]) for answer in answers for hit in answer["hits"]]


def test_pages_by_cursor_and_by_offset_equal_one_deeper_search(paged: TestClient) -> None:
    with paged:
        deep = paged.post("/v1/search", json={**REQUEST, "k": 40}).json()
        pages = [paged.post("/v1/search", json={**REQUEST, "k": 8}).json()]
        while len(pages) < 5:
            assert pages[-1]["next_cursor"]
            pages.append(
                paged.post("/v1/search", json={**REQUEST, "k": 8, "after": pages[-1]["next_cursor"]}).json()
            )
        assert rows(pages) == rows([deep])
        assert [page["offset"] for page in pages] == [0, 8, 16, 24, 32]
        offsets = [
            paged.post("/v1/search", json={**REQUEST, "k": 8, "offset": 8 * p}).json() for p in range(5)
        ]
        assert rows(offsets) == rows([deep])


def test_bad_cursors_and_offsets_are_client_errors(paged: TestClient) -> None:
    with paged:
        cursor = paged.post("/v1/search", json={**REQUEST, "k": 5}).json()["next_cursor"]
        altered = cursor[:4] + ("A" if cursor[4] != "A" else "B") + cursor[5:]
        for after, text in ((altered, "alpha beta"), ("junk!", "alpha beta"), (cursor, "gamma")):
            answer = paged.post("/v1/search", json={**REQUEST, "text": text, "k": 5, "after": after})
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["type"] == "InvalidCursorError" and error["field"] == "after"
        answer = paged.post("/v1/search", json={**REQUEST, "k": 5, "offset": 5, "after": cursor})
        assert answer.status_code == 400 and "not both" in answer.json()["error"]["message"]
        answer = paged.post("/v1/search", json={**REQUEST, "k": 10, "offset": 45})
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "offset"
        assert "offset + k is 55" in answer.json()["error"]["message"]
        assert paged.post("/v1/search", json={**REQUEST, "offset": -1}).status_code == 422


def test_a_cursor_of_a_swept_generation_is_410(paged: TestClient) -> None:
    with paged:
        cursor = paged.post("/v1/search", json={**REQUEST, "k": 5}).json()["next_cursor"]
        for i in range(CURSOR_GENERATIONS):
            document = {"key": f"n{i}", "text": "alpha", "vector": [0.0, 0.0, 1.0, 0.0]}
            assert paged.post("/v1/documents", json={"documents": [document]}).status_code == 200
            assert paged.post("/v1/search", json={**REQUEST, "k": 5}).json()["next_cursor"]
        answer = paged.post("/v1/search", json={**REQUEST, "k": 5, "after": cursor})
        assert answer.status_code == 410, answer.text
        assert answer.json()["error"]["type"] == "CursorExpiredError"
