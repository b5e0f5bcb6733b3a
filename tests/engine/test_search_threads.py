"""Issue 31 (2 threads on SciFact): a search's GIL-held work cut; threads see the same results.

A search of a small snapshot holds the GIL for everything but its kernel call, so
two threads convoy on what it does in Python: a query given as text must be made
a :class:`Query` once, not once for the search and again for its cursor; and
searches running on several threads at once must return what they return one
after another (ids, score bits, order, deletes, several segments).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.engine import query as query_module


def build(segments: int = 3, docs: int = 120, seed: int = 5) -> tuple[Index, list[str]]:
    """Several segments of Zipfian words (many ties), some documents deleted."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(20)]
    weights = 1.0 / np.arange(1, 21) ** 1.1
    weights /= weights.sum()
    index = Index("simple")
    for part in range(segments):
        index.add_many(
            Document(f"{rng.integers(10**4):04d}-{part}-{i}", " ".join(rng.choice(words, 5, p=weights)))
            for i in range(docs)
        )
        index.snapshot()
    keys = index.keys()
    index.delete_many(keys[:: max(1, len(keys) // 17)])
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 5)))) for _ in range(40)] + ["absent", ""]
    return index, texts


def test_a_search_by_text_builds_its_query_once(monkeypatch: pytest.MonkeyPatch) -> None:
    index, texts = build(1, 60)
    made: list[str] = []
    real = query_module.Query.__post_init__

    def counting(self: Query) -> None:
        made.append(self.text)
        real(self)

    monkeypatch.setattr(query_module.Query, "__post_init__", counting)
    results = index.search(texts[0], 3, RRF(), BM25Scorer())
    assert made == [texts[0]]
    # The cursor (its query made when it is read) pages as the Query's own search does.
    cursor = results.next_cursor
    assert cursor is not None
    by_text = index.search(texts[0], 3, RRF(), BM25Scorer(), after=cursor)
    by_query = index.search(Query(texts[0]), 3, RRF(), BM25Scorer(), after=cursor)
    assert by_text.keys == by_query.keys and by_text.keys != results.keys


def test_searches_on_several_threads_return_the_sequential_results() -> None:
    index, texts = build()
    scorer, fuser = BM25Scorer(), RRF()

    def seen(text: str, k: int) -> tuple[list[str], bytes]:
        found = index.search(text, k, fuser, scorer)
        return found.keys, found.scores.tobytes()

    expected = {(text, k): seen(text, k) for text in texts for k in (1, 10, 100)}
    failures: list[tuple[str, int]] = []

    def search() -> None:
        for _ in range(3):
            for text, k in expected:
                if seen(text, k) != expected[text, k]:
                    failures.append((text, k))

    workers = [threading.Thread(target=search) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
