"""Issue 31 items 1-2: one compiled call per query on every snapshot size, and ``score_many`` on threads in C.

The oracle is the numpy path (``_score_numpy``), which scores every posting:
the one-call path (``weft_bm25_query`` from the snapshot's per-term descriptor
rows) must return the same ids, score bits and order, ties by key, on
snapshots of several segments with deletions and filters; ``score_many`` with
threads inside C must return what it returns on one thread, and what
``score`` returns, query by query.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weftsearch.scorers.bm25 as bm25_module
from tests.scorers.test_bm25_kernel import DISABLED
from weftsearch import BM25Scorer, Document, Index, Query, Snapshot
from weftsearch.errors import InvalidParameterError, UnknownFieldError
from weftsearch.native import bm25 as kernel
from weftsearch.scorers.bm25 import lists as bm25_lists

needs_query = pytest.mark.skipif(
    DISABLED or kernel.compiled_bm25() is None or kernel.compiled_bm25().query is None,  # type: ignore[union-attr]
    reason="the compiled BM25 kernel (with weft_bm25_query) is not built",
)


@pytest.fixture(params=["dense", "block-max"])
def kernel_pass(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both passes of the kernel on these small parts: dense (its default there) and block-max (forced)."""
    library = kernel.compiled_bm25()
    if request.param == "dense" or library is None or library.dense_max_docs is None:
        yield request.param
        return
    saved = library.dense_max_docs.value
    library.dense_max_docs.value = 0
    try:
        yield request.param
    finally:
        library.dense_max_docs.value = saved


PARAMS = st.sampled_from([(1.2, 0.75), (0.0, 1.0), (2.0, 0.0), (0.9, 0.4), (50.0, 1.0)])
FILTERS = [None, "tag == 'a'", "tag != 'a'", "n >= 3", "n < 1", "tag == 'none'"]


def build(
    seed: int, segments: int, docs: int, vocabulary: int, deleted: float, lengths: int
) -> tuple[Index, list[str]]:
    """Several in-memory segments, Zipfian words, few lengths (many ties), random keys, fields, deletions."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocabulary)]
    weights = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    weights /= weights.sum()
    index = Index("simple")
    serial = 0
    for _ in range(segments):
        batch = []
        for _ in range(docs):
            length = int(rng.integers(1, lengths + 1))
            distinct = rng.choice(words, size=int(rng.integers(1, length + 1)), p=weights)
            fields: dict[str, str | int] = {"tag": str(rng.choice(["a", "b"])), "n": int(rng.integers(0, 5))}
            # Random keys: a later segment holds keys that sort before an earlier one's.
            key = f"{rng.integers(10**4):04d}-{serial}"
            batch.append(Document(key, " ".join(rng.choice(distinct, size=length)), fields=fields))
            serial += 1
        index.add_many(batch)
        index.snapshot()
    keys = index.keys()
    doomed = [key for key in keys if rng.random() < deleted]
    if doomed:
        index.delete_many(doomed)
    return index, words


def texts(seed: int, words: list[str], count: int) -> list[str]:
    rng = np.random.default_rng(seed + 11)
    pool = [*words, "absent"]
    found = [" ".join(rng.choice(pool, size=int(rng.integers(1, 8)))) for _ in range(count)]
    return [*found, words[0], f"{words[0]} {words[0]} {words[-1]}", ""]


def differs(one: object, other: object) -> bool:
    return bool(
        one.ids.tobytes() != other.ids.tobytes()  # type: ignore[attr-defined]
        or one.scores.tobytes() != other.scores.tobytes()  # type: ignore[attr-defined]
    )


@needs_query
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 4),
    docs=st.integers(1, 300),
    vocabulary=st.integers(1, 25),
    deleted=st.sampled_from([0.0, 0.05, 0.5]),
    lengths=st.integers(1, 6),
    ks=st.lists(st.integers(1, 200), min_size=1, max_size=3),
    params=st.lists(PARAMS, min_size=1, max_size=2),
    filters=st.lists(st.sampled_from(FILTERS), min_size=1, max_size=2),
)
def test_the_one_call_path_is_the_numpy_oracle_to_the_bit(
    kernel_pass: str,
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    lengths: int,
    ks: list[int],
    params: list[tuple[float, float]],
    filters: list[str | None],
) -> None:
    index, words = build(seed, segments, docs, vocabulary, deleted, lengths)
    snapshot = index.snapshot()
    found = []
    for k1, b in params:
        scorer = BM25Scorer(k1, b)
        for text in texts(seed, words, 8):
            for filter_text in filters:
                query = Query(text, filter=filter_text)
                try:
                    snapshot.allowed(query)
                except UnknownFieldError:  # every document deleted: no field left to filter on
                    continue
                for k in ks:
                    got = scorer.score(snapshot, query, k)
                    if text and snapshot.n_docs:
                        assert got.plan is not None and got.plan["path"] == "compiled"
                    if differs(got, scorer._score_numpy(snapshot, query, k, snapshot.allowed(query))):
                        found.append(f"{text!r} {filter_text} k={k} k1={k1} b={b}")
    assert found == []


@needs_query
def test_a_small_snapshot_searched_alone_takes_the_one_call_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below 20,000 documents a search alone went through numpy (holding the GIL); now one compiled call."""
    calls: list[int] = []
    real = bm25_lists.run

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_lists, "run", counting)
    index, words = build(3, 2, 200, 12, 0.1, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    got = scorer.score(snapshot, Query(f"{words[0]} {words[3]}"), 10)
    assert got.plan is not None and got.plan["path"] == "compiled" and calls == [1]
    assert not differs(got, scorer._score_numpy(snapshot, Query(f"{words[0]} {words[3]}"), 10))


def batch_mismatches(snapshot: Snapshot, queries: list[Query], k: int, threads: int) -> list[str]:
    scorer = BM25Scorer()
    sequential = scorer.score_many(snapshot, queries, k)
    threaded = scorer.score_many(snapshot, queries, k, threads=threads)
    found = []
    for query, one, many in zip(queries, sequential, threaded, strict=True):
        alone = scorer.score(snapshot, query, k)
        if differs(one, many) or differs(many, alone) or one.plan != many.plan:
            found.append(f"{query.text!r} k={k}")
    return found


@needs_query
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 3),
    docs=st.integers(1, 300),
    k=st.integers(1, 150),
    threads=st.integers(2, 5),
)
def test_score_many_on_threads_in_c_returns_the_sequential_results(
    kernel_pass: str, seed: int, segments: int, docs: int, k: int, threads: int
) -> None:
    index, words = build(seed, segments, docs, 15, 0.1, 5)
    queries = [Query(text) for text in texts(seed, words, 40)]
    assert batch_mismatches(index.snapshot(), queries, k, threads) == []


@needs_query
def test_score_many_asks_c_for_the_threads_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    real = kernel.query_batch

    def spying(*args: object, **kwargs: object) -> object:
        asked.append(int(args[-1]))  # type: ignore[call-overload]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel, "query_batch", spying)
    index, words = build(5, 2, 200, 12, 0.0, 5)
    queries = [Query(text) for text in texts(5, words, 30)]
    BM25Scorer().score_many(index.snapshot(), queries, 10, threads=3)
    assert asked == [3]


@pytest.mark.parametrize("threads", [0, -1, 257, 1.5, "2", True, None])
def test_score_many_refuses_a_bad_thread_count(threads: object) -> None:
    index, _ = build(1, 1, 20, 5, 0.0, 3)
    with pytest.raises(InvalidParameterError, match="threads"):
        BM25Scorer().score_many(index.snapshot(), [Query("w0")], 5, threads=threads)  # type: ignore[arg-type]


def test_the_numpy_oracle_is_still_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 10**9)
    index, words = build(2, 2, 100, 10, 0.1, 4)
    got = BM25Scorer().score(index.snapshot(), Query(words[0]), 5)
    assert got.plan is not None and got.plan["path"] == "numpy"
