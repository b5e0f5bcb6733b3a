"""Searches in flight: the per-index and process-wide counts, and BM25's choice of path under contention."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from weftsearch import BM25Scorer, Document, Index
from weftsearch.engine.inflight import SearchesInFlight, searches_in_flight
from weftsearch.fusion import RRF
from weftsearch.native import bm25 as kernel
from weftsearch.scorers import bm25 as bm25_module

WORDS = ["graph", "retrieval", "ranking", "vector", "text", "query", "index", "segment", "shard", "cluster"]


def _index(tmp_path: Path) -> Index:
    rng = np.random.default_rng(7)
    index = Index.create(tmp_path / "idx")
    index.add_many(
        Document(f"d{i:04d}", " ".join(rng.choice(WORDS, size=int(rng.integers(3, 12))).tolist()))
        for i in range(600)
    )
    index.commit()
    return index


def test_the_counts_are_per_index_and_for_the_whole_process() -> None:
    first, second = SearchesInFlight(), SearchesInFlight()
    base = searches_in_flight()
    assert not first and not second
    with first:
        assert first and not second and searches_in_flight() == base + 1
        with second:
            assert searches_in_flight() == base + 2
        assert not second and searches_in_flight() == base + 1
    assert searches_in_flight() == base
    with pytest.raises(RuntimeError), first:
        raise RuntimeError("a failed search still leaves the count")
    assert not first and searches_in_flight() == base


@pytest.mark.skipif(not kernel.compiled_bm25_available(), reason="the compiled BM25 kernel is not built")
def test_bm25_takes_the_compiled_path_only_while_another_search_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With numpy asked for a search alone (the threshold set high), a search in flight still goes compiled.

    The compiled path runs on every size since issue 31 (``_COMPILED_FROM_DOCS`` is 0);
    the in-flight rule still keeps a raised threshold from convoying threads.
    """
    paths: list[str] = []
    compiled, numpy_path = BM25Scorer._score_compiled, BM25Scorer._score_numpy

    def spy_compiled(self: BM25Scorer, *args: object, **kwargs: object) -> object:
        paths.append("compiled")
        return compiled(self, *args, **kwargs)  # type: ignore[arg-type]

    def spy_numpy(self: BM25Scorer, *args: object, **kwargs: object) -> object:
        paths.append("numpy")
        return numpy_path(self, *args, **kwargs)  # type: ignore[arg-type]

    kept_stream = BM25Scorer._kept_stream

    def spy_kept(self: BM25Scorer, *args: object, **kwargs: object) -> object:
        found = kept_stream(self, *args, **kwargs)  # type: ignore[arg-type]
        if found is not None:  # a kept set-up: the compiled call, straight from it
            paths.append("compiled")
        return found

    monkeypatch.setattr(BM25Scorer, "_score_compiled", spy_compiled)
    monkeypatch.setattr(BM25Scorer, "_kept_stream", spy_kept)
    monkeypatch.setattr(BM25Scorer, "_score_numpy", spy_numpy)
    assert bm25_module._COMPILED_FROM_DOCS == 0  # every size compiled
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 10**9)  # numpy when alone
    with _index(tmp_path) as index:
        for k in (10, 100):
            alone = index.search("graph ranking shard", k, RRF(), BM25Scorer())
            assert paths[-1] == "numpy"
            with SearchesInFlight():  # another search is running in this process
                shared = index.search("graph ranking shard", k, RRF(), BM25Scorer())
            assert paths[-1] == "compiled"
            # Same documents, order and scores to the bit on either path.
            assert shared.keys == alone.keys
            assert shared.score_array.tobytes() == alone.score_array.tobytes()


def test_concurrent_searches_answer_as_serial_ones(tmp_path: Path) -> None:
    queries = ["graph ranking", "vector text query", "shard cluster index", "segment", "retrieval graph text"]
    with _index(tmp_path) as index:
        serial = {q: (index.search(q, 20, RRF(), BM25Scorer()).keys) for q in queries}
        seen: list[tuple[str, list[str]]] = []
        errors: list[BaseException] = []

        def worker(offset: int) -> None:
            try:
                for round_ in range(30):
                    q = queries[(offset + round_) % len(queries)]
                    seen.append((q, index.search(q, 20, RRF(), BM25Scorer()).keys))
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert len(seen) == 90 and all(keys == serial[q] for q, keys in seen)
        assert searches_in_flight() == 0
