"""ShardedIndex with in-process shards: the single index's rankings to the bit, the cut, the record.

Every comparison is keys, order and the bytes of every score (fused and per
stream), against an ordinary Index holding the same documents.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.distributed.building import close_all, reseal_record, sharded_copies
from tests.distributed.corpus import scifact_documents, scifact_queries
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    F,
    Filter,
    Fuser,
    GraphScorer,
    Index,
    Query,
    RecencyScorer,
    ScoreFusion,
    Scorer,
    SearchResults,
    Snapshot,
    Stream,
    VectorScorer,
    WeightedRRF,
)
from weftsearch.distributed import RECORD, ShardedIndex, shard_of
from weftsearch.engine.stream import PlanValue
from weftsearch.errors import (
    CorruptIndexError,
    DuplicateKeyError,
    FieldTypeError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidParameterError,
    PartialGraphError,
    ShardedCutError,
    UnknownFieldError,
)

SLICE = 500
DAY = 86_400.0

ARMS: dict[str, Callable[[], list[Scorer]]] = {
    "text": lambda: [BM25Scorer()],
    "text-k1": lambda: [BM25Scorer(k1=0.9, b=0.4)],
    "vector": lambda: [VectorScorer(nprobe=None)],
    "recency": lambda: [RecencyScorer(half_life=30 * DAY)],
    "hybrid": lambda: [BM25Scorer(), VectorScorer(nprobe=None)],
    "hybrid3": lambda: [BM25Scorer(), VectorScorer(nprobe=None), RecencyScorer(half_life=30 * DAY)],
}
FUSERS: list[Fuser] = [RRF(), WeightedRRF([2.0, 1.0]), ScoreFusion()]


def assert_same(expected: Sequence[SearchResults], got: Sequence[SearchResults]) -> None:
    """Same keys, order, fused scores and per-stream ranks/scores/contributions, to the bit."""
    assert len(expected) == len(got)
    for position, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have.keys == want.keys, f"query {position}"
        assert have.scores.tobytes() == want.scores.tobytes(), f"query {position}"
        a, b = want.explain_arrays(), have.explain_arrays()
        assert b.ranks.tolist() == a.ranks.tolist()
        assert b.scores.tobytes() == a.scores.tobytes()
        assert b.contributions.tobytes() == a.contributions.tobytes()
        assert have.fuser == want.fuser and have.signals == want.signals
        assert [dict(hit.fields) for hit in have] == [dict(hit.fields) for hit in want]


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    return scifact_documents(SLICE)


@pytest.fixture(scope="module")
def queries() -> list[Query]:
    return scifact_queries(25)


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, documents: list[Document]
) -> Iterator[tuple[Index, dict[int, ShardedIndex]]]:
    root = tmp_path_factory.mktemp("sharded")
    single = Index.create(root / "single", vector_dim=384)
    single.add_many(documents)
    single.commit()
    sharded = sharded_copies(root, documents, (1, 2, 4), vector_dim=384)
    yield single, sharded
    close_all(single, sharded)


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("arm", sorted(ARMS))
def test_every_arm_equals_the_single_index_to_the_bit(
    built: tuple[Index, dict[int, ShardedIndex]], queries: list[Query], arm: str, count: int
) -> None:
    single, sharded = built
    for fuser in FUSERS[: 1 if len(ARMS[arm]()) == 1 else 3]:
        for k, depth in ((10, None), (3, 40)):
            if isinstance(fuser, WeightedRRF) and len(ARMS[arm]()) != 2:
                continue
            expected = single.search_many(queries, k, fuser, *ARMS[arm](), depth=depth)
            got = sharded[count].search_many(queries, k, fuser, *ARMS[arm](), depth=depth)
            assert_same(expected, got)
    assert sum(len(r) for r in got) > 0  # the arm has results to compare


@pytest.mark.parametrize("count", [2, 4])
def test_filtered_arms_equal_the_single_index(
    built: tuple[Index, dict[int, ShardedIndex]], queries: list[Query], count: int
) -> None:
    single, sharded = built
    filters: list[Filter | str] = [
        "year >= 2005 and source in ('a', 'b')",
        (F("source") == "c") | (F("year") < 1995),
        "not exists(year)",
        "@time >= 1603000000",
    ]
    for condition in filters:
        filtered = [dataclasses.replace(query, filter=condition) for query in queries[:10]]
        for scorers in (ARMS["text"], ARMS["vector"], ARMS["hybrid3"]):
            assert_same(
                single.search_many(filtered, 10, RRF(), *scorers()),
                sharded[count].search_many(filtered, 10, RRF(), *scorers()),
            )


def test_a_filter_on_a_field_one_shard_lacks_is_checked_as_the_whole_collection(tmp_path: Path) -> None:
    """Only one document has the field: the shards without it must not refuse the filter."""
    docs = [Document(key=f"d{i}", text=f"alpha beta {i}") for i in range(20)]
    docs.append(Document(key="special", text="alpha gamma", fields={"rare": "x"}))
    sharded = ShardedIndex.create(tmp_path / "s", 4)
    sharded.add_many(docs)
    sharded.commit()
    single = Index(analyzer="english")
    single.add_many(docs)
    query = Query(text="alpha", filter="rare == 'x'")
    assert_same(
        [single.search(query, 5, RRF(), BM25Scorer())], [sharded.search(query, 5, RRF(), BM25Scorer())]
    )
    with pytest.raises(UnknownFieldError):
        sharded.search(Query(text="alpha", filter="nope == 1"), 5, RRF(), BM25Scorer())
    sharded.close()


@pytest.mark.parametrize("count", [2, 4])
def test_after_deletes_replacements_and_merges_the_rankings_still_equal(
    tmp_path: Path, documents: list[Document], queries: list[Query], count: int
) -> None:
    rng = np.random.default_rng(count)
    single = Index.create(tmp_path / "single", vector_dim=384)
    sharded = ShardedIndex.create(tmp_path / "sharded", count, vector_dim=384)
    half = len(documents) // 2
    for index in (single, sharded):  # two batches, two commits: several segments per shard
        index.add_many(documents[:half])
        index.commit()
        index.add_many(documents[half:])
        index.commit()
    doomed = [documents[i].key for i in rng.choice(len(documents), 60, replace=False)]
    changed = [
        dataclasses.replace(documents[i], text=documents[i].text + " cancer cancer therapy")
        for i in rng.choice(len(documents), 20, replace=False)
        if documents[i].key not in doomed
    ]
    assert single.delete_many(doomed) == sharded.delete_many(doomed) == 60
    single.add_many(changed)
    sharded.add_many(changed)
    single.commit()
    sharded.commit()
    for scorers in (ARMS["text"], ARMS["hybrid3"]):
        assert_same(
            single.search_many(queries, 10, RRF(), *scorers()),
            sharded.search_many(queries, 10, RRF(), *scorers()),
        )
    single.merge(force=True)
    sharded.merge(force=True)
    for scorers in (ARMS["text"], ARMS["vector"], ARMS["hybrid3"]):
        assert_same(
            single.search_many(queries, 10, RRF(), *scorers()),
            sharded.search_many(queries, 10, RRF(), *scorers()),
        )
    sharded.close()
    single.close()


def test_without_the_collection_statistics_shards_would_score_otherwise(
    built: tuple[Index, dict[int, ShardedIndex]], queries: list[Query]
) -> None:
    """The exactness is the statistics' doing: a shard's own N, avgdl and df give other scores."""
    single, sharded = built
    expected = single.search(queries[0], 10, RRF(), BM25Scorer())
    shard = Index.open(sharded[4].path / sharded[4].shards[0], readonly=True)
    local = shard.search(queries[0], 10, RRF(), BM25Scorer())
    common = set(local.keys) & set(expected.keys)
    assert common
    assert any(local.scores[local.keys.index(k)] != expected.scores[expected.keys.index(k)] for k in common)
    shard.close()


def test_graph_scorers_are_exact_on_every_shard_count(
    built: tuple[Index, dict[int, ShardedIndex]], queries: list[Query]
) -> None:
    """Were refused on more than one shard; the coordinator now runs them on the collection's links."""
    single, sharded = built
    graph: list[Scorer] = [BM25Scorer(), GraphScorer(BM25Scorer(), max_depth=2)]
    filtered = [dataclasses.replace(query, filter="year >= 2005") for query in queries[:5]]
    for count in (1, 2, 4):
        assert_same(
            single.search_many(queries[:5], 10, RRF(), *graph),
            sharded[count].search_many(queries[:5], 10, RRF(), *graph),
        )
        assert_same(
            single.search_many(filtered, 10, RRF(), *graph),
            sharded[count].search_many(filtered, 10, RRF(), *graph),
        )
    # A graph scorer as another's seed scorer would run on one shard's part of the graph: refused.
    with pytest.raises(PartialGraphError, match=r"SCALING\.md"):
        sharded[2].search(queries[0], 10, RRF(), GraphScorer(GraphScorer(BM25Scorer())))


def test_shard_of_is_stable_across_processes_and_spreads_keys() -> None:
    keys = [f"doc-{i}" for i in range(2000)]
    here = [shard_of(key, 7) for key in keys]
    script = "import sys, json; from weftsearch.distributed import shard_of; " + (
        "print(json.dumps([shard_of(f'doc-{i}', 7) for i in range(2000)]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    there = json.loads(
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    assert here == there
    counts = np.bincount(here, minlength=7)
    assert counts.min() > 2000 / 7 * 0.8


def test_refresh_makes_a_new_cut_only_when_something_was_written(tmp_path: Path) -> None:
    """As Index.refresh changes nothing when nothing changed: no empty cut after a commit or a refresh."""
    sharded = ShardedIndex.create(tmp_path / "s", 3)
    sharded.add_many([Document(key=f"d{i}", text="apple pie") for i in range(6)])
    committed = sharded.commit()
    assert sharded.refresh() == committed == sharded.generation  # nothing written since the commit
    sharded.delete("d0")
    published = sharded.refresh()
    assert published > committed and sharded.refresh() == published  # once, then nothing new
    assert sharded.delete("d0") is False and sharded.delete("d1") is True
    assert sharded.refresh() > published
    assert len(sharded.search("apple", 10, RRF(), BM25Scorer())) == 4
    sharded.close()


def test_searches_read_the_previous_cut_until_commit_and_refresh(tmp_path: Path) -> None:
    sharded = ShardedIndex.create(tmp_path / "s", 3)
    sharded.add_many([Document(key=f"d{i}", text="apple pie") for i in range(10)])
    assert len(sharded.search("apple", 50, RRF(), BM25Scorer())) == 0  # not committed yet
    first = sharded.commit()
    assert len(sharded.search("apple", 50, RRF(), BM25Scorer())) == 10
    sharded.add_many([Document(key=f"e{i}", text="apple tart") for i in range(5)])
    sharded.delete_many(["d0", "d1"])
    assert len(sharded.search("apple", 50, RRF(), BM25Scorer())) == 10  # still the committed cut
    assert sharded.refresh() > first
    assert len(sharded.search("apple", 50, RRF(), BM25Scorer())) == 13
    sharded.close()  # the refreshed writes were never committed: discarded
    reopened = ShardedIndex.open(tmp_path / "s")
    assert reopened.cut == first
    assert len(reopened.search("apple", 50, RRF(), BM25Scorer())) == 10
    reopened.close()


def test_a_record_behind_its_shards_is_refused_naming_them_and_repair_records_them(tmp_path: Path) -> None:
    sharded = ShardedIndex.create(tmp_path / "s", 2)
    sharded.add_many([Document(key=f"d{i}", text="apple") for i in range(10)])
    sharded.commit()
    record = (tmp_path / "s" / RECORD).read_bytes()
    sharded.add_many([Document(key=f"e{i}", text="apple") for i in range(10)])
    sharded.commit()
    sharded.close()
    (tmp_path / "s" / RECORD).write_bytes(record)  # as if the writer stopped before recording the cut
    with pytest.raises(ShardedCutError, match=r"shard-0000 at generation \d+, recorded \d+"):
        ShardedIndex.open(tmp_path / "s")
    repaired = ShardedIndex.open(tmp_path / "s", repair=True)
    assert len(repaired.search("apple", 50, RRF(), BM25Scorer())) == 20
    repaired.close()
    ShardedIndex.open(tmp_path / "s", readonly=True).close()  # the record now matches


def test_the_batch_is_checked_whole_before_any_shard_gets_it(tmp_path: Path) -> None:
    sharded = ShardedIndex.create(tmp_path / "s", 2)
    sharded.add_many([Document(key="a", text="x", fields={"year": 1})])
    with pytest.raises(DuplicateKeyError):
        sharded.add_many([Document(key="b", text="x"), Document(key="b", text="y")])
    with pytest.raises(FieldTypeError):  # "year" is a number in the other shard's document
        sharded.add_many([Document(key=f"k{i}", text="x", fields={"year": "old"}) for i in range(8)])
    sharded.commit()
    assert len(sharded.search("x", 10, RRF(), BM25Scorer())) == 1
    sharded.close()


@pytest.mark.slow
def test_full_scifact_text_vector_ivf_and_hybrid_equal_the_single_index(tmp_path: Path) -> None:
    """All 5,183 documents: the single index's segment has IVF lists, the shards' smaller ones may
    not; probing every list reads every row, so the vector arm at full probe is exact on both."""
    documents = scifact_documents(None)
    queries = scifact_queries(300)
    single = Index.create(tmp_path / "single", vector_dim=384)
    single.add_many(documents)
    single.commit()
    everything = VectorScorer(nprobe=1_000_000)
    arms: list[list[Scorer]] = [
        [BM25Scorer()],
        [VectorScorer(nprobe=None)],
        [everything],
        [BM25Scorer(), everything],
    ]
    for count in (1, 2, 4):
        sharded = ShardedIndex.create(tmp_path / f"s{count}", count, vector_dim=384)
        sharded.add_many(documents, progress=False)
        sharded.commit()
        for scorers in arms:
            assert_same(
                single.search_many(queries, 10, RRF(), *scorers),
                sharded.search_many(queries, 10, RRF(), *scorers),
            )
        sharded.close()
    single.close()


def test_a_missing_or_damaged_record_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="SHARDS"):
        ShardedIndex.open(tmp_path)
    sharded = ShardedIndex.create(tmp_path / "s", 2)
    sharded.close()
    (tmp_path / "s" / RECORD).write_text('{"format": "weft-search-sharded", "version": 3}')
    with pytest.raises(CorruptIndexError, match="SHARDS: not a sealed record"):
        ShardedIndex.open(tmp_path / "s")
    with pytest.raises(IndexExistsError):
        ShardedIndex.create(tmp_path / "s", 2)


def test_a_sharded_index_has_an_id_in_its_record_and_every_shard(tmp_path: Path) -> None:
    """Files kept beside the record (the server's ranking profiles) name the sharded index by this id."""
    with ShardedIndex.create(tmp_path / "s", 2) as sharded:
        made = sharded.index_id
        assert len(made) == 32 and int(made, 16) >= 0
        sharded.commit()
    assert json.loads((tmp_path / "s" / RECORD).read_text())["body"]["index_id"] == made
    for slot in range(2):
        shard = json.loads((tmp_path / "s" / f"shard-{slot:04d}" / "SHARD").read_text())["body"]
        assert (shard["sharded_index_id"], shard["slot"], shard["shards"]) == (made, slot, 2)
    with ShardedIndex.open(tmp_path / "s", readonly=True) as reopened:
        assert reopened.index_id == made
    with ShardedIndex.open(tmp_path / "s") as writable:
        writable.commit()
        assert writable.index_id == made  # a commit keeps it


def test_a_given_index_id_names_the_sharded_index_and_the_shards_get_their_own(tmp_path: Path) -> None:
    given = "0123456789abcdef0123456789abcdef"
    with ShardedIndex.create(tmp_path / "s", 2, index_id=given) as sharded:
        assert sharded.index_id == given
    shard_ids = json.loads((tmp_path / "s" / RECORD).read_text())["body"]["shard_ids"]
    assert len(set(shard_ids)) == 2 and given not in shard_ids
    with pytest.raises(InvalidParameterError, match="index_id must be 32 lowercase hex digits, got 'x'"):
        ShardedIndex.create(tmp_path / "t", 2, index_id="x")


def test_a_malformed_id_in_the_record_is_refused(tmp_path: Path) -> None:
    ShardedIndex.create(tmp_path / "s", 2).close()
    reseal_record(tmp_path / "s" / RECORD, index_id="../x")
    with pytest.raises(CorruptIndexError, match="index_id"):
        ShardedIndex.open(tmp_path / "s")


class _CutShortWhere:
    """A user's scorer (BM25 underneath) that reports a budget stop on any snapshot holding ``key``."""

    name = "mine"

    def __init__(self, key: str) -> None:
        self.key = key
        self.inner = BM25Scorer()

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        stream = self.inner.score(snapshot, query, k)
        held = self.key in set(snapshot.keys())
        plan: dict[str, PlanValue] = {"path": "mine", "rows": len(stream)}
        return Stream(stream.ids, stream.scores, plan=plan, complete=not held)


@pytest.mark.parametrize("count", [1, 2, 4])
def test_a_stream_cut_short_on_any_shard_is_cut_short_for_the_collection(
    built: tuple[Index, dict[int, ShardedIndex]], documents: list[Document], queries: list[Query], count: int
) -> None:
    single, sharded = built
    index = sharded[count]
    cut = _CutShortWhere(documents[0].key)
    fine = _CutShortWhere("no such key")
    got = index.search(queries[0], 10, RRF(), BM25Scorer(), cut)
    assert got.cut_short == ("mine",)  # one shard holds the key: never a silent "complete"
    assert single.search(queries[0], 10, RRF(), BM25Scorer(), cut).cut_short == ("mine",)
    plan = got.plans["mine"]
    assert plan is not None and plan["shards"] == count
    assert {name.split(".")[0] for name in plan if name != "shards"} == set(index.shards)
    assert index.search(queries[0], 10, RRF(), BM25Scorer(), fine).cut_short == ()


def test_a_deeply_nested_record_is_corrupt_not_a_recursion_error(tmp_path: Path) -> None:
    # Issue 26 item 4: every JSON record read from disk; SHARDS was a RecursionError.
    root = tmp_path / "s"
    root.mkdir()
    (root / RECORD).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CorruptIndexError, match="not JSON"):
        ShardedIndex.open(root)


def test_facets_add_across_shards_to_the_single_index_counts(tmp_path: Path) -> None:
    """Issue 30: each shard counts its documents' values; the sum is the one index's facets."""
    rng = np.random.default_rng(4)
    docs = [
        Document(
            key=f"d{i:03d}",
            text=f"alpha beta {i % 5}",
            fields={
                "tags": [f"t{int(t)}" for t in rng.integers(0, 6, int(rng.integers(0, 4)))],
                "year": int(rng.integers(2000, 2005)),
                **({"rare": True} if i == 7 else {}),
            },
        )
        for i in range(150)
    ]
    single = Index(analyzer="english")
    single.add_many(docs)
    single.delete("d010")
    sharded = ShardedIndex.create(tmp_path / "s", 3)
    sharded.add_many(docs)
    sharded.delete_many(["d010"])
    sharded.commit()
    try:
        fields = ["tags", "year", "rare"]
        for condition in (
            None,
            "tags contains any ('t1', 't2')",
            "rare == true",
            Query("alpha", filter="year < 2002"),
        ):
            for k in (1, 4, 50):
                assert sharded.facets(condition, fields, k) == single.facets(condition, fields, k), (
                    condition,
                    k,
                )
        query = Query("alpha", filter="tags contains 't3'")
        results = sharded.search(query, 5, RRF(), BM25Scorer(), facets=["tags"], facet_k=3)
        assert results.facets == single.facets(query, ["tags"], 3)
        with pytest.raises(UnknownFieldError):
            sharded.facets(None, ["nope"])
    finally:
        sharded.close()
