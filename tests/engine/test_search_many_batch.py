"""``Index.search_many`` with one BM25 stream (issue 31, item 2): one batch, one search's results each.

The batch plans every query's terms at once, runs them in one compiled call (on
threads inside C when asked) and reads the hits' records and keys in one pass;
each query's results must still be exactly what ``Index.search`` gives it: the
same keys in the same order (ties on score descending, key ascending), the same
score bits, explain arrays and plan counts, on several segments with deletions,
filters, empty queries, queries with no known term and damaged records.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plans import without_paths
from weftsearch import RRF, BM25Scorer, Document, F, Index, Query, SearchResults
from weftsearch.engine.stream import _is_vouched_batch
from weftsearch.errors import UnknownFieldError
from weftsearch.scorers.bm25 import PLAN_KEYS


def build(seed: int, segments: int, docs: int, vocabulary: int, deleted: float) -> tuple[Index, list[str]]:
    """Segments of Zipfian words from a few lengths (many exact ties), random keys, a ``tag`` field."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocabulary)]
    weights = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    weights /= weights.sum()
    index = Index("simple")
    serial = 0
    for _ in range(segments):
        batch = []
        for _ in range(docs):
            length = int(rng.integers(1, 5))
            text = " ".join(rng.choice(words, size=length, p=weights).tolist())
            tag = "a" if rng.random() < 0.5 else "b"
            batch.append(Document(f"{rng.integers(10**4):04d}-{serial}", text, fields={"tag": tag}))
            serial += 1
        index.add_many(batch)
        index.snapshot()  # seals the batch into its own in-memory segment
    keys = index.keys()
    doomed = [key for key in keys if rng.random() < deleted]
    if doomed:
        index.delete_many(doomed)
    return index, words


def batch_of(seed: int, words: list[str], count: int) -> list[Query | str]:
    """Random queries (repeated terms, unknown terms, filters), an empty one and one with no known term."""
    rng = np.random.default_rng(seed + 11)
    pool = [*words, "absent"]
    batch: list[Query | str] = []
    for n in range(count):
        text = " ".join(rng.choice(pool, size=int(rng.integers(1, 7))).tolist())
        if n % 4 == 1:
            batch.append(Query(text, filter=F("tag") == "a"))
        elif n % 4 == 2:
            batch.append(text)
        else:
            batch.append(Query(text))
    return [*batch, "", Query(""), "absent", Query("absent nowhere"), words[0], f"{words[0]} {words[0]}"]


def differences(many: list[SearchResults], alone: list[SearchResults]) -> list[str]:
    """Every query (by position) whose batch results differ from its own search in any way."""
    found = []
    for position, (got, want) in enumerate(zip(many, alone, strict=True)):
        got_arrays, want_arrays = got.explain_arrays(), want.explain_arrays()
        if (
            got.keys != want.keys
            or got.score_array.tobytes() != want.score_array.tobytes()
            or got_arrays.ranks.tobytes() != want_arrays.ranks.tobytes()
            or got_arrays.scores.tobytes() != want_arrays.scores.tobytes()
            or got_arrays.contributions.tobytes() != want_arrays.contributions.tobytes()
            or without_paths(got.to_dict()) != without_paths(want.to_dict())
        ):
            found.append(f"query {position}")
    return found


#: The batches both to-the-bit oracles below draw: index shape, deletes, k, depth and threads.
batch_cases = given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 4),
    docs=st.integers(1, 150),
    vocabulary=st.integers(1, 15),
    deleted=st.sampled_from([0.0, 0.1, 0.5]),
    k=st.integers(1, 40),
    deeper=st.booleans(),
    threads=st.sampled_from([None, 1, 2]),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@batch_cases
def test_search_many_is_search_for_each_query_to_the_bit(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    k: int,
    deeper: bool,
    threads: int | None,
) -> None:
    index, words = build(seed, segments, docs, vocabulary, deleted)
    batch = batch_of(seed, words, 20)
    depth = k + 7 if deeper else None
    if not index.snapshot().field_kinds():
        # Every document deleted: a filter names a field no live document has. The batch
        # refuses it before searching anything, as a search of that query does.
        with pytest.raises(UnknownFieldError):
            index.search_many(batch, k, RRF(), BM25Scorer(), depth=depth, threads=threads)
        with pytest.raises(UnknownFieldError):
            index.search(batch[1], k, RRF(), BM25Scorer(), depth=depth)
        return
    many = index.search_many(batch, k, RRF(), BM25Scorer(), depth=depth, threads=threads)
    alone = [index.search(query, k, RRF(), BM25Scorer(), depth=depth) for query in batch]
    assert differences(many, alone) == []


@pytest.mark.parametrize("threads", [None, 1, 2])
@pytest.mark.parametrize("segments", [1, 3])
def test_every_query_keeps_its_own_plan(segments: int, threads: int | None) -> None:
    """Each query's plan is its own (terms, postings, what the kernel read), as its own search's."""
    index, words = build(3, segments, 120, 12, 0.1)
    batch = batch_of(3, words, 40)
    many = index.search_many(batch, 5, RRF(), BM25Scorer(), threads=threads)
    for query, results in zip(batch, many, strict=True):
        plan = results.plans["bm25"]
        assert plan is not None and tuple(plan) == PLAN_KEYS
        want = index.search(query, 5, RRF(), BM25Scorer()).plans["bm25"]
        assert want is not None
        assert {key: plan[key] for key in ("terms", "terms_matched", "segments", "postings")} == {
            key: want[key] for key in ("terms", "terms_matched", "segments", "postings")
        }


@pytest.mark.parametrize("segments", [1, 3])
def test_a_damaged_record_leaves_its_hit_out_of_the_batch_as_of_a_search(segments: int) -> None:
    """The batch reads all its record verdicts at once: a damaged hit is left out of each query holding it."""
    index, words = build(5, segments, 80, 6, 0.0)
    snapshot = index.snapshot()
    texts = [words[0], f"{words[0]} {words[1]}", words[1], "absent", words[0]]
    first = index.search(words[0], 8, RRF(), BM25Scorer())
    assert len(first.keys) >= 3
    victim = snapshot.id_of(first.keys[1])
    part = next(p for p in snapshot.parts if p.base <= victim < p.base + p.n_live)
    local = int(part.live_locals[victim - part.base])
    verdicts = part.reader.key_views()[0]
    assert verdicts[local] == 1  # checked sound by the first search
    verdicts[local] = 2  # as the reader's first check of a damaged record records it
    try:
        many = index.search_many(texts, 8, RRF(), BM25Scorer())
        alone = [index.search(text, 8, RRF(), BM25Scorer()) for text in texts]
    finally:
        verdicts[local] = 1
    assert differences(many, alone) == []
    assert first.keys[1] not in many[0].keys and many[0].keys == first.keys[:1] + first.keys[2:]
    assert many[4].keys == many[0].keys


def test_a_batch_decodes_no_key_until_one_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # As a search: the verdicts at the call, the keys at the first read; then the batch's keys
    # are made once and every other result takes its slice of them.
    from weftsearch.engine import snapshot as snapshot_module
    from weftsearch.storage.segment import SegmentReader

    decoded: list[int] = []
    views_read = snapshot_module._KeyViews.read
    keys_at = SegmentReader.keys_at

    def counting_read(self: snapshot_module._KeyViews, ids: list[int]) -> list[str]:
        decoded.append(len(ids))
        return views_read(self, ids)

    def counting_keys_at(self: SegmentReader, local: np.ndarray) -> list[str]:
        decoded.append(len(local))
        return keys_at(self, local)

    index = Index(analyzer="simple")
    rng = np.random.default_rng(2)
    words = ["graph", "retrieval", "sparse", "dense"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 4))).tolist()) for _ in range(300)]
    index.add_many([Document(f"k{i:04d}", text) for i, text in enumerate(texts)])
    queries = [Query(text=text) for text in ("graph sparse", "dense", "retrieval graph", "unknown")]
    for k in (5, 100):
        want = [index.search(query, k, RRF(), BM25Scorer()).keys for query in queries]
        monkeypatch.setattr(snapshot_module._KeyViews, "read", counting_read)
        monkeypatch.setattr(SegmentReader, "keys_at", counting_keys_at)
        decoded.clear()
        batch = index.search_many(queries, k, RRF(), BM25Scorer())
        assert decoded == []
        assert batch[1].keys == want[1]
        made = sum(decoded)
        assert made == sum(len(keys) for keys in want)  # the batch's, once
        assert [results.keys for results in batch] == want
        assert sum(decoded) == made
        monkeypatch.undo()


def unfiltered(seed: int, words: list[str], count: int) -> list[Query | str]:
    """:func:`batch_of` without its filtered queries: the batch the scorer hands back as one array batch."""
    return [
        query
        for query in batch_of(seed, words, count)
        if not (isinstance(query, Query) and query.filter is not None)
    ]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@batch_cases
def test_a_batch_read_from_the_kernels_arrays_is_search_for_each_query_to_the_bit(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    k: int,
    deeper: bool,
    threads: int | None,
) -> None:
    """No filter in the batch: its results are built from the batch's arrays (no stream per query)."""
    index, words = build(seed, segments, docs, vocabulary, deleted)
    batch = unfiltered(seed, words, 20)
    depth = k + 7 if deeper else None
    streams = BM25Scorer().score_many(
        index.snapshot(), [Query(q) if isinstance(q, str) else q for q in batch], k
    )
    assert _is_vouched_batch(streams, index.snapshot())  # the path under test
    many = index.search_many(batch, k, RRF(), BM25Scorer(), depth=depth, threads=threads)
    alone = [index.search(query, k, RRF(), BM25Scorer(), depth=depth) for query in batch]
    assert differences(many, alone) == []
    for got, want in zip(many, alone, strict=True):
        assert (got.signals, got.fuser, got.depth, got.cut_short, got.offset) == (
            want.signals,
            want.fuser,
            want.depth,
            want.cut_short,
            want.offset,
        )
        assert [hit.to_dict() for hit in got[1:3]] == [hit.to_dict() for hit in want[1:3]]
        assert got.next_cursor is None and got.facets is None


@pytest.mark.parametrize("merge", [True, False])
def test_a_batchs_lazy_parts_are_read_after_a_merge_and_after_close(
    tmp_path: Path, merge: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys, fields, plans and hits of an array batch are made when read, even once its segments are gone."""
    from weftsearch.engine import search as search_module

    batches: list[int] = []
    real = search_module._passed_through_batch

    def counting(*args: Any, **kwargs: Any) -> list[SearchResults]:
        batches.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(search_module, "_passed_through_batch", counting)
    index = Index.create(tmp_path / "index", "simple")
    rng = np.random.default_rng(4)
    words = ["graph", "retrieval", "sparse", "dense"]
    for part in range(3):
        index.add_many(
            [
                Document(
                    f"k{rng.integers(10**5):05d}-{part}-{n}",
                    " ".join(rng.choice(words, size=3).tolist()),
                    fields={"n": n},
                )
                for n in range(80)
            ]
        )
        index.commit()
    texts = ["graph", "sparse dense", "retrieval graph sparse", "nothing", ""]
    want = [index.search(text, k, RRF(), BM25Scorer()).to_dict() for text in texts for k in (10, 100)]
    unread = [index.search_many(texts, k, RRF(), BM25Scorer()) for k in (10, 100)]
    assert len(batches) == 2  # built from the batch's arrays
    unread_arrays = [results.explain_arrays() for batch in unread for results in batch]
    if merge:
        before = {path.name for path in (tmp_path / "index").iterdir()}
        index.delete_many(index.keys()[::4])
        index.commit()
        assert index.merge(force=True) >= 1
        assert before - {path.name for path in (tmp_path / "index").iterdir()}, "no segment file went away"
    index.close()
    gc.collect()
    got = [
        results.to_dict()
        for text_index in range(len(texts))
        for results in (unread[0][text_index], unread[1][text_index])
    ]
    assert got == want
    assert [a.ranks.tolist() for a in unread_arrays] == [
        results.explain_arrays().ranks.tolist() for batch in unread for results in batch
    ]


def test_a_batchs_results_are_read_from_two_threads_at_once() -> None:
    """Racing first reads of a batch's results (keys, hits, plans) give both threads the same answers."""
    index, words = build(8, 3, 120, 6, 0.1)
    texts = [words[0], f"{words[1]} {words[2]}", words[3 % len(words)], "absent"]
    want = [index.search(text, 7, RRF(), BM25Scorer()).to_dict() for text in texts]
    batches = [index.search_many(texts, 7, RRF(), BM25Scorer()) for _ in range(30)]
    barrier = threading.Barrier(2)
    seen: list[list[dict[str, object]]] = [[], []]
    failures: list[BaseException] = []

    def reader(slot: int) -> None:
        try:
            for batch in batches:
                barrier.wait()
                for results in batch:
                    if slot == 0:
                        results.keys  # noqa: B018 - the keys first, racing the other thread's hits
                    seen[slot].append(results.to_dict())
        except BaseException as exc:
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=reader, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures
    assert seen[0] == seen[1] == want * 30


#: What a caller may read first from one of a batch's results (each fills them all when it is the first).
FIRST_READS: dict[str, Any] = {
    "len": len,
    "keys": lambda results: results.keys,
    "plans": lambda results: results.plans,
    "a slice": lambda results: [hit.to_dict() for hit in results[1:3]],
    "the last hit": lambda results: results[-1].to_dict() if len(results) else None,
    "explain arrays": lambda results: results.explain_arrays().ranks.tolist(),
    "next cursor": lambda results: results.next_cursor,
    "repr": repr,
    "facets": lambda results: results.facets,
}


@pytest.mark.parametrize("first", sorted(FIRST_READS))
@pytest.mark.parametrize("segments", [1, 3])
def test_a_batchs_results_read_first_in_any_way_are_each_querys_search(first: str, segments: int) -> None:
    """Whatever is read first of a batch's results (which then fills them), they are the search's."""
    index, words = build(6, segments, 120, 8, 0.1)
    batch = unfiltered(6, words, 24)
    assert _is_vouched_batch(
        BM25Scorer().score_many(index.snapshot(), [Query(q) if isinstance(q, str) else q for q in batch], 6),
        index.snapshot(),
    )
    many = index.search_many(batch, 6, RRF(), BM25Scorer())
    alone = [index.search(query, 6, RRF(), BM25Scorer()) for query in batch]
    for got, want in zip(many, alone, strict=True):
        # A batch offers no cursor (a search's results do): None, read first or not.
        assert FIRST_READS[first](got) == (None if first == "next cursor" else FIRST_READS[first](want))
    assert differences(many, alone) == []
    with pytest.raises(AttributeError):
        getattr(many[0], "not_an_attribute")  # noqa: B009 - an unknown name is refused, not filled


def test_facets_of_a_batch_read_from_the_kernels_arrays_are_each_querys_own() -> None:
    """``search_many(..., facets=...)`` sets each result's facets before anything is read: they stay."""
    index, words = build(7, 2, 150, 8, 0.1)
    batch = unfiltered(7, words, 12)
    many = index.search_many(batch, 5, RRF(), BM25Scorer(), facets=["tag"])
    alone = [index.search(query, 5, RRF(), BM25Scorer(), facets=["tag"]) for query in batch]
    assert [results.facets for results in many] == [results.facets for results in alone]
    assert all(results.facets is not None for results in many)
    assert differences(many, alone) == []
