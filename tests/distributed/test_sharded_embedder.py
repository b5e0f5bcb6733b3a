"""A sharded index with an embedder: every shard records it; the coordinator embeds documents and queries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import weftsearch.embedders as embedders
from tests.distributed.doubles import CountingGroup
from tests.fake_embedder import NAME, FakeEmbedder
from weftsearch import RRF, BM25Scorer, Document, Index, Query, VectorScorer
from weftsearch.distributed import ShardedIndex, ShardGroup, local_shards
from weftsearch.errors import CorruptIndexError, EmbeddingError, UnknownEmbedderError

TEXTS = {
    "a": "sparse retrieval with inverted indexes",
    "b": "dense retrieval with neural embeddings",
    "c": "graph walks over citation links",
    "d": "recency of news articles",
    "e": "neural ranking of passages",
    "f": "citation graphs of papers",
}
DOCS = [Document(key, text) for key, text in TEXTS.items()]


class _Counting(FakeEmbedder):
    """The fake embedder, counting the texts it is given across every instance (one process)."""

    texts: list[str] = []  # noqa: RUF012 - shared on purpose: shards and coordinator share the class

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        type(self).texts.extend(texts)
        return super().embed(texts)


@pytest.fixture
def counting() -> Any:
    saved = dict(embedders._REGISTRY)
    embedders.register_embedder(NAME, _Counting)
    _Counting.texts = []
    yield _Counting
    embedders._REGISTRY.clear()
    embedders._REGISTRY.update(saved)


def test_every_shard_records_the_embedder_and_reopening_finds_it(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 3, embedder=NAME) as sharded:
        assert sharded.embedder is not None and sharded.embedder.name == NAME
        sharded.add_many(DOCS)
        sharded.commit()
    for number in range(3):
        with Index.open(tmp_path / "s" / f"shard-{number:04d}", readonly=True) as shard:
            assert shard.embedder is not None and shard.embedder.name == NAME
    with ShardedIndex.open(tmp_path / "s", readonly=True) as sharded:
        assert sharded.embedder is not None and sharded.embedder.name == NAME
        assert all(sharded.get(key).vector is not None for key in TEXTS)


def test_search_embeds_query_text_once_and_equals_the_single_index(tmp_path: Path, counting: Any) -> None:
    single = Index(embedder=NAME)
    single.add_many(DOCS)
    with ShardedIndex.create(tmp_path / "s", 3, embedder=NAME) as sharded:
        sharded.add_many(DOCS)
        sharded.commit()
        counting.texts.clear()
        for scorers in ((VectorScorer(),), (BM25Scorer(), VectorScorer())):
            got = sharded.search("citation links", 4, RRF(), *scorers)
            want = single.search("citation links", 4, RRF(), *scorers)
            assert [h.key for h in got] == [h.key for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want])
        # Only the single index's two and the coordinator's two: the shards embed no query.
        assert counting.texts == ["citation links"] * 4
        counting.texts.clear()
        sharded.search("citation links", 4, RRF(), BM25Scorer())  # no vector needed: nothing embedded
        many = sharded.search_many(
            ["neural", Query(text="graph", vector=np.ones(16, np.float32))], 2, RRF(), VectorScorer()
        )
        assert counting.texts == ["neural"]  # one batch, and a given vector is kept
        assert many[0].hits[0].key in {"b", "e"}


def test_a_failed_embedding_reaches_no_shard(tmp_path: Path, counting: Any) -> None:
    with ShardedIndex.create(tmp_path / "s", 2, embedder=NAME) as sharded:
        sharded.add_many(DOCS[:2])
        sharded.commit()
        broken = [*DOCS[2:], Document("nan", "x")]

        def fail(texts: Sequence[str]) -> NDArray[np.float32]:
            raise RuntimeError("model crashed")

        assert sharded.embedder is not None
        sharded.embedder.embed = fail  # type: ignore[method-assign]
        with pytest.raises(EmbeddingError, match="model crashed"):
            sharded.add_many(broken)
        sharded.commit()
        assert sharded.stats().documents == 2


def test_an_unregistered_embedder_is_named_at_create_and_open(tmp_path: Path) -> None:
    with pytest.raises(UnknownEmbedderError, match="unknown embedder 'nope'"):
        ShardedIndex.create(tmp_path / "x", 2, embedder="nope")
    assert not (tmp_path / "x").exists()
    with ShardedIndex.create(tmp_path / "s", 2, embedder=NAME) as sharded:
        sharded.add_many(DOCS)
        sharded.commit()
    saved = dict(embedders._REGISTRY)
    embedders._REGISTRY.pop(NAME)
    try:
        with pytest.raises(UnknownEmbedderError, match=f"unknown embedder {NAME!r}"):
            ShardedIndex.open(tmp_path / "s", readonly=True)
    finally:
        embedders._REGISTRY.update(saved)


class _OneForgets(CountingGroup):
    """Shards of which shard 1 says it records no embedder (as one copied from a plain index would)."""

    def call(self, method: str, arguments: Mapping[int, tuple[Any, ...]], *, read: bool) -> dict[int, Any]:
        results = super().call(method, arguments, read=read)
        if method == "embedder_record" and 1 in results:
            results[1] = None
        return results


def test_shards_recording_different_embedders_are_corrupt(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 2, embedder=NAME) as sharded:
        sharded.commit()

    def factory(directories: Sequence[Path], options: Mapping[str, Any] | None, readonly: bool) -> ShardGroup:
        return _OneForgets(local_shards(directories, options, readonly), {})

    with pytest.raises(
        CorruptIndexError, match=r"shard-0000 records embedder .*fake-16.* but shard-0001 records None"
    ):
        ShardedIndex.open(tmp_path / "s", readonly=True, factory=factory)


def test_the_server_over_a_sharded_index_embeds_query_text_and_upserts(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")
    from fastapi.testclient import TestClient

    from weftsearch.server.app import create_app

    with ShardedIndex.create(tmp_path / "s", 2, embedder=NAME) as sharded:
        sharded.add_many(DOCS)
        sharded.commit()
        with TestClient(create_app(sharded)) as client:
            found = client.post("/v1/search", json={"text": "citation links", "spec": "vector", "k": 1})
            assert found.status_code == 200, found.text
            assert found.json()["hits"][0]["key"] in {"c", "f"}
            assert found.json()["query_vector"]["source"] == "server"
            added = client.post("/v1/documents", json={"documents": [{"key": "z", "text": "zebra stripes"}]})
            assert added.status_code == 200, added.text
        assert sharded.get("z").vector is not None


def test_the_cli_searches_a_sharded_index_by_text_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from weftsearch.cli import main

    with ShardedIndex.create(tmp_path / "s", 2, embedder=NAME) as sharded:
        sharded.add_many(DOCS)
        sharded.commit()
    argv = [
        "search",
        "citation links",
        "--index",
        str(tmp_path / "s"),
        "--rank",
        "vector",
        "--json",
        "-k",
        "1",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    answer = json.loads(capsys.readouterr().out)
    assert answer["hits"][0]["key"] in {"c", "f"}
    assert answer["query_vector"] == {"source": "embedder", "name": NAME}


def test_search_many_facets_each_query_single_and_sharded_alike(tmp_path: Path) -> None:
    docs = [
        Document(key, text, fields={"tags": ["even" if i % 2 else "odd", "all"], "n": i})
        for i, (key, text) in enumerate(TEXTS.items())
    ]
    single = Index()
    single.add_many(docs)
    queries = [Query("retrieval", filter="n < 3"), Query("graph")]
    want = [single.facets(query, ["tags"], 5) for query in queries]
    got = single.search_many(queries, 2, RRF(), BM25Scorer(), facets=["tags"], facet_k=5)
    assert [results.facets for results in got] == want
    with ShardedIndex.create(tmp_path / "s", 3) as sharded:
        sharded.add_many(docs)
        sharded.commit()
        spread = sharded.search_many(queries, 2, RRF(), BM25Scorer(), facets=["tags"], facet_k=5)
        assert [results.facets for results in spread] == want
        assert sharded.search_many(queries, 2, RRF(), BM25Scorer())[0].facets is None


def test_a_text_only_ranking_asks_the_shards_nothing_about_vectors(tmp_path: Path) -> None:
    groups: list[CountingGroup] = []

    def factory(directories: Sequence[Path], options: Mapping[str, Any] | None, readonly: bool) -> ShardGroup:
        groups.append(CountingGroup(local_shards(directories, options, readonly), {}))
        return groups[-1]

    with ShardedIndex.create(tmp_path / "s", 2, embedder=NAME, factory=factory) as sharded:
        sharded.add_many(DOCS)
        sharded.commit()
        sharded.search("citation links", 3, RRF(), BM25Scorer())
        assert "needs_query_vector" not in groups[0].calls
        sharded.search("citation links", 3, RRF(), BM25Scorer(), VectorScorer())
        assert groups[0].calls["needs_query_vector"] == 1
