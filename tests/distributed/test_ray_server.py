"""The HTTP server over a ShardedIndex whose shards are Ray actors (the session's loopback cluster).

Skipped where the ``ray`` or ``server`` extra is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'weft-search[ray]')")
pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient  # noqa: E402

from tests.distributed.corpus import scifact_documents, scifact_queries  # noqa: E402
from weftsearch import Document, Index  # noqa: E402
from weftsearch.distributed import ShardedIndex  # noqa: E402
from weftsearch.distributed.ray_shard import ray_shards  # noqa: E402
from weftsearch.ranking.profiles import build_arm  # noqa: E402
from weftsearch.server.app import create_app  # noqa: E402


@pytest.fixture(scope="module")
def served(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ShardedIndex]]:
    root = tmp_path_factory.mktemp("ray-server")
    documents = scifact_documents(200)
    with Index.create(root / "single", vector_dim=384) as single:
        single.add_many(documents, progress=False)
    sharded = ShardedIndex.create(root / "s", 2, vector_dim=384, factory=ray_shards(max_restarts=2))
    sharded.add_many(documents, progress=False)
    sharded.commit()
    yield root / "single", sharded
    sharded.close()


def test_the_server_over_ray_shards_answers_what_the_single_index_server_answers(
    served: tuple[Path, ShardedIndex],
) -> None:
    single_path, sharded = served
    spec = "rrf(bm25, vector, k=60)@100"
    arm = build_arm(spec)
    with (
        TestClient(create_app(sharded)) as over_ray,
        TestClient(create_app(single_path, readonly=True)) as over_single,
    ):
        for query in scifact_queries(5):
            assert query.vector is not None
            request = {"text": query.text, "vector": query.vector.tolist(), "spec": spec, "k": 10}
            mine = over_ray.post("/v1/search", json=request)
            assert mine.status_code == 200, mine.text
            hits = [(hit["key"], hit["score"]) for hit in mine.json()["hits"]]
            assert hits
            direct = sharded.search(query, 10, arm.fuser, *arm.scorers, depth=max(arm.depth, 10))
            assert hits == [(hit.key, hit.score) for hit in direct]
            theirs = over_single.post("/v1/search", json=request).json()
            assert hits == [(hit["key"], hit["score"]) for hit in theirs["hits"]]
        key = hits[0][0]
        assert over_ray.get(f"/v1/documents/{key}").json() == over_single.get(f"/v1/documents/{key}").json()
        assert over_ray.get("/v1/stats").json()["documents"] == 200


def test_a_shard_that_cannot_be_reached_answers_503_naming_it(cluster: str, tmp_path: Path) -> None:
    sharded = ShardedIndex.create(tmp_path / "s", 2, factory=ray_shards(max_restarts=0))
    try:
        sharded.add_many([Document(key=f"d{i}", text="apple pie") for i in range(12)], progress=False)
        sharded.commit()
        with TestClient(create_app(sharded)) as client:
            assert client.post("/v1/search", json={"text": "apple", "spec": "bm25"}).status_code == 200
            ray.kill(sharded._group.actors[1], no_restart=True)  # type: ignore[attr-defined]
            answer = client.post("/v1/search", json={"text": "apple", "spec": "bm25"})
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            assert error["type"] == "ShardUnavailableError" and "shard-0001" in error["message"]
    finally:
        sharded.close()
