"""Issue 31: a search over 10 segments gives what the same documents in 1 segment give, to the bit.

The oracle is the one-segment index of the same documents (same deletes), whose ids follow
its keys: the 10-segment index must return the same keys in the same order with the same
score bits at k = 100 (and 10, 32), leaving out exactly the hit whose stored record fails
its checksum (a record in a middle segment, found damaged at the search). It exercises
the compiled paths of a many-segment search and, switched off, their Python fallbacks:
the hits' verdicts in one call (``weft_hits_sound``), ties across segments put in key
order in one call (``weft_ties_by_key``; the documents have few distinct texts, so scores
tie exactly), and the kernel's joint dense pass (k >= 32, several small parts without
deletions whose lists hold at least a quarter as many postings as the part has
documents: every part here but those the deletes touch). A damaged key table still
raises :class:`CorruptIndexError` at the search, and a reader's full key decode records
its key verdicts for views taken before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.test_lazy_keys import documents
from tests.storage.crafting import damage_record
from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.engine import snapshot as snapshot_module
from weftsearch.errors import CorruptIndexError
from weftsearch.native import bm25 as kernel

SEGMENTS = 10
TEXTS = ("graph", "graph sparse", "dense retrieval graph")


def build(docs: list[Document], segments: int, doomed: list[str]) -> Index:
    """``docs`` in ``segments`` interleaved segments (each spans the key range), ``doomed`` deleted."""
    index = Index(analyzer="simple")
    for start in range(segments):
        index.add_many(docs[start::segments])
        index.snapshot()  # seals the part into its own segment
    if doomed:
        index.delete_many(doomed)
    return index


def reopened(directory: Path, docs: list[Document], segments: int) -> Index:
    """``docs`` committed in ``segments`` interleaved segments, reopened read-only: no key decoded yet."""
    with Index.create(directory, "simple") as index:
        for start in range(segments):
            index.add_many(docs[start::segments])
            index.commit()
    return Index.open(directory, readonly=True)


@contextmanager
def compiled(on: bool) -> Iterator[None]:
    """Searches with the compiled verdicts and tie order (``on``) or their Python fallbacks."""
    library = kernel.compiled_bm25()
    if on:
        assert library is not None and library.hits_sound is not None and library.ties_by_key is not None
        yield
        return
    patch = pytest.MonkeyPatch()
    off = None if library is None else dataclasses.replace(library, hits_sound=None, ties_by_key=None)
    patch.setattr(snapshot_module, "compiled_bm25", lambda: off)
    try:
        yield
    finally:
        patch.undo()


@settings(max_examples=25, deadline=None)
@given(
    per_segment=st.integers(8, 60),
    deleted_parts=st.sets(st.integers(0, SEGMENTS - 1), max_size=3),
    delete_every=st.sampled_from([2, 3, 5]),
    victim_part=st.integers(3, 6),
    on=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_ten_segments_equal_one_segment(
    per_segment: int, deleted_parts: set[int], delete_every: int, victim_part: int, on: bool, seed: int
) -> None:
    docs = documents(SEGMENTS * per_segment, seed)
    # Document i lands in segment i % 10: the deletes touch only some segments, so the others
    # keep no id map and join the kernel's joint dense pass.
    doomed = [
        doc.key
        for i, doc in enumerate(docs)
        if i % SEGMENTS in deleted_parts and (i // SEGMENTS) % delete_every == 0  # every part keeps some
    ]
    one = build(docs, 1, doomed)
    with compiled(on):
        ten = build(docs, SEGMENTS, doomed)
        snapshot = ten.snapshot()
        assert len(snapshot.parts) == SEGMENTS
        # The victim: a live document of a middle segment holding "graph", damaged before any search.
        candidates = [
            doc.key
            for i, doc in enumerate(docs)
            if i % SEGMENTS == victim_part and doc.key not in doomed and "graph" in doc.text.split()
        ]
        victim = candidates[0] if candidates else None
        if victim is not None:
            victim_id = snapshot.id_of(victim)
            part = snapshot.parts[victim_part]
            assert part.base <= victim_id < part.base + part.n_live
            damage_record(part.reader, int(part.live_locals[victim_id - part.base]))
        for text in TEXTS:
            for k in (100, 10, 32):
                want = one.search(Query(text), k, RRF(), BM25Scorer())
                for _ in range(2):  # verdicts unknown (the checking path), then known (one call)
                    got = ten.search(Query(text), k, RRF(), BM25Scorer())
                    kept = [row for row, key in enumerate(want.keys) if key != victim]
                    assert got.keys == [want.keys[row] for row in kept]
                    assert got.score_array.tobytes() == want.score_array[kept].tobytes()
                # The scorer alone (no verdicts): every hit, ties in key order across segments.
                stream = BM25Scorer().score(snapshot, Query(text), k)
                alone = BM25Scorer().score(one.snapshot(), Query(text), k)
                assert snapshot.keys_of(stream.ids) == one.snapshot().keys_of(alone.ids)
                assert stream.scores.tobytes() == alone.scores.tobytes()


def test_the_compiled_paths_are_the_ones_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a build with them, a 10-segment top-100 search checks its hits and orders its ties in C."""
    calls: dict[str, int] = {"hits_sound": 0, "ties_by_key": 0}
    for name in calls:
        real = getattr(snapshot_module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(snapshot_module, name, counted)
    index = build(documents(400, 3), SEGMENTS, [])
    for _ in range(2):
        results = index.search(Query("graph sparse"), 100, RRF(), BM25Scorer())
        assert len(results) == 100
    assert calls["hits_sound"] == 2
    assert calls["ties_by_key"] >= 1  # four words: the top-100 ties across segments


def test_a_damaged_key_table_raises_at_the_search(tmp_path: Path) -> None:
    """A middle segment's key out of order (as read) is refused at the search, compiled path or not."""
    for on in (True, False):
        with compiled(on):
            index = reopened(tmp_path / str(on), documents(300, 9), SEGMENTS)
            snapshot = index.snapshot()
            reader = snapshot.parts[5].reader
            blob, offsets = reader._key_table()
            swapped = blob.copy()
            first, second = (int(offsets[i]) for i in (3, 4))
            end = int(offsets[5])
            assert second - first == end - second  # keys of one width: swap the 4th and 5th
            swapped[first:second], swapped[second:end] = blob[second:end], blob[first:second]
            table = (swapped, offsets)
            setattr(reader, "_key_table", lambda table=table: table)  # noqa: B010 - this reader only
            with pytest.raises(CorruptIndexError):
                for text in ("graph", "sparse", "dense", "retrieval"):
                    index.search(Query(text), 100, RRF(), BM25Scorer()).keys  # noqa: B018


def test_a_full_key_decode_records_the_key_verdicts() -> None:
    """Views taken before a reader decodes its whole key table see every key checked after it."""
    index = build(documents(200, 4), SEGMENTS, [])
    snapshot = index.snapshot()
    index.search(Query("graph"), 5, RRF(), BM25Scorer())  # the views are built now
    for part in snapshot.parts:
        checked = part.reader.key_views()[1]
        part.reader.keys()
        assert all(checked[local] for local in range(part.reader.n_docs))
    ids = np.arange(snapshot.n_docs, dtype=np.int64)
    scores = np.zeros(snapshot.n_docs, dtype=np.float64)  # one run of every document
    ordered = snapshot._ties_by_key(ids, scores, snapshot.n_docs)
    assert ordered is not None and snapshot.keys_of(ordered) == sorted(snapshot.keys())


def test_ties_by_key_leaves_unchecked_keys_to_the_caller(tmp_path: Path) -> None:
    """A run member whose key was never checked: ``None`` (nothing moved), the caller checks it."""
    index = reopened(tmp_path / "index", documents(200, 6), SEGMENTS)
    snapshot = index.snapshot()
    ids = np.array([0, snapshot.parts[1].base, snapshot.parts[2].base], dtype=np.int64)
    scores = np.array([1.0, 1.0, 1.0])
    assert snapshot._ties_by_key(ids, scores, 3) is None
    keys = snapshot.keys_of(ids)  # checks and records them
    ordered = snapshot._ties_by_key(ids, scores, 3)
    assert ordered is not None and snapshot.keys_of(ordered) == sorted(keys)
