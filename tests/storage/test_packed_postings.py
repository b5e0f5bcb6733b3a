"""Compressed postings (format version 3, docs/FORMAT.md "Compressed postings").

The numpy packer and decoder round-trip any postings (every width 0..32, block edges, empty
terms), the block table they write equals the C derivation's, every damaged header or run is
refused with ``PostingsDecodeError`` (``CorruptIndexError`` through the reader, naming the
term) and never read past its words, and the compiled BM25 never decodes a block it skips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import weftsearch.scorers.bm25 as bm25_module
from tests.scorers.test_bm25_kernel import block_max_everywhere
from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.errors import CorruptIndexError
from weftsearch.native import bm25 as kernel
from weftsearch.storage.postings import (
    BLOCK_ROWS,
    POSTINGS_BLOCK,
    PostingsDecodeError,
    derive_blocks,
    pack_postings,
    unpack_postings,
)
from weftsearch.storage.segment import SegmentReader


@st.composite
def postings(
    draw: Any,
) -> tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint32]]:
    """Several terms' postings over n documents: sizes at block edges, tfs and gaps of every width."""
    n_docs = draw(st.integers(1, 3000))
    sizes = draw(st.lists(st.sampled_from([0, 1, 2, 127, 128, 129, 256, 300]), min_size=1, max_size=6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    id_parts, tf_parts = [], []
    for size in sizes:
        size = min(size, n_docs)
        id_parts.append(np.sort(rng.choice(n_docs, size, replace=False)).astype(np.uint32))
        top = int(rng.integers(1, 33))
        tf_parts.append(rng.integers(1, 2**top, size, dtype=np.uint64).clip(1, 2**32 - 1).astype(np.uint32))
    offsets = np.concatenate([[0], np.cumsum([p.shape[0] for p in id_parts])]).astype(np.uint64)
    lengths = rng.integers(1, 1000, n_docs).astype(np.uint32)
    return np.concatenate(id_parts), np.concatenate(tf_parts), offsets, lengths


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(postings())
def test_pack_then_unpack_is_the_identity(case: tuple[Any, Any, Any, Any]) -> None:
    ids, tfs, offsets, lengths = case
    packed = pack_postings(ids, tfs, offsets, lengths)
    got_ids, got_tfs = unpack_postings(
        packed.data, offsets, packed.block_offsets, packed.blocks, packed.data_offsets, lengths.shape[0]
    )
    assert got_ids.tolist() == ids.tolist() and got_tfs.tolist() == tfs.tolist()
    assert derive_blocks(ids, tfs, offsets, lengths)[1].tolist() == packed.blocks.tolist()
    library = kernel.compiled_bm25()
    for term in range(offsets.shape[0] - 1):
        first, end = int(offsets[term]), int(offsets[term + 1])
        block_first, block_end = int(packed.block_offsets[term]), int(packed.block_offsets[term + 1])
        table = packed.blocks[BLOCK_ROWS * block_first : BLOCK_ROWS * block_end]
        words = packed.data[int(packed.data_offsets[term]) : int(packed.data_offsets[term + 1])]
        one = unpack_postings(
            words,
            offsets[term : term + 2],
            packed.block_offsets[term : term + 2],
            table,
            packed.data_offsets[term : term + 2],
            lengths.shape[0],
        )
        assert one[0].tolist() == ids[first:end].tolist() and one[1].tolist() == tfs[first:end].tolist()
        if library is not None and end > first:  # the C oracle of the stored table
            assert kernel.compiled_blocks(library, ids[first:end], tfs[first:end], lengths).tolist() == (
                table.tolist()
            )


def one_term(ids: list[int], tfs: list[int], n_docs: int = 1000) -> tuple[Any, ...]:
    offsets = np.array([0, len(ids)], dtype=np.uint64)
    packed = pack_postings(
        np.array(ids, np.uint32), np.array(tfs, np.uint32), offsets, np.ones(n_docs, np.uint32)
    )
    return offsets, packed.block_offsets, packed.blocks.copy(), packed.data_offsets, packed.data.copy()


def decode(parts: tuple[Any, ...], n_docs: int = 1000) -> Any:
    offsets, block_offsets, blocks, data_offsets, data = parts
    return unpack_postings(data, offsets, block_offsets, blocks, data_offsets, n_docs)


def test_the_packed_layout_is_the_documented_one() -> None:
    """ids 3, 4, 9 (gaps 3, 0, 4: 3 bits), tfs 1, 2, 1 (tf - 1 in 1 bit): two words."""
    _, _, blocks, _, data = one_term([3, 4, 9], [1, 2, 1])
    assert blocks.tolist() == [9, 2, 1, 3 | 1 << 8]
    assert data.tolist() == [3 | 0 << 3 | 4 << 6, 0 | 1 << 1 | 0 << 2]


@pytest.mark.parametrize(
    ("label", "edit", "message"),
    [
        ("id width 33", lambda b, d: b.__setitem__(3, 33 | 1 << 8), "above 32"),
        ("tf width 33", lambda b, d: b.__setitem__(3, 3 | 33 << 8), "above 32"),
        ("stray bits", lambda b, d: b.__setitem__(3, 3 | 1 << 8 | 1 << 20), "above 32"),
        ("id width + 1", lambda b, d: b.__setitem__(3, 4 | 1 << 8), "fill its words|last ids|not zero"),
        ("last id - 1", lambda b, d: b.__setitem__(0, 8), "last ids"),
        ("gap bits", lambda b, d: d.__setitem__(0, int(d[0]) ^ 1 << 7), "last ids"),
        ("padding bit", lambda b, d: d.__setitem__(1, int(d[1]) | 1 << 31), "not zero"),
    ],
)
def test_damaged_headers_and_runs_are_refused(label: str, edit: Any, message: str) -> None:
    parts = one_term([3, 4, 9], [1, 2, 1])
    assert decode(parts)[0].tolist() == [3, 4, 9]
    edit(parts[2], parts[4])
    with pytest.raises(PostingsDecodeError, match=message):
        decode(parts)


def test_ids_past_the_documents_and_short_data_are_refused() -> None:
    parts = one_term([3, 4, 9], [1, 2, 1])
    with pytest.raises(PostingsDecodeError, match="past the documents"):
        decode(parts, n_docs=9)
    offsets, block_offsets, blocks, data_offsets, data = parts
    with pytest.raises(PostingsDecodeError, match="wrong size"):
        unpack_postings(data[:1], offsets, block_offsets, blocks, data_offsets, 1000)
    with pytest.raises(PostingsDecodeError, match="wrong size"):
        unpack_postings(data, offsets, block_offsets, blocks[:3], data_offsets, 1000)


def test_a_tf_of_two_to_the_32_is_refused() -> None:
    parts = one_term([5], [2**32 - 1])
    assert decode(parts)[1].tolist() == [2**32 - 1]
    data = parts[4]
    data[-1] = 0xFFFFFFFF  # tf - 1 = 2^32 - 1
    with pytest.raises(PostingsDecodeError, match="2\\^32"):
        decode(parts)


# ------------------------------------------------------------ the kernel decodes only what it scores


def _corpus() -> list[Document]:
    """'common' in every other document; short (high-scoring) documents early, so the k-th score is set in the
    first blocks and every later block's bound falls below it. 20,000 documents: the kernel reads a list a
    window of up to 4,096 ids at a time (WEFT_WINDOW), so the last blocks lie windows past the first."""
    documents = []
    for i in range(20000):
        words = ["common" if i % 2 == 0 else "other"] + ["filler"] * 7  # gaps of 1: packed id runs
        text = " ".join(words[: 2 + i % 3]) if i < 400 else " ".join(words)
        documents.append(Document(f"doc-{i:05d}", text))
    return documents


@pytest.mark.skipif(kernel.compiled_bm25() is None, reason="the compiled BM25 is not available")
@pytest.mark.parametrize("block", [0, -1])
def test_a_skipped_block_is_never_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Break one block's packed ids so that decoding it fails, and hand the kernel the term unchecked.

    The first block holds the top documents (it is decoded: the query fails, naming the term);
    the last block's bound is below the k-th score (it is skipped, never decoded: the answer is
    the right one). A kernel that decoded every block it lands on would fail both.
    """
    block_max_everywhere(monkeypatch)  # a small part: else scored densely, every block read
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    path = tmp_path / "index"
    with Index.create(path, analyzer="simple") as index:
        index.add_many(_corpus())
    golden = [
        (h.key, h.score)
        for h in Index.open(path, readonly=True).search(Query("common"), 3, RRF(), BM25Scorer(), depth=3)
    ]

    original = SegmentReader.term_packed

    def broken(self: SegmentReader, term: str) -> tuple[Any, Any, int] | None:
        found = original(self, term)
        if found is None or term != "common":
            return found
        words, table, count = found
        n_blocks = table.shape[0] // BLOCK_ROWS
        target = block % n_blocks
        starts = [0]
        for b in range(n_blocks):
            size = min(POSTINGS_BLOCK, count - b * POSTINGS_BLOCK)
            width = int(table[3 * n_blocks + b])
            starts.append(starts[-1] + (-(-size * (width & 0xFF) // 32)) + (-(-size * (width >> 8) // 32)))
        damaged = np.array(words)
        assert (int(table[3 * n_blocks + target]) & 0xFF) > 0
        damaged[starts[target]] ^= 1  # the first gap moves by one: the block no longer ends at its last id
        return damaged, table, count

    monkeypatch.setattr(SegmentReader, "term_packed", broken)
    index = Index.open(path, readonly=True)
    if block == 0:
        with pytest.raises(CorruptIndexError, match="'common'"):
            index.search(Query("common"), 3, RRF(), BM25Scorer(), depth=3)
    else:
        got = [(h.key, h.score) for h in index.search(Query("common"), 3, RRF(), BM25Scorer(), depth=3)]
        assert got == golden
