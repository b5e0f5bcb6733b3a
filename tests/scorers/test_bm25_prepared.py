"""Issue 31 (2 threads on SciFact): a repeated query's set-up is kept per snapshot.

A search holds the GIL while it analyses its text, looks its terms up and
plans the kernel call; :func:`~weftsearch.scorers.bm25.lists.prepared_queries`
keeps that set-up per snapshot and (k1, b, average length), so a repeated text
costs one dictionary read. The numpy path stays the oracle: the kept set-up
must give the same ids, score bits and order, on several segments, with
deletions and filters, from any number of threads; it must not outlive its
snapshot's statistics, and it must stay bounded.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scorers.test_bm25_onecall import FILTERS, PARAMS, build, differs, needs_query, texts
from weftsearch import BM25Scorer, Query
from weftsearch.engine import stream as stream_module
from weftsearch.errors import CorruptIndexError, UnknownFieldError
from weftsearch.native import bm25 as kernel
from weftsearch.scorers.bm25 import lists as bm25_lists


@needs_query
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 4),
    docs=st.integers(1, 200),
    vocabulary=st.integers(1, 25),
    deleted=st.sampled_from([0.0, 0.05, 0.5]),
    k=st.integers(1, 150),
    params=PARAMS,
    filter_text=st.sampled_from(FILTERS),
)
def test_a_kept_set_up_scores_as_the_numpy_oracle_before_and_after_a_delete(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    k: int,
    params: tuple[float, float],
    filter_text: str | None,
) -> None:
    index, words = build(seed, segments, docs, vocabulary, deleted, 5)
    scorer = BM25Scorer(*params)
    found = []
    queries = texts(seed, words, 6)
    for round_ in range(3):
        snapshot = index.snapshot()
        for text in queries:
            query = Query(text, filter=filter_text)
            try:
                allowed = snapshot.allowed(query)
            except UnknownFieldError:  # every document deleted: no field left to filter on
                continue
            for _ in range(2):  # the second search reads the kept set-up
                if differs(
                    scorer.score(snapshot, query, k), scorer._score_numpy(snapshot, query, k, allowed)
                ):
                    found.append(f"round {round_} {text!r} {filter_text} k={k}")
        keys = index.keys()
        if keys:  # a new snapshot, new document frequencies: a kept set-up must not carry over
            index.delete_many(keys[: max(1, len(keys) // 3)])
    assert found == []


@needs_query
def test_a_repeated_text_is_planned_once_per_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = bm25_lists.plan

    def counting(*args: object, **kwargs: object) -> bm25_lists.TermQuery:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_lists, "plan", counting)
    index, words = build(5, 2, 100, 10, 0.1, 5)
    snapshot = index.snapshot()
    text = f"{words[0]} {words[2]} {words[0]}"
    scorer = BM25Scorer()
    first = scorer.score(snapshot, Query(text), 10)
    again = scorer.score(snapshot, Query(text, filter="tag == 'a'"), 10)  # the filter is not in the set-up
    assert not differs(
        again,
        scorer._score_numpy(
            snapshot, Query(text, filter="tag == 'a'"), 10, snapshot.allowed(Query(text, filter="tag == 'a'"))
        ),
    )
    assert calls == [1] and first.plan == scorer.score(snapshot, Query(text), 10).plan
    BM25Scorer(0.5, 0.3).score(snapshot, Query(text), 10)  # other parameters, other weights
    assert calls == [1, 1]
    index.delete(index.keys()[0])
    scorer.score(index.snapshot(), Query(text), 10)  # a new snapshot plans afresh
    assert calls == [1, 1, 1]


@needs_query
def test_kept_set_ups_are_bounded_and_dropped_when_an_impact_table_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bm25_lists, "PREPARED_QUERIES", 3)
    index, words = build(7, 1, 200, 20, 0.0, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    kept = bm25_lists.prepared_queries(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    assert kept is not None
    for word in words[:8]:
        scorer.score(snapshot, Query(word), 10)
    assert list(kept.entries) == words[5:8]  # first in, first out
    scorer.score(snapshot, Query("w1 " * 600), 10)  # over PREPARED_TEXT_CHARS: not kept
    assert list(kept.entries) == words[5:8]
    impacts = bm25_lists._impact_cache(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    held = set(impacts.entries)
    monkeypatch.setattr(impacts, "_budget", impacts.postings)  # the next table built evicts the oldest
    scorer.score(snapshot, Query(words[15]), 10)
    assert words[15] in impacts.entries and not held <= set(impacts.entries)
    assert list(kept.entries) == [words[15]]  # the others were dropped with the evicted table


@needs_query
def test_threads_reading_kept_set_ups_return_the_sequential_results() -> None:
    index, words = build(11, 3, 150, 15, 0.1, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    queries = [Query(text) for text in texts(11, words, 40)]
    expected = [scorer._score_numpy(snapshot, query, 10, None) for query in queries]
    failures: list[str] = []

    def search() -> None:
        for _ in range(5):
            for query, want in zip(queries, expected, strict=True):
                if differs(scorer.score(snapshot, query, 10), want):
                    failures.append(query.text or "")

    workers = [threading.Thread(target=search) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []


@needs_query
def test_a_kept_text_without_a_filter_takes_the_kept_call_with_the_same_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    run, run_kept = bm25_lists.run, bm25_lists.run_kept

    def counting_run(*args: object, **kwargs: object) -> object:
        calls.append("run")
        return run(*args, **kwargs)  # type: ignore[arg-type]

    def counting_kept(*args: object, **kwargs: object) -> object:
        calls.append("kept")
        return run_kept(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_lists, "run", counting_run)
    monkeypatch.setattr(bm25_lists, "run_kept", counting_kept)
    index, words = build(13, 3, 80, 8, 0.1, 4)  # several segments, ties, deletions
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    text = f"{words[1]} {words[0]}"
    first = scorer.score(snapshot, Query(text), 7)
    second = scorer.score(snapshot, Query(text), 7)
    scorer.score(snapshot, Query(text, filter="tag == 'b'"), 7)  # a filter: the part table of its mask
    assert calls == ["run", "kept", "run"]
    assert first.plan == second.plan and not differs(first, second)
    assert not differs(second, scorer._score_numpy(snapshot, Query(text), 7, None))


@needs_query
def test_a_corrupt_term_met_by_the_kept_call_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    index, words = build(17, 2, 80, 8, 0.0, 4)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    scorer.score(snapshot, Query(words[2]), 5)

    def corrupt(*args: object) -> object:
        raise kernel.CorruptTermError(0, 1)

    monkeypatch.setattr(kernel, "query_rows", corrupt)
    with pytest.raises(CorruptIndexError, match=repr(words[2])):
        scorer.score(snapshot, Query(words[2]), 5)


@needs_query
@pytest.mark.parametrize("segments", [1, 3])
@pytest.mark.parametrize("k", [1, 3, 50])
def test_a_kept_stream_is_a_vouched_stream_in_a_streams_layout(segments: int, k: int) -> None:
    # The kept call's one-segment stream is made without reading its layout: it must be in it.
    index, words = build(21, segments, 90, 6, 0.0, 4)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    text = f"{words[0]} {words[2]}"
    scorer.score(snapshot, Query(text), k)  # keeps the set-up
    stream = scorer.score(snapshot, Query(text), k)  # from the kept set-up
    assert stream_module._is_vouched(stream, snapshot) and stream.complete
    assert stream_module._stream_layout(stream.ids, stream.scores)
    assert not stream.ids.flags.writeable and not stream.scores.flags.writeable
    assert 0 < len(stream) <= k
    assert not differs(stream, scorer._score_numpy(snapshot, Query(text), k, None))
