"""The compiled BM25 top-k (``_bm25.c``, block-max MaxScore) against the exhaustive numpy path.

The numpy path (``BM25Scorer._score_numpy``) reads every posting and is the
oracle: for random corpora (many exact ties, repeated terms, one-term
documents, deletions, several segments whose keys interleave) and random
queries, k, k1 and b, the compiled path must return the same ids, the same
score bits and the same order. A deliberately broken bound must make that
comparison fail (so the comparison can see a pruning error), and searches in
threads must return exactly the sequential results.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weftsearch.scorers.bm25 as bm25_module
from weftsearch import RRF, BM25Scorer, Document, Index, Query, Snapshot
from weftsearch.native import bm25 as kernel
from weftsearch.native.loader import library_path
from weftsearch.scorers.bm25 import lists as bm25_lists
from weftsearch.scorers.bm25 import lucene_idf

DISABLED = os.environ.get(kernel.DISABLE_VARIABLE, "") not in ("", "0")
needs_compiled = pytest.mark.skipif(DISABLED, reason=f"{kernel.DISABLE_VARIABLE} turns the kernel off")


@pytest.fixture(autouse=True)
def compiled_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """BM25Scorer.score goes compiled on these small corpora too (it takes numpy below 20,000 documents)."""
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)


@pytest.fixture
def numpy_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The compiled BM25 turned off for the test (the cached choice restored after)."""
    monkeypatch.setenv(kernel.DISABLE_VARIABLE, "1")
    kernel.compiled_bm25.cache_clear()
    yield
    monkeypatch.delenv(kernel.DISABLE_VARIABLE)
    kernel.compiled_bm25.cache_clear()


def block_max_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the kernel's block-max pass on every part (small parts with long lists are scored densely)."""
    library = kernel.compiled_bm25()
    if library is not None and library.dense_max_docs is not None:
        monkeypatch.setattr(library.dense_max_docs, "value", 0)


def corpus(
    seed: int, segments: int, docs: int, vocabulary: int, deleted: float, lengths: int
) -> tuple[Index, list[str]]:
    """An in-memory index of ``segments`` segments, Zipfian words, few distinct lengths (ties), deletions.

    Keys are random, so later segments hold keys that sort before earlier
    ones (internal ids do not follow keys). Returns the index and the words.
    """
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocabulary)]
    weights = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    weights /= weights.sum()
    index = Index("simple")
    serial = 0
    for _ in range(segments):
        batch = []
        for _ in range(docs):
            # Lengths from a few values only, and a word repeated to fill: many exact ties.
            length = int(rng.integers(1, lengths + 1))
            distinct = rng.choice(words, size=int(rng.integers(1, length + 1)), p=weights)
            text = " ".join(rng.choice(distinct, size=length))
            batch.append(Document(f"{rng.integers(10**4):04d}-{serial}", text))
            serial += 1
        index.add_many(batch)
        index.snapshot()  # seals the batch into its own in-memory segment
    keys = index.keys()
    doomed = [key for key in keys if rng.random() < deleted]
    if doomed:
        index.delete_many(doomed)
    return index, words


def queries(seed: int, words: list[str], count: int) -> list[str]:
    rng = np.random.default_rng(seed + 7)
    pool = [*words, "absent"]
    found = [" ".join(rng.choice(pool, size=int(rng.integers(1, 9)))) for _ in range(count)]
    return [*found, words[0], f"{words[0]} {words[0]} {words[-1]}", " ".join(words[:3])]


def mismatches(
    snapshot: Snapshot, texts: list[str], ks: list[int], params: list[tuple[float, float]]
) -> list[str]:
    """Every (query, k, k1, b) where the compiled path differs from the numpy oracle in any bit."""
    found = []
    for k1, b in params:
        scorer = BM25Scorer(k1, b)
        for text in texts:
            for k in ks:
                got = scorer.score(snapshot, Query(text), k)
                want = scorer._score_numpy(snapshot, Query(text), k)
                if got.ids.tobytes() != want.ids.tobytes() or got.scores.tobytes() != want.scores.tobytes():
                    found.append(f"{text!r} k={k} k1={k1} b={b}")
    return found


PARAMS = st.sampled_from([(1.2, 0.75), (0.0, 1.0), (2.0, 0.0), (0.9, 0.4), (1e-9, 1.0), (50.0, 1.0)])


@needs_compiled
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 4),
    docs=st.integers(1, 500),
    vocabulary=st.integers(1, 30),
    deleted=st.sampled_from([0.0, 0.05, 0.5]),
    lengths=st.integers(1, 6),
    ks=st.lists(st.integers(1, 300), min_size=1, max_size=3),
    params=st.lists(PARAMS, min_size=1, max_size=2),
)
def test_compiled_early_termination_returns_exactly_the_exhaustive_results(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    lengths: int,
    ks: list[int],
    params: list[tuple[float, float]],
) -> None:
    index, words = corpus(seed, segments, docs, vocabulary, deleted, lengths)
    snapshot = index.snapshot()
    assert mismatches(snapshot, queries(seed, words, 8), ks, params) == []


@needs_compiled
def test_multi_block_lists_with_skipping_match_and_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long lists (many blocks per term) where most postings are never scored, and still every bit matches."""
    block_max_everywhere(monkeypatch)
    index, words = corpus(11, 3, 2500, 40, 0.1, 12)
    snapshot = index.snapshot()
    assert len(snapshot.parts) == 3
    texts = queries(11, words, 20)
    assert mismatches(snapshot, texts, [1, 10, 100], [(1.2, 0.75), (0.0, 1.0), (2.0, 0.0)]) == []
    # Early termination happened: some blocks were never scored.
    library = kernel.compiled_bm25()
    assert library is not None
    terms = sorted({"w0", "w1", "w25", "w30"})
    lists = bm25_lists.gather(snapshot, terms)
    scorer = BM25Scorer()
    weights = lucene_idf(snapshot.n_docs, lists.doc_freq)
    _, _, stats = bm25_lists.search(
        library, snapshot, lists, weights, scorer.k1, scorer.b, snapshot.avgdl, 10
    )
    assert stats.blocks_scored <= stats.blocks
    assert stats.postings_scored < stats.postings / 2


@needs_compiled
def test_a_broken_bound_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounds scaled below the truth prune documents that belong in the top k: the comparison sees it."""
    index, words = corpus(5, 2, 1500, 25, 0.05, 8)
    snapshot = index.snapshot()
    texts = queries(5, words, 15)
    assert mismatches(snapshot, texts, [1, 10], [(1.2, 0.75)]) == []
    monkeypatch.setattr(kernel, "_BOUND_SCALE", 0.6)
    assert mismatches(snapshot, texts, [1, 10], [(1.2, 0.75)]) != []


@needs_compiled
def test_searches_in_threads_return_the_sequential_results() -> None:
    index, words = corpus(3, 3, 1200, 30, 0.05, 8)
    texts = queries(3, words, 40)
    scorer = BM25Scorer()

    def run(text: str) -> tuple[list[str], list[float], bytes, bytes]:
        results = index.search(text, 10, RRF(), scorer)
        stream = scorer.score(index.snapshot(), Query(text), 25)
        return (
            [hit.key for hit in results.hits],
            [hit.score for hit in results.hits],
            *(
                stream.ids.tobytes(),
                stream.scores.tobytes(),
            ),
        )

    sequential = [run(text) for text in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            assert list(pool.map(run, texts)) == sequential


def test_the_switch_turns_it_off(numpy_path: None) -> None:
    assert not kernel.compiled_bm25_available()
    index, _ = corpus(2, 2, 200, 10, 0.1, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    stream = scorer.score(snapshot, Query("w0 w1"), 5)
    want = scorer._score_numpy(snapshot, Query("w0 w1"), 5)
    assert stream.ids.tobytes() == want.ids.tobytes()


@needs_compiled
def test_the_kernel_is_built_and_passes_its_self_check() -> None:
    assert library_path("_bm25") is not None
    assert kernel.compiled_bm25_available()


@needs_compiled
def test_block_metadata_is_bounded_per_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_lists, "BLOCK_CACHE_TERMS", 4)
    index, words = corpus(9, 1, 300, 20, 0.0, 6)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    for word in words:
        scorer.score(snapshot, Query(word), 3)
    blocks = bm25_lists._segment_blocks(snapshot.parts[0].reader)
    assert len(blocks.terms) == 4
    # Evicted terms are read (and checked) again, with the same results.
    assert mismatches(snapshot, words[:6], [3], [(1.2, 0.75)]) == []


@needs_compiled
def test_the_kernel_refuses_bad_arguments_with_a_code() -> None:
    """Bad arguments: -2; packed postings that do not decode: -3 naming the list; never a crash."""
    from weftsearch.storage.postings import pack_postings

    library = kernel.compiled_bm25()
    assert library is not None
    ids = np.array([0, 5], dtype=np.uint32)
    tfs = np.array([1, 2], dtype=np.uint32)
    packed = pack_postings(ids, tfs, np.array([0, 2], dtype=np.uint64), np.ones(8, dtype=np.uint32))
    data = packed.data.copy()
    meta = packed.blocks.copy()
    # one block: last id 5, max tf 2, min length 1; gaps 0, 4 in 3 bits, tf - 1 in 1 bit
    assert meta.tolist() == [5, 2, 1, 3 | 1 << 8] and data.tolist() == [4 << 3, 1 << 1]
    norms = np.ones(8, dtype=np.float64)
    weights = np.ones(2, dtype=np.float64)
    out_ids = np.empty(4, dtype=np.int64)
    out_scores = np.empty(4, dtype=np.float64)
    stats = np.zeros(5, dtype=np.int64)

    def call(n_docs: int, k: int = 2, term: int = 0, blocks: int = 1, m: int = 2, words: int = 2) -> int:
        lists = np.array([[data.ctypes.data, words, 2, meta.ctypes.data, blocks, term, 0, 0]], np.int64)
        parts = np.array([[norms.ctypes.data, 0, 0, n_docs]], dtype=np.int64)
        inputs = (lists.ctypes.data, 1, parts.ctypes.data, 1, weights.ctypes.data, m, 1.2, 0.75, 1.0, k, 1.0)
        return int(library.top_k(*inputs, out_ids.ctypes.data, out_scores.ctypes.data, 4, stats.ctypes.data))

    assert call(n_docs=8) == 2
    assert out_ids[:2].tolist() == [5, 0]  # tf 2 beats tf 1 at equal lengths
    assert call(n_docs=5) == -3 and stats[0] == 0  # id 5 is past a 5-document segment
    assert call(n_docs=8, k=0) == -2
    assert call(n_docs=8, term=2) == -2  # term index past m
    assert call(n_docs=8, blocks=2) == -2  # 2 postings make 1 block
    assert call(n_docs=8, k=10**18) == 2  # k is clamped to the postings that exist
    assert call(n_docs=8, words=3) == -3  # the widths need 2 words, the list claims 3
    assert call(n_docs=8, words=1) == -3  # ... or 1: a run would be read past the list
    # A block whose last id is not the id that ends it could make a seek stand still (a hang
    # inside C, found with the reader's check bypassed): the decoded block disagrees, refused.
    meta[0] = 4
    assert call(n_docs=8) == -3
    meta[0] = 5
    for width in (33 | 1 << 8, 3 | 33 << 8, 3 | 1 << 8 | 1 << 16):  # above 32 bits, or stray bits
        meta[3] = width
        assert call(n_docs=8) == -3
    meta[3] = 3 | 1 << 8
    data[0] = 5 << 3  # a gap of 5 after id 0: ids 0, 6 end past the stored last id 5
    assert call(n_docs=8) == -3
    data[0] = 4 << 3
    assert call(n_docs=8) == 2
    # The tables are checked part by part, before a part's blocks are read: a bad list in a
    # later part is still refused, named by its index, after an earlier part was searched.
    lists = np.array(
        [
            [data.ctypes.data, 2, 2, meta.ctypes.data, 1, 0, 0, 0],
            [data.ctypes.data, 2, 2, meta.ctypes.data, 1, 1, 1, 0],
        ],
        np.int64,
    )
    for part_docs, width_words in ((8, 2), (5, 2), (8, 3)):
        parts = np.array([[norms.ctypes.data, 0, 0, 8], [norms.ctypes.data, 0, 8, part_docs]], dtype=np.int64)
        lists[1, 1] = width_words
        inputs = (lists.ctypes.data, 2, parts.ctypes.data, 2, weights.ctypes.data, 2, 1.2, 0.75, 1.0, 2, 1.0)
        code = int(library.top_k(*inputs, out_ids.ctypes.data, out_scores.ctypes.data, 4, stats.ctypes.data))
        if (part_docs, width_words) == (8, 2):
            assert (code, out_ids[:2].tolist()) == (2, [5, 13])  # tf 2 in either part
        else:
            assert (code, stats[0]) == (-3, 1)


@needs_compiled
def test_a_query_cut_short_by_a_corrupt_list_leaves_nothing_for_the_next() -> None:
    # Each thread keeps the kernel's working memory between its queries (the dense pass's sums
    # included, which a query leaves zeroed): a query refused for a corrupt list, beside a sound
    # one, must leave nothing the thread's next query could add onto.
    from weftsearch.storage.postings import pack_postings

    library = kernel.compiled_bm25()
    assert library is not None and library.query is not None
    function = library.query
    ids = np.array([0, 5], dtype=np.uint32)
    tfs = np.array([1, 2], dtype=np.uint32)
    packed = pack_postings(ids, tfs, np.array([0, 2], dtype=np.uint64), np.ones(8, dtype=np.uint32))
    good, meta = packed.data.copy(), packed.blocks.copy()
    bad = good.copy()
    bad[0] = 5 << 3  # ids 0, 6: past the stored last id 5, found only when the block is decoded
    norms = np.ones(8, dtype=np.float64)
    parts = np.array([[norms.ctypes.data, 0, 0, 8]], dtype=np.int64)
    weights = np.ones(2, dtype=np.float64)
    rows = [
        np.array([[data.ctypes.data, 2, 2, meta.ctypes.data, 1, term, 0, 0]], np.int64)
        for term, data in enumerate((good, bad))
    ]
    both = np.array([(rows[0].ctypes.data, 1), (rows[1].ctypes.data, 1)], dtype=np.int64)
    alone = np.array([(rows[0].ctypes.data, 1)], dtype=np.int64)

    def run(terms: np.ndarray, m: int) -> tuple[list[int], list[float]]:
        found_ids, found_scores, _, _ = kernel.query(
            function, terms.ctypes.data, m, weights.ctypes.data, parts, 1.2, 0.75, 1.0, 2
        )
        return found_ids.tolist(), found_scores.tolist()

    assert library.dense_max_docs is not None and library.dense_max_docs.value >= 8  # scored densely
    want = run(alone, 1)
    assert want[0] == [5, 0]
    for _ in range(3):
        with pytest.raises(kernel.CorruptTermError):
            run(both, 2)
        assert run(alone, 1) == want


@needs_compiled
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 3),
    docs=st.integers(200, 1500),
    vocabulary=st.integers(2, 40),
    deleted=st.sampled_from([0.0, 0.05, 0.5]),
    lengths=st.integers(1, 4),
    ks=st.lists(st.sampled_from([1, 2, 10, 33, 100, 250]), min_size=1, max_size=3),
    params=st.lists(PARAMS, min_size=1, max_size=2),
)
def test_block_max_sums_kept_contributions_to_the_same_bits(
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    lengths: int,
    ks: list[int],
    params: list[tuple[float, float]],
) -> None:
    """Block-max on every part, where a window's exact scores are summed from the contributions its
    reads kept instead of seeking every list again when the part's lists hold few postings per
    result asked (``_bm25.c``, ``WEFT_STORE_POSTINGS_PER_K``: here at most k, else not): few distinct
    lengths (many equal scores at the k-th place), deletions, several segments, and queries of more
    lists than are kept (``WEFT_STORED_LISTS``, 16) as well.
    """
    library = kernel.compiled_bm25()
    assert library is not None and library.dense_max_docs is not None
    index, words = corpus(seed, segments, docs, vocabulary, deleted, lengths)
    snapshot = index.snapshot()
    rng = np.random.default_rng(seed)
    texts = queries(seed, words, 6)
    texts.append(" ".join(words))  # every word: more than 16 lists when the vocabulary allows
    texts.append(" ".join(rng.choice(words, size=min(len(words), 17), replace=False)))
    saved = library.dense_max_docs.value
    library.dense_max_docs.value = 0
    try:
        assert mismatches(snapshot, texts, ks, params) == []
    finally:
        library.dense_max_docs.value = saved
