"""Issue 31: a search's keys are made when first read, and are exactly the keys it would have made at once.

A search decides which documents are hits (deletes, filters, damaged records: the
verdicts) when it runs and resolves their keys when :attr:`SearchResults.keys`, a hit,
iteration, ``to_dict`` or ``next_cursor`` first reads one. The oracle is the scorer's
whole stream put in canonical order by hand (score descending, key ascending, with
the keys from :meth:`Snapshot.keys_of`), over several segments with deletes, filters
and ties at the k-th across segments. The results stay readable after the index
merged its segments away or closed, and from two threads at once.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch import RRF, BM25Scorer, Document, Index, Query, SearchResults, Snapshot
from weftsearch.engine import snapshot as snapshot_module
from weftsearch.engine.filters import F
from weftsearch.storage.segment import SegmentReader

WORDS = ["graph", "retrieval", "sparse", "dense"]  # four words: many documents tie exactly


def documents(n: int, seed: int) -> list[Document]:
    """Documents with few distinct texts (exact ties) and keys in another order than insertion."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    return [
        Document(
            f"k{int(order[i]):04d}",
            " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))).tolist()),
            fields={"g": i % 3},
        )
        for i in range(n)
    ]


def build(index: Index, docs: list[Document], segments: int, commit: Callable[[], object]) -> None:
    """``docs`` added in ``segments`` interleaved parts, each sealed by ``commit``."""
    for start in range(segments):
        index.add_many(docs[start::segments])
        commit()


def expected(snapshot: Snapshot, query: Query, k: int) -> tuple[list[str], list[float]]:
    """The top ``k`` (keys, scores) by hand: every candidate, sorted by score descending then key."""
    stream = BM25Scorer().score(snapshot, query, max(snapshot.n_docs, 1))
    keys = snapshot.keys_of(stream.ids)
    rows = sorted(zip(stream.scores.tolist(), keys, strict=True), key=lambda row: (-row[0], row[1]))[:k]
    return [key for _, key in rows], [score for score, _ in rows]


def read_keys(results: SearchResults, how: str) -> list[str]:
    """The hits' keys, read first through ``how``."""
    if how == "keys":
        return results.keys
    if how == "iterate":
        return [hit.key for hit in results]
    if how == "index":
        return [results[row].key for row in range(len(results))] if len(results) else []
    if how == "to_dict":
        return [row["key"] for row in results.to_dict()["hits"]]
    assert how == "cursor"
    results.next_cursor  # noqa: B018 - the cursor reads the last key first
    return results.keys


@settings(max_examples=30, deadline=None)
@given(
    segments=st.integers(1, 4),
    per_segment=st.integers(3, 60),
    delete_every=st.sampled_from([0, 2, 3, 7]),
    k=st.sampled_from([1, 3, 10, snapshot_module._KEYS_ONE_BY_ONE + 1, 100]),
    filtered=st.booleans(),
    how=st.sampled_from(["keys", "iterate", "index", "to_dict", "cursor"]),
    seed=st.integers(0, 2**16),
)
def test_lazy_keys_equal_the_canonical_ranking(
    segments: int, per_segment: int, delete_every: int, k: int, filtered: bool, how: str, seed: int
) -> None:
    index = Index(analyzer="simple")
    docs = documents(segments * per_segment, seed)
    build(index, docs, segments, index.snapshot)
    if delete_every:
        index.delete_many([doc.key for doc in docs[::delete_every]])
    snapshot = index.snapshot()
    for text in ("graph", "graph sparse", "dense retrieval graph"):
        query = Query(text=text, filter=F("g") == 1 if filtered else None)
        keys, scores = expected(snapshot, query, k)
        results = index.search(query, k, RRF(), BM25Scorer())
        assert len(results) == len(keys)
        assert results.score_array.tolist() == scores  # to the bit
        assert read_keys(results, how) == keys
        assert results.keys == keys and [hit.key for hit in results] == keys
        assert [hit.rank for hit in results] == list(range(1, len(keys) + 1))
        if keys:  # a page of the same ranking resolves its own slice
            skip = max(len(keys) - 2, 0)
            page = index.search(query, len(keys) - skip, RRF(), BM25Scorer(), offset=skip)
            assert page.keys == keys[skip:]


def test_a_search_decodes_no_key_until_one_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts run at the search; the hits' keys are decoded at the first read, once.

    (The scorer may decode the keys of candidates tied across segments to order them:
    that is its ranking, not the results' keys, and is not counted.)
    """
    decoded: list[int] = []
    scoring = [False]
    views_read = getattr(snapshot_module._KeyViews, "read", None)
    keys_at = SegmentReader.keys_at
    score = BM25Scorer.score

    def counting_read(self: Any, ids: list[int]) -> list[str]:
        decoded.append(len(ids))
        assert views_read is not None
        keys: list[str] = views_read(self, ids)
        return keys

    def counting_keys_at(self: SegmentReader, local: Any) -> list[str]:
        if not scoring[0]:
            decoded.append(len(local))
        return keys_at(self, local)

    def marked_score(self: BM25Scorer, snapshot: Snapshot, query: Query, k: int) -> Any:
        scoring[0] = True
        try:
            return score(self, snapshot, query, k)
        finally:
            scoring[0] = False

    monkeypatch.setattr(snapshot_module._KeyViews, "read", counting_read, raising=False)
    monkeypatch.setattr(SegmentReader, "keys_at", counting_keys_at)
    monkeypatch.setattr(BM25Scorer, "score", marked_score)
    for segments in (1, 3):
        index = Index(analyzer="simple")
        build(index, documents(300, 5), segments, index.snapshot)
        snapshot = index.snapshot()
        for k in (10, 100):  # one by one, and (on one segment) the vectorised path
            query = Query(text="graph sparse")
            want = expected(snapshot, query, k)[0]
            for _ in range(2):  # the first search records the verdicts, the second finds them
                decoded.clear()
                results = index.search(query, k, RRF(), BM25Scorer())
                assert len(results) == k and decoded == []
                assert results.keys == want
                assert sum(decoded) == k
                assert [hit.key for hit in results] == want and results.keys == want
                assert sum(decoded) == k  # resolved once, kept


def test_verdicts_are_taken_at_the_search_not_when_keys_are_read() -> None:
    """A record found damaged after the search does not change hits already decided (and vice versa)."""
    index = Index(analyzer="simple")
    build(index, documents(120, 3), 2, index.snapshot)
    snapshot = index.snapshot()
    query = Query(text="graph")
    want = expected(snapshot, query, 10)[0]
    index.search(query, 10, RRF(), BM25Scorer()).keys  # noqa: B018 - records the verdicts
    results = index.search(query, 10, RRF(), BM25Scorer())
    victim = snapshot.ids_of([want[0]])[0]
    part = next(p for p in snapshot.parts if p.base <= victim < p.base + p.n_live)
    verdicts, local = part.reader.key_views()[0], int(part.live_locals[victim - part.base])
    verdicts[local] = 2  # the record found damaged after the search
    try:
        assert results.keys == want
        later = index.search(query, 10, RRF(), BM25Scorer())
        assert want[0] not in later.keys  # a search made now leaves it out
    finally:
        verdicts[local] = 1


@pytest.mark.parametrize("merge", [True, False])
def test_keys_read_after_a_merge_and_after_close(tmp_path: Path, merge: bool) -> None:
    """Results searched before a merge replaced their segments, or before close, still give their keys."""
    index = Index.create(tmp_path / "index", "simple")
    docs = documents(240, 11)
    build(index, docs, 3, index.commit)
    snapshot = index.snapshot()
    queries = [Query(text=text) for text in ("graph", "sparse dense", "retrieval graph sparse")]
    want = {(q.text, k): expected(snapshot, q, k)[0] for q in queries for k in (10, 100)}
    unread = [
        (q.text, k, how, index.search(q, k, RRF(), BM25Scorer()))
        for q in queries
        for k in (10, 100)
        for how in ("keys", "iterate", "to_dict", "cursor")
    ]
    del snapshot
    if merge:
        before = {path.name for path in (tmp_path / "index").iterdir()}
        index.delete_many([doc.key for doc in docs[::5]])
        index.commit()
        assert index.merge(force=True) >= 1
        after = {path.name for path in (tmp_path / "index").iterdir()}
        assert before - after, "the merge removed no segment file: nothing was tested"
    index.close()
    gc.collect()
    for text, k, how, results in unread:
        assert read_keys(results, how) == want[(text, k)]


def test_an_in_memory_index_closed_before_the_keys_are_read() -> None:
    index = Index(analyzer="simple")
    build(index, documents(200, 2), 4, index.snapshot)
    query = Query(text="dense graph")
    want = {k: expected(index.snapshot(), query, k)[0] for k in (10, 100)}
    unread = {k: index.search(query, k, RRF(), BM25Scorer()) for k in (10, 100)}
    index.close()
    del index
    gc.collect()
    for k, results in unread.items():
        assert results.keys == want[k] and results.to_dict()["hits"][0]["key"] == want[k][0]


@pytest.mark.parametrize("segments", [1, 3])
def test_two_threads_read_the_same_results_keys(segments: int) -> None:
    """Racing first reads of one results' keys give both threads the same keys (and the same hits)."""
    index = Index(analyzer="simple")
    build(index, documents(300, 9), segments, index.snapshot)
    snapshot = index.snapshot()
    cases = [(Query(text=text), k) for text in ("graph", "sparse retrieval") for k in (10, 100)]
    wants = [expected(snapshot, query, k)[0] for query, k in cases]
    rounds = 40
    batches = [[index.search(query, k, RRF(), BM25Scorer()) for query, k in cases] for _ in range(rounds)]
    barrier = threading.Barrier(2)
    seen: list[list[list[str]]] = [[], []]
    failures: list[BaseException] = []

    def reader(slot: int) -> None:
        try:
            for batch in batches:
                barrier.wait()
                for results in batch:
                    seen[slot].append(results.keys if slot == 0 else [hit.key for hit in results])
        except BaseException as exc:
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=reader, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures
    assert seen[0] == seen[1] == wants * rounds


def _counted_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each compiled check of a search's hits (``hits_sound``)."""
    checks: list[int] = []
    real = getattr(snapshot_module, "hits_sound")  # noqa: B009 - not exported: the module's own name

    def counted(*args: Any) -> int:
        checks.append(1)
        return int(real(*args))

    monkeypatch.setattr(snapshot_module, "hits_sound", counted)
    return checks


def test_a_kept_search_whose_kernel_found_its_hits_sound_does_not_check_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kept path's one call checks the hits; a damaged hit takes the checking path and is left out."""
    from tests.storage.crafting import damage_record
    from weftsearch.native import bm25 as kernel

    library = kernel.compiled_bm25()
    if library is None or library.query_sound is None:
        pytest.skip("the compiled BM25 library is not built")
    checks = _counted_checks(monkeypatch)
    for damaged in (False, True):
        checks.clear()
        index = Index(analyzer="simple")
        index.add_many(documents(300, 4))
        snapshot = index.snapshot()
        stream = BM25Scorer().score(snapshot, Query("graph sparse"), 10)  # no verdicts read
        victim = snapshot.keys_of(stream.ids)[3]
        if damaged:
            part = snapshot.parts[0]
            damage_record(part.reader, int(part.live_locals[snapshot.id_of(victim) - part.base]))
        want = index.search(Query("graph sparse"), 10, RRF(), BM25Scorer())  # keeps the text's set-up
        assert len(checks) == 1 and (victim in want.keys) is not damaged
        again = index.search(Query("graph sparse"), 10, RRF(), BM25Scorer())
        # Sound: the kernel's own call found every hit sound. Damaged: it said which was not, and
        # the tail's check left that hit out again.
        assert len(checks) == (2 if damaged else 1)
        assert again.keys == want.keys and again.score_array.tobytes() == want.score_array.tobytes()


def test_a_vouched_array_counts_only_for_its_snapshot_and_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot._vouch_sound names one array of one snapshot in one thread; any other is checked."""
    from weftsearch.native import bm25 as kernel

    library = kernel.compiled_bm25()
    if library is None or library.hits_sound is None:
        pytest.skip("the compiled BM25 library is not built")
    checks = _counted_checks(monkeypatch)
    index = Index(analyzer="simple")
    index.add_many(documents(50, 5))
    first = index.snapshot()
    index.add_many([Document("zz-late", "graph")])
    second = index.snapshot()
    assert second is not first
    ids = np.arange(5, dtype=np.int64)
    ids.setflags(write=False)
    first._vouch_sound(ids)
    keep, keys = first._sound_ids(ids)
    assert checks == [] and keep is None and keys() == first.keys_of(ids)  # vouched: not checked
    first._sound_ids(ids)
    assert len(checks) == 1  # a vouch counts once
    first._vouch_sound(ids)
    first._sound_ids(ids.copy())
    assert len(checks) == 2  # an equal array, not the one vouched for
    keep, keys = second._sound_ids(ids)  # another snapshot's views: its own check
    assert len(checks) == 3 and keep is None and keys() == second.keys_of(ids)
    first._vouch_sound(ids)
    thread = threading.Thread(target=first._sound_ids, args=(ids,))
    thread.start()
    thread.join()
    assert len(checks) == 4  # another thread: checked
    del thread
    # The vouch holds its snapshot's key views weakly: they go with the snapshot.
    views = weakref.ref(first._key_views())
    del first, keep, keys
    index.close()
    gc.collect()
    assert views() is None
