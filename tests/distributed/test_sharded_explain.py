"""``ShardedIndex.explain_many``: one index's explanation tree, node for node and value for value.

Random small corpora with named fields on 1-3 shards (with deleted documents,
so the statistics skip them), parsed trees and plain text, BM25 and BM25F,
one stream or two fused: every live key's ``to_dict()`` equals the one of an
:class:`~weftsearch.Index` holding the same documents. The scorer's breakdown
is computed on the key's shard with the collection's statistics (idf's ``n``
and ``N``, the average lengths), so a shard's own statistics would show here.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.distributed.building import close_all, sharded_copies
from tests.distributed.test_sharded_fields import TITLED, document, fill, scorer
from tests.querylang.strategies import trees
from tests.scorers.test_bm25_tree import FIELD_DOCS, FIELD_SCHEMA, field_leaves
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    Query,
    Scorer,
    Snapshot,
    Stream,
)
from weftsearch.distributed import ShardedIndex
from weftsearch.engine.explanation import Explanation
from weftsearch.errors import InvalidParameterError, ShardUnavailableError, UnknownKeyError
from weftsearch.querylang import BoolNode, PhraseNode, TermNode

TEXTS = st.sampled_from(["alpha", "beta gamma", "running the", "epsilon alpha-beta", "the"])


def arms(bm25f: bool, two: bool) -> list[Scorer]:
    """One BM25 stream (BM25F when asked), or BM25 and BM25F fused."""
    return [scorer(False), scorer(True)] if two else [scorer(bm25f)]


def trees_of(
    index: Index | ShardedIndex, queries: Sequence[Query], keys: list[str], **call: Any
) -> list[Any]:
    return [
        [
            found.to_dict()
            for found in index.explain_many(query, keys, RRF(), *call["scorers"], depth=call["depth"])
        ]
        for query in queries
    ]


def compare(
    docs: dict[str, dict[str, str]],
    queries: Sequence[Query],
    depth: int,
    extra: int,
    shards: int,
    bm25f: bool,
    two: bool,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        single = Index.create(Path(root) / "one", schema=FIELD_SCHEMA)
        sharded = ShardedIndex.create(Path(root) / "sharded", shards, schema=FIELD_SCHEMA)
        try:
            fill(single, docs, extra)
            fill(sharded, docs, extra)
            keys = sorted(docs)
            call = {"scorers": arms(bm25f, two), "depth": depth}
            assert trees_of(sharded, queries, keys, **call) == trees_of(single, queries, keys, **call)
        finally:
            sharded.close()
            single.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    FIELD_DOCS,
    st.lists(trees(field_leaves(), max_leaves=5), min_size=1, max_size=2),
    st.integers(1, 8),
    st.integers(0, 2),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
)
@example(
    {"a": {"text": "alpha beta", "title": "beta alpha"}, "b": {"title": "alpha beta gamma"}, "c": {}},
    [PhraseNode(("alpha", "beta")), TermNode("alpha", field="title", boost=2.0)],
    2,
    1,
    2,
    True,
    False,
)
@example(
    {"a": {"text": "gamma", "title": "running"}, "b": {"title": "gamma"}, "c": {"text": "gamma gamma"}},
    [BoolNode(must=(TermNode("gamma"),), must_not=(PhraseNode(("run",), field="title"),))],
    5,
    2,
    3,
    False,
    True,
)
def test_parsed_trees_explain_as_one_index_on_every_shard_count(
    docs: dict[str, dict[str, str]],
    nodes: list[Any],
    depth: int,
    extra: int,
    shards: int,
    bm25f: bool,
    two: bool,
) -> None:
    compare(docs, [Query(tree=node) for node in nodes], depth, extra, shards, bm25f, two)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    FIELD_DOCS,
    st.lists(TEXTS, min_size=1, max_size=2),
    st.integers(1, 8),
    st.integers(0, 2),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
)
@example(
    {"a": {"text": "alpha"}, "b": {"text": "beta"}, "c": {"title": "alpha"}}, ["alpha"], 1, 2, 3, True, True
)
def test_plain_text_explains_as_one_index_on_every_shard_count(
    docs: dict[str, dict[str, str]],
    texts: list[str],
    depth: int,
    extra: int,
    shards: int,
    bm25f: bool,
    two: bool,
) -> None:
    compare(docs, [Query(text) for text in texts], depth, extra, shards, bm25f, two)


@pytest.fixture
def titled(tmp_path: Path) -> Any:
    documents = [document(key, fields) for key, fields in TITLED.items()]
    single = Index.create(tmp_path / "one", schema=FIELD_SCHEMA)
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [2, 3], schema=FIELD_SCHEMA)
    yield single, sharded
    close_all(single, sharded)


def test_the_breakdown_reads_the_collections_statistics_not_the_shards(titled: Any) -> None:
    single, sharded = titled
    query = Query.parse('"alpha beta"~1 OR title:gamma^2')
    want = single.explain(query, "a", RRF(), scorer(True))
    have = sharded[3].explain(query, "a", RRF(), scorer(True))
    assert have.to_dict() == want.to_dict()
    lines = "\n".join(have.lines())
    assert f"{len(TITLED)} = N, total number of documents" in lines  # not the shard's own N
    assert have.value > 0.0 and have.details[0].details  # the breakdown is there


def test_keys_below_depth_repeated_or_none_explain_as_one_index(titled: Any) -> None:
    single, sharded = titled
    for query in (Query("alpha"), Query.parse("alpha OR gamma")):
        for depth in (1, 2, 100):
            want = [
                t.to_dict()
                for t in single.explain_many(query, list(TITLED), RRF(), BM25Scorer(), depth=depth)
            ]
            for index in sharded.values():
                have = index.explain_many(query, list(TITLED), RRF(), BM25Scorer(), depth=depth)
                assert [t.to_dict() for t in have] == want
    # Repeated keys and an empty list answer as one index does.
    keys = ["c", "a", "c"]
    want = [t.to_dict() for t in single.explain_many("alpha", keys, RRF(), BM25Scorer(), scorer(True))]
    have = sharded[2].explain_many("alpha", keys, RRF(), BM25Scorer(), scorer(True))
    assert [t.to_dict() for t in have] == want
    assert sharded[2].explain_many("alpha", [], RRF(), BM25Scorer()) == []


def test_unknown_keys_and_bad_calls_raise_as_one_index(titled: Any) -> None:
    single, sharded = titled
    for index in (single, *sharded.values()):
        with pytest.raises(UnknownKeyError, match="'nope'"):
            index.explain("alpha", "nope", RRF(), BM25Scorer())
        with pytest.raises(UnknownKeyError, match="'nope'"):
            index.explain_many("alpha", ["a", "nope", "b"], RRF(), BM25Scorer())
        with pytest.raises(InvalidParameterError, match="at least one scorer"):
            index.explain("alpha", "a", RRF())
        with pytest.raises(InvalidParameterError, match="at most 1000"):
            index.explain_many("alpha", ["a"] * 1001, RRF(), BM25Scorer())
        with pytest.raises(InvalidParameterError, match="must be a positive integer, got 0"):
            index.explain("alpha", "a", RRF(), BM25Scorer(), depth=0)
    deleted = sharded[2]
    deleted.delete("a")
    deleted.commit()
    with pytest.raises(UnknownKeyError, match="'a'"):
        deleted.explain("alpha", "a", RRF(), BM25Scorer())


def test_results_of_a_search_name_the_cut_explained(titled: Any) -> None:
    _, sharded = titled
    index = sharded[2]
    results = index.search("alpha", 3, RRF(), BM25Scorer())
    before = [
        t.to_dict() for t in index.explain_many("alpha", results.keys, RRF(), BM25Scorer(), snapshot=results)
    ]
    assert [tree["value"] for tree in before] == results.scores.tolist()
    index.add(Document("f", "alpha alpha alpha"))
    index.commit()
    # The cut searched, not the new one: the same trees (N and the ranks of that cut).
    again = index.explain_many("alpha", results.keys, RRF(), BM25Scorer(), snapshot=results)
    assert [t.to_dict() for t in again] == before
    now = index.explain_many("alpha", results.keys, RRF(), BM25Scorer())
    assert [t.to_dict() for t in now] != before
    # Two cuts later the shards have let that cut go: the call names a shard, never a wrong tree.
    index.add_many([Document(f"g{n}", "alpha beta") for n in range(6)], progress=False)
    index.commit()
    with pytest.raises(ShardUnavailableError, match=r"does not hold cut"):
        index.explain_many("alpha", results.keys, RRF(), BM25Scorer(), snapshot=results)
    with pytest.raises(InvalidParameterError, match="results of a search of this sharded index"):
        index.explain(
            "alpha", "a", RRF(), BM25Scorer(), snapshot=sharded[3].search("alpha", 3, RRF(), BM25Scorer())
        )
    with pytest.raises(InvalidParameterError, match="results of a search of this sharded index"):
        index.explain("alpha", "a", RRF(), BM25Scorer(), snapshot="cut 1")


class Unexplained:
    """A scorer without ``explain``: its stream gets no breakdown, on one index and on shards."""

    name = "plain"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        ids = np.arange(snapshot.n_docs, dtype=np.int64)
        return Stream.ranked(ids, np.ones(ids.shape[0]), k, snapshot)


def test_a_scorer_without_explain_gets_no_breakdown(titled: Any) -> None:
    single, sharded = titled
    want = single.explain_many("alpha", list(TITLED), RRF(), Unexplained(), BM25Scorer())
    assert all(tree.details[0].details == () for tree in want)
    for index in sharded.values():
        have = index.explain_many("alpha", list(TITLED), RRF(), Unexplained(), BM25Scorer())
        assert [t.to_dict() for t in have] == [t.to_dict() for t in want]


class Linked:
    """A whole-collection scorer that explains itself: the in-degree of each document, from the links."""

    name = "indegree"

    def collection_inputs(self, query: Query) -> list[tuple[Scorer, Query, int]]:
        return [(BM25Scorer(), query, 5)]

    def score_inputs(self, snapshot: Snapshot, query: Query, k: int, inputs: Sequence[Stream]) -> Stream:
        counts = np.asarray(snapshot.linked().sum(axis=0)).ravel().astype(np.float64)
        allowed = snapshot.allowed(query)
        ids = np.flatnonzero((counts > 0) & (True if allowed is None else allowed)).astype(np.int64)
        return Stream.ranked(ids, counts[ids], k, snapshot)

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return self.score_inputs(snapshot, query, k, [])

    def explain(self, snapshot: Snapshot, query: Query, ids: Any) -> list[Explanation]:
        counts = np.asarray(snapshot.linked().sum(axis=0)).ravel()
        allowed = snapshot.allowed(query)  # the view's filter mask at the coordinator
        return [
            Explanation(float(counts[doc]) if allowed is None or allowed[doc] else 0.0, "in-degree")
            for doc in np.asarray(ids).tolist()
        ]


def test_graph_scorers_explain_at_the_coordinator_as_one_index(tmp_path: Path) -> None:
    documents = [
        Document(
            f"d{i}",
            f"alpha {'beta ' * (i % 3)}gamma {i}",
            links=tuple(f"d{j}" for j in range(i) if (i + j) % 3 == 0),
            fields={"n": i},
        )
        for i in range(12)
    ]
    single = Index.create(tmp_path / "one")
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(tmp_path, documents, [1, 3])
    keys = [document.key for document in documents]
    try:
        for scorers in (
            [BM25Scorer(), GraphScorer(BM25Scorer())],
            [PageRankScorer(BM25Scorer())],
            [BM25Scorer(), Linked()],
        ):
            for query in (Query("beta gamma"), Query("alpha", filter="n >= 3")):
                want = [t.to_dict() for t in single.explain_many(query, keys, RRF(), *scorers, depth=6)]
                for index in sharded.values():
                    have = index.explain_many(query, keys, RRF(), *scorers, depth=6)
                    assert [t.to_dict() for t in have] == want
        # The graph scorers offer no breakdown; a whole-collection scorer that does is explained.
        [tree] = single.explain_many("beta", ["d4"], RRF(), BM25Scorer(), Linked())
        assert tree.details[1].details[0].description == "in-degree"
    finally:
        close_all(single, sharded)
