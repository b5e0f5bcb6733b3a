"""Pages (issue 30 item 4): ``offset`` and cursors give slices of one deeper search, to the bit.

The oracle is one search with ``k = pages x size`` (the same ``depth``
argument): concatenated pages must hold its keys, fused score bits, order and
explanations, ties across a page boundary included, for BM25, vectors,
hybrid fusion and with a filter. A cursor pins its snapshot generation, and a
cursor that is altered, foreign, replayed for another query or expired is a
typed error.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query, ScoreFusion, SearchResults, VectorScorer
from weftsearch.engine.pages import CURSOR_GENERATIONS, PageStart
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.search import page_of
from weftsearch.engine.stream import MAX_K
from weftsearch.errors import CursorExpiredError, InvalidCursorError, InvalidParameterError

WORDS = ["alpha", "beta", "gamma"]


def corpus(n: int, seed: int = 3, prefix: str = "d") -> list[Document]:
    """Few words and small integer vectors, so many documents tie on every score."""
    rng = np.random.default_rng(seed)
    return [
        Document(
            f"{prefix}{i:03d}",
            " ".join(WORDS[int(w)] for w in rng.integers(0, len(WORDS), int(rng.integers(1, 4)))),
            vector=rng.integers(-1, 2, 3).astype(np.float32),
            fields={"year": int(rng.integers(2000, 2004))},
        )
        for i in range(n)
    ]


def three_segment_index(n: int = 240) -> Index:
    """An in-memory index of three segments (so ids do not follow keys), keys interleaved across them."""
    index = Index(analyzer="simple")
    documents = corpus(n)
    for part in range(3):
        index.add_many(documents[part::3])
        index.snapshot()  # seals the buffered documents into a segment of their own
    assert index.segment_count == 3
    return index


QUERY_VECTOR = np.array([1.0, 0.5, -0.25], dtype=np.float32)

RANKINGS: dict[str, tuple[Query, Fuser, tuple[Scorer, ...]]] = {
    "bm25": (Query(text="alpha beta"), RRF(), (BM25Scorer(),)),
    "vector": (Query(vector=QUERY_VECTOR), RRF(), (VectorScorer(),)),
    "hybrid-rrf": (Query(text="alpha gamma", vector=QUERY_VECTOR), RRF(), (BM25Scorer(), VectorScorer())),
    "hybrid-score": (
        Query(text="beta", vector=QUERY_VECTOR),
        ScoreFusion(),
        (BM25Scorer(), VectorScorer()),
    ),
    "hybrid-filter": (
        Query(text="alpha", vector=QUERY_VECTOR, filter="year >= 2001"),
        RRF(),
        (BM25Scorer(), VectorScorer()),
    ),
}


def facts(results: SearchResults | Sequence[SearchResults]) -> list[tuple[Any, ...]]:
    """Every hit's key, rank, fused score bits and explanation (per stream: rank, raw score bits)."""
    pages = [results] if isinstance(results, SearchResults) else list(results)
    rows = []
    for page in pages:
        for hit in page:
            signals = tuple(
                (s.rank, None if s.score is None else np.float64(s.score).view(np.uint64).item())
                for s in hit.signals
            )
            rows.append((hit.key, hit.rank, np.float64(hit.score).view(np.uint64).item(), signals))
    return rows


def by_cursor(index: Index, name: str, size: int, pages: int, depth: int | None) -> list[SearchResults]:
    query, fuser, scorers = RANKINGS[name]
    out = [index.search(query, size, fuser, *scorers, depth=depth)]
    while len(out) < pages and out[-1].next_cursor is not None:
        out.append(index.search(query, size, fuser, *scorers, depth=depth, after=out[-1].next_cursor))
    return out


def boundary_ties(pages: Sequence[SearchResults]) -> int:
    """How many page boundaries fall inside a run of equal fused scores."""
    return sum(
        1
        for before, after in itertools.pairwise(pages)
        if len(after) and before.score_array[-1] == after.score_array[0]
    )


@pytest.mark.parametrize("name", sorted(RANKINGS))
@pytest.mark.parametrize(("size", "pages", "depth"), [(7, 12, None), (13, 12, 400)])
def test_cursor_pages_equal_one_deeper_search(name: str, size: int, pages: int, depth: int | None) -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS[name]
    deep = index.search(query, size * pages, fuser, *scorers, depth=depth)
    paged = by_cursor(index, name, size, pages, depth)
    assert facts(paged) == facts(deep)
    assert len(deep) > size  # more than one page, or the test proves nothing
    if name in {"bm25", "vector"} or (name == "hybrid-rrf" and size == 7):
        assert boundary_ties(paged) > 0  # the tie rule across a boundary is exercised


@pytest.mark.parametrize("name", sorted(RANKINGS))
def test_offset_pages_equal_one_deeper_search(name: str) -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS[name]
    size, pages = 9, 8
    deep = index.search(query, size * pages, fuser, *scorers)
    paged = [index.search(query, size, fuser, *scorers, offset=size * page) for page in range(pages)]
    assert facts(paged) == facts(deep)
    assert [page.offset for page in paged] == [size * page for page in range(pages)]


def test_the_last_page_has_no_cursor_and_a_full_one_has() -> None:
    index = three_segment_index(30)
    query, fuser, scorers = RANKINGS["bm25"]
    everything = index.search(query, 1000, fuser, *scorers)
    pages = by_cursor(index, "bm25", 4, 1000, None)
    assert facts(pages) == facts(everything)
    assert pages[-1].next_cursor is None and all(page.next_cursor for page in pages[:-1])


def test_a_cursor_pins_its_generation_across_writes() -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS["hybrid-rrf"]
    old = index.snapshot()
    deep = index.search(query, 30, fuser, *scorers, snapshot=old)
    first = index.search(query, 10, fuser, *scorers)
    cursor = first.next_cursor
    assert cursor is not None
    del old
    # Writes that would rank first, and a delete of a hit on the next page.
    index.add_many(Document(f"new{i}", "alpha gamma alpha gamma", vector=QUERY_VECTOR) for i in range(5))
    index.delete(deep[12].key)
    assert index.search(query, 1, fuser, *scorers)[0].key.startswith("new")
    second = index.search(query, 10, fuser, *scorers, after=cursor)
    third = index.search(query, 10, fuser, *scorers, after=second.next_cursor)
    assert facts([first, second, third]) == facts(deep)
    assert second.generation == first.generation


def test_a_cursor_from_a_swept_generation_is_a_typed_error() -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS["bm25"]
    cursor = index.search(query, 5, fuser, *scorers).next_cursor
    generation = index.generation
    for i in range(CURSOR_GENERATIONS):
        index.add(Document(f"x{i}", "alpha"))
        newer = index.search(query, 5, fuser, *scorers).next_cursor  # each keeps its own generation
        assert newer is not None
    with pytest.raises(CursorExpiredError, match=f"generation {generation} is no longer kept"):
        index.search(query, 5, fuser, *scorers, after=cursor)


def test_a_closed_index_keeps_no_generation_for_cursors(tmp_path: Path) -> None:
    with Index.create(tmp_path / "ix", analyzer="simple") as index:
        index.add_many(corpus(40))
    reader = Index.open(tmp_path / "ix", readonly=True)
    query, fuser, scorers = RANKINGS["bm25"]
    cursor = reader.search(query, 5, fuser, *scorers).next_cursor
    assert reader._cursors.kept
    reader.close()
    assert not reader._cursors.kept
    # Another reader of the same directory (another server worker) reads the cursor: same index id.
    with Index.open(tmp_path / "ix", readonly=True) as other:
        page = other.search(query, 5, fuser, *scorers, after=cursor)
        assert facts(page) == facts(other.search(query, 5, fuser, *scorers, offset=5))


def flipped(cursor: str, at: int) -> str:
    swap = "A" if cursor[at] != "A" else "B"
    return cursor[:at] + swap + cursor[at + 1 :]


def test_an_altered_or_foreign_cursor_is_a_typed_error() -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS["hybrid-rrf"]
    cursor = index.search(query, 5, fuser, *scorers).next_cursor
    assert cursor is not None and cursor.replace("-", "").replace("_", "").isalnum()  # URL-safe
    for at in (0, 5, len(cursor) // 2, len(cursor) - 1):
        with pytest.raises(InvalidCursorError, match="not issued by this index, or was altered"):
            index.search(query, 5, fuser, *scorers, after=flipped(cursor, at))
    for bad in ("", "abc", "not a cursor!", cursor + "A", cursor[:-3]):
        with pytest.raises(InvalidCursorError):
            index.search(query, 5, fuser, *scorers, after=bad)
    with pytest.raises(InvalidCursorError, match="a cursor is a string"):
        index.search(query, 5, fuser, *scorers, after=b"abc")  # type: ignore[arg-type]
    other = three_segment_index()  # the same documents, another index
    with pytest.raises(InvalidCursorError, match="not issued by this index"):
        other.search(query, 5, fuser, *scorers, after=cursor)


@pytest.mark.parametrize(
    "change",
    [
        {"query": Query(text="alpha", vector=QUERY_VECTOR)},
        {"query": Query(text="alpha gamma", vector=QUERY_VECTOR * 2)},
        {"query": Query(text="alpha gamma", vector=QUERY_VECTOR, filter="year > 2000")},
        {"query": Query.parse("alpha gamma", vector=QUERY_VECTOR)},  # same text, parsed: another query
        {"fuser": RRF(k=10)},
        {"fuser": ScoreFusion()},
        {"scorers": (BM25Scorer(k1=1.0), VectorScorer())},
        {"scorers": (VectorScorer(), BM25Scorer())},
        {"depth": 200},
    ],
    ids=["text", "vector", "filter", "parsed", "rrf-k", "fuser", "bm25-k1", "scorer-order", "depth"],
)
def test_a_cursor_replayed_with_another_query_or_ranking_is_refused(change: dict[str, Any]) -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS["hybrid-rrf"]
    cursor = index.search(query, 5, fuser, *scorers).next_cursor
    call = {"query": query, "fuser": fuser, "scorers": scorers, "depth": None, **change}
    with pytest.raises(InvalidCursorError, match="another query or ranking"):
        index.search(call["query"], 5, call["fuser"], *call["scorers"], depth=call["depth"], after=cursor)
    # The same ranking built anew (other instances, equal parameters) is accepted; page size may change.
    page = index.search(
        Query(text="alpha gamma", vector=QUERY_VECTOR), 8, RRF(), BM25Scorer(), VectorScorer(), after=cursor
    )
    assert page.offset == 5 and len(page) == 8


@pytest.mark.parametrize("offset", [-1, True, 1.5, "3", None, MAX_K])
def test_a_bad_offset_is_a_typed_error(offset: object) -> None:
    index = three_segment_index(12)
    with pytest.raises(InvalidParameterError, match="offset"):
        index.search("alpha", 5, RRF(), BM25Scorer(), offset=offset)  # type: ignore[arg-type]


def test_offset_plus_k_is_bounded_as_k_is_and_offset_excludes_after() -> None:
    index = three_segment_index(12)
    page = index.search("alpha", 5, RRF(), BM25Scorer(), offset=MAX_K - 5)
    assert len(page) == 0 and page.next_cursor is None
    cursor = index.search("alpha", 2, RRF(), BM25Scorer()).next_cursor
    with pytest.raises(InvalidParameterError, match="not both"):
        index.search("alpha", 2, RRF(), BM25Scorer(), offset=2, after=cursor)
    with pytest.raises(
        InvalidParameterError, match=r"depth \(10\) must be at least offset \+ k \(6 \+ 5 = 11\)"
    ):
        index.search("alpha", 5, RRF(), BM25Scorer(), VectorScorer(), depth=10, offset=6)


def test_a_page_starts_after_the_cursors_hit_wherever_it_is() -> None:
    """The (score, key) boundary, not the position, says where a page starts (ties included)."""
    index = three_segment_index()
    query, fuser, scorers = RANKINGS["bm25"]
    deep = index.search(query, 60, fuser, *scorers)
    keys, scores = deep.keys, deep.score_array
    for boundary in range(1, 55):
        for position in (0, boundary - 1, boundary + 3):  # a wrong position falls back to the scan
            start = PageStart(deep.generation, position, float(scores[boundary - 1]), keys[boundary - 1], b"")
            page = page_of(deep, 0, 5, start)
            assert page.keys == keys[boundary : boundary + 5] and page.offset == boundary
    # A boundary hit that is not in the results: the page starts at the first hit ranked after it.
    tied = float(scores[3])
    start = PageStart(deep.generation, 0, tied, keys[3] + "\x7f", b"")
    assert page_of(deep, 0, 2, start).keys[0] == next(
        key
        for key, score in zip(keys, scores, strict=True)
        if score < tied or (score == tied and key > keys[3] + "\x7f")
    )


def test_a_snapshot_still_held_serves_its_cursors_and_another_snapshot_is_refused() -> None:
    index = three_segment_index()
    query, fuser, scorers = RANKINGS["bm25"]
    held = index.snapshot()
    first = index.search(query, 5, fuser, *scorers, snapshot=held)
    cursor = first.next_cursor
    index._cursors.kept.clear()  # as if many later generations had pushed it out of the window
    index.add(Document("zz", "alpha beta alpha beta"))
    deep = index.search(query, 10, fuser, *scorers, snapshot=held)
    page = index.search(query, 5, fuser, *scorers, after=cursor)  # found among the snapshots held
    assert not index._cursors.kept or held.generation not in index._cursors.kept
    assert facts([first, page]) == facts(deep)
    with pytest.raises(CursorExpiredError, match="not on the snapshot given"):
        index.search(query, 5, fuser, *scorers, after=cursor, snapshot=index.snapshot())
