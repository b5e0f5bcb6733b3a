"""Graph scorers on a ShardedIndex: the single index's rankings to the bit, on CACM's citation graph.

CACM (3,204 documents, 5,440 resolved links; about half of them cross shards
at 2 shards, three quarters at 4) is what the graph scorers were built for.
Every comparison is keys, order and the bytes of every score against an
ordinary Index of the same documents (``assert_same``). The graph walk runs
once per query at the coordinator, on a link table built from the shards
(docs/SCALING.md, "Graph scorers").
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.distributed.building import close_all, reseal_record, sharded_copies
from tests.distributed.doubles import CountingGroup, FailingGroup, failing_factory
from tests.distributed.test_sharded import assert_same
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    PropagationScorer,
    Query,
    ScoreFusion,
    Scorer,
    Snapshot,
    Stream,
)
from weftsearch.distributed import ShardedIndex, ShardGroup, local_shards
from weftsearch.engine.protocols import Fuser
from weftsearch.engine.snapshot import LinkView
from weftsearch.errors import (
    InvalidParameterError,
    PartialGraphError,
    ScorerOutputError,
    ShardedCutError,
    ShardUnavailableError,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
COUNTS = (1, 2, 4)
QUERIES = 12

ARMS: dict[str, Callable[[], list[Scorer]]] = {
    "graph": lambda: [GraphScorer(BM25Scorer(), max_depth=2)],
    "graph-directed": lambda: [GraphScorer(BM25Scorer(), max_depth=3, seed_n=8, directed=True)],
    "graph-keep-seeds": lambda: [GraphScorer(BM25Scorer(), keep_seeds=True)],
    "pagerank": lambda: [PageRankScorer(BM25Scorer())],
    "pagerank-score": lambda: [PageRankScorer(BM25Scorer(), restart="score", seed_n=10)],
    "pagerank-directed": lambda: [PageRankScorer(BM25Scorer(), directed=True, keep_seeds=True)],
    "bm25+graph": lambda: [BM25Scorer(), GraphScorer(BM25Scorer())],
    "bm25+pagerank": lambda: [BM25Scorer(), PageRankScorer(BM25Scorer(), restart="score")],
    "bm25+graph+pagerank": lambda: [BM25Scorer(), GraphScorer(BM25Scorer()), PageRankScorer(BM25Scorer())],
    "propagation": lambda: [BM25Scorer(), PropagationScorer(BM25Scorer(), depth=40, expand=True)],
}


def cacm() -> tuple[list[Document], list[Query]]:
    if not (DATA / "cacm" / "cacm.all").is_file():
        pytest.skip(f"CACM is not at {DATA / 'cacm'} (../shared/datasets/cacm)")
    from weftsearch.eval.datasets import load_collection

    collection = load_collection("cacm", DATA)
    texts = list(collection.queries.values())
    return list(collection.documents), [Query(text=text) for text in texts[:QUERIES]]


@pytest.fixture(scope="module")
def corpus() -> tuple[list[Document], list[Query]]:
    return cacm()


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, corpus: tuple[list[Document], list[Query]]
) -> Iterator[tuple[Index, dict[int, ShardedIndex]]]:
    documents, _ = corpus
    root = tmp_path_factory.mktemp("sharded-graph")
    single = Index.create(root / "single")
    single.add_many(documents, progress=False)
    single.commit()
    sharded = sharded_copies(root, documents, COUNTS)
    yield single, sharded
    close_all(single, sharded)


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("arm", sorted(ARMS))
def test_graph_arms_equal_the_single_index_to_the_bit(
    built: tuple[Index, dict[int, ShardedIndex]],
    corpus: tuple[list[Document], list[Query]],
    arm: str,
    count: int,
) -> None:
    single, sharded = built
    _, queries = corpus
    fusers: list[Fuser] = [RRF()] if len(ARMS[arm]()) == 1 else [RRF(), ScoreFusion()]
    for fuser in fusers:
        for k, depth in ((10, None), (5, 30)):
            expected = single.search_many(queries, k, fuser, *ARMS[arm](), depth=depth)
            got = sharded[count].search_many(queries, k, fuser, *ARMS[arm](), depth=depth)
            assert_same(expected, got)
            # one query at a time is the same search as the batch
            assert_same(
                expected[:2],
                [sharded[count].search(q, k, fuser, *ARMS[arm](), depth=depth) for q in queries[:2]],
            )
    graph_column = len(ARMS[arm]()) - 1
    assert any(bool((r.explain_arrays().ranks[:, graph_column] > 0).any()) for r in got), "no graph hit"


@pytest.mark.parametrize("count", [2, 4])
def test_explicit_seeds_and_a_filter_equal_the_single_index(
    built: tuple[Index, dict[int, ShardedIndex]], corpus: tuple[list[Document], list[Query]], count: int
) -> None:
    single, sharded = built
    documents, queries = corpus
    linked = [document.key for document in documents if len(document.links) >= 3]
    seeded = [
        dataclasses.replace(query, seeds=(*linked[i * 7 : i * 7 + 3], "no-such-key"))
        for i, query in enumerate(queries[:6])
    ]
    times = sorted(document.time for document in documents if document.time is not None)
    middle = times[len(times) // 2]
    filtered = [dataclasses.replace(query, filter=f"@time >= {middle}") for query in queries[:8]]
    filtered += [dataclasses.replace(query, filter=f"@time < {middle}") for query in queries[:4]]
    arms: list[tuple[list[Scorer], bool]] = [  # (scorers, whether they need explicit seeds)
        ([GraphScorer(None, max_depth=2)], True),
        ([BM25Scorer(), GraphScorer(BM25Scorer())], False),  # explicit seeds win over the seed scorer
        ([BM25Scorer(), PageRankScorer(BM25Scorer(), restart="score")], False),
        ([PageRankScorer(None, directed=True)], True),
        ([BM25Scorer(), PropagationScorer(BM25Scorer(), depth=30, expand=True)], False),
    ]
    for scorers, seeded_only in arms:
        expected = single.search_many(seeded, 10, RRF(), *scorers)
        assert_same(expected, sharded[count].search_many(seeded, 10, RRF(), *scorers))
        assert sum(len(r) for r in expected) > 0
        if not seeded_only:
            expected = single.search_many(filtered, 10, RRF(), *scorers)
            assert_same(expected, sharded[count].search_many(filtered, 10, RRF(), *scorers))
            assert sum(len(r) for r in expected) > 0
    # The filter limits what the graph stream returns, not its seeds: seeds outside it still walk.
    only = single.search_many(filtered, 10, RRF(), GraphScorer(BM25Scorer()))
    assert_same(only, sharded[count].search_many(filtered, 10, RRF(), GraphScorer(BM25Scorer())))
    assert sum(len(r) for r in only) > 0


def test_after_deletes_replacements_and_a_forced_merge(
    tmp_path: Path, corpus: tuple[list[Document], list[Query]]
) -> None:
    documents, queries = corpus
    single = Index.create(tmp_path / "single")
    indexes = {count: ShardedIndex.create(tmp_path / f"s{count}", count) for count in (2, 4)}
    targets: list[Index | ShardedIndex] = [single, *indexes.values()]
    half = len(documents) // 2
    for index in targets:
        index.add_many(documents[:half], progress=False)
        index.commit()
        index.add_many(documents[half:], progress=False)
        index.commit()
    deleted = [document.key for document in documents[::9]]
    # Replacements: the same keys with other links (the old links must vanish with the old version).
    replaced = [
        dataclasses.replace(document, links=tuple(d.key for d in documents[i + 1 : i + 4]))
        for i, document in enumerate(documents[5:400:13], start=5)
        if document.key not in deleted
    ]
    arms: list[list[Scorer]] = [
        [BM25Scorer(), GraphScorer(BM25Scorer())],
        [BM25Scorer(), PageRankScorer(BM25Scorer(), restart="score")],
        [PageRankScorer(BM25Scorer(), directed=True)],
    ]
    for index in targets:
        index.delete_many(deleted)
        index.add_many(replaced, progress=False)
        index.commit()
    for scorers in arms:
        expected = single.search_many(queries, 10, RRF(), *scorers)
        for index in indexes.values():
            assert_same(expected, index.search_many(queries, 10, RRF(), *scorers))
    for index in targets:
        index.merge(force=True)
    for scorers in arms:
        expected = single.search_many(queries, 10, RRF(), *scorers)
        for index in indexes.values():
            assert_same(expected, index.search_many(queries, 10, RRF(), *scorers))
        assert not set(deleted) & {key for results in expected for key in results.keys}
    for index in targets:
        index.close()


def test_the_link_table_is_built_once_per_cut(
    tmp_path: Path, corpus: tuple[list[Document], list[Query]]
) -> None:
    documents, queries = corpus
    calls: dict[str, int] = {}

    def factory(directories: Sequence[Path], options: Mapping[str, Any] | None, readonly: bool) -> ShardGroup:
        return CountingGroup(local_shards(directories, options, readonly), calls)

    graph: list[Scorer] = [BM25Scorer(), GraphScorer(BM25Scorer())]
    with ShardedIndex.create(tmp_path / "s", 2, factory=factory) as sharded:
        sharded.add_many(documents[:1500], progress=False)
        sharded.commit()
        sharded.search_many(queries[:3], 10, RRF(), BM25Scorer())
        assert calls.get("links", 0) == 0  # no graph scorer, no table
        sharded.search_many(queries[:3], 10, RRF(), *graph)
        sharded.search(queries[3], 10, RRF(), *graph)
        assert calls["links"] == 1
        sharded.add_many(documents[1500:], progress=False)
        sharded.refresh()  # a new cut: the table of the old one is stale
        with Index() as single:
            single.add_many(documents, progress=False)
            assert_same(
                single.search_many(queries, 10, RRF(), *graph),
                sharded.search_many(queries, 10, RRF(), *graph),
            )
        assert calls["links"] == 2
        sharded.commit()
        sharded.search(queries[0], 10, RRF(), *graph)
        assert calls["links"] == 3


def test_explain_of_a_sharded_graph_search(
    built: tuple[Index, dict[int, ShardedIndex]], corpus: tuple[list[Document], list[Query]]
) -> None:
    single, sharded = built
    _, queries = corpus
    scorers: list[Scorer] = [BM25Scorer(), GraphScorer(BM25Scorer())]
    want = single.search(queries[0], 10, RRF(), *scorers)
    have = sharded[4].search(queries[0], 10, RRF(), *scorers)
    assert [hit.to_dict() for hit in have] == [hit.to_dict() for hit in want]
    assert have.signals == ("bm25", "graph")
    plans = have.plans
    assert plans["graph"] == want.plans["graph"]  # run once, at the coordinator: its own plan
    # BM25 ran on each shard: each shard's plan under its name, their postings the single index's.
    sharded_bm25, single_bm25 = plans["bm25"], want.plans["bm25"]
    assert sharded_bm25 is not None and single_bm25 is not None and sharded_bm25["shards"] == 4
    assert (
        sum(int(sharded_bm25[f"{name}.postings"] or 0) for name in sharded[4].shards)
        == single_bm25["postings"]
    )
    assert have.to_dict()["hits"] == want.to_dict()["hits"]
    assert any(hit.signals[1].rank is not None for hit in have)


def test_paths_that_cannot_be_exact_are_still_refused(
    built: tuple[Index, dict[int, ShardedIndex]], corpus: tuple[list[Document], list[Query]]
) -> None:
    _, sharded = built
    _, queries = corpus
    # A graph scorer seeding a graph scorer: the inner one would run on each shard's part of the graph.
    nested = GraphScorer(PageRankScorer(BM25Scorer()))
    with pytest.raises(PartialGraphError, match=r"SCALING\.md"):
        sharded[2].search(queries[0], 10, RRF(), nested)
    # One shard is the whole collection: exact there, as before.
    with Index.open(sharded[1].path / sharded[1].shards[0], readonly=True) as whole:
        assert_same(
            whole.search_many(queries[:3], 10, RRF(), nested),
            sharded[1].search_many(queries[:3], 10, RRF(), nested),
        )


class WholeCollectionScorer:
    """A user scorer on the protocol: the in-degree of the seed scorer's top 3's neighbours."""

    name = "neighbours"

    def __init__(self, answer: object = None) -> None:
        self.answer = answer

    def collection_inputs(self, query: Query) -> object:
        if self.answer is not None:
            return self.answer
        return [(BM25Scorer(), query, 3)]

    def score_inputs(self, snapshot: Snapshot, query: Query, k: int, inputs: Sequence[Stream]) -> Stream:
        linked = snapshot.linked()
        seeds = inputs[0].ids
        counts = np.asarray(linked[seeds].sum(axis=0)).ravel() if seeds.size else np.zeros(snapshot.n_docs)
        ids = np.flatnonzero(counts > 0).astype(np.int64)
        return Stream.ranked(ids, counts[ids].astype(np.float64), k, snapshot)

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return self.score_inputs(snapshot, query, k, [BM25Scorer().score(snapshot, query, 3)])


def test_a_users_whole_collection_scorer_runs_through_the_protocol(
    built: tuple[Index, dict[int, ShardedIndex]], corpus: tuple[list[Document], list[Query]]
) -> None:
    single, sharded = built
    _, queries = corpus
    scorer = WholeCollectionScorer()
    expected = single.search_many(queries, 10, RRF(), BM25Scorer(), scorer)
    for count in COUNTS:
        assert_same(expected, sharded[count].search_many(queries, 10, RRF(), BM25Scorer(), scorer))
    for bad in ("seeds", [("bm25", queries[0], 3)], [(BM25Scorer(), queries[0], 0)]):
        with pytest.raises(ScorerOutputError, match=r"neighbours.*collection_inputs"):
            sharded[2].search(queries[0], 10, RRF(), WholeCollectionScorer(bad))


def test_a_link_view_answers_keys_and_links_and_refuses_the_rest() -> None:
    keys = np.array(["a", "b", "c"], dtype=np.str_)
    from weftsearch.engine.snapshot import link_matrix

    view = LinkView(
        generation=3, keys=keys, links=link_matrix(3, np.array([0, 1, 2, 2]), np.array([1, 2, 2, -1]))
    )
    assert view.n_docs == 3 and view.ids_follow_keys and view.keys() == ["a", "b", "c"]
    assert view.ids_of(["c", "zz", "a", "b\x00"]).tolist() == [2, -1, 0, -1]
    assert view.links().toarray().tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    assert view.linked().toarray().tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert view.allowed(Query(text="x")) is None
    mask = np.array([True, False, True])
    assert view.with_allowed(mask).allowed(Query(text="x", filter="@time > 1")) is mask
    with pytest.raises(InvalidParameterError, match="no filter mask"):
        view.allowed(Query(text="x", filter="@time > 1"))
    for read in (
        lambda: view.postings(["x"]),
        lambda: view.doc_lengths,
        lambda: view.vectors(),
        lambda: view.times(),
        lambda: view.fields_of(np.array([0])),
        lambda: view.query_terms("x"),
        lambda: view.latest_time,
    ):
        with pytest.raises(InvalidParameterError, match="keys and links only"):
            read()


# ---------------------------------------------------------------------------- read-only refresh


def small(count: int, tag: str) -> list[Document]:
    return [
        Document(f"{tag}{i}", f"note {tag} {i} graph", links=(f"{tag}{(i + 1) % count}",))
        for i in range(count)
    ]


def test_a_read_only_sharded_index_refreshes_to_the_writers_new_cut(tmp_path: Path) -> None:
    first, second = small(30, "a"), small(20, "b")
    with ShardedIndex.create(tmp_path / "s", 3) as writer:
        writer.add_many(first, progress=False)
        writer.commit()
        with ShardedIndex.open(tmp_path / "s", readonly=True) as reader:
            opened = reader.cut
            assert reader.refresh() == opened  # nothing new: the same cut
            before = reader.search("note graph", 100, RRF(), BM25Scorer())
            writer.add_many(second, progress=False)
            writer.refresh()  # published to the writer only: nothing recorded
            assert reader.refresh() == opened
            committed = writer.commit()
            assert reader.refresh() == committed == reader.cut
            after = reader.search_many(["note graph"], 100, RRF(), BM25Scorer(), GraphScorer(BM25Scorer()))
            with Index() as single:
                single.add_many(first + second, progress=False)
                assert_same(
                    single.search_many(["note graph"], 100, RRF(), BM25Scorer(), GraphScorer(BM25Scorer())),
                    after,
                )
            assert len(before) == 30 and len(after[0]) == 50
            assert reader.get("b3").key == "b3"


def test_a_read_only_refresh_never_adopts_half_a_commit(tmp_path: Path) -> None:
    """A writer between shard commits (one shard past the record): the reader keeps its whole cut."""
    with ShardedIndex.create(tmp_path / "s", 2) as writer:
        writer.add_many(small(40, "a"), progress=False)
        writer.commit()
        with ShardedIndex.open(tmp_path / "s", readonly=True) as reader:
            opened = reader.cut
            expected = reader.search("note graph", 100, RRF(), BM25Scorer())
            more = small(40, "c")
            writer.add_many(more, progress=False)
            number = writer.shards.index(writer.shard_of(more[0].key))
            other = 1 - number
            # One shard commits, the record is not written (the writer stopped there).
            committed = writer._group.call("commit", {number: (999,)}, read=False)[number]
            assert reader.refresh() == opened
            assert_same([expected], [reader.search("note graph", 100, RRF(), BM25Scorer())])
            record_path = tmp_path / "s" / "SHARDS"
            record = json.loads(record_path.read_text())["body"]
            assert record["generations"][number] < committed
            generations = list(record["generations"])
            generations[number] = committed
            # A newer record naming the generations before that shard commit: that shard is past
            # it (the writer committed it again), so the record is read again, then the cut kept.
            record["cut"] += 5
            reseal_record(record_path, cut=record["cut"])
            assert reader.refresh() == opened
            assert_same([expected], [reader.search("note graph", 100, RRF(), BM25Scorer())])
            # A record naming a generation a shard does not have: refused, the cut kept.
            record["generations"] = list(generations)
            record["generations"][other] += 3
            reseal_record(record_path, generations=record["generations"])
            with pytest.raises(
                ShardedCutError, match=rf"{writer.shards[other]} at generation \d+, recorded \d+"
            ):
                reader.refresh()
            assert reader.cut == opened
            assert_same([expected], [reader.search("note graph", 100, RRF(), BM25Scorer())])
            # The record the writer meant: adopted whole.
            record["generations"] = list(generations)
            reseal_record(record_path, generations=record["generations"])
            assert reader.refresh() == record["cut"]
            got = reader.search("note graph", 100, RRF(), BM25Scorer())
            assert len(got) == 40 + sum(1 for d in more if writer.shard_of(d.key) == writer.shards[number])


def test_a_graph_search_missing_a_shard_fails_naming_it_or_is_partial_when_asked(
    tmp_path: Path, corpus: tuple[list[Document], list[Query]]
) -> None:
    documents, queries = corpus
    groups: list[FailingGroup] = []
    factory = failing_factory(groups)
    scorers: list[Scorer] = [BM25Scorer(), PageRankScorer(BM25Scorer(), restart="score")]
    with ShardedIndex.create(tmp_path / "s", 2, factory=factory) as sharded:
        sharded.add_many(documents, progress=False)
        sharded.commit()
        sharded.search(queries[0], 10, RRF(), *scorers)  # the whole table, cached
        groups[0].down = True
        with pytest.raises(ShardUnavailableError, match="shard-0001"):
            sharded.search(queries[0], 10, RRF(), *scorers)
        partial = sharded.search_many(queries, 10, RRF(), *scorers, allow_partial=True)
        assert all(results.missing_shards == ("shard-0001",) for results in partial)
        # What answered is scored as the collection of shard 0's documents alone, links included.
        with Index() as alone:
            alone.add_many([d for d in documents if sharded.shard_of(d.key) == "shard-0000"], progress=False)
            assert_same(alone.search_many(queries, 10, RRF(), *scorers), partial)
        groups[0].down = False
        with Index() as single:
            single.add_many(documents, progress=False)
            assert_same(
                single.search_many(queries, 10, RRF(), *scorers),
                sharded.search_many(queries, 10, RRF(), *scorers),
            )
