"""The server over a ShardedIndex: the sharded index's own answers, the single index's to the bit.

Every search compares keys and the exact float of every score three ways:
the server over a 2-shard ShardedIndex, ``ShardedIndex.search`` itself, and
the server over an ordinary Index holding the same documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")

from fastapi.testclient import TestClient

from tests.distributed.corpus import scifact_documents, scifact_queries
from tests.distributed.doubles import FailingGroup, failing_factory
from tests.server.conftest import TEXTS, vector
from weftsearch import Document, Index, Query
from weftsearch.distributed import ShardedIndex
from weftsearch.engine.filters import parse_filter
from weftsearch.errors import InvalidParameterError, UnknownKeyError
from weftsearch.ranking.profiles import PROFILE_FORMAT, build_arm
from weftsearch.server.app import create_app
from weftsearch.server.run import serve

SLICE = 200
SPECS = [
    "bm25",
    "vector",
    "rrf(bm25, vector, k=60)@100",
    "rrf(bm25, recency(half_life=30))@50",
    "rrf(bm25, graph(seed=bm25))",
    "rrf(bm25, pagerank(seed=bm25, restart=score))@50",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ShardedIndex]]:
    """The same SciFact slice in an Index (its path) and in a 2-shard ShardedIndex (open, read-only)."""
    documents = scifact_documents(SLICE)
    root = tmp_path_factory.mktemp("sharded-server")
    with Index.create(root / "single", vector_dim=384) as single:
        single.add_many(documents, progress=False)
    with ShardedIndex.create(root / "s", 2, vector_dim=384) as sharded:
        sharded.add_many(documents, progress=False)
        sharded.commit()
    opened = ShardedIndex.open(root / "s", readonly=True)
    yield root / "single", opened
    opened.close()


@pytest.fixture(scope="module")
def queries() -> list[Query]:
    return scifact_queries(6)


@pytest.fixture(scope="module")
def clients(built: tuple[Path, ShardedIndex]) -> Iterator[tuple[TestClient, TestClient]]:
    """(server over the sharded index, server over the single index)."""
    single_path, sharded = built
    with (
        TestClient(create_app(sharded, readonly=True)) as over_shards,
        TestClient(create_app(single_path, readonly=True)) as over_single,
    ):
        yield over_shards, over_single


def request_of(query: Query, spec: str, k: int, **more: Any) -> dict[str, Any]:
    assert query.vector is not None
    return {"text": query.text, "vector": query.vector.tolist(), "spec": spec, "k": k, **more}


def ranked(body: dict[str, Any]) -> list[tuple[str, float]]:
    return [(hit["key"], hit["score"]) for hit in body["hits"]]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("filter_text", [None, "year >= 2005 and source != 'c'"])
def test_search_equals_sharded_index_search_and_the_single_index_server(
    clients: tuple[TestClient, TestClient],
    built: tuple[Path, ShardedIndex],
    queries: list[Query],
    spec: str,
    filter_text: str | None,
) -> None:
    over_shards, over_single = clients
    _, sharded = built
    arm = build_arm(spec)
    extra = {} if filter_text is None else {"filter": filter_text}
    for query in queries:
        answer = over_shards.post("/v1/search", json=request_of(query, spec, 10, **extra))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        parsed = None if filter_text is None else parse_filter(filter_text)
        wanted = Query(text=query.text, vector=query.vector, filter=parsed)
        direct = sharded.search(wanted, 10, arm.fuser, *arm.scorers, depth=max(arm.depth, 10))
        assert ranked(body) == [(hit.key, hit.score) for hit in direct]
        assert body["hits"], "a comparison of empty rankings proves nothing"
        single = over_single.post("/v1/search", json=request_of(query, spec, 10, **extra)).json()
        assert ranked(body) == ranked(single)
        assert body["generation"] == sharded.cut


def test_batch_and_explain_equal_the_single_index_server(
    clients: tuple[TestClient, TestClient], queries: list[Query]
) -> None:
    over_shards, over_single = clients
    spec = "rrf(bm25, vector, k=60)@100"
    batch = {
        "queries": [{"text": q.text, "vector": q.vector.tolist()} for q in queries if q.vector is not None],
        "spec": spec,
        "k": 5,
        "explain": True,
    }
    sharded_body = over_shards.post("/v1/search/batch", json=batch).json()
    single_body = over_single.post("/v1/search/batch", json=batch).json()
    assert len(sharded_body["results"]) == len(queries)
    for mine, theirs in zip(sharded_body["results"], single_body["results"], strict=True):
        assert ranked(mine) == ranked(theirs)
        assert [h["signals"] for h in mine["hits"]] == [h["signals"] for h in theirs["hits"]]
        assert mine["signals"] == theirs["signals"] and mine["fuser"] == theirs["fuser"]
        # Each shard's BM25 plan under its name; the shards' postings add up to the single index's.
        plan, whole = mine["plans"]["bm25"], theirs["plans"]["bm25"]
        assert plan is not None and whole is not None and plan["shards"] == 2
        assert plan["shard-0000.path"] in ("numpy", "compiled") and plan["shard-0001.path"] in (
            "numpy",
            "compiled",
        )
        assert plan["shard-0000.postings"] + plan["shard-0001.postings"] == whole["postings"]


def without_generation(body: dict[str, Any]) -> dict[str, Any]:
    """The body without its generation (a cut number on one side, an index generation on the other)."""
    return {name: value for name, value in body.items() if name != "generation"}


def test_compare_and_rank_eval_equal_the_single_index_server(
    clients: tuple[TestClient, TestClient], queries: list[Query]
) -> None:
    over_shards, over_single = clients
    asked = {f"q{i}": {"text": q.text} for i, q in enumerate(queries)}
    compare = {"a": {"spec": "bm25"}, "b": {"spec": "bm25(k1=0.9, b=0.4)"}, "queries": asked, "k": 10}
    mine = over_shards.post("/v1/compare", json=compare)
    assert mine.status_code == 200, mine.text
    assert without_generation(mine.json()) == without_generation(
        over_single.post("/v1/compare", json=compare).json()
    )
    top = {qid: [h["key"] for h in mine.json()["queries"][qid]["a"][:2]] for qid in asked}
    judgements = {qid: {key: 1 for key in keys} for qid, keys in top.items()}
    evaluate = {"ranking": {"spec": "bm25"}, "queries": asked, "judgements": judgements, "k": 10}
    evaluated = over_shards.post("/v1/rank_eval", json=evaluate)
    assert evaluated.status_code == 200, evaluated.text
    assert without_generation(evaluated.json()) == without_generation(
        over_single.post("/v1/rank_eval", json=evaluate).json()
    )


def test_documents_stats_health_and_metrics(
    clients: tuple[TestClient, TestClient], built: tuple[Path, ShardedIndex]
) -> None:
    over_shards, over_single = clients
    _, sharded = built
    key = scifact_documents(3)[2].key
    mine = over_shards.get(f"/v1/documents/{key}")
    assert mine.status_code == 200
    assert mine.json() == over_single.get(f"/v1/documents/{key}").json()
    missing = over_shards.get("/v1/documents/no-such-key")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "UnknownKeyError"

    stats = over_shards.get("/v1/stats").json()
    single_stats = over_single.get("/v1/stats").json()
    assert stats["documents"] == single_stats["documents"] == SLICE
    assert stats["generation"] == sharded.cut
    assert stats["vector_dim"] == 384 and stats["readonly"] is True
    assert {segment["name"].split("/")[0] for segment in stats["segments"]} == set(sharded.shards)
    assert sum(segment["documents"] for segment in stats["segments"]) == SLICE

    assert over_shards.get("/health").json() == {"status": "ok"}
    metrics = over_shards.get("/metrics").text
    assert f"weft_index_generation {float(sharded.cut)}" in metrics
    assert f"weft_index_documents {float(SLICE)}" in metrics


def test_a_graph_ranking_is_served_as_the_single_index_serves_it(
    clients: tuple[TestClient, TestClient], queries: list[Query]
) -> None:
    """Was 400 PartialGraphError: the graph stream now runs on the coordinator's link table."""
    over_shards, over_single = clients
    for spec in ("graph(seed=bm25)", "pagerank(seed=bm25)", "rrf(bm25, graph(seed=bm25, max_depth=2))"):
        request = {"text": queries[0].text, "spec": spec, "k": 5, "explain": True}
        mine = over_shards.post("/v1/search", json=request)
        assert mine.status_code == 200, mine.text
        theirs = over_single.post("/v1/search", json=request).json()
        assert ranked(mine.json()) == ranked(theirs) and mine.json()["hits"]
        assert [h["signals"] for h in mine.json()["hits"]] == [h["signals"] for h in theirs["hits"]]


def test_a_read_only_sharded_server_adopts_the_writers_new_cut(tmp_path: Path) -> None:
    """Like a read-only Index server: each read first adopts the newest recorded cut."""
    documents = small_documents()
    with ShardedIndex.create(tmp_path / "s", 2) as writer:
        writer.add_many(documents[:4], progress=False)
        writer.commit()
        with (
            ShardedIndex.open(tmp_path / "s", readonly=True) as reader,
            TestClient(create_app(reader, readonly=True)) as client,
        ):
            before = client.get("/v1/stats").json()
            assert before["documents"] == 4
            writer.add_many(documents[4:], progress=False)
            writer.refresh()  # published to the writer's own searches, not recorded: not adopted
            assert client.get("/v1/stats").json()["generation"] == before["generation"]
            committed = writer.commit()
            key = documents[-1].key
            found = client.get(f"/v1/documents/{key}")
            assert found.status_code == 200, found.text
            after = client.get("/v1/stats").json()
            assert after["generation"] == committed == reader.cut
            assert after["documents"] == len(documents)


def test_writes_on_a_read_only_sharded_server_answer_409(clients: tuple[TestClient, TestClient]) -> None:
    over_shards, _ = clients
    answer = over_shards.post("/v1/documents", json={"documents": [{"key": "x", "text": "y"}]})
    assert answer.status_code == 409 and answer.json()["error"]["type"] == "ReadOnly"


def small_documents() -> list[Document]:
    return [
        Document(key, text, vector=vector(i), fields={"year": 1990 + i})
        for i, (key, text) in enumerate(TEXTS.items())
    ]


def test_writes_profiles_and_commit_go_to_the_sharded_index(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 2, vector_dim=8) as sharded:
        sharded.add_many(small_documents(), progress=False)
        sharded.commit()
        with TestClient(create_app(sharded)) as client:
            added = client.post(
                "/v1/documents",
                json={"documents": [{"key": "d7", "text": "zebra graph notes", "vector": [0.5] * 8}]},
            )
            assert added.status_code == 200, added.text
            assert added.json()["generation"] == sharded.cut
            hits = client.post("/v1/search", json={"text": "zebra", "spec": "bm25"}).json()["hits"]
            assert [hit["key"] for hit in hits] == ["d7"]
            assert client.get("/v1/documents/d7").json()["text"] == "zebra graph notes"
            assert client.delete("/v1/documents/d2").status_code == 200
            assert client.delete("/v1/documents/d2").status_code == 404
            committed = client.post("/v1/commit").json()["generation"]
            assert committed == sharded.cut

            made = client.post("/v1/profiles", json={"name": "text", "spec": "bm25"})
            assert made.status_code == 201, made.text
            assert (tmp_path / "s" / "profiles" / "text.v000001.json").is_file()  # the sharded index's own
            by_profile = client.post("/v1/search", json={"text": "graph ranking", "profile": "text"}).json()
            by_spec = client.post("/v1/search", json={"text": "graph ranking", "spec": "bm25"}).json()
            assert ranked(by_profile) == ranked(by_spec) and by_spec["hits"]
            arm = build_arm("bm25")
            direct = sharded.search("graph ranking", 10, arm.fuser, *arm.scorers, depth=max(arm.depth, 10))
            assert ranked(by_spec) == [(hit.key, hit.score) for hit in direct]
        assert sharded.closed is False  # the server leaves the index to whoever opened it
    with ShardedIndex.open(tmp_path / "s", readonly=True) as reopened:
        assert reopened.cut == committed + 1  # the shutdown commits once more: a cut of its own
        with pytest.raises(UnknownKeyError, match="d2"):
            reopened.get("d2")
        assert reopened.get("d7").text == "zebra graph notes"


def _profile_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []


def test_profiles_belong_to_the_sharded_index_and_survive_a_restart(tmp_path: Path) -> None:
    """Saved through a sharded server: in DIR/profiles (beside SHARDS), naming the sharded index's id,
    not in the first shard's directory; a new server over the reopened index serves them."""
    root = tmp_path / "s"
    with ShardedIndex.create(root, 2, vector_dim=8) as sharded:
        sharded.add_many(small_documents(), progress=False)
        sharded.commit()
        owner = sharded.index_id
        with TestClient(create_app(sharded)) as client:
            for spec in ("bm25", "rrf(bm25, vector, k=60)"):
                made = client.post("/v1/profiles", json={"name": "main", "spec": spec})
                assert made.status_code == 201, made.text
    assert _profile_files(root / "profiles") == ["main.v000001.json", "main.v000002.json"]
    assert not (root / "shard-0000" / "profiles").exists()
    saved = json.loads((root / "profiles" / "main.v000002.json").read_text())
    assert saved["format"] == PROFILE_FORMAT and saved["index_id"] == owner
    with (
        ShardedIndex.open(root, readonly=True) as reopened,
        TestClient(create_app(reopened, readonly=True)) as client,
    ):
        listed = client.get("/v1/profiles/main")
        assert listed.status_code == 200, listed.text
        assert (listed.json()["version"], listed.json()["spec"]) == (2, "rrf(bm25, vector, k=60)")
        assert client.get("/v1/profiles/main/1").json()["spec"] == "bm25"


def test_options_that_do_not_fit_a_sharded_index_are_refused(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 2) as sharded:
        with pytest.raises(InvalidParameterError, match="opened writable"):
            create_app(sharded, readonly=True)
        with pytest.raises(InvalidParameterError, match="vectors_record"):
            create_app(sharded, vectors_record=tmp_path / "record.json")
        with pytest.raises(InvalidParameterError, match="one process"):
            create_app(sharded, readonly=True, writer_socket=str(tmp_path / "w.sock"))
    with pytest.raises(InvalidParameterError, match="ShardedIndex, got int"):
        create_app(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="--workers 2 with --sharded"):
        serve(None, sharded=str(tmp_path / "s"), workers=2)
    with pytest.raises(InvalidParameterError, match="--ray ADDRESS serves a sharded index"):
        serve(str(tmp_path / "s"), ray="local")
    with pytest.raises(InvalidParameterError, match="not both"):
        serve(str(tmp_path / "s"), sharded=str(tmp_path / "s"))


def test_a_shard_that_does_not_answer_gives_503_naming_it(tmp_path: Path) -> None:
    with ShardedIndex.create(tmp_path / "s", 2) as made:
        made.add_many(small_documents(), progress=False)
        made.commit()
    groups: list[FailingGroup] = []
    with (
        ShardedIndex.open(tmp_path / "s", readonly=True, factory=failing_factory(groups)) as sharded,
        TestClient(create_app(sharded, readonly=True)) as client,
    ):
        assert client.post("/v1/search", json={"text": "graph", "spec": "bm25"}).status_code == 200
        groups[0].down = True
        for answer in (
            client.post("/v1/search", json={"text": "graph", "spec": "bm25"}),
            client.get("/v1/stats"),
        ):
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            assert error["type"] == "ShardUnavailableError" and "shard-0001" in error["message"]


@pytest.mark.parametrize("spec", ["vector", "rrf(bm25, vector, k=60)@100"])
def test_a_ranking_that_needs_a_vector_none_was_sent_for_is_refused(
    clients: tuple[TestClient, TestClient], spec: str
) -> None:
    """The sharded server cannot embed text: a text-only query to a vector ranking is a 400, as on one index.

    Before, a hybrid answered 200 with BM25 alone, and "vector" 200 with no hits.
    """
    for client in clients:
        answer = client.post("/v1/search", json={"text": "cancer cells", "spec": spec})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["type"], error["field"]) == ("MissingInputError", "vector")
        assert "needs a query vector" in error["message"]
    assert (
        "sharded"
        in clients[0].post("/v1/search", json={"text": "x", "spec": spec}).json()["error"]["message"]
    )


@pytest.mark.parametrize("spec", ["bm25", "rrf(bm25, vector, k=60)@100", "rrf(bm25, graph(seed=bm25))"])
@pytest.mark.parametrize("syntax", ["plain", "lucene"])
def test_explain_terms_equals_the_single_index_server(
    clients: tuple[TestClient, TestClient], queries: list[Query], spec: str, syntax: str
) -> None:
    """``explain_terms`` over shards: each hit's tree (the BM25 breakdown with the collection's idf)."""
    over_shards, over_single = clients
    for query in queries[:3]:
        text = f"{query.text.split()[0]} OR ({query.text})" if syntax == "lucene" else query.text
        asked = {**request_of(query, spec, 5, explain_terms=True, offset=2), "text": text, "syntax": syntax}
        mine = over_shards.post("/v1/search", json=asked)
        assert mine.status_code == 200, mine.text
        theirs = over_single.post("/v1/search", json=asked).json()
        hits = mine.json()["hits"]
        assert hits and ranked(mine.json()) == ranked(theirs)
        assert [hit["explanation"] for hit in hits] == [hit["explanation"] for hit in theirs["hits"]]
        assert all(hit["explanation"]["value"] == hit["score"] for hit in hits)
        assert any(tree["details"][0]["details"] for tree in (hit["explanation"] for hit in hits))
    page = over_shards.post("/v1/search", json=request_of(queries[0], spec, 1)).json()
    after = over_shards.post(
        "/v1/search",
        json={**request_of(queries[0], spec, 1, explain_terms=True), "after": page["next_cursor"]},
    )
    assert after.status_code == 400 and after.json()["error"]["field"] == "explain_terms"
