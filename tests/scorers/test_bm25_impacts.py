"""Issue 31, item 1: the dense pass reads per-posting impact tables (``weft_bm25_impacts``).

A table holds each posting's local id and impact ``tf * (k1 + 1) / (tf + norm)``,
built per snapshot, (k1, b, average length), segment and term on the term's first
search, so the dense pass neither decodes nor divides. The oracle is the numpy
path (``_score_numpy``): the same ids, score bits and order, on snapshots of
several segments with deletions and filters, and on every snapshot after a commit,
a delete or a merge (each has its own average length: a table of an earlier
snapshot would score with stale norms). The kernel refuses a table built for other
norms or another k1, and the tables stay within their bound.
"""

from __future__ import annotations

import array

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scorers.test_bm25_onecall import build, differs, needs_query, texts
from weftsearch import BM25Scorer, Document, F, Query, Snapshot
from weftsearch.engine.snapshot import CollectionStatistics
from weftsearch.errors import CorruptIndexError, UnknownFieldError
from weftsearch.native import bm25 as kernel
from weftsearch.scorers.bm25 import lists as bm25_lists

needs_impacts = pytest.mark.skipif(
    kernel.compiled_bm25() is None or kernel.compiled_bm25().impacts is None,  # type: ignore[union-attr]
    reason="the compiled BM25 kernel (with weft_bm25_impacts) is not built",
)


def mismatches(snapshot: Snapshot, scorer: BM25Scorer, queries: list[Query], ks: list[int]) -> list[str]:
    """Queries whose one-call result differs from the numpy path's in any id, score bit or place."""
    found = []
    for query in queries:
        try:
            snapshot.allowed(query)
        except UnknownFieldError:  # every document with the field deleted: nothing to filter on
            continue
        for k in ks:
            got = scorer.score(snapshot, query, k)
            if differs(got, scorer._score_numpy(snapshot, query, k, snapshot.allowed(query))):
                found.append(f"{query.text!r} filter={query.filter!r} k={k}")
    return found


def held_norms(snapshot: Snapshot, scorer: BM25Scorer, queries: list[Query]) -> set[int]:
    """The norms addresses the impact tables of ``queries`` were built against (their headers)."""
    addresses: set[int] = set()
    for query in queries:
        planned, _ = scorer._term_query(snapshot, query)
        for entry in [] if planned is None else planned.held:
            addresses.update(int(table[2]) for table in entry.tables)
    return addresses


def part_norms(snapshot: Snapshot, scorer: BM25Scorer) -> set[int]:
    table, _ = bm25_lists._part_table(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    return {int(address) for address in table[:, 0]}


@needs_query
@needs_impacts
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 3),
    docs=st.integers(1, 250),
    steps=st.lists(st.sampled_from(["add", "delete", "merge", "shorter"]), min_size=1, max_size=4),
    k1_b=st.sampled_from([(1.2, 0.75), (0.0, 1.0), (2.0, 0.0), (0.9, 0.4)]),
    ks=st.lists(st.integers(1, 120), min_size=1, max_size=2),
)
def test_each_snapshot_scores_with_its_own_tables_across_commits_deletes_and_merges(
    seed: int, segments: int, docs: int, steps: list[str], k1_b: tuple[float, float], ks: list[int]
) -> None:
    rng = np.random.default_rng(seed)
    index, words = build(seed, segments, docs, 12, 0.05, 6)
    scorer = BM25Scorer(*k1_b)
    queries = [Query(text) for text in texts(seed, words, 10)]
    queries += [Query(text, filter=F("tag") == "a") for text in texts(seed + 1, words, 3)]
    snapshots = [index.snapshot()]
    for step in [*steps, "end"]:
        snapshot = snapshots[-1]
        assert mismatches(snapshot, scorer, queries, ks) == [], step
        # Every table a query reads was built against this snapshot's norms, never an earlier one's.
        assert held_norms(snapshot, scorer, queries) <= part_norms(snapshot, scorer)
        if step == "end":
            break
        keys = index.keys()
        if step == "add" or (step == "delete" and not keys):
            # Longer documents: the average length, so every norm, changes.
            long_text = " ".join(rng.choice(words, size=20))
            index.add_many(
                Document(f"new-{seed}-{i}-{len(snapshots)}", long_text, fields={"tag": "a"}) for i in range(5)
            )
        elif step == "shorter":
            index.add_many(Document(f"short-{seed}-{i}-{len(snapshots)}", words[0]) for i in range(7))
        elif step == "delete":
            index.delete_many([key for key in keys if rng.random() < 0.3] or keys[:1])
        else:
            index.merge(force=True)
        snapshots.append(index.snapshot())
    if len(snapshots) > 1 and snapshots[0].avgdl != snapshots[-1].avgdl:
        first, last = snapshots[0], snapshots[-1]
        assert bm25_lists._impact_cache(first, scorer.k1, scorer.b, scorer._avgdl(first)) is not (
            bm25_lists._impact_cache(last, scorer.k1, scorer.b, scorer._avgdl(last))
        )
    # An earlier snapshot still answers with its own statistics and tables.
    assert mismatches(snapshots[0], scorer, queries, ks) == []


@needs_query
@needs_impacts
def test_a_shard_view_with_the_collections_average_gets_its_own_tables() -> None:
    """A view by ``with_statistics`` shares the snapshot's memo: its tables are keyed by its average."""
    index, words = build(7, 2, 200, 10, 0.1, 6)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    queries = [Query(text) for text in texts(7, words, 12)]
    assert mismatches(snapshot, scorer, queries, [3, 10]) == []  # builds the snapshot's own tables
    live = snapshot.n_docs
    doc_freq = {"absent": 1}
    for word in words:
        doc_freq[word] = int(scorer.score_all(snapshot, Query(word))[0].shape[0]) + 3
    statistics = CollectionStatistics(live + 3, round(snapshot.avgdl * live) + 3 * 40, doc_freq)
    view = snapshot.with_statistics(statistics)
    assert view.collection_avgdl != snapshot.collection_avgdl
    assert mismatches(view, scorer, queries, [3, 10]) == []
    assert held_norms(view, scorer, queries) <= part_norms(view, scorer)
    assert held_norms(view, scorer, queries).isdisjoint(part_norms(snapshot, scorer))


@needs_query
@needs_impacts
def test_the_kernel_refuses_a_table_built_for_other_norms_or_another_k1() -> None:
    index, words = build(11, 1, 300, 6, 0.0, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer(1.2, 0.75)
    planned, _ = scorer._term_query(snapshot, Query(words[0]))
    assert planned is not None and planned.held and planned.held[0].tables
    library = kernel.compiled_bm25()
    assert library is not None
    avgdl = scorer._avgdl(snapshot)
    ids, scores, _ = bm25_lists.run(library, snapshot, planned, 1.2, 0.75, avgdl, 5)
    want = scorer._score_numpy(snapshot, Query(words[0]), 5)
    assert ids.tobytes() == want.ids.tobytes() and scores.tobytes() == want.scores.tobytes()
    for k1, b, average in ((0.9, 0.75, avgdl), (1.2, 0.5, avgdl), (1.2, 0.75, avgdl * 2)):
        # Other (b, avgdl): other norms (another part table); another k1: the header's k1 differs.
        with pytest.raises(ValueError, match="refused"):
            bm25_lists.run(library, snapshot, planned, k1, b, average, 5)


@needs_impacts
def test_a_table_of_the_wrong_size_or_a_corrupt_list_is_refused() -> None:
    index, words = build(13, 1, 300, 6, 0.0, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    library = kernel.compiled_bm25()
    assert library is not None and library.impacts is not None
    entry = bm25_lists._terms(snapshot, bm25_lists._parts(snapshot), [words[0]])[0]
    row = np.array(entry.rows[0], dtype=np.int64)
    norms_table, _ = bm25_lists._part_table(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    norms, n_docs = int(norms_table[0, 0]), int(norms_table[0, 3])
    table = kernel.impact_table(library.impacts, row, norms, n_docs, scorer.k1)
    words_needed = kernel.impact_table_words(int(row[2]))
    assert table.shape[0] == words_needed
    for size in (words_needed - 1, words_needed + 1, 0):
        room = np.zeros(max(size, 1), dtype=np.int64)
        assert library.impacts(row.ctypes.data, norms, n_docs, scorer.k1, room.ctypes.data, size) == -2
    for bad_k1 in (-1.0, float("nan")):
        room = np.zeros(words_needed, dtype=np.int64)
        assert library.impacts(row.ctypes.data, norms, n_docs, bad_k1, room.ctypes.data, words_needed) == -2
    # A block table whose last id runs past the part (refused before any posting is read), or
    # one the decoded gaps do not end at: the list is corrupt, never read out of bounds.
    meta = entry.keep[0].meta.copy()
    last_block = int(row[4]) - 1
    for bad_last in {n_docs, int(meta[last_block]) + 1}:
        crafted_meta = meta.copy()
        crafted_meta[last_block] = bad_last
        crafted = row.copy()
        crafted[3] = crafted_meta.ctypes.data
        with pytest.raises(kernel.CorruptListError):
            kernel.impact_table(library.impacts, crafted, norms, n_docs, scorer.k1)


@needs_query
@needs_impacts
def test_the_tables_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_lists, "IMPACT_CACHE_POSTINGS", 400)
    index, words = build(17, 2, 250, 20, 0.1, 6)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    queries = [Query(word) for word in words] + [Query(text) for text in texts(17, words, 10)]
    assert mismatches(snapshot, scorer, queries, [1, 10]) == []
    cache = bm25_lists._impact_cache(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    assert 0 < cache.postings <= 400
    assert len(cache.entries) < len(words)  # some were evicted (or never kept: over the budget alone)
    assert mismatches(snapshot, scorer, queries, [1, 10]) == []  # evicted terms are built again


@needs_query
@needs_impacts
def test_the_self_check_notices_a_table_one_bit_off(monkeypatch: pytest.MonkeyPatch) -> None:
    library = kernel.compiled_bm25()
    assert library is not None
    assert kernel._agrees_with_numpy(library)
    real = kernel.impact_table

    def off_by_one_bit(*args: object) -> np.ndarray:
        table = real(*args).copy()  # type: ignore[arg-type]
        impacts = table[4 : 4 + int(table[0])].view(np.float64)
        impacts[0] = np.nextafter(impacts[0], np.inf)
        return table

    monkeypatch.setattr(kernel, "impact_table", off_by_one_bit)
    assert not kernel._agrees_with_numpy(library)


@needs_query
@needs_impacts
def test_a_corrupt_list_is_named_when_its_table_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    index, words = build(19, 1, 300, 6, 0.0, 5)
    snapshot = index.snapshot()

    def corrupt(*args: object) -> None:
        raise kernel.CorruptListError(0)

    monkeypatch.setattr(kernel, "impact_table_at", corrupt)  # what a term's tables are built with
    with pytest.raises(CorruptIndexError, match=repr(words[0])):
        BM25Scorer().score(snapshot, Query(words[0]), 5)


@needs_query
@needs_impacts
@pytest.mark.parametrize("deleted", [0.2, 0.0])
def test_the_dense_pass_counts_every_live_document_it_summed(deleted: float) -> None:
    """``documents_scored``: every live (allowed) document holding a term, whatever k, as before the gate.

    Without deletions (and without a filter) the offer scan takes its every-document-live
    branch, which counts in integer lanes: the same count.
    """
    index, words = build(23, 2, 300, 8, deleted, 6)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    for text in (f"{words[0]} {words[1]} {words[5]}", words[0]):
        for query in (Query(text), Query(text, filter=F("tag") == "a")):
            ids, _ = scorer.score_all(snapshot, query)
            allowed = snapshot.allowed(query)
            want = int(ids.shape[0]) if allowed is None else int(np.count_nonzero(allowed[ids]))
            for k in (1, 5, 10**6):
                plan = scorer.score(snapshot, query, k).plan
                assert plan is not None and plan["documents_scored"] == want, (text, k)


@needs_query
@needs_impacts
@pytest.mark.parametrize("segments", [1, 3])
def test_a_large_k_gates_the_dense_pass_from_group_maxima_with_the_same_results(segments: int) -> None:
    """From k = 32 the dense pass's first gate is the k-th largest maximum of groups of sums.

    Few distinct lengths and words make many exact ties at every rank: the floor may
    equal the k-th best score, and every document tied with it must still be kept.
    Without deletions (the branch that takes the floor), k below, at and above the
    number of groups, and above the documents holding a term.
    """
    index, words = build(31, segments, 700, 6, 0.0, 3)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    for text in (words[0], f"{words[0]} {words[1]}", " ".join(words), f"{words[2]} {words[5]} {words[5]}"):
        query = Query(text)
        for k in (31, 32, 33, 64, 87, 88, 89, 100, 300, 2000):
            oracle = scorer._score_numpy(snapshot, query, k)
            assert not differs(scorer.score(snapshot, query, k), oracle), (text, k)
        batch = scorer.score_many(snapshot, [query] * 3, 100)
        assert not any(differs(got, scorer._score_numpy(snapshot, query, 100)) for got in batch), text


@needs_query
@needs_impacts
def test_a_terms_tables_lie_side_by_side_in_part_order() -> None:
    # The joint dense pass reads a term's tables of every joining part one after another: one
    # buffer in part order makes that one sequential read instead of a cache miss per table.
    index, words = build(23, 10, 60, 8, 0.0, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    planned, _ = scorer._term_query(snapshot, Query(" ".join(words[:4])))
    assert planned is not None and planned.held
    for entry in planned.held:
        assert len(entry.tables) >= 2
        ends = [table.ctypes.data + table.nbytes for table in entry.tables[:-1]]
        assert [table.ctypes.data for table in entry.tables[1:]] == ends
        assert [int(part) for part in entry.rows[:, 6]] == sorted(int(part) for part in entry.rows[:, 6])


@needs_impacts
def test_a_table_written_into_room_is_the_table_and_wrong_room_is_refused() -> None:
    index, words = build(29, 1, 200, 6, 0.0, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    library = kernel.compiled_bm25()
    assert library is not None and library.impacts is not None
    entry = bm25_lists._terms(snapshot, bm25_lists._parts(snapshot), [words[0]])[0]
    row = np.array(entry.rows[0], dtype=np.int64)
    norms_table, _ = bm25_lists._part_table(snapshot, scorer.k1, scorer.b, scorer._avgdl(snapshot))
    norms, n_docs = int(norms_table[0, 0]), int(norms_table[0, 3])
    alone = kernel.impact_table(library.impacts, row, norms, n_docs, scorer.k1)
    words_needed = kernel.impact_table_words(int(row[2]))
    room = np.zeros(words_needed + 3, dtype=np.int64)
    written = kernel.impact_table(library.impacts, row, norms, n_docs, scorer.k1, room[1 : 1 + words_needed])
    used = (4 + int(row[2])) * 8 + int(row[2]) * 4  # header, impacts, ids (not an odd count's padding)
    assert written.tobytes()[:used] == alone.tobytes()[:used] and written.ctypes.data == room[1:].ctypes.data
    wider = np.zeros(2 * words_needed, dtype=np.int64)
    narrow = np.zeros(words_needed, dtype=np.int32)
    for bad in (room[: words_needed - 1], narrow, wider[::2]):
        with pytest.raises(ValueError, match=f"{words_needed} int64 words"):
            kernel.impact_table(library.impacts, row, norms, n_docs, scorer.k1, bad)  # type: ignore[arg-type]


@needs_query
@needs_impacts
@pytest.mark.parametrize("plain_part", [0, 4, 9])
def test_the_joint_pass_with_a_list_without_its_table_is_the_numpy_path(plain_part: int) -> None:
    # A joining part whose list of a term has no table: the joint pass sums part by part
    # (decoding that list) instead of term by term; either way the numpy path's bits.
    index, words = build(31, 10, 60, 8, 0.0, 5)
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    library = kernel.compiled_bm25()
    assert library is not None
    avgdl = scorer._avgdl(snapshot)
    for text in (" ".join(words[:3]), " ".join(words[1:6]), " ".join(words)):
        query = Query(text)
        planned, _ = scorer._term_query(snapshot, query)
        assert planned is not None and planned.held
        rows = [np.array(entry.rows) for entry in planned.held]
        for term_rows in rows:
            term_rows[term_rows[:, 6] == plain_part, 7] = 0  # that part's table left out
        refs = array.array(
            "q", [value for term_rows in rows for value in (term_rows.ctypes.data, term_rows.shape[0])]
        )
        mixed = planned._replace(refs=refs)
        for k in (32, 100):
            ids, scores, _ = bm25_lists.run(library, snapshot, mixed, scorer.k1, scorer.b, avgdl, k)
            want = scorer._score_numpy(snapshot, query, k)
            assert ids.tobytes() == want.ids.tobytes() and scores.tobytes() == want.scores.tobytes()
            ids, scores, _ = bm25_lists.run(library, snapshot, planned, scorer.k1, scorer.b, avgdl, k)
            assert ids.tobytes() == want.ids.tobytes() and scores.tobytes() == want.scores.tobytes()


def test_the_parts_norms_lie_side_by_side_with_the_bits_of_each_parts_own() -> None:
    # One array for every part's length norms (a large one is given huge pages, which the
    # block-max walk's random norm reads need: 10 arrays of 100,000 were 4 KiB pages each),
    # each part's a view with the bits of the expression on its own lengths.
    index, _ = build(37, 4, 50, 8, 0.2, 7)
    snapshot = index.snapshot()
    scorer = BM25Scorer(k1=1.3, b=0.6)
    avgdl = scorer._avgdl(snapshot)
    table, kept = bm25_lists._part_table(snapshot, scorer.k1, scorer.b, avgdl)
    parts, norms = kept[0], kept[1:]
    assert len(norms) == len(snapshot.parts) == 4
    for at, (norm, blocks) in enumerate(zip(norms, parts.blocks, strict=True)):
        own = scorer.k1 * (1.0 - scorer.b + scorer.b * blocks.lengths.astype(np.float64) / avgdl)
        assert norm.tobytes() == own.tobytes()
        assert int(table[at, 0]) == norm.ctypes.data
        if at > 0:
            assert norm.ctypes.data == norms[at - 1].ctypes.data + norms[at - 1].nbytes
